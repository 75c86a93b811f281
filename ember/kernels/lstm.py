"""One LSTM time step's elementwise work as compiled kernels (Numba), for lstm_layer's loops.

A step of a small layer (32 x 128) is about 4,000 values: NumPy's dozen calls per step cost more in
call overhead than in arithmetic, so each of these loops does a step in one call after the step's GEMM.
The forward activates the gates and updates the cell with exp_compiled's vectorised float32 sigmoid
and tanh (Numba's own exp and tanh are scalar libm calls, which made the step slower than NumPy's);
the backward applies the step's gradient rule from the kept activations. Gates are [i, f, g, o], PyTorch's order.
For float32 with NumPy's bundled OpenBLAS, whole time loops (forward and backward) call its sgemm from inside
over a range of samples, so lstm_layer can run disjoint parts of the batch on threads at once.
Without Numba, or for other dtypes, recurrent_layer.py runs the same arithmetic in NumPy (recurrent.py finds the
kernels).
"""

from __future__ import annotations

from ember.kernels import exp
from ember.kernels.recurrent import RecurrentKernels

_FORWARD_SOURCE = exp.SOURCE + '''

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


def lstm_forward_loop(xw, batch_major, h0, w_t, wp, hs, act, cs, tanh_cs, pre, n0, n1):
    # every step of the layer for samples [n0, n1): pre = h_prev @ w_t (sgemm_rows_packed) + xw[t], then the
    # step's gates and cell; xw is (T, N, 4H), or (N, T, 4H) when batch_major, C-contiguous; cs[0] holds the
    # first cell state; wp: w_t packed (RecurrentKernels.packed). Samples are independent, so disjoint ranges may
    # run on threads at once.
    T, N, H = hs.shape
    G = 4 * H
    M = n1 - n0
    for t in range(T):
        h_prev = h0[n0:] if t == 0 else hs[t - 1, n0:]
        sgemm_rows_packed(M, G, H, h_prev.ctypes.data, H, wp, w_t.ctypes.data, G, pre[n0:].ctypes.data, G)
        for n in range(n0, n1):
            p = pre[n]
            x = xw[n, t] if batch_major else xw[t, n]
            for j in range(G):
                p[j] += x[j]
            _forward_row(p, act[t, n], cs[t, n], cs[t + 1, n], tanh_cs[t, n], hs[t, n], H)
'''

_SOURCE = '''
import numpy as np
from numba import njit


@njit(inline="always")
def _backward_row(dhn, dcn, a, tc, cp, dn, H):
    # one sample of a step's gradient rule from its activated gates a (4H); dcn is updated in place to the
    # previous step's. Short loops over few arrays each (see _forward_row), in the arrays' dtype: a Python
    # float constant would make the arithmetic float64, half the vector width (twice as slow before)
    one = dcn.dtype.type(1)
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


def lstm_step_backward(dh, dc, act, tanh_c, c_prev, d):
    # act (N, 4H): the step's activated gates; d (N, 4H) receives the gate pre-activations' gradient
    N, H = dc.shape
    for n in range(N):
        _backward_row(dh[n], dc[n], act[n], tanh_c[n], c_prev[n], d[n], H)
'''

_BACKWARD_LOOP_SOURCE = _SOURCE + '''


def lstm_backward_loop(ghs, has_ghs, w_hh, wp, act, cs, tanh_cs, dpre, dh, dc, n0, n1):
    # every step back from the last for samples [n0, n1): dh += ghs[t] (when given), the step's rule into
    # dpre[t], then dh = dpre[t] @ w_hh (sgemm_rows_packed); dh and dc hold the last step's incoming gradients
    # on entry and the first step's outgoing ones on return; wp: w_hh packed. All arrays C-contiguous float32;
    # disjoint ranges may run on threads at once.
    T, N, G = act.shape
    H = G // 4
    M = n1 - n0
    for t in range(T - 1, -1, -1):
        if has_ghs:
            for n in range(n0, n1):
                g = ghs[t, n]
                d = dh[n]
                for j in range(H):
                    d[j] += g[j]
        for n in range(n0, n1):
            _backward_row(dh[n], dc[n], act[t, n], tanh_cs[t, n], cs[t, n], dpre[t, n], H)
        sgemm_rows_packed(M, H, G, dpre[t, n0:].ctypes.data, G, wp, w_hh.ctypes.data, H, dh[n0:].ctypes.data, H)
'''

LSTM = RecurrentKernels("lstm", _FORWARD_SOURCE, _FORWARD_LOOP_SOURCE, _SOURCE, _BACKWARD_LOOP_SOURCE)
