"""Ember's own float32 GEMM: operands packed for the micro-kernel (sgemm_microkernel.py: its AVX-512 or AVX2
block), the blocks walked by a compiled (Numba) driver, split over the batch threads.

The driver reads a row-major A in place and packs other layouts (and a last partial row panel) into
MR-row panels, k-major, rows zero-padded; it packs B's NR-column panels when its columns are strided (a
transposed weight, copied by the micro-kernel module's 16 x 16 transposing copy) or many row panels reuse
them. K runs in blocks of KC: every output value is the
micro-kernel's in-order sum over each block, the blocks added in order, so a row's value does not depend on
how the rows or columns were split over threads or calls (OpenBLAS's results do).
"""

from __future__ import annotations

import threading

import numpy as np

from ember.kernels import background, parallel
from ember.kernels.numba_loader import numba_available
from ember.kernels.sgemm_microkernel import MR, NR, microkernel_address, transpose_address

KC = 512  # K block: an 8 x 512 A panel is 16 KB, a 512 x 32 B panel 64 KB

SOURCE = f'''
import numpy as np
from numba import njit

from ember.kernels.sgemm_intrinsics import call_driver, call_microkernel, call_transpose, float32_at

MR, NR, KC = {MR}, {NR}, {KC}


def sgemm_chunk(drv, ukr, tr, a, b, c, bias, accumulate, axis, lo, hi):
    # the product of arrays a @ b into c on one chunk of a split (parallel.run_kernel): batch entries [lo, hi)
    # (axis 0; [0, batch) is the whole product), or MR-row panels (1) or NR-column panels (2) [lo, hi) of every
    # batch entry
    b_lo, b_hi, r_lo, r_hi, j_lo, j_hi = _chunk_ranges(c, axis, lo, hi)
    _arrays(drv, ukr, tr, a, b, c, bias, accumulate, b_lo, b_hi, r_lo, r_hi, j_lo, j_hi)


def sgemm_affine_chunk(drv, ukr, tr, a, b, c, bias, accumulate, axis, scale, shift, bounds, mode, lo, hi):
    # sgemm_chunk, then each value v of the chunk's part of c becomes v * scale[row] + shift[row], the product and the
    # sum each rounded (channel_affine's values), mode 2 then through relu's select, mode 3 clipped to bounds (lo, hi)
    # as clip does (max then min, NaN kept): a pointwise convolution and its eval batch norm (ops/conv_affine.py)
    b_lo, b_hi, r_lo, r_hi, j_lo, j_hi = _chunk_ranges(c, axis, lo, hi)
    _arrays(drv, ukr, tr, a, b, c, bias, accumulate, b_lo, b_hi, r_lo, r_hi, j_lo, j_hi)
    C = float32_at(c.ctypes.data)  # c's last axis is contiguous: unit steps, so the loops vectorise
    scb, scm = c.strides[0] // 4, c.strides[1] // 4
    z = np.float32(0)
    low, high = bounds[0], bounds[1]
    for i in range(b_lo, b_hi):
        for r in range(r_lo, r_hi):
            s = scale[r]
            h = shift[r]
            at = i * scb + r * scm
            if mode == 1:
                for j in range(j_lo, j_hi):
                    C[at + j] = C[at + j] * s + h
            elif mode == 2:
                for j in range(j_lo, j_hi):
                    v = C[at + j] * s + h
                    C[at + j] = v if (v > z or v != v) else z
            else:
                for j in range(j_lo, j_hi):
                    v = C[at + j] * s + h
                    v = v if (v > low or v != v) else low
                    C[at + j] = v if (v < high or v != v) else high


@njit(inline="always")
def _chunk_ranges(c, axis, lo, hi):
    # (b_lo, b_hi, r_lo, r_hi, j_lo, j_hi) of chunk [lo, hi) of a split along `axis` (see sgemm_chunk)
    b_lo, b_hi, r_lo, r_hi, j_lo, j_hi = 0, c.shape[0], 0, c.shape[1], 0, c.shape[2]
    if axis == 0:
        b_lo, b_hi = lo, hi
    elif axis == 1:
        r_lo, r_hi = lo * MR, min(hi * MR, c.shape[1])
    else:
        j_lo, j_hi = lo * NR, min(hi * NR, c.shape[2])
    return b_lo, b_hi, r_lo, r_hi, j_lo, j_hi


@njit(inline="always")
def _arrays(drv, ukr, tr, a, b, c, bias, accumulate, b_lo, b_hi, r_lo, r_hi, j_lo, j_hi):
    # the driver (its C entry point at `drv`) on (B, M, K) @ (B, K, N) -> (B, M, N) float32 arrays (+ a contiguous
    # (N,) bias row unless it is empty): their addresses and strides read here, where they cost nothing (NumPy's
    # `ctypes.data` took 0.8 us each from Python)
    call_driver(drv, ukr, tr, a.ctypes.data, a.strides[0] // 4, a.strides[1] // 4, a.strides[2] // 4, b.ctypes.data,
                b.strides[0] // 4, b.strides[1] // 4, b.strides[2] // 4, c.ctypes.data, c.strides[0] // 4,
                c.strides[1] // 4, a.shape[2], accumulate, bias.ctypes.data if bias.size else 0, b_lo, b_hi, r_lo,
                r_hi, j_lo, j_hi)


def sgemm_entry(ukr, tr, a, sab, sam, sak, b, sbb, sbk, sbn, c, scb, scm, k_len, accumulate, bias, b_lo, b_hi, r_lo,
                r_hi, j_lo, j_hi):
    # The driver, compiled as a C entry point (driver_address) with every argument an int64: every other kernel calls
    # it through that address, so LLVM optimises its code once (about 1 s on an empty kernel cache) rather than again
    # inside each kernel built on it. C[i, r, j] (+)= sum_k A[i, r, k] B[i, k, j] for batch entries [b_lo, b_hi),
    # rows [r_lo, r_hi), columns [j_lo, j_hi): a, b, c addresses of float32 values, strides in elements, C's columns
    # contiguous. K runs in blocks of KC, so a block's panels stay in the core's L2 cache. An A whose rows or columns
    # are contiguous (row-major, or transposed as a weight gradient's) is read in place through the micro-kernel's
    # strides but for a last partial panel (whose missing rows must read as zeros); other layouts are packed. Packing
    # a transposed A cost more than the product (a 1600 x 512 by 1600 x 64 gradient: 92 against 240 GFLOP/s).
    blocks = (r_hi - r_lo + MR - 1) // MR
    kc_max = min(k_len, KC)
    in_place = sak == 1 or sam == 1  # rows or columns contiguous: the micro-kernel's strided A reads
    apack = np.empty(max(blocks * kc_max * MR, 1), np.float32)
    bpack = np.empty(max(kc_max * NR, 1), np.float32)
    pack_b = sbn != 1 or blocks >= 4
    A = float32_at(a)
    B = float32_at(b)
    ap = apack.ctypes.data
    for i in range(b_lo, b_hi):
        for k0 in range(0, max(k_len, 1), KC):
            kc = min(KC, k_len - k0)
            add = 1 if accumulate or k0 > 0 else (2 if bias else 0)  # the micro-kernel's acc (2: bias + sums)
            base = i * sab + k0 * sak
            full = (r_hi - r_lo) // MR if in_place else 0  # panels read in place
            _pack_a(A, apack, base, sam, sak, r_lo + full * MR, r_hi, blocks - full, kc)
            for j0 in range(j_lo, j_hi, NR):
                width = min(NR, j_hi - j0)
                if pack_b:
                    _pack_b(B, b, bpack, i * sbb + k0 * sbk + j0 * sbn, sbk, sbn, kc, width, tr)
                    bp, ldb = bpack.ctypes.data, NR
                else:
                    bp, ldb = b + 4 * (i * sbb + k0 * sbk + j0), sbk
                for blk in range(blocks):
                    row = r_lo + blk * MR
                    if blk < full:
                        ablk, ask, asr = a + 4 * (base + row * sam), sak, sam
                    else:
                        ablk, ask, asr = ap + 4 * (blk - full) * kc * MR, MR, 1
                    call_microkernel(ukr, kc, ablk, ask, asr, bp, ldb, c + 4 * (i * scb + row * scm + j0), scm, width,
                                     min(MR, r_hi - row), add, bias + 4 * j0 if bias else 0)


@njit(inline="always")
def _pack_a(A, apack, base, sam, sak, r_lo, r_hi, blocks, kc):
    # rows [r_lo, r_hi) of A's K block at `base` as MR-row panels, k-major, rows past r_hi zero; walked
    # along A's smaller stride (a transposed A, as a weight gradient's, is read down its rows)
    for blk in range(blocks):
        dst = blk * kc * MR
        live = min(MR, r_hi - (r_lo + blk * MR))
        src = base + (r_lo + blk * MR) * sam
        if sam < sak:
            for k in range(kc):
                for r in range(live):
                    apack[dst + k * MR + r] = A[src + k * sak + r * sam]
                for r in range(live, MR):
                    apack[dst + k * MR + r] = 0
        else:
            for r in range(live):
                for k in range(kc):
                    apack[dst + k * MR + r] = A[src + r * sam + k * sak]
            for r in range(live, MR):
                for k in range(kc):
                    apack[dst + k * MR + r] = 0


@njit(inline="always")
def _pack_b(B, b, bpack, base, sbk, sbn, kc, width, tr):
    # a (kc, width) panel of B at `base` into rows of NR, walking B along its smaller stride; a transposed B
    # (its K axis contiguous) goes by 16 x 16 blocks through the transposing copy `tr`, the rest one by one
    if sbn <= sbk:
        for k in range(kc):
            src = base + k * sbk
            for j in range(width):
                bpack[k * NR + j] = B[src + j * sbn]
        return
    j_full = width // 16 * 16 if sbk == 1 and tr != 0 else 0
    k_full = kc // 16 * 16 if j_full else 0
    dst = bpack.ctypes.data
    for j in range(0, j_full, 16):
        for k in range(0, k_full, 16):
            call_transpose(tr, b + 4 * (base + j * sbn + k), sbn, dst + 4 * (k * NR + j), NR)
    for j in range(width):
        src = base + j * sbn
        for k in range(k_full if j < j_full else 0, kc):
            bpack[k * NR + j] = B[src + k * sbk]


'''

# sgemm_rows_packed(M, N, K, a, lda, bp, b, ldb, c, ldc): C = A B for row-major float32 at addresses a, b, c with
# B packed once (pack_rows) for many products: a recurrent time loop's weight, the same at every step, which the
# driver packed again at every call; one packed copy serves every thread's part of the batch. For compiled loops
# that paste this source after their own imports (`njit`, `np`); blas.SGEMM_ROWS_SOURCE has the same name on
# OpenBLAS (b and ldb read there, bp not). Each product sums as the driver does (sgemm), so the values are the
# driver's. The micro-kernel's address is a constant of the loop, so such a loop is compiled once per process.
ROWS_SOURCE = f'''
from ember.kernels.sgemm_intrinsics import call_microkernel as _call_microkernel
from ember.kernels.sgemm_intrinsics import float32_at as _float32_at
from ember.kernels.sgemm_microkernel import microkernel_address as _microkernel_address

_MICROKERNEL = _microkernel_address()
_MR, _NR, _KC = {MR}, {NR}, {KC}


@njit(inline="always")
def sgemm_rows_packed(M, N, K, a, lda, bp, b, ldb, c, ldc):
    # C = A B with B packed by pack_rows (b and ldb unused): A's whole MR-row panels read in place, its last
    # partial one copied with zero rows (the micro-kernel reads MR rows), as the driver does
    panels = (N + _NR - 1) // _NR
    full = M // _MR
    tail = M - full * _MR
    apack = np.zeros(_MR * _KC if tail else 1, np.float32)
    A = _float32_at(a)
    for kb in range(max((K + _KC - 1) // _KC, 1)):
        k0 = kb * _KC
        kc = min(_KC, K - k0)
        for k in range(kc):
            for r in range(tail):
                apack[k * _MR + r] = A[(full * _MR + r) * lda + k0 + k]
        for j in range(panels):
            width = min(_NR, N - j * _NR)
            panel = bp.ctypes.data + 4 * (k0 * panels + j * kc) * _NR
            for blk in range(full):
                _call_microkernel(_MICROKERNEL, kc, a + 4 * (blk * _MR * lda + k0), 1, lda, panel, _NR,
                                  c + 4 * (blk * _MR * ldc + j * _NR), ldc, width, _MR, 1 if kb else 0, 0)
            if tail:
                _call_microkernel(_MICROKERNEL, kc, apack.ctypes.data, _MR, 1, panel, _NR,
                                  c + 4 * (full * _MR * ldc + j * _NR), ldc, width, tail, 1 if kb else 0, 0)
'''


def pack_rows(b: np.ndarray) -> np.ndarray:
    """A (K, N) float32 B as sgemm_rows_packed reads it: its K in blocks of KC rows (the last shorter), each
    block's NR-column panels one after another, each panel's rows NR values apart, the columns past N zero."""
    k, n = b.shape
    panels, whole = -(-n // NR), n // NR
    out = np.zeros(max(k, 1) * panels * NR, np.float32)
    for k0 in range(0, k, KC):
        kc = min(KC, k - k0)
        block = out[k0 * panels * NR:(k0 + kc) * panels * NR].reshape(panels, kc, NR)
        block[:whole] = b[k0:k0 + kc, :whole * NR].reshape(kc, whole, NR).transpose(1, 0, 2)
        if whole < panels:
            block[whole, :, :n - whole * NR] = b[k0:k0 + kc, whole * NR:]
    return out


_drivers: dict = {}
_lock = threading.RLock()  # held while the driver's entry point or a chunk kernel compiles


def driver_address() -> int:
    """The address of the GEMM driver's C entry point (sgemm_entry, its arguments all int64), which every compiled
    kernel built on the driver calls through sgemm_intrinsics.call_driver (this module's chunk kernels too) instead
    of linking it: a kernel that links the driver has LLVM optimise the driver's code again inside it, 1.5-5 s a
    kernel while the kernel cache is empty. 0 where Numba or the micro-kernel is missing."""
    if "entry" not in _drivers:
        _serve_while_compiling()
        with _lock:
            if "entry" not in _drivers:
                try:
                    _drivers["entry"] = _entry() if microkernel_address() and numba_available() else (0, None)
                except (background.NotCompiledYet, background.ClaimedElsewhere):  # not cached: asked again later
                    raise
                except Exception:  # noqa: BLE001 - a Numba that cannot build it: the callers take their other paths
                    _drivers["entry"] = (0, None)
    return _drivers["entry"][0]


def _entry() -> tuple:
    """(address, CFunc) of sgemm_entry as a C entry point, compiled once (or loaded from the kernel cache)."""
    from numba import types
    from numba.core.ccallback import CFunc

    from ember.kernels import cache
    from ember.kernels.numba_loader import numba_cache_path

    module = cache.load_source(SOURCE)
    signature = ((types.int64,) * 22, types.void)
    entry = CFunc(module.sgemm_entry, signature, locals={}, options={"error_model": "numpy"})
    entry.enable_caching()
    if entry._cache.cache_path != numba_cache_path(module):  # a locator picked another folder: never load from there
        entry = CFunc(module.sgemm_entry, signature, locals={}, options={"error_model": "numpy"})
    # claimed while it compiles, as kernels are: where ahead.py's child compiles a step, the process that meets it
    # second loads it once on disk rather than compile it again (about 1 s, in the training process's first step)
    background.gated_entry_point(entry).compile()
    return entry.address, entry  # the CFunc keeps its code alive


def _serve_while_compiling() -> None:
    """Where an op is served while kernels compile (ember.kernels.background) and the driver's entry point is
    neither compiled nor on disk: compile it in the background, raising NotCompiledYet until it is."""
    if not background.served() or not microkernel_address():  # no micro-kernel block: nothing to compile
        return
    if background.compiling("sgemm entry"):  # handed over already: no need to look at the disk again
        background.serve_or_compile("sgemm entry", None, first=True)
    from numba import types

    from ember.kernels import cache

    module = cache.load_source(SOURCE)
    if not background.function_loadable(module.sgemm_entry, types.void(*(types.int64,) * 22)):
        # first: every kernel built on it calls it (and, held in ahead.py's child, it would come last)
        background.serve_or_compile("sgemm entry", driver_address, first=True)


def _chunk_signature(*extra):
    """sgemm_chunk's signature, with `extra` argument types before the chunk's (lo, hi): one for every layout of
    the arrays, where Numba would compile one per C/F/A mix."""
    from numba import types

    read, write = (types.Array(types.float32, 3, "A", readonly=ro) for ro in (True, False))
    row = types.Array(types.float32, 1, "C", readonly=True)
    i64 = types.int64
    return types.void(i64, i64, i64, read, read, write, row, i64, i64, *extra, i64, i64)


def _chunk_kernel():
    """sgemm_chunk, the kernel of every product (a split's chunks, or the whole product as one chunk)."""
    if "chunk" not in _drivers:
        from ember.kernels.numba_loader import compile_source

        with _lock:
            if "chunk" not in _drivers:
                _drivers["chunk"] = compile_source(SOURCE, "sgemm_chunk", signature=_chunk_signature())
    return _drivers["chunk"]


def _affine_chunk_kernel():
    """sgemm_affine_chunk, compiled at its first use."""
    if "affine" not in _drivers:
        from numba import types

        from ember.kernels.numba_loader import compile_source

        row = types.Array(types.float32, 1, "C", readonly=True)
        with _lock:
            if "affine" not in _drivers:
                signature = _chunk_signature(row, row, row, types.int64)
                _drivers["affine"] = compile_source(SOURCE, "sgemm_affine_chunk", signature=signature)
    return _drivers["affine"]


_AFFINE_MODES = {None: 1, "relu": 2, "clamp": 3}  # sgemm_affine_chunk's mode by activation


def sgemm(a: np.ndarray, b: np.ndarray, out: np.ndarray, accumulate: bool = False, bias=None,
          affine=None) -> np.ndarray:
    """out (+)= a @ b for float32 (M, K) @ (K, N) or (B, M, K) @ (B, K, N), any strides (out's last axis
    contiguous), on the micro-kernel; large products split over the batch threads. Needs driver_address(). `bias`: a
    float32 (N,) row added to every row of the product (not with `accumulate`), with the bits of adding the
    product into an output prefilled with it. `affine`: (scale, shift, activation), float32 (M,) rows and None,
    ("relu",) or ("clamp", lo, hi): each output row r then becomes row * scale[r] + shift[r] and goes through the
    activation, with channel_affine's values, while it is in cache."""
    if affine is not None:
        if accumulate or bias is not None:  # the epilogue is applied to each chunk's first and only product
            raise ValueError("sgemm: an affine epilogue cannot be combined with accumulate or a bias row")
        return _sgemm_affine(a, b, out, affine)
    drv, ukr, tr, result = driver_address(), microkernel_address(), transpose_address(), out
    if bias is None:
        bias = _NO_BIAS
    elif accumulate:
        raise ValueError("sgemm: a bias row and accumulate cannot be combined")
    else:
        bias = np.ascontiguousarray(bias, np.float32)
    if a.ndim == 2:
        a, b, out = a[None], b[None], out[None]
    batch, m, k_len = a.shape
    n = b.shape[2]
    acc = int(accumulate)
    flops = 2.0 * batch * m * n * k_len
    if not parallel.worth_splitting(flops, compiled=True):
        _chunk_kernel()(drv, ukr, tr, a, b, out, bias, acc, 0, 0, batch)
        return result
    axis, count = _split_axis(b, batch, m, n)
    # strided: one native task for every layout of a, b and out, as sgemm_chunk is compiled for any
    parallel.run_kernel(_chunk_kernel(), parallel.chunks(count, flops, compiled=True),
                        (drv, ukr, tr, a, b, out, bias, acc, axis), strided=True)
    return result


def _split_axis(b, batch: int, m: int, n: int) -> tuple:
    """(axis, chunk count) a split of a (batch, m, k) @ b (batch, k, n) product goes by (see sgemm_chunk)."""
    if batch >= parallel.get_num_threads():
        return 0, batch
    if m >= 2 * MR * parallel.get_num_threads() and (b.strides[2] == 4 or n < 2 * NR * parallel.get_num_threads()):
        # whole row panels per thread; a strided B is split by columns instead, so each thread packs only its part
        return 1, -(-m // MR)
    return 2, -(-n // NR)


_NO_BIAS = np.empty(0, np.float32)  # sgemm_chunk's bias row when there is none


def _sgemm_affine(a, b, out, affine):
    """sgemm with its `affine` epilogue: sgemm_affine_chunk on each chunk of the split sgemm would make."""
    scale, shift, activation = affine
    mode = _AFFINE_MODES[None if activation is None else activation[0]]
    bounds = np.array(activation[1:3] if mode == 3 else (0, 0), np.float32)
    result = out
    if a.ndim == 2:
        a, b, out = a[None], b[None], out[None]
    batch, m, k_len = a.shape
    n = b.shape[2]
    flops = 2.0 * batch * m * n * k_len
    head = (driver_address(), microkernel_address(), transpose_address(), a, b, out, _NO_BIAS, 0)
    tail = (np.ascontiguousarray(scale, np.float32), np.ascontiguousarray(shift, np.float32), bounds, mode)
    if not parallel.worth_splitting(flops, compiled=True):
        _affine_chunk_kernel()(*head, 0, *tail, 0, batch)
        return result
    axis, count = _split_axis(b, batch, m, n)
    parallel.run_kernel(_affine_chunk_kernel(), parallel.chunks(count, flops, compiled=True), head + (axis,) + tail,
                             strided=True)
    return result
