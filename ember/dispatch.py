"""`apply`: the one entry point that runs an op on tensors, and eager execution, the interpreter
at the bottom of every thread's stack (see `ember.interpreter`).

`apply` checks devices, hands the op to the current interpreter (or, for symbolic inputs, to the
builder of their graph), wraps the results as tensors, links views, and records an autograd node
when gradients are wanted. In-place writes (`write`) and reads of values (`read`) go through the
interpreter too. The fast paths (`unary_path`, `binary_path`: each op's public function, made from its
declarations) do the same for plain eager calls on NumPy arrays in one Python frame; `apply_unary` and
`apply_binary` reach an op's fast path by the op.
"""

from __future__ import annotations

import numpy as np

from ember import interpreter as _interpreter
from ember.autograd import engine as _engine
from ember.autograd.engine import Node, record
from ember.autograd.grad_mode import state as grad_state
from ember.autograd.views import current_grad_fn, link_view
from ember.backends.meta import MetaArray, is_symbolic
from ember.dtypes import FLOAT_NP
from ember.errors import ConcretizationError, DataDependentError, DeviceMismatchError, ShapeError, fmt_shape
from ember.interpreter import Interpreter
from ember.kernels.background import NotCompiledYet, numpy_instead, serves
from ember.kernels.numba_loader import MIN_ELEMENTS
from ember.tensor import Tensor

_stack = _interpreter._stack
_entered = _interpreter.entered  # no interpreter entered in any thread: each runs plain eager


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
            node = record(op, attrs, inputs, (out,))
            if interp.sees_nodes:
                interp.recorded(node)
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
        node = record(op, attrs, inputs, results)
        if interp.sees_nodes:
            interp.recorded(node)
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


# --- the fast paths: one closure per op ---------------------------------------------------------------------
# An op's public function (ember.exp, Tensor.__add__, ember.sum, ...) is a closure made here from the op's
# declarations (arity, `float_ufunc`, `is_view`, what its gradient saves). It runs the common call, plain eager
# NumPy tensors, in one Python frame: the kernel, the output tensor and the autograd node inline (each call saved
# is 0.1-0.3 us of a 1.5-3 us small op). Anything else (other interpreters, symbolic or meta data, other
# backends, mixed devices, kernel errors) goes to apply(), which gives the same results and errors.
# The node is the one Node(op, attrs, inputs, outputs) makes (tests/test_autograd_recorders.py compares every field),
# built inline for one or two operands: on 16x16 float32, relu with grad 2.03 us against 2.70 us through Node(),
# x * y 2.23 against 2.73 (thread CPU time, Xeon family 6 model 167, 2026-12-02). Node() stays the general builder.

_new = object.__new__
_next_seq = _engine._next_seq
_FLOAT32, _FLOAT64 = np.dtype(np.float32), np.dtype(np.float64)  # where an op's float_ufunc is its kernel
_UNARY_PATHS: dict = {}  # op -> its one-operand path, for apply_unary
_BINARY_PATHS: dict = {}  # op -> its two-operand path, for apply_binary


def unary_path(op, params: tuple = ()):
    """`f(x, *args, **attrs)`: apply(op, x, **attrs) for one tensor; `params` name the attributes that may also be
    passed positionally (softplus(x, 2.0) as well as softplus(x, beta=2.0))."""

    saves = [None]  # whether the node saves x (found once)

    def run(x, *args, **attrs):
        if args:
            if len(args) > len(params):
                raise TypeError(f"{op.name}: takes at most {len(params)} argument(s) after the input, got {len(args)}")
            attrs.update(zip(params, args))
        if (not _entered[0] or type(_stack.top) is Eager) and isinstance(x, Tensor):
            data = x._data
            dev = x._device
            backend = dev._backend
            if type(data) is np.ndarray and backend is not None and backend.direct:
                try:
                    if attrs:
                        out = op.kernel(np, data, **attrs)
                    else:
                        ufunc = op.float_ufunc
                        dtype = data.dtype
                        if ufunc is not None and (dtype is _FLOAT32 or dtype is _FLOAT64):
                            out = ufunc(data)
                        else:
                            out = op.kernel(np, data)
                except Exception:  # noqa: BLE001 - the general path reports the error properly
                    return apply(op, x, **attrs)
                if type(out) is not np.ndarray:
                    out = np.asarray(out)
                t = _new(Tensor)  # Tensor._make inline
                t._data = out
                t._device = dev
                t._requires_grad = False
                t._grad_fn = None
                t._output_nr = 0
                is_view = op.is_view
                # link_view's common cases inline. A "maybe" op's result is a view when it shares x's memory (NumPy
                # collapses view chains: a view's .base is the array that owns the memory).
                if is_view is True or (is_view == "maybe" and (
                        (owner := out.base) is data or (owner is not None and owner is data.base))):
                    # a view: it shares x's version counter and records how it was made from x's base
                    t._version = x._version
                    base = x._base
                    if base is None:
                        t._base = x
                        t._view_fn = (op, attrs, (), None)
                    else:
                        t._base = base
                        t._view_fn = (op, attrs, (), x._view_fn)
                else:
                    t._version = [0]
                    t._base = None
                    t._view_fn = None
                    if is_view:  # "multi"
                        link_view(op, t, (x,), attrs)
                if x._requires_grad and grad_state.enabled and op.differentiable and (
                        (odt := out.dtype) is _FLOAT32 or odt in FLOAT_NP):
                    # Node(op, attrs, (x,), (t,)) inline: the same node (tests/test_autograd_recorders.py)
                    node = _new(Node)
                    node.op = op
                    node.attrs = attrs
                    node.freed = False
                    node.retained = None
                    node.seq = _next_seq()
                    node.view_version = t._version[0] if is_view and is_view != "multi" and t._base is not None \
                        else None
                    node.in_meta = ((data.shape, data.dtype),)  # tuples: never changed, cheaper than lists
                    fn = x._grad_fn if x._base is None else current_grad_fn(x)
                    node.edges = ((fn, x._output_nr) if fn is not None else (x, -1),)
                    save = saves[0]
                    if save is None:
                        save = saves[0] = bool(_engine.saved_inputs(op, 1, 1))
                    node._saved = {0: (x, x._version[0])} if save else None
                    if op.save_outputs:
                        version = t._version
                        node._out_saved = {0: (out, version, version[0], dev)}
                    else:
                        node._out_saved = None
                    t._requires_grad = True
                    t._grad_fn = node
                return t
        return apply(op, x, **attrs)

    run.__name__ = run.__qualname__ = op.name
    return serves(run)  # a kernel still compiling makes it fall back to apply(), which serves NumPy meanwhile


def binary_path(op, swapped: bool = False):
    """`f(a, b)`: apply(op, a, b) for two operands, tensors or Python numbers (`swapped`: apply(op, b, a), for
    the reflected operators such as Tensor.__radd__)."""

    saves = [None] * 4  # the inputs the node saves, by which operands need a gradient (found once each)

    def run(a, b):
        if swapped:
            a, b = b, a
        if not _entered[0] or type(_stack.top) is Eager:
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
            backend = dev._backend
            if backend is not None and backend.direct:
                try:
                    # the op's float_ufunc itself where it is the kernel: float32/float64 arrays of one dtype,
                    # or one such array with a Python float or int
                    ufunc = op.float_ufunc
                    if ufunc is None:
                        out = op.kernel(np, ad, bd)
                    elif type(ad) is np.ndarray:
                        dtype = ad.dtype
                        tb = type(bd)
                        if (dtype is _FLOAT32 or dtype is _FLOAT64) and (
                                (tb is np.ndarray and bd.dtype is dtype) or tb is float or tb is int):
                            # (a large pass over the threads where the op has a split kernel)
                            out = ufunc(ad, bd) if ad.size < MIN_ELEMENTS or op.split is None else op.split(ad, bd)
                        else:
                            out = op.kernel(np, ad, bd)
                    elif (bd.dtype is _FLOAT32 or bd.dtype is _FLOAT64) and (type(ad) is float or type(ad) is int):
                        out = ufunc(ad, bd)
                    else:
                        out = op.kernel(np, ad, bd)
                except Exception:  # noqa: BLE001 - the general path reports the error properly
                    return apply(op, a, b)
                if type(out) is not np.ndarray:
                    out = np.asarray(out)
                t = _new(Tensor)  # Tensor._make inline
                t._data = out
                t._device = dev
                t._version = [0]
                t._requires_grad = False
                t._grad_fn = None
                t._output_nr = 0
                t._base = None
                t._view_fn = None
                if rg and grad_state.enabled and op.differentiable and (
                        (odt := out.dtype) is _FLOAT32 or odt in FLOAT_NP):
                    # Node(op, {}, (a, b), (t,)) inline: the same node (tests/test_autograd_recorders.py)
                    node = _new(Node)
                    node.op = op
                    node.attrs = {}
                    node.freed = False
                    node.retained = None
                    node.seq = _next_seq()
                    node.view_version = None  # no two-operand op is a view
                    needs = 0  # bit i: operand i needs a gradient
                    edge_a = edge_b = meta_a = meta_b = None
                    if type(ad) is np.ndarray:  # a is a tensor (else a Python number)
                        meta_a = (ad.shape, ad.dtype)
                        if a._requires_grad:
                            fn = a._grad_fn if a._base is None else current_grad_fn(a)
                            edge_a = (fn, a._output_nr) if fn is not None else (a, -1)
                            needs = 1
                    if type(bd) is np.ndarray:
                        meta_b = (bd.shape, bd.dtype)
                        if b._requires_grad:
                            fn = b._grad_fn if b._base is None else current_grad_fn(b)
                            edge_b = (fn, b._output_nr) if fn is not None else (b, -1)
                            needs |= 2
                    node.edges = (edge_a, edge_b)
                    node.in_meta = (meta_a, meta_b)
                    save = saves[needs]
                    if save is None:
                        save = saves[needs] = _engine.saved_inputs(op, needs, 2)
                    if save:
                        saved = node._saved = {}
                        for i in save:
                            x = b if i else a
                            saved[i] = (x, x._version[0]) if isinstance(x, Tensor) else (x, None)
                    else:
                        node._saved = None
                    if op.save_outputs:
                        version = t._version
                        node._out_saved = {0: (out, version, version[0], dev)}
                    else:
                        node._out_saved = None
                    t._requires_grad = True
                    t._grad_fn = node
                return t
        return apply(op, a, b)

    run.__name__ = run.__qualname__ = op.name
    return serves(run)  # a kernel still compiling makes it fall back to apply(), which serves NumPy meanwhile


@serves
def apply_unary(op, x, **attrs):
    """apply(op, x, **attrs) for one tensor through the op's fast path (`unary_path`)."""
    run = _UNARY_PATHS.get(op)
    if run is None:
        run = _UNARY_PATHS[op] = unary_path(op)
    return run(x, **attrs)


@serves
def apply_binary(op, a, b):
    """apply(op, a, b) for two operands (tensors or Python numbers) through the op's fast path (`binary_path`)."""
    run = _BINARY_PATHS.get(op)
    if run is None:
        run = _BINARY_PATHS[op] = binary_path(op)
    return run(a, b)


_SCALARS = (int, float, bool)


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
