"""In-place methods: `x.exp_()`, `x.add_(y, alpha=...)`, `x.fill_(v)`, `x += y` ... (the result of the
out-of-place op written into x's storage through `Tensor._assign_result`). The plain in-place forms are made from
one list of the ops that have one; add_/sub_/mul_/div_ take a fast path through their op's declared ufunc."""

from __future__ import annotations

import numpy as np

from ember import creation, dispatch, ops
from ember.autograd import engine, grad_mode, views
from ember.errors import DeviceMismatchError
from ember.op import OPS
from ember.tensor import Tensor

# PyTorch's in-place forms that are exactly `x = op(x, *args)` written into x
INPLACE_FORMS = (
    "exp", "log", "log1p", "sqrt", "rsqrt", "sin", "cos", "tanh", "sigmoid", "relu", "abs", "neg", "reciprocal",
    "floor", "ceil", "trunc", "round", "pow", "remainder", "masked_fill", "scatter", "scatter_add", "index_add",
    "index_put", "clamp_min", "clamp_max", "lerp", "square", "sign", "addcmul", "addcdiv", "nan_to_num", "sgn",
    "fmax", "fmin", "heaviside", "deg2rad", "rad2deg", "addmm", "addmv", "addr", "baddbmm", "addbmm",
    "gcd", "lcm", "sinc", "ldexp", "renorm", "fix", "absolute", "arctan2", "index_copy", "index_fill", "masked_scatter",
    "acos", "acosh", "asin", "asinh", "atan", "atanh", "arccos", "arccosh", "arcsin", "arcsinh", "arctan", "arctanh",
    "atan2", "cosh", "sinh", "tan", "exp2", "expm1", "log2", "log10", "erf", "erfc", "erfinv", "i0", "lgamma", "digamma",
    "logit", "frac", "negative", "hypot", "copysign", "nextafter", "xlogy", "fmod", "floor_divide", "divide",
    "true_divide", "multiply", "subtract", "eq", "ne", "not_equal", "lt", "less", "le", "less_equal", "gt", "greater",
    "ge", "greater_equal", "logical_and", "logical_or", "logical_xor", "logical_not", "bitwise_and", "bitwise_or",
    "bitwise_xor", "bitwise_not", "bitwise_left_shift", "bitwise_right_shift", "cumsum", "cumprod", "tril", "triu",
    "scatter_reduce", "index_reduce",
)


def _inplace_form(name: str):
    """The method `<name>_`: ember.<name>(self, ...) written into self."""
    fn = getattr(ops, name)

    def method(self, *args, **kwargs):
        return self._inplace(name + "_", fn, *args, **kwargs)

    method.__name__ = method.__qualname__ = name + "_"
    method.__doc__ = f"In-place `ember.{name}(self, ...)`."
    return method


class InplaceMixin:
    """In-place methods of `ember.Tensor`."""

    __slots__ = ()

    def _inplace(self, name: str, fn, *args, **kwargs):
        """Write fn(self, *args, **kwargs) into self (autograd follows the write)."""
        mark = engine.seq_mark()
        return self._assign_result(name, fn(self, *args, **kwargs), mark)

    def clamp_(self, min=None, max=None):
        """Clamp values into [min, max] in place."""
        return self._inplace("clamp_", ops.clamp, min, max)

    clip_ = clamp_

    def add_(self, other, *, alpha=1):
        """In-place self += alpha * other."""
        return self._inplace_binary("add", other, alpha)

    def sub_(self, other, *, alpha=1):
        """In-place self -= alpha * other."""
        return self._inplace_binary("sub", other, alpha)

    def mul_(self, other):
        """In-place self *= other."""
        return self._inplace_binary("mul", other, 1)

    def div_(self, other):
        """In-place self /= other."""
        return self._inplace_binary("div", other, 1)

    def _inplace_binary(self, op: str, other, alpha):
        name, fn, ufunc = op + "_", getattr(ops, op), _UFUNCS[op]
        # Fast path (optimizer updates): plain eager CPU data, no autograd, dtypes that need no promotion.
        if (
            type(self._data) is np.ndarray
            and not (grad_mode.state.enabled
                     and (self._requires_grad or getattr(other, "_requires_grad", False)))
            and dispatch.eager_now()
        ):
            if isinstance(other, Tensor):
                if other._device is not self._device:
                    raise DeviceMismatchError(f"{name}: tensors on {self._device} and {other._device}")
                o = other._data
                ok = o.dtype == self._data.dtype
            else:
                o = other
                floating = self.is_floating_point()
                ok = isinstance(other, (int, float)) and not isinstance(other, bool) and (
                    floating or isinstance(other, int)) and not (ufunc is np.true_divide and not floating)
            if ok and getattr(self._data.flags, "writeable", True) and not isinstance(alpha, Tensor):
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
            other = ops.mul(other, alpha) if isinstance(other, Tensor) else alpha * other
        return self._inplace(name, fn, other)

    def zero_(self):
        """Fill with zeros in place."""
        return self.fill_(0)

    def fill_(self, value):
        """Fill with one value in place."""
        if isinstance(value, Tensor):
            if value.numel() != 1:
                raise ValueError(f"fill_: only a one-element tensor can be a fill value, got shape {value.shape}")
            return self.copy_(value.reshape(()))
        self._check_inplace("fill_")
        if views.needs_inplace_record(self, self) or dispatch.builds_graph(self):
            return self._assign_result("fill_", ops.full_like(self, value))
        dispatch.write(self, value, "fill_")
        self._version[0] += 1
        return self

    def copy_(self, src):
        """Copy values (broadcast, cast, and moved across devices as needed) into this tensor."""
        if not isinstance(src, Tensor):
            src = ops.full_like(self, 0) + src
        if src._device is not self._device:
            src = src.to(self._device)
        src = src.to(self.dtype)
        if src.shape != self.shape:
            src = ops.expand(src, self.shape)
        if not views.needs_inplace_record(self, src) and not dispatch.builds_graph(self, src):
            self._check_inplace("copy_")
            dispatch.write(self, src, "copy_")
            self._version[0] += 1
            return self
        return self._assign_result("copy_", ops.identity(src) if src._requires_grad else src)

    def float_power_(self, exponent):
        """In-place `ember.float_power(self, exponent)`: self must be float64, the dtype the power is computed in."""
        if self.dtype.np != np.float64:
            raise RuntimeError(f"float_power_: the base given to float_power_ has dtype {self.dtype} but the operation's "
                               "result requires dtype float64")
        return self._inplace("float_power_", ops.float_power, exponent)

    def polygamma_(self, n: int):
        """In-place `ember.polygamma(n, self)`."""
        return self._inplace("polygamma_", lambda x, k: ops.polygamma(k, x), n)

    def fill_diagonal_(self, fill_value, wrap: bool = False):
        """Fill the main diagonal (of a 2-D tensor, or of one whose dims are all equal) in place; `wrap` continues
        it every N + 1 rows of a tall matrix, as NumPy's fill_diagonal."""
        shape = tuple(self.shape)
        if self.ndim < 2 or (self.ndim > 2 and len(set(shape)) != 1):
            raise RuntimeError(f"fill_diagonal_: dimensions must be larger than 1 and all of equal length for more "
                               f"than 2 dims, got shape {shape}")
        mask = np.zeros(shape, np.bool_)
        np.fill_diagonal(mask, True, wrap=wrap)
        return self.masked_fill_(creation.tensor(mask, device=self.device), fill_value)

    def put_(self, index, source, accumulate: bool = False):
        """Write `source` at the flat positions `index` of this tensor (as if it were 1-D), summing with
        accumulate."""
        flat = ops.reshape(self, (-1,))
        target = ops.index_put(flat, (ops.reshape(index, (-1,)),), ops.reshape(source, (-1,)), accumulate)
        return self._inplace("put_", lambda x, t: ops.reshape(t, tuple(x.shape)), target)

    def apply_(self, callable):
        """Replace each value by callable(value), in place (Python numbers in and out; slow, as PyTorch's)."""
        if self.requires_grad:
            raise RuntimeError("apply_: can't call apply_() on a tensor that requires grad")
        if self.device.type != "cpu":
            raise TypeError(f"apply_: only implemented on CPU tensors, got one on {self.device}")
        values = np.vectorize(callable, otypes=[self.dtype.np])(self.numpy()) if self.numel() else self.numpy()
        return self.copy_(creation.tensor(values, device=self.device))

    def map_(self, other, callable):
        """Replace each value a (with b from `other`, broadcast) by callable(a, b), in place."""
        if self.requires_grad or other.requires_grad:
            raise RuntimeError("map_: can't call map_() on tensors that require grad")
        b = np.broadcast_to(other.numpy(), tuple(self.shape))
        values = np.vectorize(callable, otypes=[self.dtype.np])(self.numpy(), b) if self.numel() else self.numpy()
        return self.copy_(creation.tensor(values, device=self.device))

    # In-place view ops: the tensor becomes the view (a new shape over the same storage), as PyTorch's
    def squeeze_(self, *args, **kwargs):
        """`squeeze` in place."""
        return self._become_view("squeeze_", ops.squeeze(self, *args, **kwargs))

    def unsqueeze_(self, dim: int):
        """`unsqueeze` in place."""
        return self._become_view("unsqueeze_", ops.unsqueeze(self, dim))

    def t_(self):
        """`t` in place."""
        return self._become_view("t_", ops.t(self))

    def transpose_(self, dim0: int, dim1: int):
        """`transpose` in place."""
        return self._become_view("transpose_", ops.transpose(self, dim0, dim1))

    swapaxes_ = swapdims_ = transpose_

    def _become_view(self, name: str, view):
        """This tensor made `view` of itself (its storage, strides and autograd history)."""
        if self._requires_grad and self._grad_fn is None and grad_mode.state.enabled:
            raise RuntimeError(f"{name}: a leaf Variable that requires grad is being used in an in-place operation.")
        self._data = view._data
        self._grad_fn, self._output_nr, self._requires_grad = view._grad_fn, view._output_nr, view._requires_grad
        if self._base is not None:  # a view stays a view of the same base, through the longer chain
            self._base, self._view_fn = view._base, view._view_fn
        return self

    def __iadd__(self, other):
        return self.add_(other)

    def __isub__(self, other):
        return self.sub_(other)

    def __imul__(self, other):
        return self.mul_(other)

    def __itruediv__(self, other):
        return self.div_(other)


for _name in INPLACE_FORMS:
    setattr(InplaceMixin, _name + "_", _inplace_form(_name))

# add_/sub_/mul_/div_'s fast path: the NumPy ufunc each op declares it computes
_UFUNCS = {op: getattr(np, OPS[op].ufunc) for op in ("add", "sub", "mul", "div")}
