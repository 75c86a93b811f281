"""Sums over the leading axes of a float array as a GEMV with a vector of ones (the `sum` and `sum_to_size` ops).

A bias's gradient sums the output gradient over every row. NumPy's add.reduce adds the rows one at a time;
BLAS's GEMV does the same sum in blocked multiply-adds, 2-4x faster and closer to the float64 sum (a linear
layer's bias gradient over (1024, 384) float32: 47-56 -> 19-21 us, PyTorch 18; error 1.3e-4 -> 2.7e-5; over
(1024, 128) right after a GEMM, as in a backward pass: 29 -> 11 us). Putting OpenBLAS on one thread for it
(as a split does) made it slower, not faster.
"""

from __future__ import annotations

import numpy as np

# From this many values; below it the call costs about what NumPy's reduction does.
GEMV_SUM_MIN = 4096


def leading_sum(x, axis: tuple, keepdim: bool):
    """NumPy `x` summed over its leading axes `axis` = (0, ..., k-1) as ones(M) @ x.reshape(M, -1), or None
    where that does not apply (another dtype or layout, other axes, few values)."""
    k = len(axis)
    if (x.dtype != np.float32 and x.dtype != np.float64) or x.size < GEMV_SUM_MIN or not 0 < k < x.ndim \
            or tuple(axis) != tuple(range(k)) or not x.flags.c_contiguous:
        return None
    rows = 1
    for n in x.shape[:k]:
        rows *= n
    if rows < 2:
        return None
    out = np.ones(rows, x.dtype) @ x.reshape(rows, -1)
    return out.reshape(((1,) * k if keepdim else ()) + x.shape[k:])
