"""Async eager mode: eager ops return at once with pending results that the engine fills in.

With `em.set_async(True)` (or EMBER_ASYNC=1, for the main thread) `AsyncInterpreter` is on this
thread's interpreter stack: an eager CPU op computes its result's shape and dtype with the op's
shape rule, pushes the kernel to the dependency engine (reading the engine variables of its pending
inputs), and returns a tensor whose data is a `PendingArray`: shape and dtype are
known, the values arrive when the kernel has run. Chains of ops (a forward and backward pass)
therefore queue up while Python moves on, and independent kernels run at once.

What synchronises (waits for the values):
- reading values: `.numpy()`, `.item()`, `.tolist()`, `print`/`repr`, `bool()`/`float()`/`int()`,
  `np.asarray(t)`, and any other use of a pending array's data (its attributes other than
  shape/dtype wait for it);
- writing: every in-place op (`add_`, `x[i] = v`, `copy_`, `fill_`, optimizer steps) first waits for
  all queued kernels, so nothing still reading the old values sees the write;
- ops that run synchronously: views (reshape, transpose, slicing), ops whose result shape depends on
  the data (nonzero, masked selection), non-CPU devices, and kernels run inside engine workers;
- `em.synchronize()` (wait for everything), and `set_async(False)`.
An error raised by a queued kernel surfaces, named after the op, at the next of these points. If
none comes before the interpreter exits, an exit handler waits for the queue, prints the first such
error (with the op's name and the kernel's traceback) on stderr and ends the process with status 1,
so a failure is never silently dropped. It has to end the process with `os._exit` (Python ignores
errors raised by exit handlers), so exit handlers registered before Ember was imported are skipped then.
Arrays obtained from `.numpy()` share memory with their tensor: writing into them directly does not
wait for queued kernels that read the tensor, so synchronise first.
"""

from __future__ import annotations

import atexit
import os
import sys
import traceback

import numpy as np

from ember.interpreter import Interpreter, find, push, remove
from ember.runtime import engine


class PendingArray:
    """The result of a queued kernel: shape and dtype now, data once the kernel has run."""

    __slots__ = ("shape", "dtype", "var", "value")
    pending = True  # marks pending data for the tensor layer (checked on the class)
    symbolic = False

    def __init__(self, shape, dtype, var) -> None:
        self.shape = tuple(shape)
        self.dtype = np.dtype(dtype)
        self.var = var
        self.value = None

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n

    @property
    def nbytes(self) -> int:
        return self.size * self.dtype.itemsize

    def result(self) -> np.ndarray:
        """Wait for the kernel that computes this value and return the array."""
        v = self.value
        if v is None:
            engine.wait_for_var(self.var)
            v = self.value
            if v is None:  # the kernel failed: wait_for_var raised unless the error was reported already
                raise RuntimeError(f"the kernel writing {self.var.name} failed earlier; its value was never computed")
        return v

    def __array__(self, dtype=None, copy=None):
        arr = self.result()
        if copy:
            return np.array(arr, dtype=dtype, copy=True)
        return arr if dtype is None else arr.astype(dtype, copy=False)

    def __getattr__(self, name: str):
        if name in PendingArray.__slots__:  # not set yet (an instance made by copy or pickle)
            raise AttributeError(name)
        return getattr(self.result(), name)

    def __reduce__(self):
        # Copies and pickles of a pending value are of its data.
        return (np.array, (self.result(),))

    def __getitem__(self, index):
        return self.result()[index]

    def __len__(self) -> int:
        return self.shape[0]

    def __repr__(self) -> str:
        state = "ready" if self.value is not None else "pending"
        return f"PendingArray(shape={self.shape}, dtype={self.dtype}, {state})"


class AsyncInterpreter(Interpreter):
    """Eager execution that queues kernels on the dependency engine and returns pending results."""

    def run(self, op, inputs, arrays, attrs, device):
        backend = device._backend or device.backend
        if backend.abstract or not backend.direct or op.is_view or engine.in_worker():
            return self._now(op, inputs, arrays, attrs, device)
        try:
            spec = op.infer(*arrays, **attrs)
        except Exception:  # noqa: BLE001 - data-dependent or bad input: the synchronous call says which
            return self._now(op, inputs, arrays, attrs, device)
        specs = spec if isinstance(spec, tuple) else (spec,)
        if any(d is None for s in specs for d in s.shape):
            return self._now(op, inputs, arrays, attrs, device)
        eng = engine.get_engine()
        var = eng.new_var(op.name)
        outs = [PendingArray(s.shape, s.dtype, var) for s in specs]
        reads = [a.var for a in arrays if type(a) is PendingArray]
        args = tuple(arrays)
        multi = isinstance(spec, tuple)
        below = self.below

        def job():
            vals = [a.value if type(a) is PendingArray else a for a in args]
            res = below.run(op, (), vals, attrs, device)
            if multi:
                for p, r in zip(outs, res):
                    p.value = r if type(r) is np.ndarray else np.asarray(r)
            else:
                outs[0].value = res if type(res) is np.ndarray else np.asarray(res)

        eng.push(job, reads, (var,), name=op.name,
                 info=tuple(tuple(a.shape) if hasattr(a, "shape") else () for a in args))
        return tuple(outs) if multi else outs[0]

    def _now(self, op, inputs, arrays, attrs, device):
        """Run an op synchronously, first giving its pending input tensors their real arrays.

        The tensors are updated too, so a view made here has its input's very array as its base (view
        tracking in dispatch compares the two).
        """
        for t in inputs:
            data = getattr(t, "_data", None)
            if type(data) is PendingArray:
                t._data = data.result()
        return self.below.run(op, inputs, [resolve(a) for a in arrays], attrs, device)

    def write(self, target, result, name: str) -> None:
        # Everything queued finishes first, so no kernel still reading the old values sees the write.
        engine.wait_for_all()
        if type(target._data) is PendingArray:
            target._data = target._data.result()
        self.below.write(target, result, name)


_ASYNC = AsyncInterpreter()


def set_async(enabled: bool = True) -> None:
    """Turn async eager mode on or off in this thread (turning it off waits for queued kernels)."""
    on = find(AsyncInterpreter) is not None
    if enabled and not on:
        push(_ASYNC)
    elif not enabled and on:
        remove(_ASYNC)
        engine.wait_for_all()


def is_async() -> bool:
    """Whether eager ops in this thread return at once with pending results."""
    return find(AsyncInterpreter) is not None


def synchronize() -> None:
    """Wait for every queued kernel; raise the first error one of them raised."""
    engine.wait_for_all()


def _fail_exit_on_unsynchronised_error() -> None:
    """At interpreter exit: wait for queued kernels; print an error nothing synchronised and exit with status 1."""
    try:
        engine.wait_for_all()
    except Exception as err:  # noqa: BLE001 - every kernel error, whatever its original type
        _flush(sys.stdout)
        print("ember: a kernel queued in async eager mode failed, and its error was never synchronised "
              "before exit:", file=sys.stderr)
        traceback.print_exception(err, file=sys.stderr)
        _flush(sys.stderr)
        os._exit(1)  # an exception raised here would be printed and ignored, with exit status 0


def _flush(stream) -> None:
    try:
        stream.flush()
    except (AttributeError, OSError, ValueError):  # closed or replaced streams
        pass


# Registered at import, so it runs after the exit handlers of everything imported later.
atexit.register(_fail_exit_on_unsynchronised_error)


def resolve(x):
    """The array behind x if it is pending (waiting for it), else x."""
    return x.result() if type(x) is PendingArray else x
