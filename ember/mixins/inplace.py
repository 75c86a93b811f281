"""In-place methods: `x.exp_()`, `x.add_(y, alpha=...)`, `x.fill_(v)`, `x += y` ... (the result of the
out-of-place op written into x's storage through `Tensor._assign_result`)."""

from __future__ import annotations

import numpy as np

import ember
from ember.errors import DeviceMismatchError


class InplaceMixin:
    """In-place methods of `ember.Tensor`."""

    __slots__ = ()

    def _inplace(self, name: str, fn, *args, **kwargs):
        """Write fn(self, *args, **kwargs) into self (autograd follows the write)."""
        mark = ember.autograd.engine.seq_mark()
        return self._assign_result(name, fn(self, *args, **kwargs), mark)

    def exp_(self, *args, **kwargs):
        """In-place `ember.exp(self, ...)`."""
        return self._inplace("exp_", ember.ops.exp, *args, **kwargs)

    def log_(self, *args, **kwargs):
        """In-place `ember.log(self, ...)`."""
        return self._inplace("log_", ember.ops.log, *args, **kwargs)

    def log1p_(self, *args, **kwargs):
        """In-place `ember.log1p(self, ...)`."""
        return self._inplace("log1p_", ember.ops.log1p, *args, **kwargs)

    def sqrt_(self, *args, **kwargs):
        """In-place `ember.sqrt(self, ...)`."""
        return self._inplace("sqrt_", ember.ops.sqrt, *args, **kwargs)

    def rsqrt_(self, *args, **kwargs):
        """In-place `ember.rsqrt(self, ...)`."""
        return self._inplace("rsqrt_", ember.ops.rsqrt, *args, **kwargs)

    def sin_(self, *args, **kwargs):
        """In-place `ember.sin(self, ...)`."""
        return self._inplace("sin_", ember.ops.sin, *args, **kwargs)

    def cos_(self, *args, **kwargs):
        """In-place `ember.cos(self, ...)`."""
        return self._inplace("cos_", ember.ops.cos, *args, **kwargs)

    def tanh_(self, *args, **kwargs):
        """In-place `ember.tanh(self, ...)`."""
        return self._inplace("tanh_", ember.ops.tanh, *args, **kwargs)

    def sigmoid_(self, *args, **kwargs):
        """In-place `ember.sigmoid(self, ...)`."""
        return self._inplace("sigmoid_", ember.ops.sigmoid, *args, **kwargs)

    def relu_(self, *args, **kwargs):
        """In-place `ember.relu(self, ...)`."""
        return self._inplace("relu_", ember.ops.relu, *args, **kwargs)

    def abs_(self, *args, **kwargs):
        """In-place `ember.abs(self, ...)`."""
        return self._inplace("abs_", ember.ops.abs, *args, **kwargs)

    def neg_(self, *args, **kwargs):
        """In-place `ember.neg(self, ...)`."""
        return self._inplace("neg_", ember.ops.neg, *args, **kwargs)

    def reciprocal_(self, *args, **kwargs):
        """In-place `ember.reciprocal(self, ...)`."""
        return self._inplace("reciprocal_", ember.ops.reciprocal, *args, **kwargs)

    def floor_(self, *args, **kwargs):
        """In-place `ember.floor(self, ...)`."""
        return self._inplace("floor_", ember.ops.floor, *args, **kwargs)

    def ceil_(self, *args, **kwargs):
        """In-place `ember.ceil(self, ...)`."""
        return self._inplace("ceil_", ember.ops.ceil, *args, **kwargs)

    def trunc_(self, *args, **kwargs):
        """In-place `ember.trunc(self, ...)`."""
        return self._inplace("trunc_", ember.ops.trunc, *args, **kwargs)

    def round_(self, *args, **kwargs):
        """In-place `ember.round(self, ...)`."""
        return self._inplace("round_", ember.ops.round, *args, **kwargs)

    def pow_(self, *args, **kwargs):
        """In-place `ember.pow(self, ...)`."""
        return self._inplace("pow_", ember.ops.pow, *args, **kwargs)

    def remainder_(self, *args, **kwargs):
        """In-place `ember.remainder(self, ...)`."""
        return self._inplace("remainder_", ember.ops.remainder, *args, **kwargs)

    def masked_fill_(self, *args, **kwargs):
        """In-place `ember.masked_fill(self, ...)`."""
        return self._inplace("masked_fill_", ember.ops.masked_fill, *args, **kwargs)

    def scatter_(self, *args, **kwargs):
        """In-place `ember.scatter(self, ...)`."""
        return self._inplace("scatter_", ember.ops.scatter, *args, **kwargs)

    def scatter_add_(self, *args, **kwargs):
        """In-place `ember.scatter_add(self, ...)`."""
        return self._inplace("scatter_add_", ember.ops.scatter_add, *args, **kwargs)

    def index_add_(self, *args, **kwargs):
        """In-place `ember.index_add(self, ...)`."""
        return self._inplace("index_add_", ember.ops.index_add, *args, **kwargs)

    def index_put_(self, *args, **kwargs):
        """In-place `ember.index_put(self, ...)`."""
        return self._inplace("index_put_", ember.ops.index_put, *args, **kwargs)

    def clamp_min_(self, *args, **kwargs):
        """In-place `ember.clamp_min(self, ...)`."""
        return self._inplace("clamp_min_", ember.ops.clamp_min, *args, **kwargs)

    def clamp_max_(self, *args, **kwargs):
        """In-place `ember.clamp_max(self, ...)`."""
        return self._inplace("clamp_max_", ember.ops.clamp_max, *args, **kwargs)

    def lerp_(self, *args, **kwargs):
        """In-place `ember.lerp(self, ...)`."""
        return self._inplace("lerp_", ember.ops.lerp, *args, **kwargs)

    def square_(self, *args, **kwargs):
        """In-place `ember.square(self, ...)`."""
        return self._inplace("square_", ember.ops.square, *args, **kwargs)

    def sign_(self, *args, **kwargs):
        """In-place `ember.sign(self, ...)`."""
        return self._inplace("sign_", ember.ops.sign, *args, **kwargs)

    def addcmul_(self, *args, **kwargs):
        """In-place `ember.addcmul(self, ...)`."""
        return self._inplace("addcmul_", ember.ops.addcmul, *args, **kwargs)

    def addcdiv_(self, *args, **kwargs):
        """In-place `ember.addcdiv(self, ...)`."""
        return self._inplace("addcdiv_", ember.ops.addcdiv, *args, **kwargs)

    def clamp_(self, min=None, max=None):
        """Clamp values into [min, max] in place."""
        return self._inplace("clamp_", ember.ops.clamp, min, max)

    clip_ = clamp_

    def add_(self, other, *, alpha=1):
        """In-place self += alpha * other."""
        return self._inplace_binary("add_", ember.ops.add, other, alpha, np.add)

    def sub_(self, other, *, alpha=1):
        """In-place self -= alpha * other."""
        return self._inplace_binary("sub_", ember.ops.sub, other, alpha, np.subtract)

    def mul_(self, other):
        """In-place self *= other."""
        return self._inplace_binary("mul_", ember.ops.mul, other, 1, np.multiply)

    def div_(self, other):
        """In-place self /= other."""
        return self._inplace_binary("div_", ember.ops.div, other, 1, np.true_divide)

    def _inplace_binary(self, name, fn, other, alpha, ufunc):
        # Fast path (optimizer updates): plain eager CPU data, no autograd, dtypes that need no promotion.
        if (
            type(self._data) is np.ndarray
            and not (ember.autograd.grad_mode.state.enabled
                     and (self._requires_grad or getattr(other, "_requires_grad", False)))
            and ember.ops.dispatch.eager_now()
        ):
            if isinstance(other, ember.Tensor):
                if other._device is not self._device:
                    raise DeviceMismatchError(f"{name}: tensors on {self._device} and {other._device}")
                o = other._data
                ok = o.dtype == self._data.dtype
            else:
                o = other
                floating = self.is_floating_point()
                ok = isinstance(other, (int, float)) and not isinstance(other, bool) and (
                    floating or isinstance(other, int)) and not (ufunc is np.true_divide and not floating)
            if ok and getattr(self._data.flags, "writeable", True) and not isinstance(alpha, ember.Tensor):
                if alpha != 1:
                    o = o * alpha
                try:
                    ufunc(self._data, o, out=self._data)
                except ValueError:
                    pass  # a broadcast that does not fit: the general path reports it
                else:
                    self._version[0] += 1
                    return self
        if isinstance(alpha, ember.Tensor) or alpha != 1:
            other = ember.ops.mul(other, alpha) if isinstance(other, ember.Tensor) else alpha * other
        return self._inplace(name, fn, other)

    def zero_(self):
        """Fill with zeros in place."""
        return self.fill_(0)

    def fill_(self, value):
        """Fill with one value in place."""
        if isinstance(value, ember.Tensor):
            if value.numel() != 1:
                raise ValueError(f"fill_: only a one-element tensor can be a fill value, got shape {value.shape}")
            return self.copy_(value.reshape(()))
        self._check_inplace("fill_")
        if ember.autograd.views.needs_inplace_record(self, self) or ember.ops.dispatch.builds_graph(self):
            return self._assign_result("fill_", ember.ops.full_like(self, value))
        ember.ops.dispatch.write(self, value, "fill_")
        self._version[0] += 1
        return self

    def copy_(self, src):
        """Copy values (broadcast, cast, and moved across devices as needed) into this tensor."""
        if not isinstance(src, ember.Tensor):
            src = ember.ops.full_like(self, 0) + src
        if src._device is not self._device:
            src = src.to(self._device)
        src = src.to(self.dtype)
        if src.shape != self.shape:
            src = ember.ops.expand(src, self.shape)
        if not ember.autograd.views.needs_inplace_record(self, src) and not ember.ops.dispatch.builds_graph(self, src):
            self._check_inplace("copy_")
            ember.ops.dispatch.write(self, src, "copy_")
            self._version[0] += 1
            return self
        return self._assign_result("copy_", ember.ops.identity(src) if src._requires_grad else src)

    def __iadd__(self, other):
        return self.add_(other)

    def __isub__(self, other):
        return self.sub_(other)

    def __imul__(self, other):
        return self.mul_(other)

    def __itruediv__(self, other):
        return self.div_(other)
