"""`Tensor`: a value on a device (or, while tracing, a node of a graph being built)."""

from __future__ import annotations

import numpy as np

from ember import dtypes as dt
from ember.backends.meta import MetaArray
from ember.device import Device, as_device
from ember.errors import DeviceMismatchError, InplaceCastError, ShapeError, fmt_shape
from ember.interpreter import _stack
from ember.interpreter import entered as _entered
from ember.size import Size, norm_dim, size_as_is, size_of


def _check_grad(t, g) -> None:
    """PyTorch's checks on assigning t.grad = g: a tensor of t's shape, dtype and device (symbolic values while
    tracing are checked by the ops that make them)."""
    if not isinstance(g, Tensor):
        raise TypeError(f"assigned grad expected to be a Tensor or None but got grad of type {type(g).__name__}")
    a, b = g._data, t._data
    if type(a) is np.ndarray and type(b) is np.ndarray:
        if a.shape != b.shape:
            raise ShapeError(f"attempting to assign a gradient of shape {fmt_shape(a.shape)} to a tensor of shape "
                             f"{fmt_shape(b.shape)}")
        if a.dtype != b.dtype:
            raise TypeError(f"attempting to assign a gradient of dtype {g.dtype} to a tensor of dtype {t.dtype}")
    if g._device is not t._device and g._device != t._device:
        raise DeviceMismatchError(f"attempting to assign a gradient on {g._device} to a tensor on {t._device}")


class Tensor:
    """An n-dimensional array on one device, with optional gradient tracking.

    The core (data, device, autograd fields, reading values out) is here; the methods that run ops
    (operators, conversions, math, reductions, shapes, indexing, matrix products, in-place forms,
    creation and random fills) are grouped in `ember/mixins/`, which the ops layer installs on this
    class when it is imported (as JAX sets its Array's methods), since ops build on Tensor.

    `Tensor(data)` is the legacy constructor (always the default float dtype); prefer
    `ember.tensor(data, dtype=..., device=..., requires_grad=...)`.
    """

    # The fields every op reads live in slots, set by both constructors (`_make`, `_init`): the autograd
    # fields that the recording of every op reads and writes (a slot costs less to read than a class
    # default, and setting one makes no per-instance dict). Rarely set fields default to the class
    # attributes below and are stored in the instance's dict once set.
    __slots__ = ("_data", "_device", "_version", "_requires_grad", "_grad_fn", "_output_nr", "_base", "_view_fn",
                 "__weakref__", "__dict__")
    _post_accumulate_grad_hooks = None  # set by register_post_accumulate_grad_hook
    _backward_hooks = None  # a leaf's register_hook hooks (a class default: reading it makes no instance dict)
    _grad = None  # .grad's storage (see the property below)
    name = None  # as torch.Tensor.name; an ember.v1 graph tensor's is its TF1 name (ember/v1/graph_tensor.py)

    __array_priority__ = 1000  # so ndarray + Tensor calls Tensor.__radd__

    def __init__(self, data=None, *sizes, device=None, requires_grad: bool = False) -> None:
        if data is None:
            data = []
        if sizes or (isinstance(data, int) and not isinstance(data, bool)):
            # Tensor(3) or Tensor(2, 3): a tensor of that size (zero-filled here), as in torch
            dims = (data, *sizes)
            if not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in dims):
                raise TypeError(f"Tensor(): expected data, or sizes as non-negative ints, got {dims}")
            data = np.zeros(dims)
        src = data.detach().cpu()._data if isinstance(data, Tensor) else data
        device = as_device(device)
        arr = np.array(_host_data(src), dtype=dt.get_default_dtype().np)
        self._init(device.backend.from_host(arr), device)
        self._requires_grad = bool(requires_grad)

    def _init(self, data, device: Device) -> None:
        self._data = data
        self._device = device
        self._version = [0]
        self._requires_grad = False
        self._grad_fn = None
        self._output_nr = 0
        self._base = None
        self._view_fn = None

    @classmethod
    def _make(cls, data, device: Device) -> Tensor:
        """Wrap backend data without copying (the internal constructor)."""
        t = object.__new__(cls)
        t._data = data
        t._device = device
        t._version = [0]
        t._requires_grad = False
        t._grad_fn = None
        t._output_nr = 0
        t._base = None
        t._view_fn = None
        return t

    # --- attributes ------------------------------------------------------------------
    @property
    def shape(self) -> Size:
        data = self._data
        if type(data) is np.ndarray:
            return size_of(data.shape)
        if isinstance(data, MetaArray) and data.symbolic:  # a graph value: its graph says how its shape reads
            return data.graph.static_size(data)
        return size_as_is(data.shape)

    def size(self, dim: int | None = None):
        """The shape (an `ember.Size`), or one dimension of it."""
        if dim is None:
            return self.shape
        return self._data.shape[_norm_dim("size", dim, self.ndim)]

    @property
    def ndim(self) -> int:
        return len(self._data.shape)

    def dim(self) -> int:
        """Number of dimensions."""
        return len(self._data.shape)

    def numel(self) -> int:
        """Number of elements."""
        n = 1
        for d in self._data.shape:
            n *= d
        return n

    nelement = numel

    @property
    def dtype(self) -> dt.DType:
        return dt.from_numpy_dtype(self._data.dtype)

    @property
    def device(self) -> Device:
        return self._device

    @property
    def is_meta(self) -> bool:
        return self._device.type == "meta"

    @property
    def is_cuda(self) -> bool:
        return self._device.type == "cuda"

    @property
    def grad(self):
        """The gradient accumulated by backward (None until then); read through the interpreter running this
        thread's ops, so that ember.jit's tracer sees what its program reads (graph/trace.py); with no interpreter
        entered in any thread, eager's answer is the stored gradient itself."""
        return _stack.top.read_grad(self) if _entered[0] else self._grad

    @grad.setter
    def grad(self, value) -> None:
        if value is not None:
            _check_grad(self, value)
        if _entered[0]:  # (eager records nothing)
            _stack.top.wrote_grad(self)
        self._grad = value

    @property
    def requires_grad(self) -> bool:
        return self._requires_grad

    @requires_grad.setter
    def requires_grad(self, value: bool) -> None:
        self.requires_grad_(value)

    def requires_grad_(self, requires_grad: bool = True) -> Tensor:
        """Start (or stop) recording operations on this leaf for autograd."""
        if self._grad_fn is not None and not requires_grad:
            raise RuntimeError(
                "you can only change requires_grad flags of leaf tensors; use .detach() to get a "
                "tensor that does not require grad"
            )
        if requires_grad and self._data.dtype not in _FLOAT_NP:
            raise RuntimeError(
                f"only tensors of floating point dtype can require gradients, got {self.dtype}"
            )
        self._requires_grad = bool(requires_grad)
        return self

    @property
    def is_leaf(self) -> bool:
        return self._grad_fn is None

    @property
    def grad_fn(self):
        return self._grad_fn if self._base is None else _views.current_grad_fn(self)

    def retain_grad(self) -> None:
        """Keep this non-leaf tensor's gradient in `.grad` after backward."""
        if not self._requires_grad:
            raise RuntimeError("can't retain_grad on a tensor that has requires_grad=False")
        from ember.autograd.engine import retain_node_grad

        retain_node_grad(self)

    def register_hook(self, hook):
        """Call hook(grad) on this tensor's gradient in each backward; a tensor it returns replaces the gradient."""
        from ember.autograd.hooks import register_tensor_hook

        return register_tensor_hook(self, self.grad_fn, hook)

    @property
    def retains_grad(self) -> bool:
        """Whether retain_grad() was called on this non-leaf tensor."""
        node = self.grad_fn
        ref = None if node is None or not node.retained else node.retained.get(self._output_nr)
        return ref is not None and ref() is self

    @property
    def output_nr(self) -> int:
        """Which output of its grad_fn this tensor is."""
        return self._output_nr

    def register_post_accumulate_grad_hook(self, hook):
        """Call hook(self) after each backward pass has accumulated this leaf's gradient into .grad."""
        from ember.autograd.hooks import register_post_accumulate_grad_hook

        return register_post_accumulate_grad_hook(self, hook)

    @property
    def itemsize(self) -> int:
        return self._data.dtype.itemsize

    def element_size(self) -> int:
        """Bytes per element."""
        return self._data.dtype.itemsize

    @property
    def nbytes(self) -> int:
        return self.numel() * self._data.dtype.itemsize

    def is_floating_point(self) -> bool:
        """Whether the dtype is a floating-point type."""
        return self._data.dtype in _FLOAT_NP

    def is_contiguous(self) -> bool:
        """Whether the data is laid out row-major without gaps (always true on meta)."""
        flags = getattr(self._data, "flags", None)
        return True if flags is None else bool(flags.c_contiguous)

    def data_ptr(self) -> int:
        """Address of the first element (meta tensors have none)."""
        self._require_data("data_ptr")
        return self._data.__array_interface__["data"][0] if isinstance(self._data, np.ndarray) else self._data.data.ptr

    def stride(self, dim: int | None = None):
        """Strides in elements, as PyTorch reports them."""
        if isinstance(self._data, MetaArray):
            strides, acc = [], 1
            for d in reversed(self.shape):
                strides.append(acc)
                acc *= d
            strides = tuple(reversed(strides))
        else:
            strides = tuple(s // self._data.dtype.itemsize for s in self._data.strides)
        return strides if dim is None else strides[_norm_dim("stride", dim, self.ndim)]

    # --- data access ---------------------------------------------------------------
    def _require_data(self, what: str):
        """The concrete array behind this tensor, for `what` to read (a clear error when there is none)."""
        return _dispatch.read(self, what)

    def numpy(self, *, force: bool = False) -> np.ndarray:
        """The data as a NumPy array (shares memory on the CPU)."""
        data = self._require_data("numpy")
        if self._requires_grad and not force:
            raise RuntimeError("can't call numpy() on a tensor that requires grad; use tensor.detach().numpy()")
        if self._device.type == "cpu":
            return data
        self._device.backend.synchronize()
        return self._device.backend.to_host(data)

    def __array__(self, dtype=None, copy=None):
        arr = self._device.backend.to_host(self._require_data("__array__"))
        if copy:  # np.array(t) asks for a copy; on the CPU to_host returns the storage itself
            return arr.astype(arr.dtype if dtype is None else dtype, copy=True)
        return arr if dtype is None else arr.astype(dtype, copy=False)

    def item(self):
        """The value of a one-element tensor as a Python number."""
        data = self._require_data("item")
        if self.numel() != 1:
            raise ValueError(
                f"item: only one-element tensors can be converted to Python scalars, got shape {self.shape}"
            )
        return self._device.backend.to_host(data).reshape(()).item()

    def tolist(self):
        """Nested Python lists of the values."""
        return self._device.backend.to_host(self._require_data("tolist")).tolist()

    def __bool__(self) -> bool:
        if self.numel() != 1:
            raise RuntimeError(
                f"the truth value of a tensor with more than one element ({self.numel()}) is ambiguous; "
                "use .any() or .all()"
            )
        return bool(self.item())

    def __float__(self) -> float:
        return float(self.item())

    def __int__(self) -> int:
        return int(self.item())

    def __index__(self) -> int:
        if self._data.dtype.kind not in "iu" or self.numel() != 1:
            raise TypeError("only integer tensors of a single element can be converted to an index")
        return int(self.item())

    def __len__(self) -> int:
        if not self.ndim:
            raise TypeError("len() of a 0-d tensor")
        return self._data.shape[0]

    def __iter__(self):
        if not self.ndim:
            raise TypeError("iteration over a 0-d tensor")
        return (self[i] for i in range(self._data.shape[0]))

    def __hash__(self) -> int:
        return id(self)

    def __repr__(self) -> str:
        from ember.printing import tensor_repr

        return tensor_repr(self)

    def __str__(self) -> str:
        from ember.printing import tensor_repr

        return tensor_repr(self, as_str=True)

    def __format__(self, spec: str) -> str:
        if self.ndim == 0 and not isinstance(self._data, MetaArray):
            return format(self.item(), spec)
        return repr(self)

    # --- autograd --------------------------------------------------------------------
    def backward(self, gradient=None, retain_graph=None, create_graph: bool = False, inputs=None) -> None:
        """Accumulate the gradient of this tensor w.r.t. the graph's leaves (or only `inputs`) into their `.grad`."""
        _engine.backward(self, gradient, retain_graph=retain_graph, create_graph=create_graph, inputs=inputs)

    def detach(self) -> Tensor:
        """A tensor sharing this one's data that is cut from the autograd graph."""
        t = Tensor._make(self._data, self._device)
        # It shares the storage's version counter (writes through it are still seen by autograd)
        # but is no autograd view: an in-place write through it must not enter self's history.
        t._version = self._version
        return t

    @property
    def data(self) -> Tensor:
        """This tensor's values as a tensor cut from autograd (PyTorch's `.data`).

        It shares the storage but not the version counter, so, as in PyTorch, writes through it are
        invisible to autograd's check of saved tensors; `detach()` is the safe form.
        """
        return Tensor._make(self._data, self._device)

    @data.setter
    def data(self, value: Tensor) -> None:
        """Make this tensor use `value`'s storage (shape, dtype and device too), keeping its autograd identity."""
        if not isinstance(value, Tensor):
            raise TypeError(f"Tensor.data must be set to a tensor, got {type(value).__name__}")
        if self._requires_grad and value._data.dtype not in _FLOAT_NP:
            raise RuntimeError(f"Tensor.data: this tensor requires grad, so its data must be floating point, "
                               f"got {value.dtype.name}")
        if _dispatch.builds_graph(self, value):
            raise RuntimeError("Tensor.data = ...: storage cannot be swapped while ember.jit traces or a graph is "
                               "built; update the values in place (copy_) instead")
        self._data = value._data
        self._device = value._device
        self._base = None  # no longer a view of its old base
        self._view_fn = None

    def detach_(self) -> Tensor:
        """Cut this tensor from the autograd graph in place."""
        self._grad_fn = None
        self._requires_grad = False
        return self

    # --- in place --------------------------------------------------------------------
    def _check_inplace(self, name: str) -> None:
        if not _grad_state.enabled:
            return
        if self._requires_grad and self._grad_fn is None:
            raise RuntimeError(
                f"{name}: a leaf tensor that requires grad is being used in an in-place operation; "
                "wrap it in `with ember.no_grad():` or work on a clone"
            )
        base = self._base
        if base is not None and self._view_fn is not None and base._requires_grad and base._grad_fn is None:
            raise RuntimeError(
                f"{name}: a view of a leaf tensor that requires grad is being used in an in-place "
                "operation; wrap it in `with ember.no_grad():` or work on a clone"
            )

    def _assign_result(self, name: str, result: Tensor, mark: int | None = None) -> Tensor:
        """Write an out-of-place result into this tensor's storage and take over its autograd history.

        `mark` (from `autograd.seq_mark()` taken before `result` was computed) lets the nodes that
        computed it keep a copy of this tensor's old values if they saved it for backward.
        """
        self._check_inplace(name)
        if result._data.shape != self._data.shape:
            raise ShapeError(
                f"{name}: the result has shape {fmt_shape(result.shape)}, which does not match the "
                f"shape {fmt_shape(self.shape)} of the tensor written in place"
            )
        src, dst = result._data.dtype, self._data.dtype
        if src != dst and not _can_cast(src, dst):
            raise InplaceCastError(f"{name}: result type {dt.from_numpy_dtype(src)} can't be cast to the "
                            f"desired output type {dt.from_numpy_dtype(dst)}")
        if result._device is not self._device:
            raise RuntimeError(f"{name}: result on {result._device} but the tensor is on {self._device}")
        record = _views.needs_inplace_record(self, result)
        if record and mark is not None:
            _views.protect_saved(self, result, mark)
        _dispatch.write(self, result, name)
        self._version[0] += 1
        if record:
            _views.rebase_after_write(self, result)
        return self



def _host_data(src):
    """Turn nested lists that may hold tensors into something np.array accepts."""
    if isinstance(src, (list, tuple)) and src and any(isinstance(x, Tensor) for x in src):
        return [np.asarray(x) if isinstance(x, Tensor) else _host_data(x) for x in src]
    return src


def _norm_dim(op, dim, ndim):
    return norm_dim(op, dim, ndim)


def _can_cast(src, dst) -> bool:
    """PyTorch's canCast: no float -> integer and no non-bool -> bool in place."""
    if src in _FLOAT_NP and dst not in _FLOAT_NP:
        return False
    if dst == np.bool_ and src != np.bool_:
        return False
    return True


_FLOAT_NP = dt.FLOAT_NP

# dispatch and autograd build on Tensor; Tensor's own methods use them at call time
from ember import dispatch as _dispatch  # noqa: E402
from ember.autograd import engine as _engine  # noqa: E402
from ember.autograd import views as _views  # noqa: E402
from ember.autograd.grad_mode import state as _grad_state  # noqa: E402
