"""`gradcheck`: autograd's Jacobians against float64 central finite differences."""

from __future__ import annotations

import numpy as np

from ember import dtypes as _dt
from ember.autograd.engine import grad
from ember.tensor import Tensor as _Tensor


def gradcheck(fn, inputs, eps: float = 1e-6, atol: float = 1e-5, rtol: float = 1e-3, raise_exception=True) -> bool:
    """Compare autograd's Jacobians of fn with float64 central finite differences for every input.

    The numeric Jacobian is built a column at a time: each input element is nudged by +eps and -eps
    and fn is evaluated once for each, which gives that element's effect on every output at once.
    """
    inputs = tuple(inputs) if isinstance(inputs, (tuple, list)) else (inputs,)
    diff = [x for x in inputs if isinstance(x, _Tensor) and x.requires_grad]
    if not diff:
        raise ValueError("gradcheck: no input requires grad")
    for x in diff:
        if x.dtype is not _dt.float64:
            raise TypeError(f"gradcheck: inputs must be float64 for finite differences, got {x.dtype}")
        x._require_data("gradcheck")
    outs = _as_outputs(fn(*inputs))
    float_outs = [k for k, o in enumerate(outs) if o.is_floating_point()]
    analytic = {k: _analytic_jacobian(outs[k], diff) for k in float_outs}
    numeric = _numeric_jacobian(fn, inputs, diff, {k: outs[k].numel() for k in float_outs}, eps)
    for k in float_outs:
        for xi in range(len(diff)):
            a, n = analytic[k][xi], numeric[k][xi]
            if not np.allclose(a, n, atol=atol, rtol=rtol):
                if not raise_exception:
                    return False
                j, e = np.unravel_index(np.argmax(np.abs(a - n)), a.shape)
                raise RuntimeError(
                    f"gradcheck: Jacobian of output {k} w.r.t. input {xi} differs from finite differences; "
                    f"largest gap at output element {j}, input element {e}: analytic {a[j, e]:.6g}, "
                    f"numeric {n[j, e]:.6g}\nanalytic:\n{a}\nnumeric:\n{n}"
                )
    return True


def _as_outputs(out) -> list:
    outs = list(out) if isinstance(out, (tuple, list)) else [out]
    for o in outs:
        if not isinstance(o, _Tensor):
            raise TypeError(f"gradcheck: the function must return tensors, got {type(o).__name__}")
    return outs


def _analytic_jacobian(out, diff) -> list:
    """Per input, the (out.numel(), x.numel()) Jacobian from one backward pass per output element."""
    n_out = out.numel()
    jac = [np.zeros((n_out, x.numel())) for x in diff]
    if not out.requires_grad:
        return jac
    host = out._device.backend
    for j in range(n_out):
        seed = np.zeros(n_out, dtype=out._data.dtype)
        seed[j] = 1
        g = _Tensor._make(host.from_host(seed.reshape(out.shape)), out._device)
        grads = grad([out], diff, [g], retain_graph=True, allow_unused=True)
        for xi, gx in enumerate(grads):
            if gx is not None:
                jac[xi][j] = np.asarray(gx.detach()).reshape(-1)
    return jac


def _numeric_jacobian(fn, inputs, diff, sizes: dict, eps) -> dict:
    """{output index: per input, the (n_out, n_in) central-difference Jacobian}; sizes: output index -> numel."""
    from ember.autograd.grad_mode import no_grad

    def evaluate():
        with no_grad():
            outs = _as_outputs(fn(*inputs))
        # A copy: an output that is a view of an input would otherwise change with the next nudge.
        return [np.array(outs[k].detach(), dtype=np.float64).reshape(-1) for k in sizes]

    cols: dict = {k: [np.zeros((n, x.numel())) for x in diff] for k, n in sizes.items()}
    for xi, x in enumerate(diff):
        data = x._data  # written element by element, so strided (non-contiguous) inputs work too
        for e, idx in enumerate(np.ndindex(*x.shape)):
            orig = data[idx].item()
            data[idx] = orig + eps
            plus = evaluate()
            data[idx] = orig - eps
            minus = evaluate()
            data[idx] = orig
            for k, p, m in zip(sizes, plus, minus):
                cols[k][xi][:, e] = (p - m) / (2 * eps)
    return cols
