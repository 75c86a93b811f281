"""Tensor methods that delegate to ops (x.exp() is ember.exp(x)) and their in-place `_` forms."""

from __future__ import annotations

from ember import dtypes as dt
from ember import ops
from ember.autograd import seq_mark
from ember.tensor import Tensor

# Methods whose signature is the op's with the tensor first.
_DELEGATED = """
exp exp2 log log2 log10 log1p expm1 sqrt rsqrt sin cos tan tanh sigmoid relu abs sign neg negative reciprocal
floor ceil trunc round frac erf square isnan isinf isfinite logical_not logical_and logical_or logical_xor
bitwise_not bitwise_and bitwise_or bitwise_xor maximum minimum pow remainder fmod floor_divide atan2 lerp
eq ne lt le gt ge greater less greater_equal less_equal equal not_equal
matmul mm bmm dot mv outer inner sum mean prod max min amax amin argmax argmin var std logsumexp all any norm
count_nonzero reshape view flatten unflatten permute transpose t squeeze unsqueeze expand expand_as repeat tile
flip fliplr flipud roll tril triu narrow split chunk unbind movedim moveaxis swapaxes swapdims contiguous clone
gather scatter scatter_add index_select index_add index_put masked_fill masked_select nonzero argwhere softmax
log_softmax cumsum cumprod sort argsort topk kthvalue msort clamp clip clamp_min clamp_max sum_to_size diagonal
take_along_dim broadcast_to
""".split()

# In-place forms: x.name_(...) writes ops.name(x, ...) into x.
_INPLACE = """
exp log log1p sqrt rsqrt sin cos tanh sigmoid relu abs neg reciprocal floor ceil trunc round pow remainder
masked_fill scatter scatter_add index_add index_put clamp_min clamp_max lerp square sign
""".split()


def _delegate(name):
    fn = getattr(ops, name)

    def method(self, *args, **kwargs):
        return fn(self, *args, **kwargs)

    method.__name__ = name
    method.__doc__ = fn.__doc__
    return method


def _inplace(name):
    fn = getattr(ops, name)

    def method(self, *args, **kwargs):
        mark = seq_mark()
        return self._assign_result(name + "_", fn(self, *args, **kwargs), mark)

    method.__name__ = name + "_"
    method.__doc__ = f"In-place {name}."
    return method


for _name in _DELEGATED:
    setattr(Tensor, _name, _delegate(_name))
for _name in _INPLACE:
    setattr(Tensor, _name + "_", _inplace(_name))


def _is_one(alpha) -> bool:
    """Whether a scalar multiplier is the number 1 (a tensor multiplier is always applied)."""
    return not isinstance(alpha, Tensor) and alpha == 1


def add(input, other, *, alpha=1):
    """input + alpha * other."""
    return ops.add(input, other if _is_one(alpha) else ops.mul(other, alpha))


def sub(input, other, *, alpha=1):
    """input - alpha * other."""
    return ops.sub(input, other if _is_one(alpha) else ops.mul(other, alpha))


def div(input, other, *, rounding_mode=None):
    """input / other (true division; 'trunc' or 'floor' rounding on request)."""
    if rounding_mode is None:
        return ops.div(input, other)
    if rounding_mode == "floor":
        return ops.floor_divide(input, other)
    if rounding_mode == "trunc":
        q = ops.div(input, other)
        q = ops.trunc(q)
        return q if input.is_floating_point() else q.to(input.dtype)
    raise ValueError(f"div: rounding_mode must be None, 'floor' or 'trunc', got {rounding_mode!r}")


def mul(input, other):
    """input * other."""
    return ops.mul(input, other)


Tensor.add = add
Tensor.sub = sub
Tensor.subtract = sub
Tensor.div = div
Tensor.divide = div
Tensor.true_divide = div
Tensor.mul = mul
Tensor.multiply = mul


def _where(self, condition, other):
    return ops.where(condition, self, other)


Tensor.where = _where
Tensor.view_as = lambda self, other: ops.view(self, tuple(other.shape))
Tensor.reshape_as = lambda self, other: ops.reshape(self, tuple(other.shape))


def _addcmul_(self, tensor1, tensor2, *, value=1):
    """self += value * tensor1 * tensor2, in place."""
    mark = seq_mark()
    return self._assign_result("addcmul_", ops.addcmul(self, tensor1, tensor2, value=value), mark)


def _addcdiv_(self, tensor1, tensor2, *, value=1):
    """self += value * tensor1 / tensor2, in place."""
    mark = seq_mark()
    return self._assign_result("addcdiv_", ops.addcdiv(self, tensor1, tensor2, value=value), mark)


def _lerp_(self, end, weight):
    mark = seq_mark()
    return self._assign_result("lerp_", ops.lerp(self, end, weight), mark)


Tensor.addcmul_ = _addcmul_
Tensor.addcdiv_ = _addcdiv_
Tensor.addcmul = lambda self, t1, t2, *, value=1: ops.addcmul(self, t1, t2, value=value)
Tensor.addcdiv = lambda self, t1, t2, *, value=1: ops.addcdiv(self, t1, t2, value=value)
Tensor.lerp_ = _lerp_


# --- new_* constructors, random fills -------------------------------------------------------
def _new_full(self, size, fill_value, *, dtype=None, device=None, requires_grad=False):
    from ember.creation import full

    return full(tuple(size), fill_value, dtype=dtype or self.dtype, device=device or self.device,
                requires_grad=requires_grad)


Tensor.new_full = _new_full
Tensor.new_zeros = lambda self, *size, dtype=None, device=None, requires_grad=False: _new_full(
    self, _size(size), 0, dtype=dtype, device=device, requires_grad=requires_grad)
Tensor.new_ones = lambda self, *size, dtype=None, device=None, requires_grad=False: _new_full(
    self, _size(size), 1, dtype=dtype, device=device, requires_grad=requires_grad)
Tensor.new_empty = Tensor.new_zeros


def _new_tensor(self, data, *, dtype=None, device=None, requires_grad=False):
    from ember.creation import tensor

    return tensor(data, dtype=dtype or self.dtype, device=device or self.device, requires_grad=requires_grad)


Tensor.new_tensor = _new_tensor


def _size(size):
    from ember.creation import _size as parse

    return parse(size)


def _fill_random(self, name, draw, generator=None):
    """Write host-drawn random values into self in place (no autograd history)."""
    from ember.creation import _random

    with_grad = self._requires_grad
    sample = _random(self.device, tuple(self.shape), self._data.dtype, draw, False, generator)
    from ember.autograd.grad_mode import no_grad

    if with_grad and self._grad_fn is None:
        with no_grad():
            return self.copy_(sample)
    return self.copy_(sample)


def _draw_dtype(t):
    """Draw float32 samples for float32 (and narrower) tensors: NumPy's float32 path is twice as fast."""
    import numpy as np

    return np.float64 if t._data.dtype == np.float64 else np.float32


def _fill_in_place(self, fill) -> bool:
    """Let NumPy's generator write straight into a contiguous float CPU tensor (no temporary, no copy)."""
    import numpy as np

    from ember.autograd.grad_mode import state

    data = self._data
    if (type(data) is not np.ndarray or data.dtype not in (np.float32, np.float64) or not data.flags.c_contiguous
            or not data.flags.writeable or self._device.type != "cpu"
            or (state.enabled and self._requires_grad and self._grad_fn is not None)):
        return False
    from ember.ops.dispatch import eager_now

    if not eager_now():
        return False
    fill(data)
    self._version[0] += 1
    return True


def _normal_(self, mean=0.0, std=1.0, *, generator=None):
    """Fill with samples of N(mean, std^2) in place."""
    from ember.random import host_rng

    shape, dtype = tuple(self.shape), _draw_dtype(self)

    def into(out):
        host_rng(generator).standard_normal(out=out, dtype=out.dtype)
        if std != 1.0:
            out *= std
        if mean != 0.0:
            out += mean

    if _fill_in_place(self, into):
        return self

    def draw(r):
        out = r.standard_normal(shape, dtype=dtype)
        if std != 1.0:
            out *= std
        if mean != 0.0:
            out += mean
        return out

    return _fill_random(self, "normal_", draw, generator)


def _uniform_(self, a=0.0, b=1.0, *, generator=None):
    """Fill with samples of U(a, b) in place."""
    from ember.random import host_rng

    shape, dtype = tuple(self.shape), _draw_dtype(self)

    def into(out):
        host_rng(generator).random(out=out, dtype=out.dtype)
        out *= b - a
        out += a

    if _fill_in_place(self, into):
        return self

    def draw(r):
        out = r.random(shape, dtype=dtype)
        out *= b - a
        out += a
        return out

    return _fill_random(self, "uniform_", draw, generator)


Tensor.normal_ = _normal_
Tensor.uniform_ = _uniform_
Tensor.bernoulli_ = lambda self, p=0.5, *, generator=None: _fill_random(
    self, "bernoulli_", lambda r: (r.random(tuple(self.shape)) < p), generator)
Tensor.exponential_ = lambda self, lambd=1.0, *, generator=None: _fill_random(
    self, "exponential_", lambda r: r.exponential(1.0 / lambd, size=tuple(self.shape)), generator)
Tensor.random_ = lambda self, low=0, high=None, *, generator=None: _fill_random(
    self, "random_", lambda r: r.integers(low if high is not None else 0, high if high is not None else low,
                                          size=tuple(self.shape)), generator)


def _is_dtype(x):
    return isinstance(x, dt.DType)


def _ravel(self):
    """The tensor flattened to 1-D (a view where possible)."""
    return ops.reshape(self, (-1,))


def _astype(self, dtype):
    """A copy cast to dtype (NumPy's name for `.to(dtype, copy=True)`)."""
    return self.to(dt.as_dtype(dtype), copy=True)


Tensor.ravel = _ravel
Tensor.astype = _astype
