"""float32 sigmoid and tanh that Numba vectorises, as source for other compiled kernels.

Without Intel's SVML, Numba compiles `math.exp` and `math.tanh` to a scalar libm call per element, so a
loop that calls them does not vectorise and runs several times slower than NumPy. These helpers are
plain float32 arithmetic that LLVM turns into SIMD code inside the calling loop: an exp by Cody-Waite
range reduction x = n*ln2 + r with |r| <= ln2/2, e^r - 1 by its Taylor series to r^7 (truncation below
1e-8 relative) and 2^n built from its exponent bits. That exp clamps its argument to [-87, 88], where
sigmoid and tanh have saturated, so it is not offered on its own. Against float64: sigmoid32 and tanh32
within 2.5 float32 ulps (NumPy's tanh 1.4, 1/(1 + np.exp(-x)) 3.2; sigmoid below -87, whose value is
under 1e-38, within 1e-38), NaN propagated, +-inf saturated.
Kernels paste `SOURCE` at the top of their own source (`kernel_for` compiles one text); each helper is
inlined where it is called.
"""

from __future__ import annotations

SOURCE = '''
import numpy as np
from numba import njit

_LOG2E = np.float32(1.4426950408889634)
_LN2_HI = np.float32(0.693359375)  # ln 2 split so that n * _LN2_HI is exact for every float32 exponent
_LN2_LO = np.float32(-2.1219444005469057e-4)
_EXP_MIN, _EXP_MAX = np.float32(-87.0), np.float32(88.0)
_T = [np.float32(1.0 / k) for k in (2.0, 6.0, 24.0, 120.0, 720.0, 5040.0)]
_T2, _T3, _T4, _T5, _T6, _T7 = _T
_ONE, _TWO, _HALF = np.float32(1.0), np.float32(2.0), np.float32(0.5)
_TANH_LIMIT = np.float32(9.0)  # tanh(9) rounds to 1 in float32


@njit(inline="always", error_model="numpy")
def _reduce(v):
    # (2^n, e^r - 1) with v = n*ln2 + r; comparisons keep a NaN as it is (it propagates through r)
    if v < _EXP_MIN:
        v = _EXP_MIN
    if v > _EXP_MAX:
        v = _EXP_MAX
    n = np.floor(v * _LOG2E + _HALF)
    r = (v - n * _LN2_HI) - n * _LN2_LO
    q = r * (_ONE + r * (_T2 + r * (_T3 + r * (_T4 + r * (_T5 + r * (_T6 + r * _T7))))))
    bits = np.int32((np.int32(n) + np.int32(127)) << np.int32(23))
    return bits.view(np.float32), q


@njit(inline="always", error_model="numpy")
def _exp32(v):
    s, q = _reduce(v)
    return s * q + s


@njit(inline="always", error_model="numpy")
def _expm1_32(v):
    s, q = _reduce(v)
    return s * q + (s - _ONE)  # for |v| < ln2/2, s is 1: e^r - 1 itself, accurate near zero


@njit(inline="always", error_model="numpy")
def sigmoid32(v):
    return _ONE / (_ONE + _exp32(-v))


@njit(inline="always", error_model="numpy")
def tanh32(v):
    # e / (e + 2) with e = expm1(2v): relative accuracy near zero, exactly +-1 beyond the limit
    if v > _TANH_LIMIT:
        v = _TANH_LIMIT
    if v < -_TANH_LIMIT:
        v = -_TANH_LIMIT
    e = _expm1_32(_TWO * v)
    return e / (e + _TWO)
'''
