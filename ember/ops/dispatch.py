"""`apply`: the one entry point that runs an op on tensors.

It checks devices, runs the kernel (or, on the meta device and while tracing, only the shape
rule), wraps the results as tensors, and records an autograd node when gradients are wanted.
"""

from __future__ import annotations

import numpy as np

from ember.autograd import Node
from ember.backends.meta import MetaArray
from ember.errors import DeviceMismatchError, ShapeError
from ember.grad_mode import state as grad_state
from ember.ops._rules import FLOAT_NP
from ember.tensor import Tensor


class _TraceState:
    """Set by graph tracing: when `hook` is set, ops on symbolic data are handed to it."""

    hook = None


trace_state = _TraceState()


def apply(op, *inputs, **attrs):
    """Run `op` on `inputs` (tensors and Python scalars) with keyword attributes."""
    device = None
    needs_grad = False
    arrays = []
    for x in inputs:
        if isinstance(x, Tensor):
            d = x._device
            if device is None:
                device = d
            elif d is not device:
                raise DeviceMismatchError(
                    f"{op.name}: expected all tensors on the same device, but found tensors on "
                    f"{device} and {d}"
                )
            if x._requires_grad:
                needs_grad = True
            arrays.append(x._data)
        else:
            arrays.append(x)
    if device is None:
        raise TypeError(f"{op.name}: expected at least one tensor argument")
    backend = device._backend or device.backend

    if backend.abstract or trace_state.hook is not None:
        outs = _abstract(op, arrays, attrs, device)
    else:
        try:
            outs = backend.run(op.kernel, arrays, attrs)
        except (ShapeError, IndexError, TypeError, NotImplementedError, RuntimeError) as e:
            if type(e).__module__.startswith("ember") or str(e).startswith(op.name):
                raise
            explain_failure(op, arrays, attrs, e)
        except Exception as e:  # NumPy's own errors: report them in terms of the op
            explain_failure(op, arrays, attrs, e)

    if op.n_outputs == 1:
        if type(outs) is not np.ndarray and not isinstance(outs, MetaArray):
            outs = _as_array(backend, outs)
        out = Tensor._make(outs, device)
        if op.is_view:
            _link_view(op, out, inputs, attrs)
        if needs_grad and grad_state.enabled and op.differentiable and outs.dtype in FLOAT_NP:
            node = Node(op, attrs, inputs, (out,))
            out._requires_grad = True
            out._grad_fn = node
        return out

    results = tuple(
        Tensor._make(o if type(o) is np.ndarray or isinstance(o, MetaArray) else _as_array(backend, o), device)
        for o in outs
    )
    if needs_grad and grad_state.enabled and op.differentiable:
        node = Node(op, attrs, inputs, results)
        for i, t in enumerate(results):
            if t._data.dtype in FLOAT_NP:
                t._requires_grad = True
                t._grad_fn = node
                t._output_nr = i
    return results


def _as_array(backend, x):
    if isinstance(x, np.generic):
        return np.asarray(x)
    return x


def _link_view(op, out, inputs, attrs) -> None:
    """Make a view share its source's version counter and remember how it was made from its base.

    The version counter lets autograd see writes through any alias; the recorded steps let an
    in-place write through the view be replayed into the base's history (`copy_slices`).
    """
    src = inputs[0]
    a = out._data
    if op.is_view == "maybe" and not isinstance(a, MetaArray) and not np.may_share_memory(a, src._data):
        return
    out._version = src._version
    if src._base is not None:
        out._base = src._base
        parent = src._view_fn
    else:
        out._base = src
        parent = None
    out._view_fn = (op, attrs, inputs[1:], parent)


def _abstract(op, arrays, attrs, device):
    hook = trace_state.hook
    if hook is not None:
        return hook(op, arrays, attrs, device)
    return op.infer(*arrays, **attrs)


def explain_failure(op, arrays, attrs, exc: Exception):
    """A kernel failed: let the shape rule raise its clear error, else wrap NumPy's message."""
    specs = [MetaArray(a.shape, a.dtype) if hasattr(a, "shape") and hasattr(a, "dtype") else a for a in arrays]
    op.infer(*specs, **attrs)  # raises the op's own ShapeError/TypeError when the inputs are bad
    if isinstance(exc, IndexError):
        raise IndexError(f"{op.name}: {exc}") from None
    raise RuntimeError(f"{op.name} failed: {type(exc).__name__}: {exc}") from exc
