"""im2col as a compiled kernel (Numba) when the `jit` extra is installed.

NumPy builds convolution patches by padding the input and copying a six-dimensional strided view,
which runs at a fraction of memory bandwidth; this loop nest writes each patch row once and reads the
padding as zeros without materialising it. Without Numba (or
with EMBER_FUSION_BACKEND=numpy) the NumPy path in conv.py is used, with the same values.
"""

from __future__ import annotations

import numpy as np

_SOURCE = '''
def im2col(x, kh, kw, sh, sw, pt, pl, dh, dw, oh, ow, out, per_sample):
    # out[n, (c*kh + i)*kw + j, y*ow + x] (per_sample) or out[(c*kh + i)*kw + j, n, y*ow + x]
    N, C, H, W = x.shape
    for t in range(N * C):
        n = t // C
        c = t % C
        for i in range(kh):
            for j in range(kw):
                row = (c * kh + i) * kw + j
                for y in range(oh):
                    iy = y * sh - pt + i * dh
                    base = y * ow
                    for xx in range(ow):
                        ix = xx * sw - pl + j * dw
                        v = x[n, c, iy, ix] if (iy >= 0 and iy < H and ix >= 0 and ix < W) else x.dtype.type(0)
                        if per_sample:
                            out[n, row, base + xx] = v
                        else:
                            out[row, n, base + xx] = v
'''

_MIN_ELEMENTS = 1 << 14  # below this the compiled call's fixed cost is not repaid


def _kernel():
    from ember.graph.codegen.numba_cpu import NumbaRenderer, compiled_function

    if not NumbaRenderer().available():
        return None
    # Serial: Numba's worker threads and OpenBLAS's (spinning after each GEMM) would fight over the cores.
    return compiled_function(_SOURCE, "im2col")


_cached: list = []


def im2col_compiled(xp, x, kh, kw, stride, pad, dil, oh, ow, per_sample: bool):
    """Patches of NCHW `x` as (N, C*kh*kw, OH*OW) (per_sample) or (C*kh*kw, N*OH*OW), or None to use NumPy."""
    if xp is not np or x.dtype not in (np.float32, np.float64) or x.size * kh * kw < _MIN_ELEMENTS:
        return None
    from ember.graph.codegen import get_backend

    if get_backend() == "numpy":
        return None
    if not _cached:
        _cached.append(_kernel())
    fn = _cached[0]
    if fn is None:
        return None
    n, c = x.shape[:2]
    rows = c * kh * kw
    out = np.empty((n, rows, oh * ow) if per_sample else (rows, n, oh * ow), x.dtype)
    fn(np.ascontiguousarray(x), kh, kw, stride[0], stride[1], pad[0], pad[2], dil[0], dil[1], oh, ow, out,
       per_sample)
    return out if per_sample else out.reshape(rows, n * oh * ow)
