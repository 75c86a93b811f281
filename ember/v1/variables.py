"""`Variable`: a symbolic tensor whose value persists between runs of a session; initializers."""

from __future__ import annotations

import numpy as np

from ember.errors import fmt_shape
from ember.op import Op, register
from ember.ops._rules import spec
from ember.tensor import Tensor
from ember.v1 import variable_values
from ember.v1.convert import convert_to_tensor, is_symbolic
from ember.v1.graph_api import GLOBAL_VARIABLES, TRAINABLE_VARIABLES, Operation, get_default_graph
from ember.v1.graph_tensor import GraphTensor
from ember.v1.naming import tf_op
from ember.v1.state_ops import assign, assign_add, assign_sub, assign_value, group
from ember.v1.tensor_shape import TensorShape


class Variable(Tensor):
    """A graph tensor read from the variable's storage at each run; `initializer` fills the storage.

    As in TF1, the storage belongs to a session: each session of the graph holds its own value
    (see variable_values.py). Comparison is by identity, as for TF1 variables.
    """

    def __init__(self, initial_value=None, trainable: bool = True, collections=None, validate_shape: bool = True,
                 name: str | None = None, dtype=None) -> None:
        if initial_value is None:
            raise ValueError("Variable: initial_value must be given")
        if _in_function_graph():
            _lifted_init(self, initial_value, trainable, collections, validate_shape, name, dtype)
            return
        if callable(initial_value):
            initial_value = initial_value()
        graph = get_default_graph()
        placed = graph.variable_device()  # a device function (replica_device_setter) may put variables elsewhere
        if placed is not None:
            from ember.v1.graph_api import device

            with device(placed):
                init = convert_to_tensor(initial_value, dtype=dtype if not is_symbolic(initial_value) else None)
        else:
            init = convert_to_tensor(initial_value, dtype=dtype if not is_symbolic(initial_value) else None)
        if init._data.graph is not graph:
            raise ValueError("Variable: the initial value belongs to another graph than the default one")
        if dtype is not None and init.dtype is not _as_dtype(dtype):
            init = init.to(_as_dtype(dtype))
        shape = tuple(init.shape)
        if validate_shape and any(d is None for d in shape):
            raise ValueError(
                f"Variable: the initial value has shape {fmt_shape(shape)} with unknown dimensions; "
                "give a fully known initial value"
            )
        self.op_name = graph.scoped_name(name or "Variable")
        self.spec_shape = shape
        self.spec_dtype = init._data.dtype
        self.storage_device = placed if placed is not None else init._device
        self.trainable = bool(trainable)
        value = graph.variable(self, name=self.op_name)
        Tensor._init(self, value, self.storage_device)
        if self.is_floating_point():
            self.requires_grad_(True)  # gradients() reaches variables through autograd
        self.initial_value = init
        with graph.absolute_scope(self.op_name):  # the initializer is "<name>/Assign", as in TF1
            self._initializer_value = assign_value(self, init)
        self.initializer = Operation(self._initializer_value._data.node)
        for key in collections if collections is not None else [GLOBAL_VARIABLES]:
            graph.add_to_collection(key, self)
        if trainable and TRAINABLE_VARIABLES not in (collections or ()):
            graph.add_to_collection(TRAINABLE_VARIABLES, self)

    # --- storage (used by the executor and the assign kernels, inside a session's run) ----------
    def read_storage(self):
        """The value in the running session; FailedPreconditionError if it was never initialised there."""
        return variable_values.current().read(self)

    def write(self, xp, value, mode: str = "set"):
        """Set, add to or subtract from the value in the running session; returns the stored array."""
        return variable_values.current().write(self, xp, value, mode)

    # --- TF1's Variable interface ------------------------------------------------------------
    @property
    def name(self) -> str:
        return f"{self.op_name}:0"

    @property
    def op(self) -> Operation:
        return Operation(self._data.node)

    @property
    def graph(self):
        return self._data.graph

    def get_shape(self) -> TensorShape:
        """The static shape."""
        return TensorShape(self.spec_shape)

    def value(self) -> Tensor:
        """The variable as a tensor (read at the start of each run; gradients reach the variable)."""
        return self

    def read_value(self) -> Tensor:
        """The variable's value when this read runs (after its control dependencies)."""
        from ember.v1.state_ops import identity

        return identity(self)

    def initialized_value(self) -> Tensor:
        """The variable's value read after its initializer ran (to initialise other variables from it)."""
        from ember.v1.state_ops import identity

        with self.graph.control_dependencies([self.initializer]):
            return identity(self)

    def assign(self, value, use_locking: bool = True, name: str | None = None) -> Tensor:
        """An op writing `value` into this variable."""
        return assign(self, value, name=name)

    def assign_add(self, delta, use_locking: bool = True, name: str | None = None) -> Tensor:
        """An op adding `delta` to this variable."""
        return assign_add(self, delta, name=name)

    def assign_sub(self, delta, use_locking: bool = True, name: str | None = None) -> Tensor:
        """An op subtracting `delta` from this variable."""
        return assign_sub(self, delta, name=name)

    def load(self, value, session=None) -> None:
        """Write a value into the variable in `session` (default: the default session) now, outside any run."""
        from ember.v1.session import default_session_for

        if self.storage_device.job is not None:
            raise ValueError(f"load: variable {self.op_name} lives on {self.storage_device}, another process; "
                             "assign it in a graph run instead")
        arr = np.asarray(value, dtype=self.spec_dtype)
        if arr.shape != self.spec_shape:
            raise ValueError(f"load: value of shape {arr.shape} for variable {self.op_name} of shape {self.spec_shape}")
        backend = self._device.backend
        default_session_for(self.graph, session).variable_values.write(self, backend.xp, backend.from_host(arr))

    def eval(self, feed_dict=None, session=None):
        """The variable's value in `session` (default: the default session)."""
        from ember.v1.session import default_session_for

        return default_session_for(self.graph, session).run(self, feed_dict=feed_dict)

    def __eq__(self, other) -> bool:
        return self is other

    def __ne__(self, other) -> bool:
        return self is not other

    def __hash__(self) -> int:
        return id(self)

    def __repr__(self) -> str:
        return f"<tf.Variable '{self.name}' shape={fmt_shape(self.spec_shape)} dtype={self.dtype.name}>"


def _in_function_graph() -> bool:
    from ember.v1.control_flow_ops import in_function_graph

    return in_function_graph()


def _lifted_init(var, initial_value, trainable, collections, validate_shape, name, dtype) -> None:
    """A variable made inside a cond branch or a loop body lives in the outermost graph (TF1's rule)."""
    from ember.v1.control_flow_ops import init_scope

    if is_symbolic(initial_value) and hasattr(initial_value._data.node.graph, "outer"):
        raise ValueError(
            f"Initializer for variable {name or 'Variable'} is from inside a control-flow construct, such as a "
            "loop or conditional. When creating a variable inside a loop or conditional, use a lambda as the "
            "initializer."
        )
    with init_scope():
        Variable.__init__(var, initial_value, trainable, collections, validate_shape, name, dtype)


def _as_dtype(dtype):
    from ember.dtypes import as_dtype

    return as_dtype(dtype)


# --- collections and initializers --------------------------------------------------------------
def global_variables(scope: str | None = None) -> list:
    """All variables of the default graph."""
    return get_default_graph().get_collection(GLOBAL_VARIABLES, scope)


all_variables = global_variables


def trainable_variables(scope: str | None = None) -> list:
    """The variables of the default graph created with trainable=True."""
    return get_default_graph().get_collection(TRAINABLE_VARIABLES, scope)


def variables_initializer(var_list, name: str = "init") -> Operation:
    """One operation running the initializers of `var_list`."""
    return group(*[v.initializer for v in var_list], name=name)


def global_variables_initializer() -> Operation:
    """One operation initialising every variable of the default graph."""
    return variables_initializer(global_variables())


initialize_all_variables = global_variables_initializer


def local_variables_initializer() -> Operation:
    """One operation initialising local variables (there are none in ember.v1: a no-op)."""
    return group(name="local_init")


class ReportUninitializedOp(Op):
    """The names (bytes) of the variables that hold no value in the running session, as a 1-D array."""

    name = "report_uninitialized_variables"
    differentiable = False
    stateful = True  # its result depends on the session's state when it runs
    fresh_output = True

    def infer(self, variables):
        return spec((None,), np.dtype(object))

    def kernel(self, xp, variables):
        values = variable_values.current()
        remote = [v for v in variables if v.storage_device.job is not None]
        ready = {}
        if remote:  # variables placed on other processes: one question per process holding some of them
            from ember.v1.remote import variables_initialized

            ready = dict(zip(map(id, remote), variables_initialized(remote)))
        return np.array([v.op_name.encode() for v in variables if not ready.get(id(v), values.has(v))], dtype=object)


report_uninitialized_op = register(ReportUninitializedOp())


class IsInitializedOp(Op):
    """Whether one variable holds a value in the running session (a bool scalar)."""

    name = "is_variable_initialized"
    differentiable = False
    stateful = True
    fresh_output = True

    def infer(self, variable):
        return spec((), np.dtype(bool))

    def kernel(self, xp, variable):
        return xp.asarray(variable_values.current().has(variable))


is_initialized_op = register(IsInitializedOp())


@tf_op("report_uninitialized_variables")
def report_uninitialized_variables(var_list=None, name: str = "report_uninitialized_variables") -> Tensor:
    """A tensor: the names of the variables (default: all) not initialised when it runs, as bytes."""
    graph = get_default_graph()
    variables = tuple(global_variables() if var_list is None else var_list)
    value = graph.add_op(report_uninitialized_op, [], {"variables": variables}, graph.device)
    return GraphTensor._make(value, graph.device)


@tf_op("IsVariableInitialized")
def is_variable_initialized(variable, name: str | None = None) -> Tensor:
    """A bool tensor: whether `variable` holds a value when it runs."""
    graph = get_default_graph()
    value = graph.add_op(is_initialized_op, [], {"variable": variable}, graph.device)
    return GraphTensor._make(value, graph.device)


@tf_op("assert_variables_initialized")
def assert_variables_initialized(var_list=None) -> Tensor:
    """An op (a tensor here) that fails with FailedPreconditionError when run if a variable is uninitialised."""
    from ember.v1.check_ops import assert_empty

    return assert_empty(report_uninitialized_variables(var_list), "uninitialized variables")
