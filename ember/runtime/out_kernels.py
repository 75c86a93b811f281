"""`out=` kernels: compute an op's result into a given buffer (plan arenas, pooled eager outputs).

`kernel_out(xp, *args, out=..., **attrs)` returns the result: `out` when it could write there,
otherwise a fresh array from the op's ordinary kernel (unusual dtypes, promotion, broadcasting it
does not handle). Either way the values equal the ordinary kernel's bit for bit; callers keep
whatever array comes back. They are registered here by op name, so the ops stay unchanged; an op
may also define a `kernel_out` method itself, which wins. Only ops whose out= form is as fast as the
ordinary kernel are here: NumPy's masked copies (for `where`) and reductions with `out=` are slower
than a fresh result.
"""

from __future__ import annotations

import numpy as np

from ember.ops.opmath import LOW_FLOAT_NP
from ember.ops.registry import OPS

OUT_KERNELS: dict = {}  # op name -> kernel_out


def register_out(name: str):
    """Decorator: register fn as the out= kernel of the op called `name`."""

    def deco(fn):
        OUT_KERNELS[name] = fn
        return fn

    return deco


def out_kernel_of(op):
    """The op's out= kernel, or None."""
    fn = getattr(op, "kernel_out", None)
    return fn if fn is not None else OUT_KERNELS.get(op.name)


def _fallback(name, *args, **attrs):
    return OPS[name].kernel(np, *args, **attrs)


_NUM = (float, int)


# --- binary elementwise -------------------------------------------------------------------
def _binary(name: str, ufunc) -> None:
    def kernel_out(xp, a, b, *, out):
        ta, tb = type(a), type(b)
        if ta is np.ndarray and a.dtype.kind == "f" and a.dtype == out.dtype:
            if (tb is np.ndarray and b.dtype == a.dtype) or tb in _NUM:
                return ufunc(a, b, out=out)
        elif tb is np.ndarray and b.dtype.kind == "f" and b.dtype == out.dtype and ta in _NUM:
            return ufunc(a, b, out=out)
        return _fallback(name, a, b)

    kernel_out.__name__ = f"{name}_out"
    register_out(name)(kernel_out)


def _compare(name: str, ufunc) -> None:
    def kernel_out(xp, a, b, *, out):
        ta, tb = type(a), type(b)
        if out.dtype == np.bool_ and ta is np.ndarray and a.dtype.kind == "f":
            if (tb is np.ndarray and b.dtype == a.dtype) or tb in _NUM:
                return ufunc(a, b, out=out)
        return _fallback(name, a, b)

    kernel_out.__name__ = f"{name}_out"
    register_out(name)(kernel_out)


for _name, _uf in (("add", np.add), ("sub", np.subtract), ("mul", np.multiply), ("div", np.true_divide),
                   ("maximum", np.maximum), ("minimum", np.minimum)):
    _binary(_name, _uf)
for _name, _uf in (("eq", np.equal), ("ne", np.not_equal), ("lt", np.less), ("le", np.less_equal),
                   ("gt", np.greater), ("ge", np.greater_equal)):
    _compare(_name, _uf)


# --- unary elementwise ---------------------------------------------------------------------
def _unary(name: str, ufunc, *, any_dtype=False) -> None:
    def kernel_out(xp, x, *, out):
        if type(x) is np.ndarray and x.dtype == out.dtype and (any_dtype or x.dtype.kind == "f"):
            return ufunc(x, out=out)
        return _fallback(name, x)

    kernel_out.__name__ = f"{name}_out"
    register_out(name)(kernel_out)


for _name, _uf in (("exp", np.exp), ("log", np.log), ("sqrt", np.sqrt), ("tanh", np.tanh), ("sin", np.sin),
                   ("cos", np.cos), ("exp2", np.exp2), ("log2", np.log2), ("log10", np.log10),
                   ("log1p", np.log1p), ("expm1", np.expm1), ("tan", np.tan)):
    _unary(_name, _uf)
_unary("neg", np.negative, any_dtype=True)
_unary("abs", np.abs, any_dtype=True)


@register_out("relu")
def relu_out(xp, x, *, out):
    """max(x, 0) into out."""
    if type(x) is np.ndarray and x.dtype == out.dtype and x.dtype.kind in "fiu":
        return np.maximum(x, x.dtype.type(0), out=out)
    return _fallback("relu", x)


@register_out("square")
def square_out(xp, x, *, out):
    """x * x into out."""
    if type(x) is np.ndarray and x.dtype == out.dtype and x.dtype.kind in "fiu":
        return np.multiply(x, x, out=out)
    return _fallback("square", x)


@register_out("reciprocal")
def reciprocal_out(xp, x, *, out):
    """1 / x into out."""
    if type(x) is np.ndarray and x.dtype == out.dtype and x.dtype.kind == "f":
        return np.true_divide(1, x, out=out)
    return _fallback("reciprocal", x)


@register_out("clone")
def clone_out(xp, x, *, out):
    """A copy of x in out."""
    if type(x) is np.ndarray and x.dtype == out.dtype and x.shape == out.shape:
        np.copyto(out, x)
        return out
    return _fallback("clone", x)


@register_out("cast")
def cast_out(xp, x, *, dtype, out):
    """x converted to dtype, in out."""
    if type(x) is np.ndarray and out.dtype == np.dtype(dtype) and x.shape == out.shape:
        np.copyto(out, x, casting="unsafe")
        return out
    return _fallback("cast", x, dtype=dtype)


# --- products -----------------------------------------------------------------------------
@register_out("matmul")
def matmul_out(xp, a, b, *, out):
    """a @ b into out (same dtypes, at least 1-D; float16/bfloat16 take the kernel, which sums in float32)."""
    if (type(a) is np.ndarray and type(b) is np.ndarray and a.dtype == b.dtype == out.dtype
            and a.ndim and b.ndim and a.dtype not in LOW_FLOAT_NP):
        return np.matmul(a, b, out=out)
    return _fallback("matmul", a, b)


@register_out("linear")
def linear_out(xp, x, w, b, *, out):
    """x @ w.T + b into out (same dtypes; float16/bfloat16 take the kernel, which sums in float32)."""
    if (type(x) is np.ndarray and type(w) is np.ndarray and x.dtype == w.dtype == out.dtype and x.ndim
            and x.dtype not in LOW_FLOAT_NP
            and (b is None or (type(b) is np.ndarray and b.dtype == x.dtype))):
        np.matmul(x, w.T, out=out)
        if b is not None:
            out += b
        return out
    return _fallback("linear", x, w, b)


# --- generated kernels ---------------------------------------------------------------------
@register_out("fused_elementwise")
def fused_elementwise_out(xp, *arrays, region, out):
    """A fused region's (single) result written into out by its generated kernel."""
    from ember.graph.codegen import run_region

    return run_region(region, arrays, [out])[0]
