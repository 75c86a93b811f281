"""One LSTM time step's gradient rule as a compiled kernel (Numba), for lstm_layer_backward's loop.

A step of a small layer (32 x 128) is about 4,000 values: NumPy's dozen calls per step cost more in
call overhead than in arithmetic, so this loop does a step's elementwise gradient in one call, from
the activations computed for all steps at once. (The forward step is left to NumPy: its exp and tanh
are vectorised there, and Numba's scalar ones made the step slower.) Gates are [i, f, o, g]. Without
Numba, or for other dtypes, recurrent_layer.py runs the same arithmetic in NumPy.
"""

from __future__ import annotations

from ember.ops.compiled import kernel_for

_SOURCE = '''
def lstm_step_backward(dh, dc, act, tanh_c, c_prev, d):
    # act (N, 4H): the step's activated gates; dc is updated in place to the previous step's
    N, H = dc.shape
    for n in range(N):
        for j in range(H):
            i = act[n, j]
            f = act[n, H + j]
            o = act[n, 2 * H + j]
            g = act[n, 3 * H + j]
            tc = tanh_c[n, j]
            dhv = dh[n, j]
            dcv = dc[n, j] + dhv * o * (1.0 - tc * tc)
            d[n, j] = dcv * g * i * (1.0 - i)
            d[n, H + j] = dcv * c_prev[n, j] * f * (1.0 - f)
            d[n, 2 * H + j] = dhv * tc * o * (1.0 - o)
            d[n, 3 * H + j] = dcv * i * (1.0 - g * g)
            dc[n, j] = dcv * f
'''


def step_backward_kernel(xp, dtype, elements: int):
    """The compiled step gradient for `elements` values of `dtype` in all, or None to use NumPy."""
    return kernel_for(_SOURCE, "lstm_step_backward", xp, dtype, elements)
