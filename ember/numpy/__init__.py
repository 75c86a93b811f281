"""NumPy-named functions over Ember tensors, for programs written against HIPS autograd's `autograd.numpy`.

`import ember.numpy as np; from ember import grad` runs such a program unchanged otherwise: every function
accepts tensors, NumPy arrays, nested lists and Python or NumPy scalars in any mix, follows NumPy's
argument names (`axis`, `keepdims`, `ddof`, ...), NumPy's defaults (float64 for new float data) and
NumPy's type promotion, and returns an `ndarray` (`_ndarray.py`): a tensor that autograd can
differentiate, with NumPy's operators, methods and printing. `ember.numpy.random` is NumPy's own
random module (for initialisation code) and `ember.numpy.linalg` NumPy's linear algebra names over
`ember.linalg`.
"""

from __future__ import annotations

import builtins
import math
import operator

import numpy as _np

from ember import dtypes as _dt
from ember import ops as _ops
from ember.creation import from_numpy as _from_numpy
from ember.creation import tensor as _tensor
from ember.device import as_device as _as_device
from ember.numpy._ndarray import adopt as _adopt
from ember.numpy._ndarray import ndarray  # noqa: F401  (public: the type of every result)
from ember.tensor import Tensor

pi = math.pi
e = math.e
inf = math.inf
nan = math.nan
newaxis = None

float16 = _dt.float16
float32 = _dt.float32
float64 = _dt.float64
int8 = _dt.int8
int16 = _dt.int16
int32 = _dt.int32
int64 = _dt.int64
uint8 = _dt.uint8
bool_ = _dt.bool_
float_ = double = float64

_SCALARS = (bool, int, float)


# --- converting arguments -----------------------------------------------------------------------
def _host_array(obj) -> _np.ndarray:
    """NumPy's own inference for Python data (float64 for floats), limited to Ember's dtypes."""
    arr = _np.asarray(obj)
    if arr.dtype.kind == "u" and arr.dtype != _np.uint8:
        arr = arr.astype(_np.int64)
    return arr


def _as_tensor(x, device=None, dtype=None) -> Tensor:
    """x as a tensor: tensors pass through, NumPy arrays are shared, Python data takes NumPy's dtypes."""
    if isinstance(x, Tensor):
        t = x
    elif isinstance(x, (list, tuple)) and _holds_tensor(x):
        t = _ops.stack([_as_tensor(v, device) for v in x])
    elif type(x) is _np.ndarray and (device is None or _as_device(device).type == "cpu"):
        arr = _host_array(x)
        t = _from_numpy(arr) if arr.dtype in _SUPPORTED_NP else _tensor(arr)
    else:
        t = _tensor(_host_array(x), device=device)
    if device is not None and t.device is not _as_device(device):
        t = t.to(device)
    if dtype is not None and t.dtype is not _dt.as_dtype(dtype):
        t = t.to(_dt.as_dtype(dtype))
    return t


_SUPPORTED_NP = _dt.numpy_set(_dt.ALL_DTYPES)


def _holds_tensor(seq) -> bool:
    return builtins.any(isinstance(v, Tensor) or (isinstance(v, (list, tuple)) and _holds_tensor(v)) for v in seq)


def _device_of(*args):
    """The device of the first tensor among args (looking inside lists), or None."""
    for a in args:
        if isinstance(a, Tensor):
            return a.device
        if isinstance(a, (list, tuple)):
            d = _device_of(*a)
            if d is not None:
                return d
    return None


def _operand(x, device):
    """An operand for a binary op: Python numbers stay numbers (weakly typed, as in NumPy); NumPy scalars
    are 0-d arrays of their dtype (strongly typed, as in NumPy 2)."""
    if isinstance(x, _SCALARS):
        return x
    return _as_tensor(x, device)


def _operands(a, b, bool_loop: bool = True):
    """Both operands of a binary op, at least one a tensor, cast so the op gives NumPy's result dtype."""
    device = _device_of(a, b)
    a, b = _operand(a, device), _operand(b, device)
    if not isinstance(a, Tensor) and not isinstance(b, Tensor):
        a = _as_tensor(a)
    return _promoted(a, b, bool_loop=bool_loop)


def _promoted(*xs, bool_loop: bool = True):
    """Operands cast to NumPy's result dtype (`np.result_type`), so Ember's own promotion agrees with NumPy's:
    a bool array with a Python int is int64 (`1 - mask`), an integer array with a Python float is float64,
    int64 with float32 arrays is float64. Python numbers stay numbers (weak, as in NumPy); a Python bool
    meeting numbers becomes 1 or 0. `bool_loop=False`: the ufunc has no bool loop, so bools compute in int8."""
    try:
        want = _np.result_type(*[x._data.dtype if isinstance(x, Tensor) else x for x in xs])
        if want == _np.bool_ and not bool_loop:
            want = _np.dtype(_np.int8)
        target = _dt.from_numpy_dtype(want)
    except (TypeError, ValueError, KeyError):  # bfloat16, or a dtype Ember lacks: Ember's own promotion
        return xs
    numeric = want != _np.bool_
    return tuple(x.to(target) if isinstance(x, Tensor) and x._data.dtype != want
                 else (int(x) if numeric and isinstance(x, bool) else x) for x in xs)


def _binary(fn, a, b, bool_loop: bool = True):
    return fn(*_operands(a, b, bool_loop))


def _unary(fn, float_only: bool = True):
    def call(x):
        t = _as_tensor(x)
        if float_only and not t.is_floating_point():
            t = t.to(float64)  # NumPy computes integer inputs of float functions in float64
        return fn(t)

    call.__name__ = fn.__name__
    call.__doc__ = f"Elementwise {fn.__name__} (NumPy's name)."
    return call


def _binary_fn(name, fn, bool_loop: bool = True):
    def call(x1, x2):
        return _binary(fn, x1, x2, bool_loop)

    call.__name__ = name
    call.__doc__ = f"Elementwise {name} with broadcasting (NumPy's name)."
    return call


def _axis(axis):
    return tuple(axis) if isinstance(axis, list) else axis


# --- creation -----------------------------------------------------------------------------------
def array(object, dtype=None, copy: bool = True, ndmin: int = 0) -> Tensor:  # noqa: A002 - NumPy's name
    """A new tensor from data (a copy), with NumPy's dtype inference."""
    t = _as_tensor(object, dtype=dtype)
    if copy and (t is object or isinstance(object, _np.ndarray)):
        t = _ops.clone(t)
    while t.ndim < ndmin:
        t = _ops.unsqueeze(t, 0)
    return t


def asarray(a, dtype=None) -> Tensor:
    """a as a tensor without copying where possible (NumPy arrays are shared)."""
    return _as_tensor(a, dtype=dtype)


def _shape(shape) -> tuple:
    """A shape from an int, a sequence of ints, or 0-d/1-d integer arrays and tensors (as NumPy accepts)."""
    if isinstance(shape, (Tensor, _np.ndarray)):
        if shape.ndim > 1:
            raise TypeError(f"a shape must be an int or a 1-D sequence of ints, got an array of shape {shape.shape}")
        return (operator.index(shape),) if shape.ndim == 0 else tuple(int(operator.index(d)) for d in shape)
    if hasattr(shape, "__index__"):
        return (operator.index(shape),)
    return tuple(operator.index(d) for d in shape)


def zeros(shape, dtype=float64) -> Tensor:
    """A tensor of zeros (float64 unless told)."""
    return _full(shape, 0, dtype)


def _full(shape, value, dtype):
    from ember.creation import full

    return full(_shape(shape), value, dtype=_dt.as_dtype(dtype))


def ones(shape, dtype=float64) -> Tensor:
    """A tensor of ones (float64 unless told)."""
    return _full(shape, 1, dtype)


def empty(shape, dtype=float64) -> Tensor:
    """An uninitialised tensor (float64 unless told)."""
    from ember.creation import empty as _empty

    return _empty(_shape(shape), dtype=_dt.as_dtype(dtype))


def full(shape, fill_value, dtype=None) -> Tensor:
    """A tensor filled with one value (dtype from the value, as in NumPy)."""
    if dtype is None:
        dtype = _dt.from_numpy_dtype(_host_array(fill_value).dtype)
    return _full(shape, fill_value, dtype)


def _like(a, value, dtype):
    t = _as_tensor(a)
    dtype = t.dtype if dtype is None else _dt.as_dtype(dtype)
    from ember.creation import full as _full_fn

    return _full_fn(t.shape, value, dtype=dtype, device=t.device)


def zeros_like(a, dtype=None) -> Tensor:
    """Zeros with a's shape (and dtype unless told)."""
    return _like(a, 0, dtype)


def ones_like(a, dtype=None) -> Tensor:
    """Ones with a's shape (and dtype unless told)."""
    return _like(a, 1, dtype)


def full_like(a, fill_value, dtype=None) -> Tensor:
    """fill_value with a's shape (and dtype unless told)."""
    return _like(a, fill_value, dtype)


def empty_like(a, dtype=None) -> Tensor:
    """An uninitialised tensor with a's shape (zeros here)."""
    return _like(a, 0, dtype)


def arange(start, stop=None, step=1, dtype=None) -> Tensor:
    """Evenly spaced values in [start, stop); int64 for integer arguments, else float64."""
    return _tensor(_np.arange(start, stop, step, dtype=None if dtype is None else _dt.as_dtype(dtype).np))


def linspace(start, stop, num: int = 50, endpoint: bool = True, dtype=None) -> Tensor:
    """`num` evenly spaced values from start to stop (float64 unless told)."""
    arr = _np.linspace(start, stop, num, endpoint=endpoint)
    return _tensor(arr, dtype=dtype)


def eye(N: int, M: int | None = None, k: int = 0, dtype=float64) -> Tensor:  # noqa: N803 - NumPy's names
    """A 2-D tensor with ones on the k-th diagonal."""
    return _tensor(_np.eye(N, M, k, dtype=_dt.as_dtype(dtype).np))


def identity(n: int, dtype=float64) -> Tensor:
    """The n x n identity matrix."""
    return eye(n, dtype=dtype)


def copy(a) -> Tensor:
    """A copy of a (differentiable)."""
    return _ops.clone(_as_tensor(a))


def diag(v, k: int = 0) -> Tensor:
    """The k-th diagonal of a matrix, or a matrix with a vector on its k-th diagonal."""
    v = _as_tensor(v)
    if v.ndim == 2:
        return _ops.diagonal(v, k)
    if v.ndim != 1:
        raise ValueError(f"diag: input must be 1-D or 2-D, got shape {v.shape}")
    n = v.shape[0] + builtins.abs(k)
    pos = _np.arange(v.shape[0])
    rows = _tensor(pos + builtins.max(-k, 0), device=v.device)
    cols = _tensor(pos + builtins.max(k, 0), device=v.device)
    from ember.creation import zeros as _zeros

    return _ops.index_put(_zeros(n, n, dtype=v.dtype, device=v.device), (rows, cols), v)


# --- elementwise ------------------------------------------------------------------------------
exp = _unary(_ops.exp)
exp2 = _unary(_ops.exp2)
expm1 = _unary(_ops.expm1)
log = _unary(_ops.log)
log2 = _unary(_ops.log2)
log10 = _unary(_ops.log10)
log1p = _unary(_ops.log1p)
sqrt = _unary(_ops.sqrt)
square = _unary(_ops.square, float_only=False)
abs = absolute = fabs = _unary(_ops.abs, float_only=False)  # noqa: A001 - NumPy's name
sign = _unary(_ops.sign, float_only=False)
sin = _unary(_ops.sin)
cos = _unary(_ops.cos)
tan = _unary(_ops.tan)
tanh = _unary(_ops.tanh)
negative = _unary(_ops.neg, float_only=False)
reciprocal = _unary(_ops.reciprocal)
floor = _unary(_ops.floor, float_only=False)
ceil = _unary(_ops.ceil, float_only=False)
trunc = fix = _unary(_ops.trunc, float_only=False)
isnan = _unary(_ops.isnan, float_only=False)
isinf = _unary(_ops.isinf, float_only=False)
isfinite = _unary(_ops.isfinite, float_only=False)
logical_not = _unary(_ops.logical_not, float_only=False)


def sinh(x) -> Tensor:
    """Hyperbolic sine."""
    x = _as_tensor(x)
    return (_ops.exp(x) - _ops.exp(-x)) * 0.5


def cosh(x) -> Tensor:
    """Hyperbolic cosine."""
    x = _as_tensor(x)
    return (_ops.exp(x) + _ops.exp(-x)) * 0.5


def round(a, decimals: int = 0) -> Tensor:  # noqa: A001 - NumPy's name
    """Round half to even, to `decimals` places."""
    a = _as_tensor(a)
    if decimals == 0:
        return _ops.round(a)
    scale = 10.0**decimals
    return _ops.round(a * scale) / scale


around = round

add = _binary_fn("add", _ops.add)
subtract = _binary_fn("subtract", _ops.sub)
multiply = _binary_fn("multiply", _ops.mul)
floor_divide = _binary_fn("floor_divide", _ops.floor_divide, bool_loop=False)
power = _binary_fn("power", _ops.pow, bool_loop=False)
mod = remainder = _binary_fn("remainder", _ops.remainder, bool_loop=False)
fmod = _binary_fn("fmod", _ops.fmod, bool_loop=False)
maximum = _binary_fn("maximum", _ops.maximum)
minimum = _binary_fn("minimum", _ops.minimum)
arctan2 = _binary_fn("arctan2", _ops.atan2)
equal = _binary_fn("equal", _ops.eq)
not_equal = _binary_fn("not_equal", _ops.ne)
less = _binary_fn("less", _ops.lt)
less_equal = _binary_fn("less_equal", _ops.le)
greater = _binary_fn("greater", _ops.gt)
greater_equal = _binary_fn("greater_equal", _ops.ge)
logical_and = _binary_fn("logical_and", _ops.logical_and)
logical_or = _binary_fn("logical_or", _ops.logical_or)
logical_xor = _binary_fn("logical_xor", _ops.logical_xor)


def divide(x1, x2) -> Tensor:
    """True division (integers divide in float64, as in NumPy)."""
    a, b = _operands(x1, x2)
    if not _is_float(a) and not _is_float(b):
        if isinstance(b, Tensor):
            b = b.to(float64)
        else:
            a = a.to(float64)
    return _ops.div(a, b)


def _is_float(x) -> bool:
    return isinstance(x, float) or (isinstance(x, Tensor) and x.is_floating_point())


true_divide = divide


def logaddexp(x1, x2) -> Tensor:
    """log(exp(x1) + exp(x2)) without overflow."""
    device = _device_of(x1, x2)
    a, b = _as_tensor(x1, device), _as_tensor(x2, device)
    m = _ops.maximum(a, b).detach()  # a constant shift: the gradient is exact either way
    m = _ops.where(_ops.isfinite(m), m, 0.0)
    return m + _ops.log(_ops.exp(a - m) + _ops.exp(b - m))


def where(condition, x=None, y=None):
    """x where condition holds, else y; with only a condition, the indices where it holds."""
    device = _device_of(condition, x, y)
    cond = _as_tensor(condition, device)
    if cond.dtype is not _dt.bool_:
        cond = cond != 0
    if x is None and y is None:
        return _ops.nonzero(cond, as_tuple=True)
    if x is None or y is None:
        raise ValueError("where: give both x and y, or neither")
    x, y = _operand(x, device), _operand(y, device)
    if not isinstance(x, Tensor) and not isinstance(y, Tensor):
        x = _as_tensor(x, device)
    return _ops.where(cond, *_promoted(x, y))


def clip(a, a_min, a_max, out=None) -> Tensor:
    """Limit values to [a_min, a_max] (either may be None or an array)."""
    _no_out(out)
    device = _device_of(a, a_min, a_max)
    a = _as_tensor(a, device)
    lo = None if a_min is None else _operand(a_min, device)
    hi = None if a_max is None else _operand(a_max, device)
    bounds = [b for b in (lo, hi) if b is not None]
    a = _promoted(a, *bounds)[0]
    return _ops.clamp(a, lo, hi)


def isclose(a, b, rtol: float = 1e-05, atol: float = 1e-08) -> Tensor:
    """Elementwise |a - b| <= atol + rtol * |b|."""
    device = _device_of(a, b)
    a, b = _as_tensor(a, device), _as_tensor(b, device)
    return _ops.le(_ops.abs(a - b), atol + rtol * _ops.abs(b))


def allclose(a, b, rtol: float = 1e-05, atol: float = 1e-08) -> bool:
    """Whether every element of a is close to b."""
    return builtins.bool(_ops.all(isclose(a, b, rtol, atol)).item())


def array_equal(a1, a2) -> bool:
    """Whether a1 and a2 have the same shape and elements."""
    a1, a2 = _as_tensor(a1), _as_tensor(a2, _device_of(a1))
    return a1.shape == a2.shape and builtins.bool(_ops.all(_ops.eq(a1, a2)).item())


# --- reductions -------------------------------------------------------------------------------
def _float_input(a):
    t = _as_tensor(a)
    return t if t.is_floating_point() else t.to(float64)


def _no_out(out) -> None:
    if out is not None:
        raise NotImplementedError("out= is not supported: tensors are returned, not written into")


def sum(a, axis=None, dtype=None, out=None, keepdims: bool = False) -> Tensor:  # noqa: A001 - NumPy's name
    """Sum over axis (all axes when None)."""
    _no_out(out)
    t = _as_tensor(a, dtype=dtype)
    return _ops.sum(t, _axis(axis), keepdims)


def mean(a, axis=None, dtype=None, out=None, keepdims: bool = False) -> Tensor:
    """Arithmetic mean over axis (integers average in float64, as in NumPy)."""
    _no_out(out)
    t = _float_input(a) if dtype is None else _as_tensor(a, dtype=dtype)
    return _ops.mean(t, _axis(axis), keepdims)


def prod(a, axis=None, dtype=None, out=None, keepdims: bool = False) -> Tensor:
    """Product over axis."""
    _no_out(out)
    t = _as_tensor(a, dtype=dtype)
    return _ops.prod(t, _axis(axis), keepdims)


def max(a, axis=None, out=None, keepdims: bool = False) -> Tensor:  # noqa: A001 - NumPy's name
    """Largest value over axis (ties share the gradient)."""
    _no_out(out)
    return _ops.amax(_as_tensor(a), _axis(axis), keepdims)


def min(a, axis=None, out=None, keepdims: bool = False) -> Tensor:  # noqa: A001 - NumPy's name
    """Smallest value over axis (ties share the gradient)."""
    _no_out(out)
    return _ops.amin(_as_tensor(a), _axis(axis), keepdims)


amax, amin = max, min


def argmax(a, axis=None, out=None, *, keepdims: bool = False) -> Tensor:
    """Index of the largest value (in the flattened array when axis is None)."""
    _no_out(out)
    return _ops.argmax(_as_tensor(a), axis, keepdims)


def argmin(a, axis=None, out=None, *, keepdims: bool = False) -> Tensor:
    """Index of the smallest value (in the flattened array when axis is None)."""
    _no_out(out)
    return _ops.argmin(_as_tensor(a), axis, keepdims)


def var(a, axis=None, dtype=None, out=None, ddof: int = 0, keepdims: bool = False) -> Tensor:
    """Variance over axis, dividing by N - ddof (NumPy's default ddof is 0)."""
    _no_out(out)
    t = _float_input(a) if dtype is None else _as_tensor(a, dtype=dtype)
    return _ops.var(t, _axis(axis), keepdim=keepdims, correction=ddof)


def std(a, axis=None, dtype=None, out=None, ddof: int = 0, keepdims: bool = False) -> Tensor:
    """Standard deviation over axis, dividing by N - ddof (NumPy's default ddof is 0)."""
    _no_out(out)
    t = _float_input(a) if dtype is None else _as_tensor(a, dtype=dtype)
    return _ops.std(t, _axis(axis), keepdim=keepdims, correction=ddof)


def all(a, axis=None, out=None, keepdims: bool = False) -> Tensor:  # noqa: A001 - NumPy's name
    """Whether every element (over axis) is true."""
    _no_out(out)
    return _ops.all(_as_tensor(a), axis, keepdims)


def any(a, axis=None, out=None, keepdims: bool = False) -> Tensor:  # noqa: A001 - NumPy's name
    """Whether any element (over axis) is true."""
    _no_out(out)
    return _ops.any(_as_tensor(a), axis, keepdims)


def count_nonzero(a, axis=None) -> Tensor:
    """Number of non-zero elements (over axis)."""
    return _ops.count_nonzero(_as_tensor(a), axis)


def cumsum(a, axis=None, dtype=None, out=None) -> Tensor:
    """Running sum along axis (of the flattened array when axis is None)."""
    _no_out(out)
    t = _as_tensor(a, dtype=dtype)
    return _ops.cumsum(_ops.reshape(t, -1), 0) if axis is None else _ops.cumsum(t, axis)


def cumprod(a, axis=None, dtype=None, out=None) -> Tensor:
    """Running product along axis (of the flattened array when axis is None)."""
    _no_out(out)
    t = _as_tensor(a, dtype=dtype)
    return _ops.cumprod(_ops.reshape(t, -1), 0) if axis is None else _ops.cumprod(t, axis)


def trace(a, offset: int = 0) -> Tensor:
    """Sum of the offset-th diagonal."""
    return _ops.sum(_ops.diagonal(_as_tensor(a), offset))


def sort(a, axis: int | None = -1) -> Tensor:
    """Sorted values along axis (of the flattened array when axis is None)."""
    t = _as_tensor(a)
    if axis is None:
        t, axis = _ops.reshape(t, -1), 0
    return _ops.sort(t, axis)[0]


def argsort(a, axis: int | None = -1) -> Tensor:
    """Indices that sort a along axis (stable)."""
    t = _as_tensor(a)
    if axis is None:
        t, axis = _ops.reshape(t, -1), 0
    return _ops.argsort(t, axis, stable=True)


# --- shapes -------------------------------------------------------------------------------------
def shape(a) -> tuple:
    """The shape of a."""
    return tuple(_as_tensor(a).shape)


def ndim(a) -> int:
    """The number of dimensions of a."""
    return _as_tensor(a).ndim


def size(a, axis: int | None = None) -> int:
    """The number of elements of a (along axis, if given)."""
    t = _as_tensor(a)
    return t.numel() if axis is None else t.shape[axis]


def reshape(a, newshape, order: str = "C") -> Tensor:
    """a with a new shape (a view where possible)."""
    if order != "C":
        raise NotImplementedError("reshape: only order='C' is supported")
    return _ops.reshape(_as_tensor(a), _shape(newshape))


def ravel(a) -> Tensor:
    """a flattened to 1-D."""
    return _ops.reshape(_as_tensor(a), (-1,))


def transpose(a, axes=None) -> Tensor:
    """a with its axes reversed, or permuted as `axes` says (a view)."""
    t = _as_tensor(a)
    if axes is None:
        axes = tuple(reversed(range(t.ndim)))
    return _ops.permute(t, tuple(axes))


def swapaxes(a, axis1: int, axis2: int) -> Tensor:
    """a with two axes exchanged (a view)."""
    return _ops.transpose(_as_tensor(a), axis1, axis2)


def moveaxis(a, source, destination) -> Tensor:
    """a with axes moved to new positions (a view)."""
    return _ops.movedim(_as_tensor(a), source, destination)


def expand_dims(a, axis) -> Tensor:
    """a with new axes of length one inserted at `axis` (an int or a tuple)."""
    t = _as_tensor(a)
    axes = (axis,) if isinstance(axis, int) else tuple(axis)
    nd = t.ndim + len(axes)
    for ax in sorted(ax % nd for ax in axes):
        t = _ops.unsqueeze(t, ax)
    return t


def squeeze(a, axis=None) -> Tensor:
    """a without (the named) axes of length one."""
    t = _as_tensor(a)
    if axis is None:
        return _ops.squeeze(t)
    axes = (axis,) if isinstance(axis, int) else tuple(axis)
    for ax in axes:
        if t.shape[ax] != 1:
            raise ValueError(f"squeeze: cannot select an axis to squeeze out which has size not equal to one (axis {ax})")
    return _ops.squeeze(t, tuple(axes))


def broadcast_to(a, shape) -> Tensor:
    """a broadcast to `shape` (a read-only view)."""
    return _ops.broadcast_to(_as_tensor(a), _shape(shape))


def _tensors(arrays) -> list:
    arrays = list(arrays)
    device = _device_of(*arrays)
    return [_as_tensor(a, device) for a in arrays]


def concatenate(arrays, axis: int | None = 0) -> Tensor:
    """Join arrays along an existing axis (flattening them first when axis is None)."""
    ts = _tensors(arrays)
    if axis is None:
        ts, axis = [_ops.reshape(t, (-1,)) for t in ts], 0
    return _ops.cat(ts, axis)


def stack(arrays, axis: int = 0) -> Tensor:
    """Join arrays along a new axis."""
    return _ops.stack(_tensors(arrays), axis)


def vstack(tup) -> Tensor:
    """Stack arrays row-wise (1-D arrays become rows)."""
    return _ops.cat([t if t.ndim >= 2 else _ops.reshape(t, (1, -1)) for t in _tensors(tup)], 0)


def hstack(tup) -> Tensor:
    """Stack arrays column-wise (along axis 1, or axis 0 for 1-D arrays)."""
    ts = _tensors(tup)
    return _ops.cat(ts, 0 if builtins.all(t.ndim <= 1 for t in ts) else 1)


def column_stack(tup) -> Tensor:
    """Stack 1-D arrays as columns of a 2-D array."""
    return _ops.cat([_ops.reshape(t, (-1, 1)) if t.ndim < 2 else t for t in _tensors(tup)], 1)


def split(ary, indices_or_sections, axis: int = 0) -> list:
    """Split into equal sections, or at the given indices, along axis (views)."""
    t = _as_tensor(ary)
    n = t.shape[axis]
    if isinstance(indices_or_sections, (int, _np.integer)):
        k = int(indices_or_sections)
        if k <= 0 or n % k:
            raise ValueError(f"split: array split does not result in an equal division ({n} into {k})")
        bounds = [n // k * i for i in range(k + 1)]
    else:
        bounds = [0] + [builtins.min(builtins.max(int(i), 0), n) for i in indices_or_sections] + [n]
    return [_ops.narrow(t, axis, lo, builtins.max(hi - lo, 0)) for lo, hi in zip(bounds[:-1], bounds[1:])]


def tile(A, reps) -> Tensor:  # noqa: N803 - NumPy's name
    """A repeated `reps` times along each axis."""
    return _ops.tile(_as_tensor(A), _shape(reps))


def repeat(a, repeats, axis: int | None = None) -> Tensor:
    """Each element repeated `repeats` times along axis (the flattened array when axis is None)."""
    t = _as_tensor(a)
    if axis is None:
        t, axis = _ops.reshape(t, (-1,)), 0
    idx = _np.repeat(_np.arange(t.shape[axis]), repeats)
    return _ops.index_select(t, axis, _tensor(idx, device=t.device))


def flip(m, axis=None) -> Tensor:
    """m with the order of elements reversed along axis (all axes when None)."""
    t = _as_tensor(m)
    axes = tuple(range(t.ndim)) if axis is None else ((axis,) if isinstance(axis, int) else tuple(axis))
    return _ops.flip(t, axes)


def fliplr(m) -> Tensor:
    """m with columns in reverse order."""
    return _ops.fliplr(_as_tensor(m))


def flipud(m) -> Tensor:
    """m with rows in reverse order."""
    return _ops.flipud(_as_tensor(m))


def roll(a, shift, axis=None) -> Tensor:
    """Elements shifted along axis, wrapping around (the flattened array when axis is None)."""
    return _ops.roll(_as_tensor(a), shift, axis)


def tril(m, k: int = 0) -> Tensor:
    """Lower triangle of m (zeros above the k-th diagonal)."""
    return _ops.tril(_as_tensor(m), k)


def triu(m, k: int = 0) -> Tensor:
    """Upper triangle of m (zeros below the k-th diagonal)."""
    return _ops.triu(_as_tensor(m), k)


def diagonal(a, offset: int = 0, axis1: int = 0, axis2: int = 1) -> Tensor:
    """The offset-th diagonal over two axes (a view)."""
    return _ops.diagonal(_as_tensor(a), offset, axis1, axis2)


# --- products -----------------------------------------------------------------------------------
def _pair(a, b):
    device = _device_of(a, b)
    return _promoted(_as_tensor(a, device), _as_tensor(b, device))


def dot(a, b) -> Tensor:
    """NumPy's dot: inner product, matrix product, or a sum over a's last and b's second-to-last axis."""
    a, b = _pair(a, b)
    if a.ndim == 0 or b.ndim == 0:
        return a * b
    if b.ndim <= 2 and a.ndim <= 2 or b.ndim == 1:
        return _ops.matmul(a, b)
    return _ops.tensordot(a, b, ([a.ndim - 1], [b.ndim - 2]))


def matmul(x1, x2) -> Tensor:
    """Matrix product with broadcasting over leading axes."""
    return _ops.matmul(*_pair(x1, x2))


def vdot(a, b) -> Tensor:
    """Dot product of the flattened arrays."""
    a, b = _pair(a, b)
    return _ops.matmul(_ops.reshape(a, (-1,)), _ops.reshape(b, (-1,)))


def inner(a, b) -> Tensor:
    """Sum of products over the last axes of a and b."""
    a, b = _pair(a, b)
    if a.ndim == 0 or b.ndim == 0:
        return a * b
    return _ops.tensordot(a, b, ([a.ndim - 1], [b.ndim - 1]))


def outer(a, b) -> Tensor:
    """Outer product of the flattened arrays."""
    a, b = _pair(a, b)
    return _ops.outer(_ops.reshape(a, (-1,)), _ops.reshape(b, (-1,)))


def tensordot(a, b, axes=2) -> Tensor:
    """Sum of products over the given axes (the last `axes` of a with the first of b)."""
    a, b = _pair(a, b)
    if not isinstance(axes, int):
        axes = tuple([ax] if isinstance(ax, int) else list(ax) for ax in axes)
    return _ops.tensordot(a, b, axes)


def einsum(subscripts: str, *operands) -> Tensor:
    """Einstein summation."""
    return _ops.einsum(subscripts, *_promoted(*_tensors(operands)))  # NumPy promotes; Ember's einsum does not


def nonzero(a) -> tuple:
    """The indices of the non-zero elements: one index array per axis."""
    return _ops.nonzero(_as_tensor(a), as_tuple=True)


def _public_functions(namespace: dict, module: str) -> list:
    """The names of the public functions a module defines itself (not classes, not imported names)."""
    return [name for name, value in namespace.items()
            if not name.startswith("_") and callable(value) and getattr(value, "__module__", None) == module
            and not isinstance(value, type)]


def _returning_ndarrays(fn):
    """fn with its tensor results made ndarrays (a result that is one of the arguments comes back as an alias)."""
    import functools

    @functools.wraps(fn)
    def call(*args, **kwargs):
        return _as_ndarrays(fn(*args, **kwargs), args, kwargs)

    return call


def _as_ndarrays(out, args, kwargs):
    if type(out) is Tensor:
        if builtins.any(out is a for a in args) or builtins.any(out is v for v in kwargs.values()):
            out = _ops.view(out, tuple(out.shape))  # never change the class of the caller's own tensor
        return _adopt(out)
    if type(out) in (tuple, list):
        return type(out)(_as_ndarrays(o, args, kwargs) for o in out)
    if isinstance(out, tuple) and hasattr(out, "_fields"):  # NumPy's named results (eigh, svd, ...)
        return type(out)(*(_as_ndarrays(o, args, kwargs) for o in out))
    return out


# Every public function returns ndarrays; the wrapping is done once, here, for all of them.
for _name in _public_functions(globals(), __name__):
    globals()[_name] = _returning_ndarrays(globals()[_name])
del _name

from ember.numpy import linalg, random  # noqa: E402, F401  (public submodules; they use the functions above)
