"""`apply`: the one entry point that runs an op on tensors, and eager execution, the interpreter
at the bottom of every thread's stack (see `ember.interpreter`).

`apply` checks devices, hands the op to the current interpreter (or, for symbolic inputs, to the
builder of their graph), wraps the results as tensors, links views, and records an autograd node
when gradients are wanted. In-place writes (`write`) and reads of values (`read`) go through the
interpreter too. The fast paths `apply_unary` and `apply_binary` do the same for plain eager
calls on NumPy arrays with a few checks fewer.
"""

from __future__ import annotations

import numpy as np

from ember import interpreter as _interpreter
from ember.autograd.engine import NO_OPERAND, record, record_operands
from ember.autograd.grad_mode import state as grad_state
from ember.autograd.views import link_view
from ember.backends.meta import MetaArray, is_symbolic
from ember.dtypes import FLOAT_NP
from ember.errors import ConcretizationError, DataDependentError, DeviceMismatchError, ShapeError, fmt_shape
from ember.interpreter import Interpreter
from ember.kernels.background import NotCompiledYet, numpy_instead, serves
from ember.tensor import Tensor

_stack = _interpreter._stack


class Eager(Interpreter):
    """Run kernels now on the inputs' device (on meta, the shape rule is the kernel)."""

    @serves
    def run(self, op, inputs, arrays, attrs, device):
        backend = device._backend or device.backend
        if backend.abstract:  # the meta device is the shape rule and nothing else
            return op.infer(*arrays, **attrs)
        try:
            if backend.direct:  # NumPy backends: no device context to enter
                return op.kernel(np, *arrays, **attrs)
            return backend.run(op.kernel, arrays, attrs)
        except NotCompiledYet:  # a kernel it wants is compiling in the background: NumPy this time
            return numpy_instead(op.kernel, np, *arrays, **attrs)
        except Exception as e:  # noqa: BLE001 - reported in terms of the op
            kernel_failed(op, arrays, attrs, e)

    def write(self, target, result, name: str) -> None:
        data = target._data
        if isinstance(data, MetaArray):
            return  # meta tensors have no values to write
        if not _writeable(data):
            raise RuntimeError(
                f"{name}: this tensor is a read-only view (for example from expand/broadcast_to); "
                "clone it before writing into it"
            )
        src = result._data if isinstance(result, Tensor) else result
        target._device.backend.xp.copyto(data, src, casting="unsafe")

    def read(self, tensor, what: str):
        data = tensor._data
        if type(data) is np.ndarray:
            return data
        if getattr(type(data), "pending", False):  # a result async execution has not filled in yet
            tensor._data = data = data.result()
            return data
        if isinstance(data, MetaArray):
            if data.symbolic:
                raise ConcretizationError(
                    f"{what}: this tensor (shape {fmt_shape(tensor.shape)}, {tensor.dtype.name}) is symbolic: "
                    "its value is not known while a graph is built or ember.jit traces a function, so Python "
                    "control flow (if/while, bool(), int(), float(), .item(), .numpy(), .tolist()) cannot "
                    "depend on it. Use ember.where(...) for a data-dependent choice, move the branch "
                    "outside the jitted function, or mark the argument static with "
                    "ember.jit(fn, static_argnums=...)."
                )
            raise DataDependentError(f"{what}: tensors on the meta device have no data (device='meta')")
        return data


def kernel_failed(op, arrays, attrs, e: Exception):
    """Re-raise a kernel's error: Ember's own errors as they are, NumPy's in terms of the op."""
    if isinstance(e, (ShapeError, IndexError, TypeError, NotImplementedError, RuntimeError)) and (
            type(e).__module__.startswith("ember") or str(e).startswith(op.name)):
        raise e
    explain_failure(op, arrays, attrs, e)


EAGER = Eager()
_interpreter._Stack.top = EAGER  # every thread starts eager


def current() -> Interpreter:
    """The interpreter that runs ops in this thread now."""
    return _stack.top


def is_tracing() -> bool:
    """True while ember.jit is tracing a function in this thread."""
    return _stack.top.tracer is not None


def current_tracer():
    """The ember.jit trace being recorded in this thread, or None."""
    return _stack.top.tracer


def outside_trace() -> Interpreter:
    """`with outside_trace():` runs ops eagerly on concrete tensors even while ember.jit traces:
    state made there (optimizer moments) is a real tensor, which the graph then captures."""
    return Eager()


def _symbolic_interpreter(top: Interpreter, arrays) -> Interpreter:
    """Who builds an op on graph values when the top interpreter computes: the top itself if a
    graph-building interpreter is below it (interpreters above a trace, such as autocast, see the op
    first and hand it down), else the builder of the values' graph (ember.v1 builds graphs eagerly)."""
    node = top
    while node is not None:
        if node.symbolic:
            return top
        node = node.below
    for a in arrays:
        if type(a) is not np.ndarray and getattr(a, "symbolic", False):
            return a.graph.builder
    raise AssertionError("no symbolic input")


@serves
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
    interp = _stack.top
    backend = device._backend
    if type(interp) is Eager and not symbolic and mixed is None and backend is not None and backend.direct:
        try:  # the common case, Eager.run inlined: a NumPy kernel now
            outs = op.kernel(np, *arrays, **attrs)
        except NotCompiledYet:  # a kernel it wants is compiling in the background: NumPy this time
            outs = numpy_instead(op.kernel, np, *arrays, **attrs)
        except Exception as e:  # noqa: BLE001 - reported in terms of the op
            kernel_failed(op, arrays, attrs, e)
    else:
        if symbolic and not interp.symbolic:
            interp = _symbolic_interpreter(interp, arrays)
        if type(interp) is not Eager:
            prepared = interp.prepare(op, inputs)  # e.g. moved under a device scope by a send/recv pair
            if prepared is not None:
                return apply(op, *prepared, **attrs)
        if mixed is not None:
            raise DeviceMismatchError(
                f"{op.name}: expected all tensors on the same device, but found tensors on {device} and {mixed}"
            )
        outs = interp.run(op, inputs, arrays, attrs, device)

    if op.n_outputs == 1:
        if type(outs) is not np.ndarray and not isinstance(outs, MetaArray):
            outs = _as_array(outs)
        out = Tensor._make(outs, device)
        if interp.symbolic:
            interp.outputs((out,))
        if op.is_view:
            link_view(op, out, inputs, attrs)
        if needs_grad and grad_state.enabled and op.differentiable and outs.dtype in FLOAT_NP:
            record(op, attrs, inputs, (out,))
        return out

    results = tuple(
        Tensor._make(o if type(o) is np.ndarray or isinstance(o, MetaArray) else _as_array(o), device) for o in outs
    )
    if interp.symbolic:
        interp.outputs(results)
    if op.is_view:
        for t in results:
            link_view(op, t, inputs, attrs)
    if needs_grad and grad_state.enabled and op.differentiable:
        record(op, attrs, inputs, results)
    return results


def write(target: Tensor, result, name: str) -> None:
    """Write `result` (a tensor or a scalar) into `target`'s storage through the current interpreter."""
    interp = _stack.top
    if not interp.symbolic and (is_symbolic(target) or (isinstance(result, Tensor) and is_symbolic(result))):
        interp = (target._data if is_symbolic(target) else result._data).graph.builder
    interp.write(target, result, name)


def read(tensor: Tensor, what: str):
    """The concrete array behind `tensor` (waiting for pending results); a clear error when there is none."""
    data = tensor._data
    if type(data) is np.ndarray and type(_stack.top) is Eager:
        return data
    return _stack.top.read(tensor, what)


def builds_graph(*tensors) -> bool:
    """Whether writes into these tensors must go through graph building (a trace, or symbolic data)."""
    return _stack.top.symbolic or any(is_symbolic(t) for t in tensors)


def eager_now() -> bool:
    """Whether ops in this thread run plain eager kernels now (what the fast paths require)."""
    return type(_stack.top) is Eager


def profiled_eager():
    """The recording profile when ops in this thread run eager kernels under the profiler alone, else None:
    a fast path that bypasses the ops (a fused optimizer pass) may then run and record itself."""
    top = _stack.top
    if type(top) is Eager:  # the common answer
        return None
    return top.profile if top.records_eager_kernels and type(top.below) is Eager else None


@serves
def apply_unary(op, x, **attrs):
    """apply() for one CPU tensor with nothing unusual going on; anything else takes apply()."""
    if isinstance(x, Tensor) and type(_stack.top) is Eager:
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
                record_operands(op, attrs, x, NO_OPERAND, t)
            return t
    return apply(op, x, **attrs)


_SCALARS = (int, float, bool)


@serves
def apply_binary(op, a, b):
    """apply() for two NumPy-backed operands (tensors or Python numbers): the most common call.

    Anything unusual (symbolic or meta data, other backends, mixed devices, errors) goes to apply().
    """
    if type(_stack.top) is Eager:
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
                record_operands(op, {}, a, b, t)
            return t
    return apply(op, a, b)


def _as_array(x):
    if isinstance(x, np.generic):
        return np.asarray(x)
    return x


def _writeable(arr) -> bool:
    return bool(getattr(getattr(arr, "flags", None), "writeable", True))  # CuPy's flags have no writeable


def explain_failure(op, arrays, attrs, exc: Exception):
    """A kernel failed: let the shape rule raise its clear error, else wrap the backend's message."""
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
