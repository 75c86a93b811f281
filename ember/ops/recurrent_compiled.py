"""One LSTM time step's elementwise work as compiled kernels (Numba), for lstm_layer's loops.

A step of a small layer (32 x 128) is about 4,000 values: NumPy's dozen calls per step cost more in
call overhead than in arithmetic, so each of these loops does a step in one call after the step's GEMM.
The forward activates the gates and updates the cell with exp_compiled's vectorised float32 sigmoid
and tanh (Numba's own exp and tanh are scalar libm calls, which made the step slower than NumPy's);
the backward applies the step's gradient rule from the kept activations. Gates are [i, f, o, g].
Without Numba, or for other dtypes, recurrent_layer.py runs the same arithmetic in NumPy.
"""

from __future__ import annotations

import numpy as np

from ember.ops import exp_compiled
from ember.ops.compiled import kernel_for

_FORWARD_SOURCE = exp_compiled.SOURCE + '''

def lstm_step_forward(pre, c_prev, act, c_next, tanh_c, h):
    # pre (N, 4H): the step's gate pre-activations; act (N, 4H) receives them activated. Short loops over few
    # arrays each: LLVM vectorises a loop only when its run-time checks that the arrays do not overlap
    # stay few, and falls back to scalar code when they do overlap (so act must not be pre).
    N, H = c_prev.shape
    for n in range(N):
        p = pre[n]
        a = act[n]
        for j in range(3 * H):
            a[j] = sigmoid32(p[j])
        for j in range(3 * H, 4 * H):
            a[j] = tanh32(p[j])
        cp = c_prev[n]
        cn = c_next[n]
        for j in range(H):
            cn[j] = a[H + j] * cp[j] + a[j] * a[3 * H + j]
        tc = tanh_c[n]
        hn = h[n]
        for j in range(H):
            t = tanh32(cn[j])
            tc[j] = t
            hn[j] = a[2 * H + j] * t
'''

_SOURCE = '''
def lstm_step_backward(dh, dc, act, tanh_c, c_prev, d):
    # act (N, 4H): the step's activated gates; dc is updated in place to the previous step's. Row by row in
    # short loops (see lstm_step_forward), in the arrays' dtype: a Python float constant would make the
    # arithmetic float64, half the vector width (twice as slow before)
    N, H = dc.shape
    one = dc.dtype.type(1)
    for n in range(N):
        a = act[n]
        dhn = dh[n]
        dcn = dc[n]
        tc = tanh_c[n]
        dn = d[n]
        cp = c_prev[n]
        for j in range(H):
            t = tc[j]
            dcn[j] += dhn[j] * a[2 * H + j] * (one - t * t)
        for j in range(H):
            o = a[2 * H + j]
            dn[2 * H + j] = dhn[j] * tc[j] * o * (one - o)
        for j in range(H):
            i = a[j]
            g = a[3 * H + j]
            dn[j] = dcn[j] * g * i * (one - i)
            dn[3 * H + j] = dcn[j] * i * (one - g * g)
        for j in range(H):
            f = a[H + j]
            dn[H + j] = dcn[j] * cp[j] * f * (one - f)
        for j in range(H):
            dcn[j] *= a[H + j]
'''


def step_backward_kernel(xp, dtype, elements: int):
    """The compiled step gradient for `elements` values of `dtype` in all, or None to use NumPy."""
    return kernel_for(_SOURCE, "lstm_step_backward", xp, dtype, elements)


def step_forward_kernel(xp, dtype, elements: int):
    """The compiled forward step for `elements` values of `dtype` in all (float32 only), or None to use NumPy."""
    if dtype != np.float32:  # the sigmoid and tanh are float32 approximations
        return None
    return kernel_for(_FORWARD_SOURCE, "lstm_step_forward", xp, dtype, elements)
