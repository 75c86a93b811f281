"""PyTorch's vectorised normal fill: Box-Muller over blocks of 16 uniforms, as its CPU kernel computes it.

Each block of 16 uniforms u becomes 16 normals: with r = sqrt(-2 log(1 - u[j])) and t = 2 pi u[j + 8],
out[j] = r cos t and out[j + 8] = r sin t for j < 8 (then * std + mean, fused). float32 runs aten's AVX2
kernel, whose log, sin and cos are Cephes polynomials in float32 (avx_mathfun.h) with the multiply-adds
the compiler fuses; this module makes the same float32 operations in the same order, so the values agree
bit for bit. float64 runs aten's scalar kernel on libm's log, cos and sin: the compiled loop and the loop on
Python's math module call libm as PyTorch does; NumPy's vectorised float64 log, sin and cos, used only for
large arrays without Numba, may differ from libm in the last bit.

Each transform has a NumPy path and a compiled (Numba) loop in ember/kernels/random_draws.py making the same operations,
used for large inputs when the `jit` extra is installed.
"""

from __future__ import annotations

import math

import numpy as np

from ember.kernels import random_draws as compiled
from ember.kernels.random_draws import (  # Cephes' constants, shared with the compiled loops
    _COS,
    _DP1,
    _DP2,
    _DP3,
    _EXPONENT_BITS,
    _FOUR_OVER_PI,
    _HALF_BITS,
    _LOG_P,
    _LOG_Q1,
    _LOG_Q2,
    _MIN_NORMAL_BITS,
    _SIN,
    _SQRT_HALF,
    _TWO_PI_F32,
)
from ember.random.fma import fma32, fma64

_F = np.float32


# --- NumPy ---------------------------------------------------------------------------------------
def _log_f32(x: np.ndarray) -> np.ndarray:
    """avx_mathfun's log256_ps for positive float32 x."""
    bits = np.maximum(x, np.array(_MIN_NORMAL_BITS, np.int32).view(_F)).view(np.int32)
    e = ((bits >> 23) - 0x7F).astype(_F)
    e += _F(1)
    x = ((bits & ~_EXPONENT_BITS) | _HALF_BITS).view(_F)  # the mantissa, in [0.5, 1)
    small = x < _SQRT_HALF
    x = (x - _F(1)) + np.where(small, x, _F(0))
    e -= small
    z = x * x
    y = fma32(x, _LOG_P[0], _LOG_P[1])
    for p in _LOG_P[2:]:
        y = fma32(y, x, p)
    y *= x
    y = fma32(y, z, e * _LOG_Q1)
    y -= z * _F(0.5)
    x += y
    return fma32(e, _LOG_Q2, x)


def _sincos_f32(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """avx_mathfun's sincos256_ps."""
    sin_negative = np.signbit(x)
    x = np.abs(x)
    j = ((x * _FOUR_OVER_PI).astype(np.int32) + 1) & ~1
    y = j.astype(_F)
    sin_negative ^= (j & 4) != 0
    cos_negative = (~(j - 2) & 4) != 0
    second_polynomial = (j & 2) != 0
    x = fma32(y, _DP3, fma32(y, _DP2, fma32(y, _DP1, x)))
    z = x * x
    yc = fma32(fma32(z, _COS[0], _COS[1]), z, _COS[2])
    yc *= z
    yc = fma32(yc, z, -(z * _F(0.5)))
    yc += _F(1)
    ys = fma32(fma32(z, _SIN[0], _SIN[1]), z, _SIN[2])
    ys *= z
    ys = fma32(ys, x, x)
    s = np.where(second_polynomial, yc, ys)
    c = np.where(second_polynomial, ys, yc)
    np.negative(s, out=s, where=sin_negative)
    np.negative(c, out=c, where=cos_negative)
    return s, c


def _finish(n, mean, std, fma, dtype):
    if std == 1 and mean == 0:
        return n
    return fma(n, dtype.type(std), dtype.type(mean))


_NUMPY_BLOCKS = 4096  # blocks per step of the NumPy paths: their temporaries stay in cache


def transform_f32_numpy(blocks: np.ndarray, mean: float, std: float) -> None:
    """Uniforms to normals in place, for a (blocks, 16) float32 array (the AVX2 kernel's operations)."""
    for start in range(0, len(blocks), _NUMPY_BLOCKS):
        part = blocks[start:start + _NUMPY_BLOCKS]
        radius = np.sqrt(_F(-2) * _log_f32(_F(1) - part[:, :8]))
        s, c = _sincos_f32(_TWO_PI_F32 * part[:, 8:])
        part[:, :8] = _finish(radius * c, mean, std, fma32, np.dtype(_F))
        part[:, 8:] = _finish(radius * s, mean, std, fma32, np.dtype(_F))


def transform_f64_numpy(blocks: np.ndarray, mean: float, std: float) -> None:
    """Uniforms to normals in place, for a (blocks, 16) float64 array (the scalar kernel's operations)."""
    for start in range(0, len(blocks), _NUMPY_BLOCKS):
        part = blocks[start:start + _NUMPY_BLOCKS]
        radius = np.sqrt(-2.0 * np.log(1.0 - part[:, :8]))
        theta = (2.0 * np.pi) * part[:, 8:]
        cos, sin = np.cos(theta), np.sin(theta)
        part[:, :8] = _finish(radius * cos, mean, std, fma64, np.dtype(np.float64))
        part[:, 8:] = _finish(radius * sin, mean, std, fma64, np.dtype(np.float64))


_LIBM_VALUES = 1 << 14  # up to this many float64 values without Numba, a loop on Python's math (libm's)


def _transform_f64_libm(blocks: np.ndarray, mean: float, std: float) -> None:
    """transform_f64's operations on Python's math module: libm's log, cos and sin, as PyTorch's."""
    flat = blocks.reshape(-1, 16)
    for b in range(len(flat)):
        row = flat[b].tolist()
        for j in range(8):
            radius = math.sqrt(-2.0 * math.log(1.0 - row[j]))
            theta = (2.0 * math.pi) * row[j + 8]
            row[j], row[j + 8] = radius * math.cos(theta), radius * math.sin(theta)
        flat[b] = row
    if std != 1 or mean != 0:
        flat[...] = fma64(flat, std, mean)


def transform(blocks: np.ndarray, mean: float, std: float) -> None:
    """Box-Muller in place on a C-contiguous (blocks, 16) float32 or float64 array of uniforms in [0, 1)."""
    dtype = blocks.dtype.type
    kernel = compiled.kernel(f"transform_{'f32' if dtype is np.float32 else 'f64'}", dtype, blocks.size)
    if kernel is not None:
        kernel(blocks, dtype(mean), dtype(std))
    elif dtype is np.float32:
        transform_f32_numpy(blocks, mean, std)
    elif blocks.size <= _LIBM_VALUES:
        _transform_f64_libm(blocks, mean, std)
    else:
        transform_f64_numpy(blocks, mean, std)


def normal_pairs(u: np.ndarray) -> np.ndarray:
    """(k, 2) float64 uniforms (u1, u2) to (r cos t, r sin t) with r = sqrt(-2 log(1 - u2)), t = 2 pi u1.

    aten's scalar normal_distribution<double> draws a pair per two values (caching the sine)."""
    out = np.empty_like(u)
    kernel = compiled.kernel("normal_pairs", np.float64, u.size)
    if kernel is not None:
        kernel(u, out)
    elif u.size <= _LIBM_VALUES:
        for k, (u1, u2) in enumerate(u.tolist()):
            radius = math.sqrt(-2.0 * math.log1p(-u2))
            theta = 2.0 * math.pi * u1
            out[k] = radius * math.cos(theta), radius * math.sin(theta)
    else:
        radius = np.sqrt(-2.0 * np.log1p(-u[:, 1]))
        theta = (2.0 * np.pi) * u[:, 0]
        out[:, 0], out[:, 1] = radius * np.cos(theta), radius * np.sin(theta)
    return out
