"""Low-precision floats accumulate in float32: PyTorch's "opmath" type for float16 and bfloat16.

A sum of 100,000 ones in bfloat16 stops growing at 256, and a float16 sum of a few hundred values
near 300 overflows. So every reduction-like kernel (sums, means, variances, products, scans,
softmax, matrix products, convolutions, normalisations, losses, pooling) runs `upcast` on its
inputs, accumulates in float32 and rounds its result once to the input's dtype. Composite
functions and gradient rules use `upcast_tensor`, a differentiable cast, so their gradients are
computed in float32 too and the engine rounds them to each input's dtype.
"""

from __future__ import annotations

import numpy as np

from ember import dtypes as dt

LOW_FLOAT_NP = dt.numpy_set((dt.float16, dt.bfloat16))
FLOAT32_NP = np.dtype(np.float32)


def is_low(np_dtype) -> bool:
    """Whether a NumPy dtype is float16 or bfloat16."""
    return np_dtype in LOW_FLOAT_NP


def opmath(np_dtype):
    """The dtype a kernel accumulates in: float32 for float16/bfloat16, else the dtype itself."""
    return FLOAT32_NP if np_dtype in LOW_FLOAT_NP else np_dtype


def upcast(x):
    """An array in its opmath dtype (the same array when it already is)."""
    return x.astype(FLOAT32_NP) if x.dtype in LOW_FLOAT_NP else x


def rounded(x, np_dtype):
    """An opmath result rounded back to `np_dtype` (the same array when it already has it)."""
    if x.dtype == np_dtype:
        return x
    with np.errstate(over="ignore"):  # beyond float16's range is inf, quietly as in PyTorch
        return x.astype(np_dtype)


def upcast_tensor(t):
    """A tensor in its opmath dtype, by a differentiable cast (None and other dtypes pass through)."""
    if t is None or t.dtype.np not in LOW_FLOAT_NP:
        return t
    return t.to(dt.float32)
