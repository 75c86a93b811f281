"""One compiled pass per parameter for SGD with momentum (eager CPU, the `jit` extra's Numba).

The update written in tensor ops is five passes over every parameter-sized array (momentum times the
buffer, plus the gradient, the learning rate times it, added to the parameter), each with its own
temporary. This loop reads the parameter, gradient and buffer once and writes the parameter and
buffer once, with the same operations in the same order and in the parameter's dtype, so the result
is bit for bit the unfused one. It runs only where that holds: eager NumPy float32/float64 data of one
dtype, contiguous and writable, Python-number options, an existing momentum buffer; everything else
(the first step, jit traces, other devices, small tensors) takes the tensor-op path in sgd.py.
"""

from __future__ import annotations

import numpy as np

from ember.ops import dispatch
from ember.ops.compiled import kernel_for

_SOURCE = '''
def sgd_momentum(p, g, buf, lr_neg, momentum, keep, wd, has_wd, has_keep, nesterov, maximize):
    for k in range(p.size):
        gv = g[k]
        if has_wd:  # weight_decay * param, then +/- grad (sgd.py's _effective_grad)
            d = p[k] * wd
            d = d - gv if maximize else d + gv
        else:
            d = -gv if maximize else gv
        b = buf[k] * momentum
        b = b + d * keep if has_keep else b + d
        buf[k] = b
        step = d + b * momentum if nesterov else b
        p[k] = p[k] + step * lr_neg
'''


def _array(t):
    a = t._data
    if type(a) is not np.ndarray or not a.flags.c_contiguous or not a.flags.writeable:
        return None
    return a


def sgd_momentum_step(p, grad, buf, *, lr, momentum, dampening, weight_decay, nesterov, maximize) -> bool:
    """Apply one SGD-with-momentum update to p and buf in one compiled pass; False where it cannot run."""
    options = (lr, momentum, dampening, weight_decay)
    if not dispatch.eager_now() or any(type(v) not in (int, float) for v in options):
        return False
    arrays = [_array(t) for t in (p, grad, buf)]
    if any(a is None for a in arrays) or p._device is not grad._device or p._device is not buf._device:
        return False
    pa, ga, ba = arrays
    dtype = pa.dtype
    if ga.dtype != dtype or ba.dtype != dtype or ga.shape != pa.shape or ba.shape != pa.shape:
        return False
    fn = kernel_for(_SOURCE, "sgd_momentum", np, dtype, pa.size)
    if fn is None:
        return False
    cast = dtype.type  # Python numbers act in the array's dtype, as NumPy's weak scalars do
    keep = 1 - dampening
    fn(pa.reshape(-1), ga.reshape(-1), ba.reshape(-1), cast(-lr), cast(momentum), cast(keep), cast(weight_decay),
       weight_decay != 0, keep != 1, bool(nesterov), bool(maximize))
    p._version[0] += 1
    buf._version[0] += 1
    return True
