"""In-place methods: `x.exp_()`, `x.add_(y, alpha=...)`, `x.fill_(v)`, `x += y` ... (the result of the
out-of-place op written into x's storage through `Tensor._assign_result`). The plain in-place forms are made from
one list of the ops that have one; add_/sub_/mul_/div_ take a fast path through their op's declared ufunc."""

from __future__ import annotations

import numpy as np

from ember import dispatch, ops
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
