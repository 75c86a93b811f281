"""The random draws' compiled loops (Numba, the `jit` extra): the same operations as their NumPy paths in
ember/random/ (box_muller.py, sampling.py).

Box-Muller's float32 and float64 transforms, aten's scalar normal pairs, the fused uniform x * span + low,
and randperm's two shuffles. `fma` is LLVM's fused multiply-add (one rounding, as PyTorch's compiled
kernels), so these loops give the NumPy paths' values bit for bit. The Cephes constants of aten's AVX2
log, sin and cos live here, for both paths.
"""

from __future__ import annotations

import numpy as np

from ember.kernels.numba_loader import compile_source, compiled_allowed
from ember.kernels.selection import Table

_F = np.float32
# Cephes' log: a degree-8 polynomial on [sqrt(1/2) - 1, sqrt(2) - 1], ln 2 split in two for the exponent
_LOG_P = tuple(_F(c) for c in (7.0376836292e-2, -1.1514610310e-1, 1.1676998740e-1, -1.2420140846e-1,
                               1.4249322787e-1, -1.6668057665e-1, 2.0000714765e-1, -2.4999993993e-1,
                               3.3333331174e-1))
_LOG_Q1, _LOG_Q2 = _F(-2.12194440e-4), _F(0.693359375)
_SQRT_HALF = _F(0.707106781186547524)
_MIN_NORMAL_BITS = 0x00800000
_EXPONENT_BITS = 0x7F800000
_HALF_BITS = 0x3F000000
# Cephes' sin and cos: pi/4 split in three for the argument reduction, then two polynomials in x^2
_DP1, _DP2, _DP3 = _F(-0.78515625), _F(-2.4187564849853515625e-4), _F(-3.77489497744594108e-8)
_SIN = (_F(-1.9515295891e-4), _F(8.3321608736e-3), _F(-1.6666654611e-1))
_COS = (_F(2.443315711809948e-005), _F(-1.388731625493765e-003), _F(4.166664568298827e-002))
_FOUR_OVER_PI = _F(1.27323954473516)
_TWO_PI_F32 = _F(2.0 * np.pi)

THRESHOLDS = Table("random draws", "Intel Xeon (family 6, model 167), 2 cores, loaded, 2026-12-01", {
    "min_values_float32": (1 << 14, "values from which a compiled float32 loop (normals, fused uniforms) repays its "
                                    "call and, once per process, Numba's import"),
    "min_values_float64": (1 << 9, "the same for float64, whose NumPy path runs libm per value in Python"),
    "min_values_int64": (1 << 14, "the same for randperm's shuffles"),
})


def _constants() -> str:
    here = globals()
    lines = [f"P{k} = np.float32({float(c)!r})" for k, c in enumerate(_LOG_P)]
    for name in ("_LOG_Q1", "_LOG_Q2", "_SQRT_HALF", "_DP1", "_DP2", "_DP3", "_FOUR_OVER_PI", "_TWO_PI_F32"):
        lines.append(f"{name.strip('_')} = np.float32({float(here[name])!r})")
    lines += [f"S{k} = np.float32({float(c)!r})" for k, c in enumerate(_SIN)]
    lines += [f"C{k} = np.float32({float(c)!r})" for k, c in enumerate(_COS)]
    return "\n".join(lines)


_HEAD = '''
import math

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.extending import intrinsic

'''

_LOOPS = '''
F0, F05, F1, F2 = np.float32(0.0), np.float32(0.5), np.float32(1.0), np.float32(2.0)


@intrinsic
def fma(typingctx, a, b, c):
    """a * b + c rounded once (LLVM's fma: the FMA instruction, or libm's fma without one)."""
    def codegen(context, builder, signature, args):
        return builder.fma(args[0], args[1], args[2])
    return a(a, a, a), codegen


@intrinsic
def bits_of(typingctx, x):
    """The bits of a float32, as an int32."""
    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.IntType(32))
    return types.int32(x), codegen


@intrinsic
def float_of(typingctx, i):
    """The float32 whose bits are the low 32 bits of the integer i."""
    def codegen(context, builder, signature, args):
        word = args[0]
        if word.type.width > 32:
            word = builder.trunc(word, ir.IntType(32))
        return builder.bitcast(word, ir.FloatType())
    return types.float32(i), codegen


@njit(inline="always")
def log_f32(x):
    bits = bits_of(max(x, float_of(np.int32(0x00800000))))
    e = np.float32((bits >> 23) - np.int32(0x7F)) + F1
    m = float_of((bits & np.int32(~0x7F800000)) | np.int32(0x3F000000))
    if m < SQRT_HALF:
        m = (m - F1) + m
        e = e - F1
    else:
        m = m - F1
    z = m * m
    y = fma(fma(fma(fma(fma(fma(fma(fma(P0, m, P1), m, P2), m, P3), m, P4), m, P5), m, P6), m, P7), m, P8)
    y = fma(y * m, z, e * LOG_Q1)
    y = y - z * F05
    return fma(e, LOG_Q2, m + y)


@njit(inline="always")
def cephes_sin_cos(x):
    sin_negative = x < F0
    x = abs(x)
    j = (np.int32(x * FOUR_OVER_PI) + 1) & ~1
    y = np.float32(j)
    if j & 4:
        sin_negative = not sin_negative
    cos_negative = (~(j - 2) & 4) != 0
    x = fma(y, DP3, fma(y, DP2, fma(y, DP1, x)))
    z = x * x
    yc = fma(fma(C0, z, C1), z, C2)
    yc = fma(yc * z, z, -(z * F05)) + F1
    ys = fma(fma(S0, z, S1), z, S2)
    ys = fma(ys * z, x, x)
    if (j & 2) == 0:
        s, c = ys, yc
    else:
        s, c = yc, ys
    return (-s if sin_negative else s), (-c if cos_negative else c)


def transform_f32(blocks, mean, std):
    for b in range(blocks.shape[0]):
        for j in range(8):
            radius = np.float32(math.sqrt(-F2 * log_f32(F1 - blocks[b, j])))
            s, c = cephes_sin_cos(TWO_PI_F32 * blocks[b, j + 8])
            blocks[b, j] = fma(radius * c, std, mean)
            blocks[b, j + 8] = fma(radius * s, std, mean)


def transform_f64(blocks, mean, std):
    for b in range(blocks.shape[0]):
        for j in range(8):
            radius = math.sqrt(-2.0 * math.log(1.0 - blocks[b, j]))
            theta = (2.0 * math.pi) * blocks[b, j + 8]
            blocks[b, j] = fma(radius * math.cos(theta), std, mean)
            blocks[b, j + 8] = fma(radius * math.sin(theta), std, mean)


def normal_pairs(u, out):
    for k in range(u.shape[0]):
        radius = math.sqrt(-2.0 * math.log1p(-u[k, 1]))
        theta = 2.0 * math.pi * u[k, 0]
        out[k, 0] = radius * math.cos(theta)
        out[k, 1] = radius * math.sin(theta)


def affine(x, span, low, out):
    for i in range(x.size):
        out[i] = fma(x[i], span, low)


def swap_forward(perm, offsets):
    for i in range(offsets.size):
        j = i + offsets[i]
        perm[i], perm[j] = perm[j], perm[i]


def inside_out(picks, perm):
    for i in range(picks.size):
        z = picks[i]
        perm[i] = perm[z]
        perm[z] = i
'''

_source: str | None = None


def kernel(name: str, dtype, elements: int):
    """The compiled loop `name` for `elements` values of `dtype`, or None to run the NumPy path (below the
    size where it pays, without Numba, or with EMBER_FUSION_BACKEND=numpy)."""
    global _source
    if elements < THRESHOLDS[f"min_values_{np.dtype(dtype).name}"] or not compiled_allowed():
        return None
    if _source is None:
        _source = _HEAD + _constants() + _LOOPS
    return compile_source(_source, name)
