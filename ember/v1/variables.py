"""`Variable`: a symbolic tensor whose value is storage that persists between runs; initializers."""

from __future__ import annotations

import threading

import numpy as np

from ember.errors import fmt_shape
from ember.tensor import Tensor
from ember.v1.convert import convert_to_tensor, is_symbolic
from ember.v1.errors import FailedPreconditionError
from ember.v1.graph_api import GLOBAL_VARIABLES, TRAINABLE_VARIABLES, Operation, get_default_graph
from ember.v1.state_ops import assign, assign_add, assign_sub, group


class Variable(Tensor):
    """A graph tensor read from the variable's storage at each run; `initializer` fills the storage.

    The storage belongs to the Variable, so every session of its graph sees the same values
    (in TF1 each session holds its own). Comparison is by identity, as for TF1 variables.
    """

    def __init__(self, initial_value=None, trainable: bool = True, collections=None, validate_shape: bool = True,
                 name: str | None = None, dtype=None) -> None:
        if initial_value is None:
            raise ValueError("Variable: initial_value must be given")
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
        self._storage = None
        self._lock = threading.Lock()
        value = graph.variable(self, name=self.op_name)
        Tensor._init(self, value, self.storage_device)
        if self.is_floating_point():
            self.requires_grad_(True)  # gradients() reaches variables through autograd
        self.initial_value = init
        self._initializer_value = assign(self, init)
        self.initializer = Operation(self._initializer_value._data.node)
        graph.name_node(self.initializer.node, f"{self.op_name}/Assign", scoped=False)
        for key in collections if collections is not None else [GLOBAL_VARIABLES]:
            graph.add_to_collection(key, self)
        if trainable and TRAINABLE_VARIABLES not in (collections or ()):
            graph.add_to_collection(TRAINABLE_VARIABLES, self)

    # --- storage (used by the executor and the assign kernels) ----------------------------
    def read_storage(self):
        """The current storage; an error naming the variable if it was never initialised."""
        storage = self._storage
        if storage is None:
            raise FailedPreconditionError(f"Attempting to use uninitialized value {self.op_name}")
        return storage

    def write(self, xp, value, mode: str = "set"):
        """Set, add to or subtract from the storage; returns the storage."""
        with self._lock:
            cur = self._storage
            if mode == "set":
                if cur is None or tuple(cur.shape) != tuple(value.shape):
                    self._storage = xp.array(value, dtype=self.spec_dtype, copy=True)
                else:
                    xp.copyto(cur, value, casting="unsafe")
                return self._storage
            if cur is None:
                raise FailedPreconditionError(f"Attempting to use uninitialized value {self.op_name}")
            ufunc = xp.add if mode == "add" else xp.subtract
            ufunc(cur, value, out=cur, casting="unsafe")
            return cur

    def is_initialized_now(self) -> bool:
        """Whether the storage holds a value (asked of the process holding it, for a variable placed on another)."""
        if self.storage_device.job is not None:
            from ember.distributed.remote import variables_initialized

            return variables_initialized([self])[0]
        return self._storage is not None

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

    def get_shape(self) -> tuple:
        """The static shape."""
        return self.spec_shape

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
        """Write a value into the storage now (outside any graph run)."""
        if self.storage_device.job is not None:
            raise ValueError(f"load: variable {self.op_name} lives on {self.storage_device}, another process; "
                             "assign it in a graph run instead")
        arr = np.asarray(value, dtype=self.spec_dtype)
        if arr.shape != self.spec_shape:
            raise ValueError(f"load: value of shape {arr.shape} for variable {self.op_name} of shape {self.spec_shape}")
        backend = self._device.backend
        self.write(backend.xp, backend.from_host(arr), "set")

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


def report_uninitialized_variables(var_list=None) -> list:
    """Names of the variables whose storage holds no value yet (checked now, not in a graph run)."""
    variables = list(var_list or global_variables())
    remote = [v for v in variables if v.storage_device.job is not None]
    if remote:  # one question per process holding some of them
        from ember.distributed.remote import variables_initialized

        ready = dict(zip(map(id, remote), variables_initialized(remote)))
        return [v.op_name for v in variables if not ready.get(id(v), v._storage is not None)]
    return [v.op_name for v in variables if not v.is_initialized_now()]
