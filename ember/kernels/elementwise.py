"""One-pass kernels split over the threads: relu's forward and backward, clamp's forward (ReLU6, hardtanh), add, sub
and mul of two arrays of one shape, and the sum over leading dims (a linear layer's bias gradient).

NumPy runs each ufunc on one thread; PyTorch splits an elementwise loop over its threads from 32K values
(at::internal::GRAIN_SIZE). These compiled loops run as chunks of a flat range on the pool's GIL-free workers
(parallel.run_kernel) from SPLIT's threshold on, and in the caller alone below it. They are memory-bound: two
threads stream about twice the bytes of one while the arrays sit in the cores' caches, as a training step's
activations do.

Where the output is one of the inputs (a memory plan's buffer reused, or an in-place op) the loop stores through
that input: LLVM must otherwise assume the two arrays overlap at other indices, and its run-time overlap check,
which fails for the same array, runs the scalar loop (an MLP's (128, 512) ReLU: 23 against 4 us).
"""

from __future__ import annotations

import numpy as np

from ember.kernels import parallel
from ember.kernels.numba_loader import MIN_ELEMENTS, kernel_for
from ember.kernels.selection import Table, compiled_or_numpy, listening, note

# the binary ops a kernel here computes, by the code its `op` argument takes
BINARY_OPS = {"add": ("+", 0), "sub": ("-", 1), "mul": ("*", 2)}


def _binary_loops() -> str:
    """same_shape's body: for each op one loop per aliasing (out is a, out is b, out apart)."""
    lines = []
    for symbol, code in BINARY_OPS.values():
        lines += [f"    if op == {code}:",
                  "        if out.ctypes.data == a.ctypes.data:",
                  "            for i in range(np.uint64(lo), np.uint64(hi)):",
                  "                bi = b[i]",
                  f"                a[i] = a[i] {symbol} bi",
                  "            return",
                  "        if out.ctypes.data == b.ctypes.data:",
                  "            for i in range(np.uint64(lo), np.uint64(hi)):",
                  "                ai = a[i]",
                  f"                b[i] = ai {symbol} b[i]",
                  "            return",
                  "        for i in range(np.uint64(lo), np.uint64(hi)):",
                  f"            out[i] = a[i] {symbol} b[i]",
                  "        return"]
    return "\n".join(lines)


_SOURCE = '''
import numpy as np


def relu_forward(x, out, lo, hi):
    # np.maximum(x, 0)'s values (NaN kept, -0.0 and negatives to +0.0) as one vectorised select over [lo, hi)
    z = x.dtype.type(0)
    if x.ctypes.data == out.ctypes.data:
        for i in range(np.uint64(lo), np.uint64(hi)):
            v = x[i]
            x[i] = v if (v > z or v != v) else z
        return
    for i in range(np.uint64(lo), np.uint64(hi)):
        v = x[i]
        out[i] = v if (v > z or v != v) else z


def clamp_forward(x, out, low, high, mode, lo, hi):
    # over [lo, hi): mode 0 x.clip(low, high) (a bound replaces x only where x is beyond it: -0.0 kept at a bound of
    # +0.0, low > high gives high), 1 np.maximum(x, low), 2 np.minimum(x, high) (the bound where equal); NaN kept.
    # The bounds come as float64 holding values of x's dtype: exact in it
    low, high = x.dtype.type(low), x.dtype.type(high)
    if mode == 0:
        for i in range(np.uint64(lo), np.uint64(hi)):
            v = x[i]
            v = low if v < low else v
            out[i] = high if v > high else v
    elif mode == 1:
        for i in range(np.uint64(lo), np.uint64(hi)):
            v = x[i]
            out[i] = v if (v > low or v != v) else low
    else:
        for i in range(np.uint64(lo), np.uint64(hi)):
            v = x[i]
            out[i] = v if (v < high or v != v) else high


def relu_backward(g, out, gx, lo, hi):
    # g where out > 0, else 0 (NaN in out passes g, as PyTorch's threshold_backward), over [lo, hi). Unsigned
    # indices and g read unconditionally make the loop a vectorised select; with a signed index, Numba's
    # negative-index wraparound kept a branch per value (3.2 ms against 0.07 ms over 0.5 M values of random sign)
    z = g.dtype.type(0)
    if gx.ctypes.data == g.ctypes.data:
        for i in range(np.uint64(lo), np.uint64(hi)):
            gi = g[i]
            g[i] = z if out[i] <= 0 else gi
        return
    if gx.ctypes.data == out.ctypes.data:
        for i in range(np.uint64(lo), np.uint64(hi)):
            gi = g[i]
            out[i] = z if out[i] <= 0 else gi
        return
    for i in range(np.uint64(lo), np.uint64(hi)):
        gi = g[i]
        gx[i] = z if out[i] <= 0 else gi


def leading_sum(x, out, lo, hi):
    # out[j] = the sum over rows of x[:, j] for the columns [lo, hi), row after row onto 0 (an all -0.0 column sums
    # to +0.0): NumPy's add.reduce over leading axes adds in that order, so the values are its own bit for bit
    # (four rows a visit to out, added one after another: the same order, a quarter of out's loads and stores)
    R = x.shape[0]
    for j in range(np.uint64(lo), np.uint64(hi)):
        out[j] = 0
    i = 0
    while i + 4 <= R:
        a, b, c, d = x[i], x[i + 1], x[i + 2], x[i + 3]
        for j in range(np.uint64(lo), np.uint64(hi)):
            v = out[j] + a[j]
            v += b[j]
            v += c[j]
            out[j] = v + d[j]
        i += 4
    for k in range(i, R):
        r = x[k]
        for j in range(np.uint64(lo), np.uint64(hi)):
            out[j] += r[j]


def same_shape(a, b, out, op, lo, hi):
    # out[i] = a[i] (op) b[i] over [lo, hi), op a code of BINARY_OPS
''' + _binary_loops() + "\n"

SPLIT = Table("elementwise", measured_on="Intel Xeon (family 6, model 167), 2 cores, OpenBLAS 0.3.31 SkylakeX kernels, "
              "2026-12-02", values={
    "split_min": (1 << 17, "from this many values relu's passes split over the threads (float32, in us, one thread -> "
                           "two: 64K values about even (relu 11.3 -> 11.2); 128K relu 16.7 -> 13.9, relu_backward "
                           "23.6 -> 15.0; 256K relu 50 -> 22, relu_backward 111 -> 31; a split's hand-off costs "
                           "about 3 us)"),
    "add_sum_split_min": (1 << 18, "... add, sub, mul and sums over leading dims, which mostly follow a GEMM (a "
                                  "residual add, a bias gradient), whose OpenBLAS threads hold the other cores for "
                                  "0.2 ms: when a split waited for its worker, a transformer step with its (16, 64, "
                                  "128) adds split ran 1 ms slower (24.7 against 23.6 ms); now that the caller runs an "
                                  "unstarted chunk itself, 128K or 32K change the MLP's and transformer's steps by "
                                  "under 1%; alone, 256K values add 104 -> 32 us"),
})
FUSED = Table("fused_elementwise", measured_on="AMD EPYC (family 25, model 17), 2 cores, OpenBLAS 0.3.31 SkylakeX "
              "kernels, 2026-12-05", values={
    "split_min": (1 << 16, "from this many values a jitted plan's fused elementwise loop (graph/codegen/numba_cpu.py) "
                           "splits over the threads (an SGD momentum update, float32, in cache, in us, one thread -> "
                           "two: 32K 7.8 -> 7.6; 64K 12.9 -> 9.6; 128K 26 -> 17; 400K 57 -> 40)"),
})
compiled_or_numpy("relu", "compiled pass", "16384+ float32/float64 values, Numba; split over the threads from "
                  "elementwise's split_min")
compiled_or_numpy("relu_backward", "compiled pass", "as relu's")
compiled_or_numpy("clamp", "compiled pass", "float32/float64 from elementwise's split_min values (split over the "
                  "threads; below, NumPy's clip costs the same), number bounds not NaN and within the dtype's range, "
                  "Numba")
compiled_or_numpy("sum", "compiled columns", "a sum over leading dims of C-contiguous float32/float64 data, from "
                  "elementwise's add_sum_split_min values and 32 columns, Numba: the columns split over the threads")
for _name in BINARY_OPS:
    compiled_or_numpy(_name, "compiled pass", "two C-contiguous float32/float64 arrays of one shape and dtype, from "
                      "elementwise's add_sum_split_min values (below, NumPy's ufunc on one thread), Numba")

_FLOAT32, _FLOAT64 = np.dtype(np.float32), np.dtype(np.float64)
_LARGEST = {_FLOAT32: float(np.finfo(np.float32).max), _FLOAT64: float(np.finfo(np.float64).max)}  # clamp's bounds
_INF = float("inf")


def _kernel(name: str, dtype):
    """The compiled function `name` for `dtype`, or None (no Numba, or the NumPy backend is chosen)."""
    return kernel_for(_SOURCE, name, np, dtype, MIN_ELEMENTS)


def run_pass(fn, n: int, args: tuple, least: int | None = None) -> None:
    """fn(*args, start, stop) over a flat pass of n values: split over the threads from `least` values (SPLIT's
    split_min by default; FUSED's for the jit's fused loops and the optimizers' one-pass updates), else one direct
    call (0.3 us, against 2.8 through the pool's launcher)."""
    if n >= (SPLIT["split_min"] if least is None else least):
        parallel.run_kernel(fn, parallel.chunks(n), args)
    else:
        fn(*args, 0, n)


def float_arrays(xp, *arrays) -> bool:
    """Whether the compiled passes take these arrays: NumPy arrays of one shape and of one dtype, float32 or float64
    (checked in a loop, not all() over a generator: this runs on every small relu_backward)."""
    if xp is not np:
        return False
    a = arrays[0]
    dtype = getattr(a, "dtype", None)
    if dtype is not _FLOAT32 and dtype is not _FLOAT64 and dtype not in (_FLOAT32, _FLOAT64):
        return False
    for t in arrays:
        if type(t) is not np.ndarray or (t.dtype is not dtype and t.dtype != dtype) or t.shape != a.shape:
            return False
    return True


def relu(xp, x, into=None):
    """np.maximum(x, 0) in one compiled pass (into a C-contiguous `into` of x's shape and dtype), or None where the
    NumPy kernel must run. Worth it from MIN_ELEMENTS values: below, NumPy's one call costs less (relu's kernels in
    ops/elementwise.py check the size before they call this)."""
    if not float_arrays(xp, x):
        return None
    fn = _kernel("relu_forward", x.dtype)
    if fn is None:
        return None
    note("relu", "compiled pass")
    out = np.empty(x.shape, x.dtype) if into is None else into
    # ravel: a view of C-contiguous data, else a C-ordered copy
    run_pass(fn, x.size, (x.ravel(), out.reshape(-1)))
    return out


def clamp(xp, x, low=None, high=None):
    """x.clip(low, high) (np.maximum(x, low) or np.minimum(x, high) where one bound is None) in one compiled pass,
    the same values; None where the NumPy kernel must run (a bound that is NaN or beyond x's dtype's range, or
    what `relu` declines). Worth it where it splits, from SPLIT's split_min values (the op checks the size)."""
    limit = _LARGEST.get(x.dtype) if xp is np and type(x) is np.ndarray else None
    if limit is None or (low is None and high is None):
        return None
    bounds = [0.0, 0.0]
    for k, bound in enumerate((low, high)):
        if bound is not None:
            value = float(bound)
            if not -limit <= value <= limit and abs(value) != _INF:
                return None  # NaN everywhere, or a bound NumPy's cast would refuse: its kernel says what it says
            bounds[k] = float(x.dtype.type(value))  # rounded to x's dtype, carried as a float (the pool's scalar)
    fn = _kernel("clamp_forward", x.dtype)
    if fn is None:
        return None
    if listening[0]:
        note("clamp", "compiled pass")
    out = np.empty(x.shape, x.dtype)
    mode = 0 if low is not None and high is not None else 1 if high is None else 2
    run_pass(fn, x.size, (x.ravel(), out.reshape(-1), bounds[0], bounds[1], mode))
    return out


def relu_backward(xp, g, out, into=None):
    """g where out > 0 else 0 in one pass (into a C-contiguous `into` of g's shape and dtype, which may be g
    itself), or None where the NumPy kernel must run."""
    dtype = getattr(g, "dtype", None)
    if not ((dtype is _FLOAT32 or dtype is _FLOAT64) and type(g) is np.ndarray and type(out) is np.ndarray
            and out.dtype is dtype and g.shape == out.shape and xp is np) and not float_arrays(xp, g, out):
        return None  # (the common case checked inline: this runs on every relu's backward, most of them small)
    fn = _kernel("relu_backward", dtype)
    if fn is None:
        return None
    if listening[0]:
        note("relu_backward", "compiled pass")
    gx = np.empty(g.shape, dtype) if into is None else into
    n = g.size
    if n < SPLIT["split_min"]:  # _run inline: most relu gradients are small
        fn(g.ravel(), out.ravel(), gx.reshape(-1), 0, n)
    else:
        parallel.run_kernel(fn, parallel.chunks(n), (g.ravel(), out.ravel(), gx.reshape(-1)))
    return gx


def binary(name: str, a, b, out=None):
    """a (name) b for `name` in BINARY_OPS, split over the threads, into `out` (a C-contiguous array of their shape
    and dtype, which may be a or b) or a new array; None where NumPy's ufunc should run instead: fewer than SPLIT's
    add_sum_split_min values, operands of other shapes or dtypes (broadcasting, promotion), non-contiguous ones, or
    no Numba."""
    if (type(a) is not np.ndarray or type(b) is not np.ndarray or a.size < SPLIT["add_sum_split_min"]
            or a.shape != b.shape
            or a.dtype != b.dtype or a.dtype not in (_FLOAT32, _FLOAT64) or not a.flags.c_contiguous
            or not b.flags.c_contiguous):
        return None
    if out is not None and (type(out) is not np.ndarray or out.shape != a.shape or out.dtype != a.dtype
                            or not out.flags.c_contiguous):
        return None
    fn = _kernel("same_shape", a.dtype)
    if fn is None:
        return None
    note(name, "compiled pass")
    if out is None:
        out = np.empty(a.shape, a.dtype)
    parallel.run_kernel(fn, parallel.chunks(a.size), (a.reshape(-1), b.reshape(-1), out.reshape(-1),
                                                     BINARY_OPS[name][1]))
    return out


def leading_sum(x, dims: int):
    """x summed over its first `dims` dims (add.reduce's values bit for bit), the columns split over the threads; or
    None where NumPy's reduce should run: fewer than SPLIT's add_sum_split_min values or 32 columns (a thread's 16 at
    least), data not C-contiguous float32/float64, or no Numba."""
    if (type(x) is not np.ndarray or x.size < SPLIT["add_sum_split_min"] or x.dtype not in (_FLOAT32, _FLOAT64)
            or not x.flags.c_contiguous or not 0 < dims < x.ndim):
        return None
    rows = 1
    for d in x.shape[:dims]:
        rows *= d
    columns = x.size // rows
    if columns < 32:
        return None
    fn = _kernel("leading_sum", x.dtype)
    if fn is None:
        return None
    note("sum", "compiled columns")
    out = np.empty(x.shape[dims:], x.dtype)
    parallel.run_kernel(fn, parallel.chunks(columns, grain=16), (x.reshape(rows, columns), out.reshape(-1)))
    return out
