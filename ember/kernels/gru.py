"""A GRU layer's time loops as compiled kernels (Numba), for gru_layer.

As for the LSTM (lstm.py): a step of a small layer is a few thousand values, so NumPy's dozen
calls per step cost more than their arithmetic. Each step here is one GEMM with the hidden weight and one
compiled pass over the step's rows, using exp_compiled's vectorised float32 sigmoid and tanh. For float32
with NumPy's bundled OpenBLAS the whole time loop (forward and backward) runs compiled, calling its sgemm
from inside over a range of samples, so gru_layer runs disjoint parts of the batch on threads at once.
Gates are [r, z, n], PyTorch's order, with n = tanh(x_n + r * (W_hn h + b_hn)) as PyTorch (and ONNX's
linear_before_reset) define it. Without Numba, or for other dtypes, gru_layer.py runs the same rule in NumPy.
"""

from __future__ import annotations

from ember.kernels import exp
from ember.kernels.recurrent import RecurrentKernels

_FORWARD_SOURCE = exp.SOURCE + '''

@njit(inline="always")
def _forward_row(x, p, b, hp, a, ghn, hn, H):
    # one sample: x (3H) its input projections, p (3H) h_prev @ W_hh^T, b (3H) the hidden bias, hp (H) h_prev;
    # a (3H) receives r, z, n, ghn (H) the hidden projection's n part (W_hn h + b_hn), hn (H) the new state.
    # Short loops over few arrays each: LLVM vectorises a loop only while its overlap checks stay few.
    for j in range(2 * H):
        a[j] = sigmoid32(x[j] + (p[j] + b[j]))
    for j in range(H):
        ghn[j] = p[2 * H + j] + b[2 * H + j]
    for j in range(H):
        a[2 * H + j] = tanh32(x[2 * H + j] + a[j] * ghn[j])
    for j in range(H):
        n = a[2 * H + j]
        hn[j] = n + a[H + j] * (hp[j] - n)


def gru_step_forward(x, pre, b, h_prev, act, ghn, h):
    # one step for every sample: pre (N, 3H) = h_prev @ W_hh^T, x (N, 3H) the step's input projections
    N, H = h.shape
    for n in range(N):
        _forward_row(x[n], pre[n], b, h_prev[n], act[n], ghn[n], h[n], H)
'''

_FORWARD_LOOP_SOURCE = _FORWARD_SOURCE + '''


def gru_forward_loop(xw, batch_major, h0, w_t, wp, b, hs, act, ghn, pre, n0, n1):
    # every step of the layer for samples [n0, n1): pre = h_prev @ w_t (sgemm_rows_packed), then the step's
    # gates and state; xw is (T, N, 3H), or (N, T, 3H) when batch_major, C-contiguous; wp: w_t packed
    # (RecurrentKernels.packed). Samples are independent, so disjoint ranges may run on threads at once.
    T, N, H = hs.shape
    G = 3 * H
    M = n1 - n0
    for t in range(T):
        h_prev = h0 if t == 0 else hs[t - 1]
        sgemm_rows_packed(M, G, H, h_prev[n0:].ctypes.data, H, wp, w_t.ctypes.data, G, pre[n0:].ctypes.data, G)
        for n in range(n0, n1):
            x = xw[n, t] if batch_major else xw[t, n]
            _forward_row(x, pre[n], b, h_prev[n], act[t, n], ghn[t, n], hs[t, n], H)
'''

_BACKWARD_SOURCE = '''
import numpy as np
from numba import njit


@njit(inline="always")
def _backward_row(dz, dw, g, has_g, a, ghn, hp, dh, dx, dg, H):
    # one sample of a step's gradient rule. The new state's gradient is dh = dz + dw (+ g, the step's output
    # gradient, when has_g): dz its share through the later step's z, dw the later step's GEMM with W_hh.
    # From the activations a (3H) = r, z, n: dx (3H) receives the input projections' gradient, dg (3H) the
    # hidden projection's, and dz this step's share of the previous state's (dh * z). In the arrays' dtype:
    # a Python float constant would make the arithmetic float64.
    one = dz.dtype.type(1)
    for j in range(H):
        dh[j] = dz[j] + dw[j]
    if has_g:
        for j in range(H):
            dh[j] += g[j]
    for j in range(H):
        z = a[H + j]
        n = a[2 * H + j]
        dx[2 * H + j] = dh[j] * (one - z) * (one - n * n)
        dx[H + j] = dh[j] * (hp[j] - n) * z * (one - z)
    for j in range(H):
        r = a[j]
        dx[j] = dx[2 * H + j] * ghn[j] * r * (one - r)
    for j in range(2 * H):
        dg[j] = dx[j]
    for j in range(H):
        dg[2 * H + j] = dx[2 * H + j] * a[j]
    for j in range(H):
        dz[j] = dh[j] * a[H + j]


def gru_step_backward(dz, dw, g, has_g, act, ghn, h_prev, dh, dx, dg):
    # one step back for every sample (see _backward_row); dz (N, H) is updated in place, dh (N, H) is scratch
    N, H = dz.shape
    for n in range(N):
        _backward_row(dz[n], dw[n], g[n], has_g, act[n], ghn[n], h_prev[n], dh[n], dx[n], dg[n], H)
'''

_BACKWARD_LOOP_SOURCE = _BACKWARD_SOURCE + '''


def gru_backward_loop(ghs, has_ghs, w_hh, wp, h0, hs, act, ghn, dxw, dgh, dz, dw, dh, n0, n1):
    # every step back from the last for samples [n0, n1): the step's rule into dxw[t] and dgh[t] (and dz),
    # then dw = dgh[t] @ W_hh (sgemm_rows_packed); the state's gradient is dz + dw, which the caller sums for
    # h0's; wp: w_hh packed. All arrays C-contiguous float32; disjoint ranges may run on threads at once.
    T, N, G = act.shape
    H = G // 3
    M = n1 - n0
    for t in range(T - 1, -1, -1):
        h_prev = h0 if t == 0 else hs[t - 1]
        g = ghs[t] if has_ghs else ghs[0]
        for n in range(n0, n1):
            _backward_row(dz[n], dw[n], g[n], has_ghs, act[t, n], ghn[t, n], h_prev[n], dh[n], dxw[t, n],
                          dgh[t, n], H)
        sgemm_rows_packed(M, H, G, dgh[t, n0:].ctypes.data, G, wp, w_hh.ctypes.data, H, dw[n0:].ctypes.data, H)
'''


GRU = RecurrentKernels("gru", _FORWARD_SOURCE, _FORWARD_LOOP_SOURCE, _BACKWARD_SOURCE, _BACKWARD_LOOP_SOURCE)
