"""One LSTM time step's elementwise work as compiled kernels (Numba), for lstm_layer's loops.

A step of a small layer (32 x 128) is about 4,000 values: NumPy's dozen calls per step cost more in
call overhead than in arithmetic, so each of these loops does a step in one call after the step's GEMM.
The forward activates the gates and updates the cell with exp_compiled's vectorised float32 sigmoid
and tanh (Numba's own exp and tanh are scalar libm calls, which made the step slower than NumPy's);
the backward applies the step's gradient rule from the kept activations. Gates are [i, f, g, o], PyTorch's order.
Without Numba, or for other dtypes, recurrent_layer.py runs the same arithmetic in NumPy.
"""

from __future__ import annotations

import numpy as np

from ember.ops import cblas, exp_compiled
from ember.ops.compiled import kernel_for

_FORWARD_SOURCE = exp_compiled.SOURCE + '''

@njit(inline="always")
def _forward_row(p, a, cp, cn, tc, hn, H):
    # one sample: p (4H) pre-activations, a (4H) receives them activated; short loops over few arrays each:
    # LLVM vectorises a loop only when its run-time checks that the arrays do not overlap stay few, and
    # falls back to scalar code when they do overlap (so a must not be p)
    for j in range(2 * H):
        a[j] = sigmoid32(p[j])
    for j in range(2 * H, 3 * H):
        a[j] = tanh32(p[j])
    for j in range(3 * H, 4 * H):
        a[j] = sigmoid32(p[j])
    for j in range(H):
        cn[j] = a[H + j] * cp[j] + a[j] * a[2 * H + j]
    for j in range(H):
        t = tanh32(cn[j])
        tc[j] = t
        hn[j] = a[3 * H + j] * t


def lstm_step_forward(pre, c_prev, act, c_next, tanh_c, h):
    # pre (N, 4H): the step's gate pre-activations; act (N, 4H) receives them activated
    N, H = c_prev.shape
    for n in range(N):
        _forward_row(pre[n], act[n], c_prev[n], c_next[n], tanh_c[n], h[n], H)
'''

_FORWARD_LOOP_SOURCE = _FORWARD_SOURCE + '''
from ember.ops.cblas import sgemm


def lstm_forward_loop(xw, batch_major, h0, w_t, hs, act, cs, tanh_cs, pre):
    # every step of the layer: pre = h_prev @ w_t (NumPy's OpenBLAS) + xw[t], then the step's gates and cell;
    # xw is (T, N, 4H), or (N, T, 4H) when batch_major, C-contiguous; cs[0] holds the first cell state
    T, N, H = hs.shape
    G = 4 * H
    for t in range(T):
        h_prev = h0 if t == 0 else hs[t - 1]
        sgemm(101, 111, 111, N, G, H, np.float32(1), h_prev.ctypes.data, H, w_t.ctypes.data, G, np.float32(0),
              pre.ctypes.data, G)
        for n in range(N):
            p = pre[n]
            x = xw[n, t] if batch_major else xw[t, n]
            for j in range(G):
                p[j] += x[j]
            _forward_row(p, act[t, n], cs[t, n], cs[t + 1, n], tanh_cs[t, n], hs[t, n], H)
'''

_SOURCE = '''
def lstm_step_backward(dh, dc, act, tanh_c, c_prev, d):
    # act (N, 4H): the step's activated gates; dc is updated in place to the previous step's. Row by row in
    # short loops (see _forward_row), in the arrays' dtype: a Python float constant would make the
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
            dcn[j] += dhn[j] * a[3 * H + j] * (one - t * t)
        for j in range(H):
            o = a[3 * H + j]
            dn[3 * H + j] = dhn[j] * tc[j] * o * (one - o)
        for j in range(H):
            i = a[j]
            g = a[2 * H + j]
            dn[j] = dcn[j] * g * i * (one - i)
            dn[2 * H + j] = dcn[j] * i * (one - g * g)
        for j in range(H):
            f = a[H + j]
            dn[H + j] = dcn[j] * cp[j] * f * (one - f)
        for j in range(H):
            dcn[j] *= a[H + j]
'''

def forward_loop_kernel(xp, dtype, elements: int):
    """The compiled whole-layer forward (float32, NumPy's bundled OpenBLAS found), or None."""
    if dtype != np.float32 or cblas.sgemm is None:
        return None
    return kernel_for(_FORWARD_LOOP_SOURCE, "lstm_forward_loop", xp, dtype, elements, cache=False)


def step_backward_kernel(xp, dtype, elements: int):
    """The compiled step gradient for `elements` values of `dtype` in all, or None to use NumPy."""
    return kernel_for(_SOURCE, "lstm_step_backward", xp, dtype, elements)


def step_forward_kernel(xp, dtype, elements: int):
    """The compiled forward step for `elements` values of `dtype` in all (float32 only), or None to use NumPy."""
    if dtype != np.float32:  # the sigmoid and tanh are float32 approximations
        return None
    return kernel_for(_FORWARD_SOURCE, "lstm_step_forward", xp, dtype, elements)
