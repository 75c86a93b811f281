"""The interpreter stack: how ops run in the current thread.

`ember.dispatch.apply` hands every op to the interpreter on top of this thread's stack. The
bottom one is eager execution (`ember.dispatch.Eager`); others are entered with `with`:
graph building (`ember.graph.build.GraphBuilder`, and the `ember.jit` tracer built on it), the
profiler, async execution and the eager memory pool (`ember.runtime`). Each overrides what it
changes and hands the rest to the interpreter below it, so they stack: the profiler over async
over eager. A new execution mode is a new interpreter, never a flag checked in the tensor or
autograd layers (JAX's `Primitive.bind` to the current trace, made small).
"""

from __future__ import annotations

import threading


class Interpreter:
    """One way of running ops. The defaults defer to the interpreter below."""

    symbolic = False  # True: ops become graph nodes (their outputs are values, not arrays)
    tracer = None  # the ember.jit trace being recorded, if this interpreter records one
    casts_inputs = False  # True: `prepare` casts inputs (autocast), also for graphs built above it
    records_eager_kernels = False  # True: the profiler's, whose `profile` records kernels run beside the ops
    sees_nodes = False  # True: `recorded` is called with each autograd node `apply` records under it (anomaly mode)
    below: Interpreter | None = None

    def run(self, op, inputs, arrays, attrs, device):
        """The outputs (arrays, or graph values when symbolic) of `op` on `arrays` (the inputs' data)."""
        return self.below.run(op, inputs, arrays, attrs, device)

    def write(self, target, result, name: str) -> None:
        """Make `target` hold `result`'s values (an in-place op; autograd is handled by the caller)."""
        self.below.write(target, result, name)

    def read(self, tensor, what: str):
        """The concrete array behind `tensor`, for `what` (numpy, item, print, ...) to read."""
        return self.below.read(tensor, what)

    def read_grad(self, tensor):
        """`tensor.grad` as code running under this interpreter sees it (ember.jit's tracer records the read)."""
        below = self.below
        return tensor._grad if below is None else below.read_grad(tensor)

    def wrote_grad(self, tensor) -> None:
        """Code running under this interpreter assigned `tensor.grad` (ember.jit's tracer records the write)."""
        if self.below is not None:
            self.below.wrote_grad(tensor)

    def prepare(self, op, inputs):
        """New inputs the op must run on instead (moved to a scope's device by graph building, cast
        by autocast), or None to run it as it is; `apply` runs the op again on what this returns."""
        return self.below.prepare(op, inputs) if self.below is not None else None

    def outputs(self, tensors) -> None:
        """Called with the tensors an op made (a tracer remembers them)."""

    def check_random(self) -> None:
        """Called before a random draw made outside an op (ember.creation's); vmap's randomness='error' refuses it."""
        if self.below is not None:
            self.below.check_random()

    def recorded(self, node) -> None:
        """Called with each autograd node an op run under this interpreter recorded, where `sees_nodes`."""
        if self.below is not None:
            self.below.recorded(node)

    def jit_key(self):
        """What of this interpreter's state a program traced under it depends on (autocast: its dtype), or None."""
        return None

    # --- entering and leaving --------------------------------------------------------------
    def __enter__(self) -> Interpreter:
        push(self)
        return self

    def __exit__(self, *exc) -> None:
        remove(self)


class _Stack(threading.local):
    top: Interpreter | None = None  # set to the eager interpreter when ember.dispatch is imported


_stack = _Stack()
# How many interpreters are entered, in all threads together. While none is, every thread runs plain eager, which
# the dispatch fast paths learn from this one read instead of a thread-local lookup (35-50 ns on every op).
entered = [0]
_entered_lock = threading.Lock()


def current() -> Interpreter:
    """The interpreter that runs ops in this thread now."""
    return _stack.top


def push(interp: Interpreter) -> None:
    """Put `interp` on top of this thread's stack."""
    top = _stack.top
    node = top
    while node is not None:
        if node is interp:
            raise RuntimeError(f"{type(interp).__name__} is already active in this thread")
        node = node.below
    interp.below = top
    if top is not None and top.sees_nodes:  # nodes recorded above still reach the one below that wants them
        interp.sees_nodes = True
    with _entered_lock:
        entered[0] += 1
    _stack.top = interp


def remove(interp: Interpreter) -> None:
    """Take `interp` off this thread's stack (from the top, or from below others entered later)."""
    top = _stack.top
    if top is interp:
        _stack.top = interp.below
    else:
        node = top
        while node is not None and node.below is not interp:
            node = node.below
        if node is None:
            raise RuntimeError(f"{type(interp).__name__} is not active in this thread")
        node.below = interp.below
    with _entered_lock:
        entered[0] -= 1


def jit_keys() -> tuple:
    """The jit keys of the interpreters active in this thread (Interpreter.jit_key), top first."""
    keys = []
    node = _stack.top
    while node is not None:
        key = node.jit_key()
        if key is not None:
            keys.append(key)
        node = node.below
    return tuple(keys)


def find(kind) -> Interpreter | None:
    """The nearest active interpreter of class `kind` in this thread, or None."""
    node = _stack.top
    while node is not None:
        if isinstance(node, kind):
            return node
        node = node.below
    return None
