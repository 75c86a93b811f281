"""The exact GELU and its gradient in float32 as one-pass compiled loops (Numba), with the `jit` extra.

GELU(x) = x/2 * (1 + erf(x / sqrt 2)). These loops take erf as a rational function, u * P(u^2) / Q(u^2)
for |u| < 3.92 and exactly +-1 beyond (where erf rounds to +-1 in float32), which LLVM vectorises with
no exp at all; the gradient adds one vectorised exp (exp_compiled's) for the normal density. The
coefficients are a weighted least-squares fit to erf on [0, 3.92] in float64 (Lawson's iteration
towards the minimax fit; 1.4e-9 from erf there); evaluated in float32 with fused multiply-adds the
erf is within 4e-7 of the true one, and GELU within 1.2e-6 of the exact value on [-12, 12], its
gradient within 2.2e-7: as close as PyTorch's vectorised GELU, whose erf (Abramowitz and Stegun 7.1.26)
is within 1.5e-7 (1.2e-6 and 2.8e-7 measured the same way). NumPy's path (elementwise.py,
gelu_backward.py) takes _special.py's erf (1.5e-7), so the two paths agree to those tolerances, not
bit for bit. A NaN stays NaN; GELU(inf) is inf and GELU(-inf) NaN, as on NumPy's path.
"""

from __future__ import annotations

import numpy as np

from ember.kernels import exp, parallel
from ember.kernels.numba_loader import contiguous, kernel_for
from ember.kernels.selection import Table, compiled_or_numpy, note

# erf(u) ~ u * P(u^2) / Q(u^2) on |u| < 3.92, lowest order first (see the module docstring)
_P = (1.128379180818542, 0.18470060839294347, 0.05427854021683386, 0.0038323900371818992,
      0.0003803826741717765, 4.718128819303053e-06, -1.3337656864321534e-08)
_Q = (1.0, 0.4970201809240498, 0.11377559073660351, 0.015431009854082318, 0.0013050465085027087,
      6.342207812359547e-05)

_SOURCE = exp.SOURCE + "\n".join(
    [f"P{k} = np.float32({c!r})" for k, c in enumerate(_P)] + [f"Q{k} = np.float32({c!r})" for k, c in enumerate(_Q)]
) + '''

import math

F1, HALF, NEG_HALF = np.float32(1.0), np.float32(0.5), np.float32(-0.5)
ERF_ONE_FROM = np.float32(3.92)  # erf(3.92) = 1 - 6e-9: +-1 in float32 from here
EXP_FLOOR = np.float32(-87.0)  # exp_compiled's exp clamps below this; e^-87 < 2e-38
INV_SQRT_2 = np.float32(1.0 / math.sqrt(2.0))
INV_SQRT_2PI = np.float32(1.0 / math.sqrt(2.0 * math.pi))


@njit(inline="always", error_model="numpy")
def _erf(u):
    a = abs(u)
    c = ERF_ONE_FROM if a > ERF_ONE_FROM else a  # keeps P and Q finite; those lanes take +-1 below
    s = c * c
    p = (((((P6 * s + P5) * s + P4) * s + P3) * s + P2) * s + P1) * s + P0
    q = ((((Q5 * s + Q4) * s + Q3) * s + Q2) * s + Q1) * s + Q0
    r = c * p / q
    r = F1 if a >= ERF_ONE_FROM else r
    return r if u >= 0 else (-r if u < 0 else u)  # the sign of u; a NaN comes through as itself


def gelu_forward(x, out, lo, hi):
    # over [lo, hi) of flat x and out (unsigned indices: no negative-index wraparound, so the loop vectorises)
    for i in range(np.uint64(lo), np.uint64(hi)):
        v = x[i]
        out[i] = HALF * v * (F1 + _erf(v * INV_SQRT_2))


def gelu_backward(g, x, out, lo, hi):
    for i in range(np.uint64(lo), np.uint64(hi)):
        v = x[i]
        arg = NEG_HALF * v * v
        density = _exp32(arg) * INV_SQRT_2PI
        density = np.float32(0) if arg < EXP_FLOOR else density  # e^arg rounds to 0 (x * 0 is NaN for x = inf)
        out[i] = (HALF * (F1 + _erf(v * INV_SQRT_2)) + density * v) * g[i]
'''

GELU = Table("gelu", measured_on="AMD EPYC (family 26), 2 cores, OpenBLAS held to Haswell kernels, 2026-11-27", values={
    "split_min": (1 << 18, "arrays of this many values or more (a transformer's MLP activations) are split over the "
                           "threads"),
})
compiled_or_numpy("gelu", "compiled pass", "the exact GELU of float32, 16384+ values, Numba")
compiled_or_numpy("gelu_backward", "compiled pass", "as gelu's")


def _kernel(name: str, xp, x):
    if x.dtype != np.float32:
        return None
    # contract: the polynomials' multiply-adds fuse, which is both faster and more accurate
    fn = kernel_for(_SOURCE, name, xp, x.dtype, x.size, fastmath={"contract"})
    if fn is not None:
        note("gelu" if name == "gelu_forward" else "gelu_backward", "compiled pass")
    return fn


def _run(fn, arrays: list, shape):
    """fn(*arrays, out, lo, hi) over the flat arrays, split over the pool's GIL-free workers from split_min values
    (as Python chunks, the transformer's (16, 64, 512) forward took 199 us and its gradient 312; now 121 and 221, 2
    threads, the Xeon of docs/performance.md, 2026-12-02)."""
    out = np.empty(arrays[-1].size, np.float32)
    args = tuple(a.reshape(-1) for a in arrays) + (out,)
    if out.size >= GELU["split_min"]:
        parallel.run_kernel(fn, parallel.chunks(out.size), args)
    else:
        fn(*args, 0, out.size)
    return out.reshape(shape)


def gelu_compiled(xp, x):
    """The exact GELU of float32 NumPy `x`, or None to use NumPy."""
    fn = _kernel("gelu_forward", xp, x)
    return None if fn is None else _run(fn, [contiguous(x)], x.shape)


def gelu_backward_compiled(xp, g, x):
    """g * gelu'(x) for the exact GELU and float32 NumPy `g` and `x` of one shape, or None to use NumPy."""
    fn = _kernel("gelu_backward", xp, x) if g.dtype == np.float32 else None
    return None if fn is None else _run(fn, [contiguous(g), contiguous(x)], x.shape)
