"""One compiled pass per parameter for SGD with momentum and for Adam/AdamW (eager CPU, Numba).

Written in tensor ops, SGD's momentum update is five passes over every parameter-sized array and
Adam's about a dozen, each op with its own dispatch and temporary. These loops read each array once
and write the parameter and its state once, with the same operations in the same order and in the
parameter's dtype (every Python-number option rounded to it first, as NumPy's weak scalars are), so
the results are bit for bit the unfused ones. They run only where that holds: eager NumPy float32/
float64 data of one dtype, contiguous and writable, Python-number options, existing state (SGD's
buffer; Adam without amsgrad); everything else (SGD's first step, jit traces, other devices) takes
the tensor-op path in sgd.py and adam.py.
"""

from __future__ import annotations

import functools

import numpy as np

from ember.ops import dispatch
from ember.ops.compiled import MIN_ELEMENTS, kernel_for


# Each option combination gets its own loop with the branches resolved in the text: LLVM vectorised none of
# the loops that branched on options per element (Adam at 64K values: 210 -> 31 us per step). The texts are
# built once per combination, not per parameter and step.
@functools.cache
def _sgd_source(has_wd: bool, maximize: bool, has_keep: bool, nesterov: bool) -> str:
    if has_wd:  # weight_decay * param, then +/- grad (sgd.py's _effective_grad)
        grad = "d = p[k] * wd\n        d = d - g[k]" if maximize else "d = p[k] * wd\n        d = d + g[k]"
    else:
        grad = "d = -g[k]" if maximize else "d = g[k]"
    return f'''
def sgd_momentum(p, g, buf, lr_neg, momentum, keep, wd):
    for k in range(p.size):
        {grad}
        b = buf[k] * momentum
        b = {"b + d * keep" if has_keep else "b + d"}
        buf[k] = b
        p[k] = p[k] + ({"d + b * momentum" if nesterov else "b"}) * lr_neg
'''


@functools.cache
def _adam_source(mode: int, maximize: bool, small_w: bool) -> str:
    # mode 0: no weight decay, 1: L2 (weight_decay * param +/- grad), 2: decoupled (param *= decay)
    if mode == 1:
        grad = "gv = pv * wd - gv" if maximize else "gv = pv * wd + gv"
    else:
        grad = ("pv = pv * decay\n        " if mode == 2 else "") + ("gv = -gv" if maximize else "")
    lerp = "mv + w1 * diff" if small_w else "gv - diff * one_minus_w1"  # lerp, PyTorch's two forms
    return f'''
import numpy as np


def adam(p, g, m, v, w1, one_minus_w1, beta2, c2, bc2_sqrt, eps, neg_step, wd, decay):
    for k in range(p.size):
        pv = p[k]
        gv = g[k]
        {grad}
        mv = m[k]
        diff = gv - mv
        mv = {lerp}
        m[k] = mv
        vv = v[k] * beta2
        vv = c2 * gv * gv + vv  # addcmul: (value * g) * g + v
        v[k] = vv
        p[k] = neg_step * mv / (np.sqrt(vv) / bc2_sqrt + eps) + pv  # addcdiv: (value * m) / denom + p
'''


def _flat_arrays(tensors, options):
    """The tensors' data as flat arrays of one dtype and shape, or, where the compiled pass cannot run, the
    reason why (a str): not eager (the profiler alone is allowed: the pass records itself), an option that is
    not a Python number, another device, dtype or layout. The reasons are built only on failure."""
    if not eager():
        return "the update is being traced, not run eagerly"
    if any(type(v) not in (int, float) for v in options):
        return "its options must be Python numbers, not tensors"
    return _checked_arrays(tensors)


def _checked_arrays(tensors):
    """_flat_arrays' checks of the tensors themselves (the flat arrays, or why not: a str)."""
    first = tensors[0]
    arrays = []
    for t in tensors:
        a = t._data
        if type(a) is not np.ndarray or t._device is not first._device:
            return f"it needs NumPy-backed tensors on one CPU device, got {t.device}"
        if a.dtype != first._data.dtype or a.shape != first._data.shape:
            return (f"the parameter ({first._data.dtype}, shape {tuple(first._data.shape)}) and its gradient and "
                    f"state ({a.dtype}, shape {tuple(a.shape)}) differ")
        flags = a.flags
        if not (flags.c_contiguous and flags.writeable):
            return f"a tensor of shape {tuple(a.shape)} is not contiguous and writable"
        arrays.append(a.reshape(-1))
    return arrays


def eager() -> bool:
    """Whether an update runs eagerly here (the compiled pass's first condition; not under ember.jit's trace)."""
    return dispatch.eager_now() or dispatch.profiled_eager() is not None


def compiled_available() -> bool:
    """Whether the compiled passes can run at all: Numba installed and EMBER_FUSION_BACKEND not `numpy`."""
    from ember.graph.codegen import get_backend
    from ember.graph.codegen.numba_cpu import NumbaRenderer

    return get_backend() != "numpy" and NumbaRenderer().available()


def unfused_reason(tensors, options) -> str:
    """Why the compiled pass did not run for these tensors and options (for fused=True's error)."""
    found = _flat_arrays(tensors, options)
    if isinstance(found, str):
        return found
    if found[0].dtype not in (np.float32, np.float64):
        return f"it needs float32 or float64 tensors, got {found[0].dtype}"
    return "the compiled kernels (the `jit` extra's Numba) are not available"


def _run(name: str, fn, *args) -> None:
    """fn(*args), recorded as one `name` event when the profiler is on (as PyTorch's _fused_adam_ is)."""
    prof = dispatch.profiled_eager()
    if prof is None:
        fn(*args)
    else:
        prof.timed(lambda: fn(*args), name, tuple(a.shape for a in args if isinstance(a, np.ndarray)), "eager")


def _written(*tensors) -> bool:
    for t in tensors:
        t._version[0] += 1
    return True


def sgd_momentum_pass(*, lr, momentum, dampening, weight_decay, nesterov, maximize):
    """`update(p, grad, buf) -> bool`, which applies one parameter's SGD-with-momentum update to p and buf in one
    compiled pass (False where it cannot run), or None where no parameter's pass can run (not eager, options
    that are not Python numbers). Made once per group and step: what does not depend on the parameter (the
    loop's text, its compiled function and the options in each dtype) is found once, not per parameter (a tiny
    MLP's six parameters: 36 -> 22 us a step)."""
    if not eager() or any(type(v) not in (int, float) for v in (lr, momentum, dampening, weight_decay)):
        return None
    keep = 1 - dampening
    source = _sgd_source(weight_decay != 0, bool(maximize), keep != 1, bool(nesterov))
    by_dtype: dict = {}  # dtype -> (compiled loop, options in that dtype)

    def update(p, grad, buf) -> bool:
        arrays = _checked_arrays((p, grad, buf))
        if isinstance(arrays, str):
            return False
        dtype = arrays[0].dtype
        found = by_dtype.get(dtype)
        if found is None:
            # every size, as Adam's: one call replaces five ops (an MLP's biases: 2.77 -> 2.71 ms per step)
            fn = kernel_for(source, "sgd_momentum", np, dtype, MIN_ELEMENTS)
            cast = dtype.type  # Python numbers act in the array's dtype, as NumPy's weak scalars do
            found = by_dtype[dtype] = fn, (cast(-lr), cast(momentum), cast(keep), cast(weight_decay))
        fn, options = found
        if fn is None:
            return False
        _run("fused_sgd_momentum", fn, *arrays, *options)
        return _written(p, buf)

    return update


def adam_step(p, grad, exp_avg, exp_avg_sq, *, step: float, beta1, beta2, lr, weight_decay, eps, maximize: bool,
              decoupled: bool) -> bool:
    """Apply one Adam (AdamW with `decoupled`) update in one compiled pass; False where it cannot run."""
    arrays = _flat_arrays((p, grad, exp_avg, exp_avg_sq), (beta1, beta2, lr, weight_decay, eps))
    if isinstance(arrays, str):
        return False
    cast = arrays[0].dtype.type
    w1 = cast(1 - beta1)
    mode = 0 if weight_decay == 0 else (2 if decoupled else 1)
    # every size: one call replaces a dozen ops
    fn = kernel_for(_adam_source(mode, bool(maximize), bool(abs(w1) < 0.5)), "adam", np, arrays[0].dtype,
                    MIN_ELEMENTS)
    if fn is None:
        return False
    _run("fused_adam", fn, *arrays, w1, cast(1) - w1, cast(beta2), cast(1 - beta2),
         cast((1 - beta2**step) ** 0.5), cast(eps), cast(-(lr / (1 - beta1**step))), cast(weight_decay),
         cast(1 - lr * weight_decay))
    return _written(p, exp_avg, exp_avg_sq)
