"""Elementwise ops: unary math, binary arithmetic with broadcasting, comparisons, where, clamp."""

from __future__ import annotations

import math

import numpy as np

from ember.autograd.grad_mode import state as grad_state
from ember.dispatch import apply, binary_path, unary_path
from ember.errors import DtypeError, IntegerDivisionByZeroError
from ember.kernels import elementwise as elementwise_kernels
from ember.kernels.gelu import gelu_compiled
from ember.kernels.numba_loader import MIN_ELEMENTS
from ember.op import OPS, Op, register
from ember.ops._rules import (
    BOOL_NP,
    FLOAT_NP,
    SINGLE_DOUBLE_NP,
    binary_dtype,
    broadcast_shapes,
    default_float,
    float_of,
    is_plus_zero,
    require_float,
    shape_of,
    spec,
)
from ember.ops._special import erf as _erf


# --- unary ---------------------------------------------------------------------------
class UnaryOp(Op):
    """f(x) elementwise. `float_only` ops compute in the default float for integer inputs.

    An op given a `ufunc` computes with that NumPy ufunc (the same name in CuPy) and gets an
    `out=` kernel from it; `ufunc_kinds` limits both to the dtype kinds where the ufunc is exact.
    """

    elementwise = True
    inplace_ok = True
    fresh_output = True

    def __init__(self, name, fn=None, grad=None, *, ufunc=None, ufunc_kinds="f", into=None, float_only=True,
                 save_input=False, save_output=False, bool_result=False, refuses=None):
        self.name = name
        # "int": defined on floating point only (PyTorch: not implemented for integer tensors), "bool": not on bool
        self.refuses = refuses
        self.into = into  # (x, out) -> the result computed into out, or None when it cannot
        self.ufunc = ufunc
        self.ufunc_kinds = ufunc_kinds
        self.fn = fn if fn is not None else (lambda xp, x: getattr(xp, ufunc)(x))
        if fn is None and ufunc is not None:  # the kernel is the ufunc (with dtype rules floats need none of)
            self.float_ufunc = getattr(np, ufunc)
        self.grad = grad
        if grad is not None:
            self.vjp = grad  # the rule itself, one call fewer a backward: the engine takes a lone gradient as (g,)
        self.float_only = float_only
        self.bool_result = bool_result
        self.save_inputs = (0,) if save_input else ()
        self.save_outputs = (0,) if save_output else ()
        self.differentiable = grad is not None
        if ufunc is not None or into is not None:
            self.kernel_out = self._kernel_out

    def _kernel_out(self, xp, x, *, out):
        if type(x) is np.ndarray and x.dtype == out.dtype:
            if self.into is not None:
                res = self.into(x, out)
                if res is not None:
                    return res
            elif x.dtype.kind in self.ufunc_kinds:
                return getattr(np, self.ufunc)(x, out=out)
        return self.kernel(xp, x)

    def _dtype(self, dtype):
        if self.bool_result:
            return BOOL_NP
        return float_of(dtype) if self.float_only else dtype

    def _check(self, dtype) -> None:
        if self.refuses == "int":
            require_float(self.name, dtype)
        elif self.refuses == "bool" and dtype == BOOL_NP:
            raise DtypeError(f"{self.name}: not defined for bool tensors")

    def infer(self, x, **attrs):
        if self.refuses:
            self._check(x.dtype)
        return spec(x.shape, self._dtype(x.dtype))

    def kernel(self, xp, x, **attrs):
        if self.refuses:
            self._check(x.dtype)
        if self.float_only and x.dtype not in FLOAT_NP:
            x = x.astype(default_float())
        out = self.fn(xp, x, **attrs)
        if not self.bool_result and out.dtype != x.dtype:
            out = out.astype(x.dtype)
        return out


def _unary(name, fn=None, grad=None, params=(), **kw):
    """Register a unary elementwise op; `params` name the attributes that may also be passed positionally."""
    call = unary_path(register(UnaryOp(name, fn, grad, **kw)), params)
    call.__doc__ = f"Elementwise {name}."
    return call


def _x(ctx):
    return ctx.input(0)


_LN2 = math.log(2.0)
_SQRT_2 = math.sqrt(2.0)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)
_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)


def _gelu_kernel(xp, x, approximate="none"):
    if approximate == "tanh":
        inner = math.sqrt(2.0 / math.pi) * (x + 0.044715 * x**3)
        return 0.5 * x * (1.0 + xp.tanh(inner))
    if approximate != "none":
        raise ValueError(f"gelu: approximate must be 'none' or 'tanh', got {approximate!r}")
    out = gelu_compiled(xp, x)  # float32 with the jit extra: one compiled pass (kernels/gelu.py)
    if out is not None:
        return out
    return 0.5 * x * (1.0 + _erf(xp, x / _SQRT_2))


def _gelu_grad(ctx, g):
    x = _x(ctx)
    if not grad_state.enabled:  # no graph of the backward recorded: one op (gelu_backward.py)
        from ember.ops.gelu_backward import gelu_backward_op

        return apply(gelu_backward_op, g, x, approximate=ctx.attrs.get("approximate", "none"))
    if ctx.attrs.get("approximate", "none") == "tanh":
        k = math.sqrt(2.0 / math.pi)
        t = tanh(k * (x + 0.044715 * x * x * x))
        return g * (0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * k * (1.0 + 3 * 0.044715 * x * x))
    cdf = 0.5 * (1.0 + erf(x * (1.0 / _SQRT_2)))
    pdf = exp(-0.5 * x * x) * _INV_SQRT_2PI
    return g * (cdf + x * pdf)


def _softplus_kernel(xp, x, beta=1.0, threshold=20.0):
    bx = x * beta
    soft = xp.logaddexp(0, bx) / beta
    return xp.where(bx > threshold, x, soft).astype(x.dtype, copy=False)


def _softplus_grad(ctx, g):
    x = _x(ctx)
    beta, threshold = ctx.attrs.get("beta", 1.0), ctx.attrs.get("threshold", 20.0)
    bx = x * beta
    return g * where(bx > threshold, 1.0, sigmoid(bx))


def _sigmoid_kernel(xp, x):
    # 1 / (1 + exp(-x)): exp overflows to inf for very negative x, giving exactly 0 (as PyTorch).
    with np.errstate(over="ignore"):
        return 1.0 / (1.0 + xp.exp(-x))


def _silu_grad(ctx, g):
    x = _x(ctx)
    s = sigmoid(x)
    return g * (s * (1.0 + x * (1.0 - s)))


def _zero_grad(ctx, g):
    return zeros_like_grad(g)


def _leaky_relu_kernel(xp, x, negative_slope=0.01):
    return xp.where(x > 0, x, x * negative_slope)


def _elu_kernel(xp, x, alpha=1.0):
    return xp.where(x > 0, x, alpha * xp.expm1(xp.minimum(x, 0)))


neg = _unary("neg", lambda xp, x: -x if x.dtype != BOOL_NP else _bool_neg(x), lambda c, g: neg(g), ufunc="negative",
             ufunc_kinds="iuf", float_only=False)
def _abs_grad(ctx, g):
    x = _x(ctx)
    return g * where(x != x, 0.0, sign(x))  # sign(NaN) counts as 0, as PyTorch's sgn: l1_loss's gradient there is 0


abs = _unary("abs", None, _abs_grad, ufunc="absolute", ufunc_kinds="biuf", float_only=False, save_input=True,
             refuses="bool")
sign = _unary("sign", lambda xp, x: xp.sign(x) if x.dtype != BOOL_NP else x.copy(), _zero_grad, float_only=False)
exp = _unary("exp", None, lambda c, g: g * c.output, ufunc="exp", save_output=True)
exp2 = _unary("exp2", None, lambda c, g: g * c.output * _LN2, ufunc="exp2", save_output=True)
log = _unary("log", None, lambda c, g: g / _x(c), ufunc="log", save_input=True)
log2 = _unary("log2", None, lambda c, g: g / (_x(c) * _LN2), ufunc="log2", save_input=True)
log10 = _unary("log10", None, lambda c, g: g / (_x(c) * math.log(10.0)), ufunc="log10", save_input=True)
log1p = _unary("log1p", None, lambda c, g: g / (_x(c) + 1.0), ufunc="log1p", save_input=True)
expm1 = _unary("expm1", None, lambda c, g: g * (c.output + 1.0), ufunc="expm1", save_output=True)
sqrt = _unary("sqrt", None, lambda c, g: g / (2.0 * c.output), ufunc="sqrt", save_output=True)
_ZEROS: dict = {}


def _zero(xp, dtype):
    """A 0-d zero of `dtype`: NumPy's maximum against it costs half what it does against a scalar."""
    if xp is not np:
        return dtype.type(0)
    z = _ZEROS.get(dtype)
    if z is None:
        z = _ZEROS[dtype] = np.zeros((), dtype)
        z.flags.writeable = False
    return z


def _int_or_float(fn):
    """An `into` for float and integer data only."""
    return lambda x, out: fn(x, out) if x.dtype.kind in "fiu" else None


rsqrt = _unary("rsqrt", lambda xp, x: 1 / xp.sqrt(x), lambda c, g: g * (-0.5 * c.output ** 3), save_output=True)
square = _unary("square", lambda xp, x: x * x, lambda c, g: g * 2.0 * _x(c), float_only=False, save_input=True,
                into=_int_or_float(lambda x, out: np.multiply(x, x, out=out)))
sin = _unary("sin", None, lambda c, g: g * cos(_x(c)), ufunc="sin", save_input=True)
cos = _unary("cos", None, lambda c, g: -(g * sin(_x(c))), ufunc="cos", save_input=True)
tan = _unary("tan", None, lambda c, g: g * (1.0 + c.output * c.output), ufunc="tan", save_output=True)
tanh = _unary("tanh", None, lambda c, g: g * (1.0 - c.output * c.output), ufunc="tanh", save_output=True)
sigmoid = _unary("sigmoid", _sigmoid_kernel, lambda c, g: g * (c.output * (1.0 - c.output)), save_output=True)
def _relu_kernel(xp, x):
    if x.size >= MIN_ELEMENTS:  # checked first: small tensors skip the compiled path's checks altogether
        fast = elementwise_kernels.relu(xp, x)
        if fast is not None:
            return fast
    return xp.maximum(x, _zero(xp, x.dtype))


def _relu_into(x, out):
    if x.size >= MIN_ELEMENTS and out.flags.c_contiguous and out.shape == x.shape:
        if elementwise_kernels.relu(np, x, into=out) is not None:
            return out
    return np.maximum(x, _zero(np, x.dtype), out=out)


relu = _unary("relu", _relu_kernel, lambda c, g: relu_backward(g, c.output), float_only=False, save_output=True,
              into=_int_or_float(_relu_into), refuses="bool")


def _relu_op_kernel(xp, x):
    """relu's whole kernel (UnaryOp.kernel's dtype rules keep every dtype as it is for relu): one Python call
    where the generic path made three, on the hottest activation of eager training."""
    dtype = x.dtype
    small = xp is np and x.size < MIN_ELEMENTS
    if small:
        z = _ZEROS.get(dtype)  # made for numeric dtypes only (bool is refused below before one could be)
        if z is not None:
            return np.maximum(x, z)
    if dtype == BOOL_NP:
        OPS["relu"]._check(dtype)
    if not small:
        return _relu_kernel(xp, x)
    return np.maximum(x, _zero(np, dtype))


OPS["relu"].kernel = _relu_op_kernel
leaky_relu = _unary("leaky_relu", _leaky_relu_kernel,
                    lambda c, g: where(_x(c) > 0, g, g * c.attrs.get("negative_slope", 0.01)), save_input=True,
                    params=("negative_slope",), refuses="int")
elu = _unary("elu", _elu_kernel,
             lambda c, g: where(_x(c) > 0, g, g * (c.output + c.attrs.get("alpha", 1.0))),
             save_input=True, save_output=True, params=("alpha",), refuses="int")
gelu = _unary("gelu", _gelu_kernel, _gelu_grad, save_input=True, refuses="int")
silu = _unary("silu", lambda xp, x: x * _sigmoid_kernel(xp, x), _silu_grad, save_input=True, refuses="int")
softplus = _unary("softplus", _softplus_kernel, _softplus_grad, save_input=True, params=("beta", "threshold"),
                  refuses="int")
erf = _unary("erf", _erf, lambda c, g: g * (_TWO_OVER_SQRT_PI * exp(-(_x(c) * _x(c)))), save_input=True)
reciprocal = _unary("reciprocal", lambda xp, x: 1 / x, lambda c, g: -(g * c.output * c.output), save_output=True,
                    into=lambda x, out: np.true_divide(1, x, out=out) if x.dtype.kind == "f" else None)
floor = _unary("floor", lambda xp, x: xp.floor(x), _zero_grad, float_only=False, refuses="bool")
ceil = _unary("ceil", lambda xp, x: xp.ceil(x), _zero_grad, float_only=False, refuses="bool")
trunc = _unary("trunc", lambda xp, x: xp.trunc(x), _zero_grad, float_only=False, refuses="bool")
_round_half_even = _unary("round", lambda xp, x: xp.round(x), _zero_grad, float_only=False, refuses="bool")


def round(input, *, decimals: int = 0):  # noqa: A001  (PyTorch's name)
    """Round half to even; with `decimals`, to that many decimal places (negative: to tens, hundreds, ...), as
    PyTorch computes it: x * 10**d rounded, then divided by 10**d."""
    if not decimals:
        return _round_half_even(input)
    if not input.dtype.is_floating_point:
        raise DtypeError(f"round: decimals needs a floating-point input, got {input.dtype.name}")
    from ember.ops.opmath import upcast_tensor

    scale = 10.0 ** (int(decimals) if decimals > 0 else -int(decimals))  # (abs is the op here)
    x = upcast_tensor(input)  # float16/bfloat16: scaled and rounded in float32, as PyTorch does, rounded once
    out = _round_half_even(x * scale) / scale if decimals > 0 else _round_half_even(x / scale) * scale
    return out if x is input else out.to(input.dtype)
frac = _unary("frac", lambda xp, x: x - xp.trunc(x), lambda c, g: g, refuses="int")
logical_not = _unary("logical_not", ufunc="logical_not", ufunc_kinds="biuf", bool_result=True, float_only=False)
bitwise_not = _unary("bitwise_not", ufunc="invert", ufunc_kinds="biu", float_only=False)
isnan = _unary("isnan", ufunc="isnan", ufunc_kinds="biuf", bool_result=True, float_only=False)
isinf = _unary("isinf", ufunc="isinf", ufunc_kinds="biuf", bool_result=True, float_only=False)
isfinite = _unary("isfinite", ufunc="isfinite", ufunc_kinds="biuf", bool_result=True, float_only=False)


def _bool_neg(x):
    raise DtypeError("neg: negation of a bool tensor is not supported; use logical_not or ~")


def zeros_like_grad(g):
    """Zeros shaped like a gradient (for ops whose derivative is zero almost everywhere)."""
    return g * 0.0


# --- binary ----------------------------------------------------------------------------
class BinaryOp(Op):
    """f(a, b) with broadcasting and PyTorch's type promotion; Python scalars on either side.

    `reads` maps each input to the inputs its gradient reads (autograd saves no more); `ufunc`
    names the NumPy ufunc that computes the op, which also gives it an `out=` kernel.
    """

    elementwise = True
    inplace_ok = True
    fresh_output = True

    def __init__(self, name, fn=None, grad=None, *, ufunc=None, ufunc_kinds="biuf", result="promote", reads=None,
                 no_bool=False):
        self.name = name
        self.ufunc = ufunc
        self.ufunc_kinds = ufunc_kinds
        self.fn = fn if fn is not None else (lambda xp, a, b: getattr(xp, ufunc)(a, b))
        # NumPy's ufunc itself for NumPy operands: the fast path below then costs no lambda call and lookup
        self.np_ufunc = getattr(np, ufunc) if fn is None and ufunc is not None else None
        self.grad = grad
        if grad is not None:
            self.vjp = grad  # the rule is the op's vjp: one call fewer on every backward through it
        self.result = result  # promote | float (true division) | bool (comparisons) | int (bitwise)
        self.no_bool = no_bool  # sub: a bool operand is an error, as in PyTorch
        self.grad_reads = (reads if reads is not None else {}) if grad is not None else None
        self.differentiable = grad is not None
        # Same-dtype floating operands (or a float tensor with a Python number) need no promotion.
        self.fast = result != "int"
        self.float_ufunc = self.np_ufunc if self.fast else None
        if ufunc is not None and result != "int":
            self.kernel_out = self._ufunc_out

    def _ufunc_out(self, xp, a, b, *, out):
        # Only where no promotion is involved: same-dtype float operands (or one a Python number).
        ta, tb = type(a), type(b)
        f = getattr(np, self.ufunc)
        wanted = np.bool_ if self.result == "bool" else None
        if ta is np.ndarray and a.dtype.kind == "f" and out.dtype == (wanted or a.dtype):
            if self.split is not None and a.size >= MIN_ELEMENTS and \
                    elementwise_kernels.binary(self.name, a, b, out=out) is not None:
                return out
            if (tb is np.ndarray and b.dtype == a.dtype) or tb in (float, int):
                return f(a, b, out=out)
        elif tb is np.ndarray and b.dtype.kind == "f" and out.dtype == (wanted or b.dtype) and ta in (float, int):
            return f(a, b, out=out)
        return self.kernel(xp, a, b)

    def _dtype(self, a, b):
        dtype = binary_dtype(a, b)
        if self.no_bool and (_is_bool(a) or _is_bool(b)):
            raise DtypeError(
                f"{self.name}: subtraction with a bool tensor is not supported; use ~ or logical_not() to "
                "invert a mask, ^ or logical_xor() for two masks"
            )
        if self.result == "float":
            return float_of(dtype), float_of(dtype)
        if self.result == "bool":
            return dtype, BOOL_NP
        if self.result == "int" and dtype in FLOAT_NP:
            raise DtypeError(f"{self.name}: not defined for floating-point tensors")
        return dtype, dtype

    def infer(self, a, b):
        shape = broadcast_shapes(self.name, shape_of(a), shape_of(b))
        return spec(shape, self._dtype(a, b)[1])

    def kernel(self, xp, a, b):
        if self.fast and type(a) is np.ndarray and a.dtype in FLOAT_NP:
            f = self.np_ufunc
            if type(b) is np.ndarray:
                if b.dtype is a.dtype:
                    if self.split is not None and a.size >= MIN_ELEMENTS:
                        return self.split(a, b)
                    return f(a, b) if f is not None else self.fn(xp, a, b)
            elif (type(b) is float or type(b) is int) and a.dtype.kind == "f":  # not bfloat16 (kind V)
                return f(a, b) if f is not None else self.fn(xp, a, b)
        compute, result = self._dtype(a, b)
        if getattr(a, "dtype", compute) != compute:
            a = a.astype(compute)
        if getattr(b, "dtype", compute) != compute:
            b = b.astype(compute)
        out = self.fn(xp, a, b)
        # NumPy computes bfloat16 with a Python float in float32: keep PyTorch's result dtype.
        return out if out.dtype == result else out.astype(result)


def _is_bool(x) -> bool:
    return isinstance(x, bool) or getattr(x, "dtype", None) == BOOL_NP


def _binary(name, fn=None, grad=None, **kw):
    call = binary_path(register(BinaryOp(name, fn, grad, **kw)))
    call.__doc__ = f"Elementwise {name} with broadcasting."
    return call


def _ab(ctx):
    return ctx.input(0), ctx.input(1)


def _pow_grad(ctx, g):
    a, b = _ab(ctx)
    ga = gb = None
    if ctx.needs_grad(0):
        ga = g * b * pow(a, b - 1) if isinstance(b, (int, float)) else g * b * pow(a, b - 1.0)
        if isinstance(b, (int, float)) and b == 0:
            ga = g * 0.0
    if ctx.needs_grad(1):
        out = pow(a, b)
        if isinstance(a, (int, float)):
            gb = g * out * (math.log(a) if a > 0 else 0.0)
        else:
            gb = g * out * log(where(a > 0, a, 1.0))
    return ga, gb


def _div_grad(ctx, g):
    b = ctx.input(1)
    ga = g / b if ctx.needs_grad(0) else None
    # (a / b) / b as PyTorch: b * b overflows float32 beyond |b| ~ 1.8e19, and an infinite a / b stays infinite
    gb = -(g * ((ctx.input(0) / b) / b)) if ctx.needs_grad(1) else None
    return ga, gb


def _max_min_grad(loses):
    """PyTorch's rule: ties share the gradient; an operand gets none only where it loses, so where
    either is NaN (no comparison holds) both get all of it."""

    def grad(ctx, g):
        a, b = _ab(ctx)
        tie = eq(a, b)
        ga = where(tie, g * 0.5, where(loses(a, b), 0.0, g)) if ctx.needs_grad(0) else None
        gb = where(tie, g * 0.5, where(loses(b, a), 0.0, g)) if ctx.needs_grad(1) else None
        return ga, gb

    return grad


def _pow_kernel(xp, a, b):
    if getattr(a, "dtype", None) is not None and a.dtype.kind in "iu" and isinstance(b, int) and b < 0:
        raise RuntimeError("pow: integers to negative integer powers are not allowed")
    return xp.power(a, b)


def _check_int_divisor(name, b):
    # NumPy gives 0 (with a warning) for integer division by zero; PyTorch raises.
    if getattr(b, "dtype", None) is not None and b.dtype.kind in "biu" and not b.all():
        raise IntegerDivisionByZeroError(f"{name}: integer division by zero")
    if type(b) is int and b == 0:
        raise IntegerDivisionByZeroError(f"{name}: integer division by zero")


def _floor_divide(xp, a, b):
    if getattr(a, "dtype", None) is None or a.dtype.kind in "biu":
        _check_int_divisor("floor_divide", b)
    return xp.floor_divide(a, b)


def _remainder(xp, a, b):
    if getattr(a, "dtype", None) is None or a.dtype.kind in "biu":
        _check_int_divisor("remainder", b)
    return xp.remainder(a, b)


def _remainder_grad(ctx, g):
    gb = -(g * floor_divide(*_ab(ctx))) if ctx.needs_grad(1) else None
    return g, gb


_add = _binary("add", None, lambda c, g: (g, g), ufunc="add")
_sub = _binary("sub", None, lambda c, g: (g, -g), ufunc="subtract", no_bool=True)
mul = _binary("mul", None,
              lambda c, g: (g * c.input(1) if c.needs_grad(0) else None, g * c.input(0) if c.needs_grad(1) else None),
              ufunc="multiply",
              reads={0: (1,), 1: (0,)})


def _split_pass(name: str):
    """`split` of the op `name`: the compiled pass over the threads where it takes the operands, else NumPy's
    ufunc (one thread)."""
    ufunc = OPS[name].np_ufunc

    def split(a, b):
        out = elementwise_kernels.binary(name, a, b)
        return ufunc(a, b) if out is None else out

    return split


for _name in elementwise_kernels.BINARY_OPS:
    OPS[_name].split = _split_pass(_name)
_div = _binary("div", None, _div_grad, ufunc="true_divide", ufunc_kinds="f", result="float", reads={0: (1,), 1: (0, 1)})


def _is_one(alpha) -> bool:
    """Whether a multiplier is the number 1 (a tensor multiplier is always applied)."""
    return type(alpha) in (int, float) and alpha == 1


def add(input, other, *, alpha=1):
    """input + alpha * other, with broadcasting."""
    if _is_one(alpha):
        return _add(input, other)
    _check_alpha("add", input, other, alpha)
    return _add(input, mul(other, alpha))


def sub(input, other, *, alpha=1):
    """input - alpha * other, with broadcasting."""
    if _is_one(alpha):
        return _sub(input, other)
    _check_alpha("sub", input, other, alpha)
    return _sub(input, mul(other, alpha))


def _check_alpha(op: str, input, other, alpha) -> None:
    """A float alpha with integer tensors is an error, as in PyTorch: the result would change dtype or truncate."""
    from ember.tensor import Tensor

    if isinstance(alpha, float) and all(not isinstance(t, Tensor) or t.dtype.np not in FLOAT_NP for t in (input, other)):
        raise DtypeError(f"{op}: for integer tensors (here {input.dtype.name}) alpha must not be a floating-point "
                         f"number, got {alpha}")


def div(input, other, *, rounding_mode=None):
    """input / other (true division; 'trunc' or 'floor' rounding on request)."""
    if rounding_mode is None:
        return _div(input, other)
    if rounding_mode == "floor":
        return floor_divide(input, other)
    if rounding_mode == "trunc":
        from ember.tensor import Tensor

        q = trunc(_div(input, other))
        return q.to(input.dtype) if isinstance(input, Tensor) and not input.is_floating_point() else q
    raise ValueError(f"div: rounding_mode must be None, 'floor' or 'trunc', got {rounding_mode!r}")
pow = _binary("pow", _pow_kernel, _pow_grad, ufunc="power", ufunc_kinds="f", reads={0: (0, 1), 1: (0, 1)})
floor_divide = _binary("floor_divide", _floor_divide, lambda c, g: (g * 0.0, g * 0.0), ufunc="floor_divide",
                       ufunc_kinds="f")
remainder = _binary("remainder", _remainder, _remainder_grad, ufunc="remainder", ufunc_kinds="f", reads={1: (0, 1)})
fmod = _binary("fmod", None, lambda c, g: (g, -(g * trunc(div(*_ab(c)))) if c.needs_grad(1) else None), ufunc="fmod",
               reads={1: (0, 1)})
maximum = _binary("maximum", None, _max_min_grad(lambda a, b: lt(a, b)), ufunc="maximum", reads={0: (0, 1), 1: (0, 1)})
minimum = _binary("minimum", None, _max_min_grad(lambda a, b: gt(a, b)), ufunc="minimum", reads={0: (0, 1), 1: (0, 1)})
atan2 = _binary(
    "atan2",
    None,
    lambda c, g: (g * c.input(1) / (c.input(0) ** 2 + c.input(1) ** 2),
                  -(g * c.input(0)) / (c.input(0) ** 2 + c.input(1) ** 2)),
    ufunc="arctan2", ufunc_kinds="f", result="float", reads={0: (0, 1), 1: (0, 1)},
)
eq = _binary("eq", ufunc="equal", result="bool")
ne = _binary("ne", ufunc="not_equal", result="bool")
lt = _binary("lt", ufunc="less", result="bool")
le = _binary("le", ufunc="less_equal", result="bool")
gt = _binary("gt", ufunc="greater", result="bool")
ge = _binary("ge", ufunc="greater_equal", result="bool")
logical_and = _binary("logical_and", ufunc="logical_and", result="bool")
logical_or = _binary("logical_or", ufunc="logical_or", result="bool")
logical_xor = _binary("logical_xor", ufunc="logical_xor", result="bool")
bitwise_and = _binary("bitwise_and", ufunc="bitwise_and", result="int")
bitwise_or = _binary("bitwise_or", ufunc="bitwise_or", result="int")
bitwise_xor = _binary("bitwise_xor", ufunc="bitwise_xor", result="int")
gcd = _binary("gcd", ufunc="gcd", result="int")  # the greatest common divisor, >= 0, of integers
lcm = _binary("lcm", ufunc="lcm", result="int")  # the least common multiple, >= 0, of integers

greater, less, greater_equal, less_equal, not_equal = gt, lt, ge, le, ne  # (torch.equal is reduction.equal)
multiply, subtract, divide, true_divide, negative = mul, sub, div, div, neg


# --- where, clamp ----------------------------------------------------------------------
class WhereOp(Op):
    name = "where"
    save_inputs = (0,)
    elementwise = True

    def infer(self, cond, a, b):
        if cond.dtype != BOOL_NP:
            raise TypeError(f"where: condition must be a bool tensor, got {cond.dtype}")
        shape = broadcast_shapes("where", shape_of(cond), shape_of(a), shape_of(b))
        return spec(shape, binary_dtype(a, b))

    def kernel(self, xp, cond, a, b):
        if cond.dtype != BOOL_NP:
            raise TypeError(f"where: condition must be a bool tensor, got {cond.dtype}")
        dtype = binary_dtype(a, b)
        fast = _masked_select_zero(xp, cond, a, b, dtype)
        if fast is not None:
            return fast
        # NumPy has no common type for integers and bfloat16: convert array operands first
        a = a.astype(dtype) if getattr(a, "dtype", dtype) != dtype else a
        b = b.astype(dtype) if getattr(b, "dtype", dtype) != dtype else b
        out = xp.where(cond, a, b)
        return out if out.dtype == dtype else out.astype(dtype)

    def vjp(self, ctx, g):
        cond = ctx.input(0)
        ga = where(cond, g, 0.0) if ctx.needs_grad(1) else None
        gb = where(cond, 0.0, g) if ctx.needs_grad(2) else None
        return None, ga, gb


def _masked_select_zero(xp, cond, a, b, dtype):
    """where(cond, a, 0) as a bitwise AND of a's bits with the mask: NumPy's where is ~10x slower on
    unpredictable masks. The AND gives exactly `where`'s values (+0.0 where the mask is off; a
    product by the mask would give -0.0 for negative values and NaN for infinities).

    Only for float arrays of the condition's shape; the caller falls back to where otherwise.
    """
    if is_plus_zero(b) and type(a) is xp.ndarray:
        src, mask = a, cond
    elif is_plus_zero(a) and type(b) is xp.ndarray:
        src, mask = b, ~cond
    else:
        return None
    if src.dtype != dtype or src.dtype not in FLOAT_NP or src.shape != cond.shape:
        return None
    bits, ones = _ALL_ONES[src.dtype.itemsize]
    return (src.view(bits) & (mask.view(np.uint8).astype(bits) * ones)).view(src.dtype)


# unsigned type of each float width, and its all-ones value (mask 1 -> every bit kept)
_ALL_ONES = {n: (np.dtype(f"u{n}"), np.dtype(f"u{n}").type(np.iinfo(f"u{n}").max)) for n in (2, 4, 8)}


_where_op = register(WhereOp())


def _relu_backward_kernel(xp, g, out):
    fast = elementwise_kernels.relu_backward(xp, g, out)
    if fast is not None:
        return fast
    mask = ~(out <= 0)  # NaN in out passes g, as PyTorch's threshold_backward
    picked = _masked_select_zero(xp, mask, g, 0.0, g.dtype)
    return picked if picked is not None else xp.where(mask, g, g.dtype.type(0))


# relu's gradient as one op (PyTorch's threshold_backward): 0 where out <= 0, else g. It is linear in g,
# so its own gradient is relu_backward(gg, out), and every order of derivative stays this one op.
relu_backward = _binary("relu_backward", _relu_backward_kernel,
                        lambda c, g: (relu_backward(g, c.input(1)) if c.needs_grad(0) else None, None),
                        reads={0: (1,), 1: ()})


def _relu_backward_out(xp, g, out_, *, out):
    """relu_backward into `out` (a planned buffer, maybe g's own) where the compiled kernel runs."""
    if type(out) is np.ndarray and out.flags.c_contiguous and out.shape == getattr(g, "shape", None) \
            and out.dtype == getattr(g, "dtype", None):
        done = elementwise_kernels.relu_backward(xp, g, out_, into=out)
        if done is not None:
            return done
    return OPS["relu_backward"].kernel(xp, g, out_)


OPS["relu_backward"].kernel_out = _relu_backward_out


def where(condition, input=None, other=None):
    """Elementwise choice: input where condition is true, else other (`where(c)` = nonzero)."""
    from ember.tensor import Tensor

    if not isinstance(condition, Tensor):
        raise TypeError(f"where: condition must be a bool tensor, got {type(condition).__name__}")
    if input is None and other is None:
        from ember.ops.indexing import nonzero

        return nonzero(condition, as_tuple=True)
    return apply(_where_op, condition, input, other)


_BOUNDS = (int, float, type(None))  # clamp bounds of the fast path (not bool: PyTorch promotes it differently)


class ClampOp(Op):
    name = "clamp"
    save_inputs = (0,)
    elementwise = True

    def infer(self, x, min=None, max=None):
        if min is None and max is None:
            raise ValueError("clamp: at least one of min and max must be given")
        dtype = x.dtype
        for bound in (min, max):
            if bound is not None:
                dtype = binary_dtype(spec(x.shape, dtype), bound)
        return spec(x.shape, dtype)

    def kernel(self, xp, x, min=None, max=None):
        if (xp is np and x.dtype in SINGLE_DOUBLE_NP and type(min) in _BOUNDS and type(max) in _BOUNDS
                and (min is not None or max is not None)):
            # a float32/float64 tensor with number bounds keeps its dtype: no promotion work; a large one in one
            # compiled pass split over the threads (ReLU6 after MobileNetV2's batch norms: 400K values 94 -> 39 us
            # on the 2-core Xeon of docs/performance.md; below the split, NumPy's one pass on one thread costs the
            # same), else the array's clip method (np.clip wraps it in Python)
            if x.size >= elementwise_kernels.SPLIT["split_min"]:
                out = elementwise_kernels.clamp(xp, x, min, max)
                if out is not None:
                    return out
            if min is not None and max is not None:
                return x.clip(min, max)
            return np.maximum(x, min) if max is None else np.minimum(x, max)
        dtype = self.infer(x, min, max).dtype
        x = x.astype(dtype, copy=False)
        if min is not None and max is not None:
            return xp.clip(x, min, max).astype(dtype, copy=False)  # one pass: minimum(maximum(x, min), max)
        if min is not None:
            x = xp.maximum(x, min)
        if max is not None:
            x = xp.minimum(x, max)
        return x.astype(dtype, copy=False)

    def vjp(self, ctx, g):
        x = ctx.input(0)
        lo, hi = ctx.attrs.get("min"), ctx.attrs.get("max")
        mask = None
        if lo is not None:
            mask = ge(x, lo)
        if hi is not None:
            m = le(x, hi)
            mask = m if mask is None else logical_and(mask, m)
        return (where(mask, g, 0.0),)


_clamp_op = register(ClampOp())
_clamp_path = unary_path(_clamp_op)


class ClampTensorOp(Op):
    """clamp with a tensor bound (the other a tensor, a number or None): min(max(x, lo), hi), NaN from any."""

    name = "clamp_tensor"
    save_inputs = (0, 1, 2)

    def infer(self, x, lo, hi):
        given = [v for v in (x, lo, hi) if v is not None]
        shape = broadcast_shapes(self.name, *(shape_of(v) for v in given))
        from ember.ops._rules import result_dtype

        return spec(shape, result_dtype(*given))

    def kernel(self, xp, x, lo, hi):
        dtype = self.infer(x, lo, hi).dtype
        out = x.astype(dtype, copy=False)
        if lo is not None:
            out = xp.maximum(out, lo.astype(dtype, copy=False) if hasattr(lo, "dtype") else lo)
        if hi is not None:
            out = xp.minimum(out, hi.astype(dtype, copy=False) if hasattr(hi, "dtype") else hi)
        return out if out.dtype == dtype else out.astype(dtype)

    def vjp(self, ctx, g):
        # PyTorch's clamp_backward_min_max: x gets the gradient where lo <= x <= hi (so none where any is
        # NaN), a bound only where it is the value taken; with lo > hi, hi wins.
        x, lo, hi = ctx.input(0), ctx.input(1), ctx.input(2)
        inside = None
        if lo is not None:
            inside = ge(x, lo)
        if hi is not None:
            inside = le(x, hi) if inside is None else logical_and(inside, le(x, hi))
        gx = where(inside, g, 0.0) if ctx.needs_grad(0) else None
        glo = ghi = None
        if lo is not None and ctx.needs_grad(1):
            takes_lo = lt(x, lo) if hi is None else logical_and(lt(x, lo), lt(lo, hi))
            glo = where(takes_lo, g, 0.0)
        if hi is not None and ctx.needs_grad(2):
            takes_hi = gt(x, hi) if lo is None else logical_or(gt(x, hi), lt(hi, lo))
            ghi = where(takes_hi, g, 0.0)
        return gx, glo, ghi


_clamp_tensor_op = register(ClampTensorOp())


def clamp(input, min=None, max=None):
    """Limit values to [min, max]; bounds may be numbers or tensors."""
    from ember.tensor import Tensor

    if isinstance(min, Tensor) or isinstance(max, Tensor):
        return apply(_clamp_tensor_op, input, min, max)
    return _clamp_path(input, min=min, max=max)


clip = clamp


def clamp_min(input, min):
    """max(input, min) elementwise."""
    return clamp(input, min=min)


def clamp_max(input, max):
    """min(input, max) elementwise."""
    return clamp(input, max=max)


def hardtanh(x, min_val=-1.0, max_val=1.0):
    """clamp(x, min_val, max_val)."""
    return clamp(x, min_val, max_val)


def relu6(x):
    """clamp(x, 0, 6)."""
    return clamp(x, 0.0, 6.0)
