"""`apply`: the one entry point that runs an op on tensors.

It checks devices, runs the kernel (or, on the meta device and while tracing, only the shape
rule), wraps the results as tensors, and records an autograd node when gradients are wanted.
"""

from __future__ import annotations

import contextlib
import threading

import numpy as np

from ember.autograd.engine import record
from ember.autograd.grad_mode import state as grad_state
from ember.autograd.views import link_view
from ember.backends.meta import MetaArray
from ember.errors import DataDependentError, DeviceMismatchError, ShapeError
from ember.ops._rules import FLOAT_NP
from ember.tensor import Tensor


class _TraceState(threading.local):
    """Graph building. `builder` (installed by ember.graph) appends a node for an op that has a
    symbolic input; `hook` is set while `ember.jit` traces, when every op goes to the builder."""

    hook = None


trace_state = _TraceState()


def is_tracing() -> bool:
    """True while ember.jit is tracing a function in this thread."""
    return trace_state.hook is not None


@contextlib.contextmanager
def outside_trace():
    """Run ops eagerly on concrete tensors even while ember.jit traces: state made here (optimizer
    moments) is a real tensor, which the graph then captures like a parameter."""
    prev = trace_state.hook
    trace_state.hook = None
    try:
        yield
    finally:
        trace_state.hook = prev


graph_builder = [None]  # set by ember.graph on import: builder(op, inputs, arrays, attrs, device)
graph_placer = [None]  # set by ember.graph: placer(op, inputs) -> inputs moved under a device scope, or None
# Set by ember.runtime while the profiler, the eager pool or async mode is on: called as
# kernel_hook(op, backend, arrays, attrs, inputs) instead of the kernel (the fast paths defer to apply()).
kernel_hook = None


def apply(op, *inputs, **attrs):
    """Run `op` on `inputs` (tensors and Python scalars) with keyword attributes."""
    device = None
    needs_grad = False
    symbolic = False
    mixed = None
    arrays = []
    for x in inputs:
        if isinstance(x, Tensor):
            a = x._data
            if type(a) is not np.ndarray and isinstance(a, MetaArray) and a.symbolic:
                symbolic = True
            d = x._device
            if device is None:
                device = d
            elif d is not device and mixed is None:
                mixed = d
            if x._requires_grad:
                needs_grad = True
            arrays.append(a)
        else:
            arrays.append(x)
    if device is None:
        raise TypeError(f"{op.name}: expected at least one tensor argument")
    if (symbolic or trace_state.hook is not None) and graph_placer[0] is not None:
        placed = graph_placer[0](op, inputs)  # building under a device scope: send/recv to the op's device
        if placed is not None:
            return apply(op, *placed, **attrs)
    if mixed is not None:
        raise DeviceMismatchError(
            f"{op.name}: expected all tensors on the same device, but found tensors on {device} and {mixed}"
        )
    backend = device._backend or device.backend

    if symbolic or backend.abstract or trace_state.hook is not None:
        outs = _abstract(op, inputs, arrays, attrs, device, symbolic)
    else:
        try:
            if kernel_hook is not None:
                outs = kernel_hook(op, backend, arrays, attrs, inputs)
            elif backend.direct:  # NumPy backends: no device context to enter
                outs = op.kernel(np, *arrays, **attrs)
            else:
                outs = backend.run(op.kernel, arrays, attrs)
        except (ShapeError, IndexError, TypeError, NotImplementedError, RuntimeError) as e:
            if type(e).__module__.startswith("ember") or str(e).startswith(op.name):
                raise
            explain_failure(op, arrays, attrs, e)
        except Exception as e:  # NumPy's own errors: report them in terms of the op
            explain_failure(op, arrays, attrs, e)

    if op.n_outputs == 1:
        if type(outs) is not np.ndarray and type(outs) is not MetaArray:
            outs = _as_array(backend, outs)
        out = Tensor._make(outs, device)
        if trace_state.hook is not None:
            trace_state.hook.track(out)
        if op.is_view:
            link_view(op, out, inputs, attrs)
        if needs_grad and grad_state.enabled and op.differentiable and outs.dtype in FLOAT_NP:
            record(op, attrs, inputs, (out,))
        return out

    results = tuple(
        Tensor._make(o if type(o) is np.ndarray or isinstance(o, MetaArray) else _as_array(backend, o), device)
        for o in outs
    )
    if trace_state.hook is not None:
        for t in results:
            trace_state.hook.track(t)
    if needs_grad and grad_state.enabled and op.differentiable:
        record(op, attrs, inputs, results)
    return results


def apply_unary(op, x, **attrs):
    """apply() for one CPU tensor with nothing unusual going on; anything else takes apply()."""
    if isinstance(x, Tensor) and trace_state.hook is None and kernel_hook is None:
        dev = x._device
        backend = dev._backend
        if backend is not None and backend.direct and type(x._data) is np.ndarray:
            try:
                out = op.kernel(np, x._data, **attrs)
            except Exception:  # noqa: BLE001 - the general path reports the error properly
                return apply(op, x, **attrs)
            if type(out) is not np.ndarray:
                out = np.asarray(out)
            t = Tensor._make(out, dev)
            if op.is_view:
                link_view(op, t, (x,), attrs)
            if x._requires_grad and grad_state.enabled and op.differentiable and out.dtype in FLOAT_NP:
                record(op, attrs, (x,), (t,))
            return t
    return apply(op, x, **attrs)


_SCALARS = (int, float, bool)


def apply_binary(op, a, b):
    """apply() for two NumPy-backed operands (tensors or Python numbers): the most common call.

    Anything unusual (symbolic or meta data, other backends, mixed devices, errors) goes to apply().
    """
    if trace_state.hook is None and kernel_hook is None:
        if isinstance(a, Tensor):
            dev = a._device
            ad = a._data
            if type(ad) is not np.ndarray:
                return apply(op, a, b)
            rg = a._requires_grad
            if isinstance(b, Tensor):
                bd = b._data
                if b._device is not dev or type(bd) is not np.ndarray:
                    return apply(op, a, b)
                rg = rg or b._requires_grad
            elif type(b) in _SCALARS:
                bd = b
            else:
                return apply(op, a, b)
        elif isinstance(b, Tensor) and type(a) in _SCALARS:
            dev = b._device
            ad = a
            bd = b._data
            if type(bd) is not np.ndarray:
                return apply(op, a, b)
            rg = b._requires_grad
        else:
            return apply(op, a, b)
        if dev._backend is not None and dev._backend.direct:
            try:
                out = op.kernel(np, ad, bd)
            except Exception:  # noqa: BLE001 - the general path reports the error properly
                return apply(op, a, b)
            if type(out) is not np.ndarray:
                out = np.asarray(out)
            t = Tensor._make(out, dev)
            if rg and grad_state.enabled and op.differentiable and out.dtype in FLOAT_NP:
                record(op, {}, (a, b), (t,))
            return t
    return apply(op, a, b)


def _as_array(backend, x):
    if isinstance(x, np.generic):
        return np.asarray(x)
    return x


def _abstract(op, inputs, arrays, attrs, device, symbolic):
    if symbolic or trace_state.hook is not None:
        return graph_builder[0](op, inputs, arrays, attrs, device)
    return op.infer(*arrays, **attrs)


def explain_failure(op, arrays, attrs, exc: Exception):
    """A kernel failed: let the shape rule raise its clear error, else wrap NumPy's message."""
    specs = [MetaArray(a.shape, a.dtype) if hasattr(a, "shape") and hasattr(a, "dtype") else a for a in arrays]
    try:
        op.infer(*specs, **attrs)  # raises the op's own ShapeError/TypeError when the inputs are bad
    except DataDependentError:
        pass  # the rule wants values these inputs do have: the kernel's own error says what is wrong
    if isinstance(exc, IndexError):
        raise IndexError(f"{op.name}: {exc}") from None
    if isinstance(exc, ValueError) and str(exc).startswith(op.name + ":"):
        raise exc  # the kernel's own ValueError (checked after the shape rule: NumPy's matmul says "matmul:" too)
    raise RuntimeError(f"{op.name} failed: {type(exc).__name__}: {exc}") from exc
