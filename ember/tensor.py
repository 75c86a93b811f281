"""`Tensor`: a value on a device (or, while tracing, a node of a graph being built)."""

from __future__ import annotations

import numpy as np

from ember import dtypes as dt
from ember.backends.meta import MetaArray
from ember.device import Device, as_device
from ember.errors import ConcretizationError, DataDependentError, ShapeError, fmt_shape


class Tensor:
    """An n-dimensional array on one device, with optional gradient tracking.

    `Tensor(data)` is the legacy constructor (always the default float dtype); prefer
    `ember.tensor(data, dtype=..., device=..., requires_grad=...)`.
    """

    # Only the fields every tensor sets live in slots; the autograd fields default to the class
    # attributes below and are stored per instance only once set (most tensors never set them).
    __slots__ = ("_data", "_device", "_version", "__weakref__", "__dict__")
    _requires_grad = False
    _grad_fn = None
    _output_nr = 0
    _base = None
    _view_fn = None
    _post_accumulate_grad_hooks = None  # set by register_post_accumulate_grad_hook
    grad = None

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

    @classmethod
    def _make(cls, data, device: Device) -> Tensor:
        """Wrap backend data without copying (the internal constructor)."""
        t = object.__new__(cls)
        t._data = data
        t._device = device
        t._version = [0]
        return t

    # --- attributes ------------------------------------------------------------------
    @property
    def shape(self) -> tuple:
        return tuple(self._data.shape)

    def size(self, dim: int | None = None):
        """The shape, or one dimension of it."""
        if dim is None:
            return tuple(self._data.shape)
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

    @property
    def _version_value(self) -> int:
        return self._version[0]

    def retain_grad(self) -> None:
        """Keep this non-leaf tensor's gradient in `.grad` after backward."""
        if not self._requires_grad:
            raise RuntimeError("can't retain_grad on a tensor that has requires_grad=False")
        from ember.autograd.engine import retain_node_grad

        retain_node_grad(self)

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
    def _require_data(self, what: str) -> None:
        data = self._data
        if type(data) is np.ndarray:
            tracer = _ops._dispatch.trace_state.hook
            if tracer is not None and tracer.is_mutated(self):
                raise ConcretizationError(
                    f"{what}: this tensor of shape {fmt_shape(self.shape)} was updated in place inside the "
                    "function ember.jit is tracing, so its value is only known when the graph runs. "
                    "Keep the computation in tensor ops instead of reading the value in Python."
                )
            return
        if getattr(type(data), "pending", False):  # async eager: wait for the kernel computing it
            self._data = data.result()
            return
        if isinstance(data, MetaArray):
            if data.symbolic:
                raise ConcretizationError(
                    f"{what}: this tensor (shape {fmt_shape(self.shape)}, {self.dtype.name}) is symbolic: its "
                    "value is not known while a graph is built or ember.jit traces a function, so Python "
                    "control flow (if/while, bool(), int(), float(), .item(), .numpy(), .tolist()) cannot "
                    "depend on it. Use ember.where(...) for a data-dependent choice, move the branch "
                    "outside the jitted function, or mark the argument static with "
                    "ember.jit(fn, static_argnums=...)."
                )
            raise DataDependentError(f"{what}: tensors on the meta device have no data (device='meta')")

    def numpy(self, *, force: bool = False) -> np.ndarray:
        """The data as a NumPy array (shares memory on the CPU)."""
        self._require_data("numpy")
        if self._requires_grad and not force:
            raise RuntimeError("can't call numpy() on a tensor that requires grad; use tensor.detach().numpy()")
        if self._device.type == "cpu":
            return self._data
        self._device.backend.synchronize()
        return self._device.backend.to_host(self._data)

    def __array__(self, dtype=None, copy=None):
        self._require_data("__array__")
        arr = self._device.backend.to_host(self._data)
        if copy:  # np.array(t) asks for a copy; on the CPU to_host returns the storage itself
            return arr.astype(arr.dtype if dtype is None else dtype, copy=True)
        return arr if dtype is None else arr.astype(dtype, copy=False)

    def item(self):
        """The value of a one-element tensor as a Python number."""
        self._require_data("item")
        if self.numel() != 1:
            raise ValueError(
                f"item: only one-element tensors can be converted to Python scalars, got shape {self.shape}"
            )
        return self._device.backend.to_host(self._data).reshape(()).item()

    def tolist(self):
        """Nested Python lists of the values."""
        self._require_data("tolist")
        return self._device.backend.to_host(self._data).tolist()

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

    __str__ = __repr__

    def __format__(self, spec: str) -> str:
        if self.ndim == 0 and not isinstance(self._data, MetaArray):
            return format(self.item(), spec)
        return repr(self)

    # --- autograd --------------------------------------------------------------------
    def backward(self, gradient=None, retain_graph=None, create_graph: bool = False, inputs=None) -> None:
        """Accumulate the gradient of this tensor w.r.t. the graph's leaves into their `.grad`."""
        from ember.autograd.engine import backward

        if inputs is not None:
            raise NotImplementedError("backward(inputs=...) is not supported; use ember.autograd.grad")
        backward(self, gradient, retain_graph=retain_graph, create_graph=create_graph)

    def detach(self) -> Tensor:
        """A tensor sharing this one's data that is cut from the autograd graph."""
        t = Tensor._make(self._data, self._device)
        # It shares the storage's version counter (writes through it are still seen by autograd)
        # but is no autograd view: an in-place write through it must not enter self's history.
        t._version = self._version
        return t

    def detach_(self) -> Tensor:
        """Cut this tensor from the autograd graph in place."""
        self._grad_fn = None
        self._requires_grad = False
        return self

    # --- devices and dtypes --------------------------------------------------------
    def to(self, *args, **kwargs) -> Tensor:
        """Move and/or cast: to(device), to(dtype), to(device, dtype), to(other_tensor)."""
        device, dtype, copy = _parse_to_args(self, args, kwargs)
        out = self
        if dtype is not None and dtype.np != self._data.dtype:
            out = _ops.cast(out, dtype)
        if device is not None and device is not self._device:
            out = _ops.to_device(out, device)
        if copy and out is self:
            out = self.clone()
        return out

    def cpu(self) -> Tensor:
        """This tensor on the cpu device."""
        return self.to("cpu")

    def cuda(self, device=None) -> Tensor:
        """This tensor on a CUDA device."""
        return self.to("cuda" if device is None else (f"cuda:{device}" if isinstance(device, int) else device))

    def type(self, dtype=None):
        """The type name ('ember.FloatTensor' style) or a cast to `dtype`."""
        if dtype is None:
            return f"ember.{self.dtype.name}"
        return self.to(dt.as_dtype(dtype))

    def float(self) -> Tensor:
        return self.to(dt.float32)

    def double(self) -> Tensor:
        return self.to(dt.float64)

    def half(self) -> Tensor:
        return self.to(dt.float16)

    def bfloat16(self) -> Tensor:
        if dt.bfloat16 is None:
            raise TypeError("bfloat16 needs the ml_dtypes package: pip install ml_dtypes")
        return self.to(dt.bfloat16)

    def long(self) -> Tensor:
        return self.to(dt.int64)

    def int(self) -> Tensor:
        return self.to(dt.int32)

    def short(self) -> Tensor:
        return self.to(dt.int16)

    def byte(self) -> Tensor:
        return self.to(dt.uint8)

    def bool(self) -> Tensor:
        return self.to(dt.bool_)

    def type_as(self, other: Tensor) -> Tensor:
        return self.to(other.dtype)

    # --- indexing ----------------------------------------------------------------------
    def __getitem__(self, index) -> Tensor:
        return _ops.getitem(self, index)

    def __setitem__(self, index, value) -> None:
        _ops.setitem(self, index, value)

    # --- in place --------------------------------------------------------------------
    def _check_inplace(self, name: str) -> None:
        if _ops._dispatch.kernel_hook is not None:  # runtime features on: queued kernels finish first
            from ember.runtime.async_eager import before_write

            before_write(self)
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
            raise TypeError(f"{name}: result type {dt.from_numpy_dtype(src)} can't be cast to the "
                            f"desired output type {dt.from_numpy_dtype(dst)}")
        if result._device is not self._device:
            raise RuntimeError(f"{name}: result on {result._device} but the tensor is on {self._device}")
        record = _views.needs_inplace_record(self, result)
        if record and mark is not None:
            _views.protect_saved(self, result, mark)
        if _is_graph_value(self._data) or _is_graph_value(result._data) or _ops._dispatch.trace_state.hook:
            self._write_symbolic(name, result)
        elif not isinstance(self._data, MetaArray):
            if not _writeable(self._data):
                raise RuntimeError(
                    f"{name}: this tensor is a read-only view (for example from expand/broadcast_to); "
                    "clone it before writing into it"
                )
            self._device.backend.xp.copyto(self._data, result._data, casting="unsafe")
        self._version[0] += 1
        if record:
            _views.rebase_after_write(self, result)
        return self

    def _write_symbolic(self, name: str, result: Tensor) -> None:
        """An in-place write while building a graph: rebind to the new value (functionalisation).

        A tensor from outside a traced function is not rebound: the tracer records the update and
        ember.jit writes the computed values into it after each call.
        """
        if self._view_fn is not None and _is_graph_value(self._base._data if self._base is not None else None):
            raise NotImplementedError(
                f"{name}: in-place writes through a view are not supported while building a graph; "
                "write into the base tensor (x[idx] = v) or use out-of-place ops"
            )
        tracer = _ops._dispatch.trace_state.hook
        value = result._data
        if not _is_graph_value(value):
            value = tracer.lift(result) if tracer is not None else value
        if _is_graph_value(self._data) or tracer is None:
            self._data = value
        else:
            tracer.mutate(self, value)

    def add_(self, other, *, alpha=1) -> Tensor:
        """In-place self += alpha * other."""
        return self._inplace_binary("add_", _ops.add, other, alpha, np.add)

    def sub_(self, other, *, alpha=1) -> Tensor:
        """In-place self -= alpha * other."""
        return self._inplace_binary("sub_", _ops.sub, other, alpha, np.subtract)

    def mul_(self, other) -> Tensor:
        """In-place self *= other."""
        return self._inplace_binary("mul_", _ops.mul, other, 1, np.multiply)

    def div_(self, other) -> Tensor:
        """In-place self /= other."""
        return self._inplace_binary("div_", _ops.div, other, 1, np.true_divide)

    def _inplace_binary(self, name, fn, other, alpha, ufunc) -> Tensor:
        # Fast path (optimizer updates): no autograd, CPU, dtypes that need no promotion.
        if (
            type(self._data) is np.ndarray
            and not (_grad_state.enabled and (self._requires_grad or getattr(other, "_requires_grad", False)))
            and _ops._dispatch.trace_state.hook is None
            and _ops._dispatch.kernel_hook is None
        ):
            if isinstance(other, Tensor):
                if other._device is not self._device:
                    raise DeviceMismatchError(f"{name}: tensors on {self._device} and {other._device}")
                o = other._data
                ok = o.dtype == self._data.dtype
            else:
                o = other
                ok = isinstance(other, (int, float)) and not isinstance(other, bool) and (
                    self._data.dtype in _FLOAT_NP or isinstance(other, int)
                ) and not (ufunc is np.true_divide and self._data.dtype not in _FLOAT_NP)
            if ok and self._data.flags.writeable and not isinstance(alpha, Tensor):
                if alpha != 1:
                    o = o * alpha
                try:
                    ufunc(self._data, o, out=self._data)
                except ValueError:
                    pass  # a broadcast that does not fit: the general path reports it
                else:
                    self._version[0] += 1
                    return self
        if isinstance(alpha, Tensor) or alpha != 1:
            other = _ops.mul(other, alpha) if isinstance(other, Tensor) else alpha * other
        mark = _engine.seq_mark()
        return self._assign_result(name, fn(self, other), mark)

    def zero_(self) -> Tensor:
        """Fill with zeros in place."""
        return self.fill_(0)

    def fill_(self, value) -> Tensor:
        """Fill with one value in place."""
        if isinstance(value, Tensor):
            if value.numel() != 1:
                raise ValueError(f"fill_: only a one-element tensor can be a fill value, got shape {value.shape}")
            return self.copy_(value.reshape(()))
        self._check_inplace("fill_")
        if _views.needs_inplace_record(self, self) or _symbolic_context(self):
            return self._assign_result("fill_", _ops.full_like(self, value))
        if not isinstance(self._data, MetaArray):
            self._data[...] = value
        self._version[0] += 1
        return self

    def copy_(self, src) -> Tensor:
        """Copy values (broadcast, cast, and moved across devices as needed) into this tensor."""
        if not isinstance(src, Tensor):
            src = _ops.full_like(self, 0) + src
        if src._device is not self._device:
            src = src.to(self._device)
        src = src.to(self.dtype)
        if src.shape != self.shape:
            src = _ops.expand(src, self.shape)
        if not _views.needs_inplace_record(self, src) and not _symbolic_context(self, src):
            self._check_inplace("copy_")
            if not isinstance(self._data, MetaArray):
                self._device.backend.xp.copyto(self._data, src._data)
            self._version[0] += 1
            return self
        return self._assign_result("copy_", _ops.identity(src) if src._requires_grad else src)

    def clamp_(self, min=None, max=None) -> Tensor:
        """Clamp values into [min, max] in place."""
        mark = _engine.seq_mark()
        return self._assign_result("clamp_", _ops.clamp(self, min, max), mark)

    clip_ = clamp_

    def __iadd__(self, other):
        return self.add_(other)

    def __isub__(self, other):
        return self.sub_(other)

    def __imul__(self, other):
        return self.mul_(other)

    def __itruediv__(self, other):
        return self.div_(other)

    # --- operators -------------------------------------------------------------------
    def __add__(self, other):
        return _ops.add(self, other)

    def __radd__(self, other):
        return _ops.add(other, self)

    def __sub__(self, other):
        return _ops.sub(self, other)

    def __rsub__(self, other):
        return _ops.sub(other, self)

    def __mul__(self, other):
        return _ops.mul(self, other)

    def __rmul__(self, other):
        return _ops.mul(other, self)

    def __truediv__(self, other):
        return _ops.div(self, other)

    def __rtruediv__(self, other):
        return _ops.div(other, self)

    def __floordiv__(self, other):
        return _ops.floor_divide(self, other)

    def __rfloordiv__(self, other):
        return _ops.floor_divide(other, self)

    def __mod__(self, other):
        return _ops.remainder(self, other)

    def __rmod__(self, other):
        return _ops.remainder(other, self)

    def __pow__(self, other):
        return _ops.pow(self, other)

    def __rpow__(self, other):
        return _ops.pow(other, self)

    def __matmul__(self, other):
        return _ops.matmul(self, other)

    def __rmatmul__(self, other):
        return _ops.matmul(other, self)

    def __neg__(self):
        return _ops.neg(self)

    def __pos__(self):
        return self

    def __abs__(self):
        return _ops.abs(self)

    def __invert__(self):
        return _ops.logical_not(self) if self._data.dtype == np.bool_ else _ops.bitwise_not(self)

    def __and__(self, other):
        return _ops.logical_and(self, other) if self._data.dtype == np.bool_ else _ops.bitwise_and(self, other)

    def __or__(self, other):
        return _ops.logical_or(self, other) if self._data.dtype == np.bool_ else _ops.bitwise_or(self, other)

    def __xor__(self, other):
        return _ops.logical_xor(self, other) if self._data.dtype == np.bool_ else _ops.bitwise_xor(self, other)

    __rand__ = __and__
    __ror__ = __or__
    __rxor__ = __xor__

    def __eq__(self, other):
        return _ops.eq(self, other)

    def __ne__(self, other):
        return _ops.ne(self, other)

    def __lt__(self, other):
        return _ops.lt(self, other)

    def __le__(self, other):
        return _ops.le(self, other)

    def __gt__(self, other):
        return _ops.gt(self, other)

    def __ge__(self, other):
        return _ops.ge(self, other)

    @property
    def T(self) -> Tensor:
        if self.ndim > 2:
            return _ops.permute(self, tuple(reversed(range(self.ndim))))
        return _ops.t(self) if self.ndim == 2 else self

    @property
    def mT(self) -> Tensor:
        if self.ndim < 2:
            raise ValueError(f"mT: tensor must have at least 2 dimensions, got shape {fmt_shape(self.shape)}")
        return _ops.transpose(self, -2, -1)


def _is_graph_value(data) -> bool:
    """Whether data is a value of a graph being built (not a real array)."""
    return type(data) is not np.ndarray and isinstance(data, MetaArray) and data.symbolic


def _symbolic_context(*tensors) -> bool:
    """Whether writes into these tensors must go through graph building."""
    return _ops._dispatch.trace_state.hook is not None or any(_is_graph_value(t._data) for t in tensors)


def _host_data(src):
    """Turn nested lists that may hold tensors into something np.array accepts."""
    if isinstance(src, (list, tuple)) and src and any(isinstance(x, Tensor) for x in src):
        return [np.asarray(x) if isinstance(x, Tensor) else _host_data(x) for x in src]
    return src


def _norm_dim(op, dim, ndim):
    from ember.ops._rules import norm_dim

    return norm_dim(op, dim, ndim)


def _writeable(arr) -> bool:
    flags = getattr(arr, "flags", None)
    return True if flags is None else bool(flags.writeable)


def _can_cast(src, dst) -> bool:
    """PyTorch's canCast: no float -> integer and no non-bool -> bool in place."""
    if src in _FLOAT_NP and dst not in _FLOAT_NP:
        return False
    if dst == np.bool_ and src != np.bool_:
        return False
    return True


def _parse_to_args(t, args, kwargs):
    device = kwargs.pop("device", None)
    dtype = kwargs.pop("dtype", None)
    copy = kwargs.pop("copy", False)
    kwargs.pop("non_blocking", None)
    if kwargs:
        raise TypeError(f"to() got unexpected arguments {sorted(kwargs)}")
    for a in args:
        if isinstance(a, Tensor):
            device, dtype = a._device, a.dtype
        elif isinstance(a, (str, Device)):
            device = a
        elif a is not None:
            dtype = a
    return (
        None if device is None else as_device(device),
        None if dtype is None else dt.as_dtype(dtype),
        copy,
    )


_FLOAT_NP = frozenset(d.np for d in dt.FLOAT_DTYPES)

from ember import ops as _ops  # noqa: E402  (ops and autograd build on Tensor)
from ember.autograd import engine as _engine  # noqa: E402
from ember.autograd import views as _views  # noqa: E402
from ember.autograd.grad_mode import state as _grad_state  # noqa: E402
from ember.errors import DeviceMismatchError  # noqa: E402
