"""TF1's variable sharing: `variable_scope` (with `reuse`), `get_variable`, `get_variable_scope`, AUTO_REUSE.

Each graph keeps a store of the variables made by `get_variable`, by full name ("scope/name"). A
scope's `reuse` says what `get_variable` may do: None (not reusing) creates a variable and
refuses an existing name; True returns the existing variable and refuses a new name; AUTO_REUSE
does whichever applies. Reuse is inherited by the scopes inside. Entering a variable scope also
opens a name scope for the ops built inside; variables made by `get_variable` are named by the
variable scope only, as in TF1.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import numpy as np

from ember import dtypes as dt
from ember.tensor import Tensor
from ember.v1.convert import is_symbolic
from ember.v1.graph_api import GraphKeys, _graph_of, get_default_graph
from ember.v1.init_ops import Constant, GlorotUniform, Initializer, Zeros
from ember.v1.tensor_shape import TensorShape


class _ReuseMode:
    """The `reuse=tf.AUTO_REUSE` value: create a variable if it does not exist, else return it."""

    def __repr__(self) -> str:
        return "AUTO_REUSE"


AUTO_REUSE = _ReuseMode()


class VariableScope:
    """A variable scope: its name, whether it reuses variables, and defaults for `get_variable`."""

    def __init__(self, reuse, name: str = "", initializer=None, regularizer=None, dtype=dt.float32,
                 original_name_scope: str = "") -> None:
        self.name = name
        self._reuse = reuse
        self.initializer = initializer
        self.regularizer = regularizer
        self.dtype = dt.as_dtype(dtype)
        self.original_name_scope = original_name_scope

    @property
    def reuse(self):
        """False (create), True (reuse) or AUTO_REUSE."""
        return False if self._reuse is None else self._reuse

    def reuse_variables(self) -> None:
        """From now on, `get_variable` in this scope returns existing variables."""
        self._reuse = True

    def set_initializer(self, initializer) -> None:
        """The default initializer of `get_variable` in this scope."""
        self.initializer = initializer

    def set_regularizer(self, regularizer) -> None:
        """The default regularizer of `get_variable` in this scope."""
        self.regularizer = regularizer

    def set_dtype(self, dtype) -> None:
        """The default dtype of `get_variable` in this scope."""
        self.dtype = dt.as_dtype(dtype)

    def get_variable(self, name, shape=None, dtype=None, initializer=None, regularizer=None, trainable=None,
                     collections=None, **kwargs):
        """`tf.get_variable` in this scope."""
        with variable_scope(self):
            return get_variable(name, shape, dtype, initializer, regularizer, trainable, collections, **kwargs)

    def __repr__(self) -> str:
        return f"<tf.VariableScope {self.name!r} reuse={self._reuse!r}>"


class _Store:
    """A graph's variables made by get_variable, and how often each variable scope name was opened."""

    def __init__(self) -> None:
        self.variables: dict = {}
        self.scope_counts: dict = {}
        self.stack: list = [VariableScope(None)]

    def open(self, name: str) -> None:
        self.scope_counts[name] = self.scope_counts.get(name, 0) + 1

    def close_subscopes(self, name: str) -> None:
        """Forget the scopes opened inside `name`, so entering it again hands out the same default names."""
        prefix = name + "/" if name else ""
        for k in self.scope_counts:
            if k.startswith(prefix):
                self.scope_counts[k] = 0


def _store(graph) -> _Store:
    graph = getattr(graph, "root", graph)  # control-flow functions share their outermost graph's variables
    store = graph.__dict__.get("_variable_store")
    if store is None:
        store = graph.__dict__["_variable_store"] = _Store()
    return store


def get_variable_scope() -> VariableScope:
    """The current variable scope of the default graph."""
    return _store(get_default_graph()).stack[-1]


def _unique_scope_name(store: _Store, current: VariableScope, prefix: str) -> str:
    full = f"{current.name}/{prefix}" if current.name else prefix
    if store.scope_counts.get(full, 0) == 0:
        return prefix
    i = 1
    while store.scope_counts.get(f"{full}_{i}", 0) > 0:
        i += 1
    return f"{prefix}_{i}"


@contextlib.contextmanager
def variable_scope(name_or_scope=None, default_name: str | None = None, values=None, initializer=None,
                   regularizer=None, caching_device=None, partitioner=None, custom_getter=None, reuse=None,
                   dtype=None, use_resource=None, constraint=None,
                   auxiliary_name_scope: bool = True) -> Iterator[VariableScope]:
    """A variable scope (and a name scope of the same name): `get_variable` names are prefixed by it;
    `reuse=True` or `AUTO_REUSE` shares variables made before under the same names."""
    if name_or_scope is None and default_name is None:
        raise TypeError("variable_scope: if default_name is None then name_or_scope is required")
    if partitioner is not None or custom_getter is not None:
        raise NotImplementedError("variable_scope: partitioner and custom_getter are not supported")
    if reuse is False:
        reuse = None  # False means "inherit", as in TF1
    graph = _graph_of(values)
    store = _store(graph)
    current = store.stack[-1]
    if isinstance(name_or_scope, VariableScope):
        full = name_or_scope.name
        name_scope = full  # a new name scope for the ops, as TF1 opens when re-entering a scope object
        base = name_or_scope
    else:
        base = current
        if name_or_scope is not None:
            if not isinstance(name_or_scope, str):
                raise TypeError(f"variable_scope: expected a string or a VariableScope, got {name_or_scope!r}")
            relative = name_or_scope
        else:
            relative = _unique_scope_name(store, current, default_name)
        full = f"{current.name}/{relative}" if current.name else relative
        name_scope = relative
    if reuse is None:  # inherited from the enclosing scope, else the re-entered scope's own
        reuse = current._reuse if current._reuse is not None else base._reuse
    scope_cm = graph.name_scope(name_scope) if auxiliary_name_scope else contextlib.nullcontext(
        graph.get_name_scope())
    with scope_cm as opened:
        new = VariableScope(
            reuse, full,
            initializer=initializer if initializer is not None else base.initializer,
            regularizer=regularizer if regularizer is not None else base.regularizer,
            dtype=dtype if dtype is not None else base.dtype,
            original_name_scope=base.original_name_scope if isinstance(name_or_scope, VariableScope) else opened,
        )
        store.stack.append(new)
        store.open(full)
        try:
            yield new
        finally:
            store.stack.pop()
            store.close_subscopes(full)


def _default_initializer(name: str, dtype):
    if dtype.is_floating_point:
        return GlorotUniform()
    if dtype.category in (dt.INT, dt.BOOL):
        return Zeros(dtype)
    raise ValueError(f"An initializer for variable {name} of dtype {dtype.name} is required")


def init_scope():
    """The outermost graph, outside any control-flow function (see control_flow_ops.init_scope)."""
    from ember.v1.control_flow_ops import init_scope as scope

    return scope()


def get_variable(name: str, shape=None, dtype=None, initializer=None, regularizer=None, trainable=None,
                 collections=None, caching_device=None, partitioner=None, validate_shape: bool = True,
                 use_resource=None, custom_getter=None, constraint=None, synchronization=None, aggregation=None):
    """The variable `scope/name`: made (with `initializer`, default Glorot-uniform for floats) unless the scope
    reuses variables, in which case the existing one is returned (its shape and dtype must agree)."""
    from ember.v1.variables import Variable

    graph = get_default_graph()
    store = _store(graph)
    scope = store.stack[-1]
    full = f"{scope.name}/{name}" if scope.name else name
    found = store.variables.get(full)
    if found is not None:
        if scope._reuse is None:
            raise ValueError(
                f"Variable {full} already exists, disallowed. Did you mean to set reuse=True or "
                "reuse=tf.AUTO_REUSE in VarScope?"
            )
        if shape is not None and not found.get_shape().is_compatible_with(TensorShape(shape)):
            raise ValueError(
                f"Trying to share variable {full}, but specified shape {TensorShape(shape)} and found shape "
                f"{found.get_shape()}."
            )
        if dtype is not None and dt.as_dtype(dtype) is not found.dtype:
            raise ValueError(
                f"Trying to share variable {full}, but specified dtype {dt.as_dtype(dtype).name} and found dtype "
                f"{found.dtype.name}."
            )
        return found
    if scope._reuse is True:
        raise ValueError(
            f"Variable {full} does not exist, or was not created with tf.get_variable(). Did you mean to set "
            "reuse=tf.AUTO_REUSE in VarScope?"
        )
    if partitioner is not None or custom_getter is not None:
        raise NotImplementedError("get_variable: partitioner and custom_getter are not supported")
    initializer = initializer if initializer is not None else scope.initializer
    given_value = isinstance(initializer, Tensor) or (
        initializer is not None and not callable(initializer) and not isinstance(initializer, Initializer))
    if given_value:
        if shape is not None and validate_shape:
            raise ValueError("If initializer is a constant, do not specify shape.")
    elif shape is None:
        raise ValueError(f"Shape of a new variable ({full}) must be fully defined, but instead was None.")
    dtype = dt.as_dtype(dtype) if dtype is not None else (
        initializer.dtype if isinstance(initializer, Tensor) else scope.dtype)
    if initializer is None:
        initializer = _default_initializer(full, dtype)
    if trainable is None:
        trainable = True
    with init_scope():  # inside a cond branch or a loop body, the variable still belongs to the outermost graph
        graph = get_default_graph()
        with graph.name_scope(full + "/Initializer/"):
            if isinstance(initializer, Tensor) and is_symbolic(initializer):
                init = initializer
            elif given_value:
                init = Constant(np.asarray(initializer), dtype)(np.shape(initializer), dtype)
            else:
                init = initializer(list(shape), dtype=dtype)
        with graph.name_scope(None):
            var = Variable(init, trainable=trainable, collections=collections, validate_shape=validate_shape,
                           name=full, dtype=dtype)
    store.variables[full] = var
    regularizer = regularizer if regularizer is not None else scope.regularizer
    if regularizer is not None:
        graph = get_default_graph()
        with graph.name_scope(full + "/Regularizer/"):
            loss = regularizer(var)
        if loss is not None:
            graph.add_to_collection(GraphKeys.REGULARIZATION_LOSSES, loss)
    return var
