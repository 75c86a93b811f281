"""2-D convolution (NCHW) and its transpose, by im2col + one batched GEMM per call.

conv2d's input gradient is conv_transpose2d and its weight gradient is conv2d_weight_grad, so
every gradient rule is itself an Ember op (and second derivatives work). float16/bfloat16 operands
are multiplied and summed in float32 and each result is rounded once.
"""

from __future__ import annotations

import numpy as np

from ember.errors import ShapeError, fmt_shape
from ember.ops import batch_threads, conv_rows, depthwise, depthwise_compiled, direct_conv, gemm, winograd
from ember.ops._rules import binary_dtype, refuse_bool, spec
from ember.ops.channel_affine import channel_affine
from ember.ops.conv_compiled import col2im_available, col2im_compiled, im2col_compiled
from ember.ops.dispatch import apply
from ember.ops.opmath import rounded, upcast
from ember.ops.registry import Op, register


def _pair(v, name):
    if isinstance(v, int):
        return (v, v)
    v = tuple(v)
    if len(v) != 2:
        raise ValueError(f"conv2d: {name} must be an int or a pair, got {v}")
    return v


def conv_out_size(size, k, stride, pad_lo, pad_hi, dil):
    """Output length of a convolution along one dim."""
    if size is None:
        return None
    return (size + pad_lo + pad_hi - dil * (k - 1) - 1) // stride + 1


def _as_strided(xp, x, shape, strides):
    if hasattr(xp, "lib") and hasattr(xp.lib, "stride_tricks"):
        return xp.lib.stride_tricks.as_strided(x, shape=shape, strides=strides)
    raise NotImplementedError("as_strided is not available for this backend")


def _pad(xp, x, pad):
    pt, pb, pl, pr = pad
    if pt or pb or pl or pr:
        return xp.pad(x, ((0, 0), (0, 0), (pt, pb), (pl, pr)))
    return x


def _windows(xp, x, kh, kw, stride, pad, dil, order):
    """The padded input's sliding windows as a strided view with axes named by `order` (a permutation
    of "nckpoq": sample, channel, kernel row, kernel column, output row, output column), and (OH, OW)."""
    x = _pad(xp, x, pad)
    n, c, h, w = x.shape
    sh, sw = stride
    dh, dw = dil
    oh = (h - dh * (kh - 1) - 1) // sh + 1
    ow = (w - dw * (kw - 1) - 1) // sw + 1
    s_n, s_c, s_h, s_w = x.strides
    axes = {"n": (n, s_n), "c": (c, s_c), "k": (kh, s_h * dh), "p": (kw, s_w * dw), "o": (oh, s_h * sh),
            "q": (ow, s_w * sw)}
    win = _as_strided(xp, x, tuple(axes[a][0] for a in order), tuple(axes[a][1] for a in order))
    return win, oh, ow


def _out_hw(x, kh, kw, stride, pad, dil):
    h, w = x.shape[2] + pad[0] + pad[1], x.shape[3] + pad[2] + pad[3]
    return (h - dil[0] * (kh - 1) - 1) // stride[0] + 1, (w - dil[1] * (kw - 1) - 1) // stride[1] + 1


def im2col(xp, x, kh, kw, stride, pad, dil, groups, out=None):
    """Patches of x as a (groups, C/groups*kh*kw, N*OH*OW) matrix, and (OH, OW) (`out`: a flat buffer the
    compiled kernel may write them into)."""
    n, c = x.shape[:2]
    oh, ow = _out_hw(x, kh, kw, stride, pad, dil)
    cols = im2col_compiled(xp, x, kh, kw, stride, pad, dil, oh, ow, per_sample=False, out=out)
    if cols is None:
        win, oh, ow = _windows(xp, x, kh, kw, stride, pad, dil, "ckpnoq")
        cols = xp.ascontiguousarray(win)
    return cols.reshape(groups, (c // groups) * kh * kw, n * oh * ow), oh, ow


def col2im(xp, cols, n, c, h, w, kh, kw, oh, ow, stride, pad, dil, out=None):
    """Sum (C, kh, kw, N, OH, OW) patches back into an (N, C, h, w) image (the adjoint of im2col), into `out`
    (a C-contiguous array of that shape) when given."""
    img = col2im_compiled(xp, cols, n, c, h, w, kh, kw, oh, ow, stride, pad, dil, out=out)
    if img is not None:
        return img
    pt, pb, pl, pr = pad
    sh, sw = stride
    dh, dw = dil
    img = xp.zeros((c, n, h + pt + pb, w + pl + pr), dtype=cols.dtype)
    cols = cols.reshape(c, kh, kw, n, oh, ow)
    for i in range(kh):
        r0 = i * dh
        for j in range(kw):
            c0 = j * dw
            img[:, :, r0 : r0 + sh * (oh - 1) + 1 : sh, c0 : c0 + sw * (ow - 1) + 1 : sw] += cols[:, i, j]
    img = img[:, :, pt : pt + h, pl : pl + w].transpose(1, 0, 2, 3)
    if out is None:
        return xp.ascontiguousarray(img)
    out[...] = img
    return out


def im2col_per_sample(xp, x, kh, kw, stride, pad, dil, groups, out=None):
    """Patches as (N, groups, C/groups*kh*kw, OH*OW): the product with the weight is then NCHW already
    (`out`: a flat buffer the compiled kernel may write them into)."""
    n, c = x.shape[:2]
    oh, ow = _out_hw(x, kh, kw, stride, pad, dil)
    cols = im2col_compiled(xp, x, kh, kw, stride, pad, dil, oh, ow, per_sample=True, out=out)
    if cols is None:
        win, oh, ow = _windows(xp, x, kh, kw, stride, pad, dil, "nckpoq")
        cols = xp.ascontiguousarray(win)
    return cols.reshape(n, groups, (c // groups) * kh * kw, oh * ow), oh, ow


def _small_weight(w) -> bool:
    """Whether a convolution's weight is small enough that per-sample GEMMs beat one big GEMM."""
    return w.size <= 4096


def _gemm(xp, a, b, out=None):
    """Per-group a[g] @ b[g] (into `out`, a flat buffer of that many values, when given). One group is a plain
    2-D product, which BLAS runs fastest."""
    if out is not None:
        out = out.reshape(a.shape[0], a.shape[1], b.shape[2])
    if a.shape[0] == 1:
        return gemm.matmul(a[0], b[0], out=None if out is None else out[0], xp=xp)[None]
    return gemm.matmul(xp.ascontiguousarray(a), xp.ascontiguousarray(b), out=out, xp=xp)


def _check_conv(op, x, w, stride, pad, dil, groups, transposed=False):
    if len(x.shape) != 4:
        raise ShapeError(f"{op}: expected a 4-D input (N, C, H, W), got shape {fmt_shape(x.shape)}")
    if len(w.shape) != 4:
        raise ShapeError(f"{op}: expected a 4-D weight, got shape {fmt_shape(w.shape)}")
    if groups < 1:
        raise ValueError(f"{op}: groups must be positive, got {groups}")
    c = x.shape[1]
    if transposed:
        if w.shape[0] != c:
            raise ShapeError(
                f"{op}: input {fmt_shape(x.shape)} has {c} channels but weight {fmt_shape(w.shape)} expects {w.shape[0]}"
            )
    else:
        if c is not None and c != w.shape[1] * groups:
            raise ShapeError(
                f"{op}: input {fmt_shape(x.shape)} has {c} channels, but weight {fmt_shape(w.shape)} with "
                f"groups={groups} expects {w.shape[1] * groups}"
            )
        if w.shape[0] % groups:
            raise ShapeError(f"{op}: out_channels {w.shape[0]} is not divisible by groups={groups}")
    for s in stride:
        if s < 1:
            raise ValueError(f"{op}: stride must be positive, got {stride}")
    for d in dil:
        if d < 1:
            raise ValueError(f"{op}: dilation must be positive, got {dil}")


class Conv2dOp(Op):
    name = "conv2d"
    fresh_output = True
    grad_reads = {0: (1,), 1: (0,)}

    def infer(self, x, w, stride, padding, dilation, groups):
        _check_conv(self.name, x, w, stride, padding, dilation, groups)
        n, _, h, wd = x.shape
        kh, kw = w.shape[2], w.shape[3]
        oh = conv_out_size(h, kh, stride[0], padding[0], padding[1], dilation[0])
        ow = conv_out_size(wd, kw, stride[1], padding[2], padding[3], dilation[1])
        if (oh is not None and oh <= 0) or (ow is not None and ow <= 0):
            raise ShapeError(
                f"conv2d: input {fmt_shape(x.shape)} (padded by {padding}) is smaller than the dilated "
                f"kernel {fmt_shape(w.shape[2:])}"
            )
        return spec((n, w.shape[0], oh, ow), binary_dtype(x, w))

    def kernel(self, xp, x, w, stride, padding, dilation, groups):
        out_spec = self.infer(x, w, stride, padding, dilation, groups)
        dtype = out_spec.dtype
        x, w = upcast(x.astype(dtype, copy=False)), upcast(w.astype(dtype, copy=False))
        o, _, kh, kw = w.shape
        n = x.shape[0]
        if groups > 1 and w.shape[1] == 1:  # depthwise: compiled loops, or without Numba taps where they pay
            out = depthwise_compiled.forward(xp, x, w, stride, padding, dilation,
                                             *_out_hw(x, kh, kw, stride, padding, dilation))
            if out is None and depthwise.forward_pays(x.shape, stride, padding):
                out = depthwise.forward(xp, x, w, stride, padding, dilation)
            if out is not None:
                return rounded(out, dtype)
        wm = w.reshape(groups, o // groups, -1)
        h, wd = x.shape[2], x.shape[3]
        if pointwise_takes_batch(x, w, stride, padding):
            # A pointwise convolution is a GEMM on the input as it lies: (G, O/G, C/G) @ (N, G, C/G, H*W),
            # no patches copied; on small maps one GEMM over the whole batch (below) runs BLAS better. One product
            # per sample with the weight read in place (_per_sample_gemm), so Ember's GEMM takes them: MobileNetV2's
            # 1x1 layers at batch 1 took 1.17 ms in all against NumPy's broadcast matmul's 1.66 (2026-11-27).
            cols = x.reshape(n, groups, -1, h * wd)
            if xp is not np:
                return rounded(xp.matmul(wm, cols).reshape(n, o, h, wd), dtype)
            out = np.empty((n, groups, o // groups, h * wd), np.result_type(x, wm))
            return rounded(_per_sample_gemm(wm, cols, out).reshape(n, o, h, wd), dtype)
        if n == 1 and xp is np and batch_threads.workers() > 1 and _rows_pay(x, w, stride, padding, dilation):
            return rounded(_forward_by_rows(x, w, stride, padding, dilation, groups), dtype)
        if n == 1 and xp is np and _halves_pay(x, w, stride, padding, dilation, groups):
            return rounded(_forward_by_channel_halves(x, w, stride, padding, dilation), dtype)
        return rounded(_dense_forward(xp, x, w, stride, padding, dilation, groups), dtype)

    def vjp(self, ctx, g):
        return _conv_vjp(ctx, g, transposed=False)


_conv2d_op = register(Conv2dOp())


def pointwise_takes_batch(x, w, stride, padding) -> bool:
    """Whether conv2d runs this 1x1, stride-1, unpadded convolution as a GEMM on the input as it lies (a single sample,
    or maps of 256 pixels and more) rather than by patches."""
    return w.shape[2] == w.shape[3] == 1 and tuple(stride) == (1, 1) and not any(padding) \
        and (x.shape[0] == 1 or x.shape[2] * x.shape[3] >= 256)


def _dense_forward(xp, x, w, stride, padding, dilation, groups):
    """conv2d by the direct convolution (where direct_conv.applies), Winograd (3x3 stride-1 float32) or im2col +
    GEMM, in the arrays' dtype."""
    o, _, kh, kw = w.shape
    n = x.shape[0]
    wm = w.reshape(groups, o // groups, -1)
    if xp is np and direct_conv.applies(x.shape, w.shape, x.dtype, stride, padding, dilation, groups):
        return direct_conv.conv2d(x, w, stride[0], padding)
    if xp is np and winograd.applies(x.shape, w.shape, x.dtype, stride, padding, dilation, groups):
        return winograd.conv3x3(x, w, padding)
    if n > 1 and xp is np and batch_threads.workers() > 1:
        return _forward_split(x, wm, kh, kw, stride, padding, dilation, groups)
    if _small_weight(w):
        # Per-sample patches: (G, O/G, K) @ (N, G, K, L) is (N, G, O/G, L), NCHW with no
        # transposing copy; for small weights the GEMMs are memory-bound and this wins.
        cols, oh, ow = im2col_per_sample(xp, x, kh, kw, stride, padding, dilation, groups)
        if xp is not np:
            return xp.matmul(wm, cols).reshape(n, o, oh, ow)
        out = np.empty((n, groups, o // groups, oh * ow), np.result_type(x, wm))
        return _per_sample_gemm(wm, cols, out).reshape(n, o, oh, ow)
    # Large weights: one big GEMM per group runs BLAS far better than many per-sample ones.
    cols, oh, ow = im2col(xp, x, kh, kw, stride, padding, dilation, groups)
    out = _gemm(xp, wm, cols).reshape(o, n, oh, ow).transpose(1, 0, 2, 3)
    return xp.ascontiguousarray(out)


# A single sample's output rows are split over threads from 256 output pixels per channel: on smaller maps
# each band's GEMM is too narrow and both threads read the whole weight (ResNet-18's (1, 512, 7, 7) layer:
# 2.1 ms split against 1.7 with BLAS's threads on one GEMM).
_MIN_ROWS_SPLIT_PIXELS = 256


def _rows_pay(x, w, stride, padding, dilation) -> bool:
    oh, ow = _out_hw(x, w.shape[2], w.shape[3], stride, padding, dilation)
    if oh * ow < _MIN_ROWS_SPLIT_PIXELS or oh < 2:
        return False
    # Winograd's compiled kernel splits a sample's tile rows itself (winograd.conv3x3)
    return not (winograd.splits_tile_rows()
                and winograd.applies(x.shape, w.shape, x.dtype, stride, padding, dilation, 1))


def _forward_by_rows(x, w, stride, padding, dilation, groups):
    """conv2d of a single sample with its output rows split over the batch threads, each convolving the band
    of input rows its output rows read: the patches (or Winograd tiles) are made on every core, not on one
    while BLAS's threads wait. Where Ember's GEMM runs, the im2col bands are conv_rows' compiled kernel instead.
    ResNet-18's 7x7 stem at batch 1: see docs/architecture.md."""
    o, _, kh, kw = w.shape
    h = x.shape[2]
    oh, ow = _out_hw(x, kh, kw, stride, padding, dilation)
    if groups == 1 and x.dtype == w.dtype == np.float32 and conv_rows.available() \
            and not direct_conv.applies(x.shape, w.shape, x.dtype, stride, padding, dilation, groups) \
            and not winograd.applies(x.shape, w.shape, x.dtype, stride, padding, dilation, groups):
        return conv_rows.forward(x, w, stride, padding, dilation, oh, ow)  # the im2col bands below, compiled whole
    (sh, _), (dh, _), (pt, _, pl, pr) = stride, dilation, padding
    out = np.empty((1, o, oh, ow), np.result_type(x, w))
    planes = out.reshape(o, oh * ow)

    def band(a, b):
        lo, hi = a * sh - pt, (b - 1) * sh - pt + dh * (kh - 1) + 1  # input rows [lo, hi) feed rows [a, b)
        rows = x[:, :, max(lo, 0):min(hi, h)]
        pad = (max(0, -lo), max(0, hi - h), pl, pr)
        if groups > 1 or winograd.applies(rows.shape, w.shape, rows.dtype, stride, pad, dilation, groups) \
                or direct_conv.applies(rows.shape, w.shape, rows.dtype, stride, pad, dilation, groups):
            out[:, :, a:b] = _dense_forward(np, rows, w, stride, pad, dilation, groups)
            return
        # The band's patches go into this thread's reused workspace and its GEMM straight into its rows of the
        # output: fresh patch arrays, each the size of the last, made glibc map and fault in new pages on
        # every call (the 7x7 stem: 5.3 against 2.2 ms).
        size = x.shape[1] * kh * kw * (b - a) * ow
        cols, _, _ = im2col(np, rows, kh, kw, stride, pad, dilation, 1, out=batch_threads.workspace(size, rows.dtype))
        gemm.matmul(w.reshape(o, -1), cols[0], out=planes[:, a * ow:b * ow])

    batch_threads.run(band, oh, 2 * w.size * oh * ow)
    return out


# A single sample whose output maps are too small to split by rows (ResNet-18's 14x14 and 7x7 layers) is split by
# input channels instead: each half makes its patches and multiplies them by its columns of the weight, on a
# thread of its own, and the two partial outputs are added. So the patches are made on both cores, and each
# thread's GEMM runs single-threaded, which OpenBLAS does better on these short outputs than one two-thread GEMM:
# ResNet-18's (1, 256, 14, 14) by 3x3 went from 1.43 to 1.30 ms and its 3x3 stride-2 layers from 28x28 and 14x14
# from 0.82 to 0.73 and 0.85 to 0.79 ms (interleaved; PyTorch 1.06-1.13, 0.59-0.63, 0.67-0.68). Its (1, 512, 7, 7)
# layer, whose 9.4 MB weight makes the GEMMs bound by reading it, gained nothing (1.62 against 1.59 ms) and keeps
# one GEMM. Always two halves, on one thread or two, so the values do not depend on the thread count. Where Ember's
# GEMM runs, each half is conv_rows' compiled kernel (no Python on the helper thread, no wait for the GIL).
_HALVES_MIN_CHANNELS = 64
_HALVES_MIN_FLOPS = 10e6
_HALVES_MAX_WEIGHT_BYTES = 8 << 20


def _halves_pay(x, w, stride, padding, dilation, groups) -> bool:
    o, c, kh, kw = w.shape
    if groups != 1 or c < _HALVES_MIN_CHANNELS or w.nbytes > _HALVES_MAX_WEIGHT_BYTES or kh * kw == 1 \
            or _rows_pay(x, w, stride, padding, dilation):
        return False  # a 1x1 layer's patches are one strided copy: splitting it cost more than it gained
    oh, ow = _out_hw(x, kh, kw, stride, padding, dilation)
    if 2 * w.size * oh * ow < _HALVES_MIN_FLOPS:
        return False
    return not winograd.applies(x.shape, w.shape, x.dtype, stride, padding, dilation, groups)


def _forward_by_channel_halves(x, w, stride, padding, dilation):
    """conv2d of a single sample as the sum of two convolutions over halves of its input channels, one per
    batch thread (see _HALVES_MIN_CHANNELS)."""
    o, c, kh, kw = w.shape
    oh, ow = _out_hw(x, kh, kw, stride, padding, dilation)
    if x.dtype == w.dtype == np.float32 and conv_rows.available():
        return conv_rows.forward_by_channel_halves(x, w, stride, padding, dilation, oh, ow)  # below, compiled whole
    wm = w.reshape(o, -1)
    halves = ((0, c // 2), (c // 2, c))
    out = np.empty((2, o, oh * ow), np.result_type(x, w))

    def work(a, b):
        for k in range(a, b):
            lo, hi = halves[k]
            size = (hi - lo) * kh * kw * oh * ow
            cols, _, _ = im2col(np, x[:, lo:hi], kh, kw, stride, padding, dilation, 1,
                                out=batch_threads.workspace(size, x.dtype))
            # the half's weight columns as a strided view (BLAS reads it with the full row stride: no copy)
            gemm.matmul(wm[:, lo * kh * kw:hi * kh * kw], cols.reshape(-1, oh * ow), out=out[k])

    batch_threads.run(work, 2)
    return np.add(out[0], out[1], out=out[0]).reshape(1, o, oh, ow)


# Patches are made and multiplied a block of samples at a time, into each thread's reused workspace: a
# block small enough to stay in cache between im2col and its GEMM, and no fresh tens of megabytes whose
# pages fault in on every call. (32, 64, 32, 32) x (64, 64, 3, 3) forward: 21.5 -> 14.5 ms per thread.
_BLOCK_BYTES = 4 << 20


# conv_transpose2d's patches are summed back by col2im right after its GEMM writes them: blocks that stay in the
# core's cache between the two ran ResNet-20's stride-2 input gradients 14-20% faster than 4 MB ones.
_ADJOINT_BLOCK_BYTES = 1 << 20


def _blocks(a: int, b: int, per_sample_bytes: int, block_bytes: int = _BLOCK_BYTES):
    """[start, stop) ranges covering samples a..b, each a block whose patches fit block_bytes (at least one)."""
    step = max(1, block_bytes // max(per_sample_bytes, 1))
    return [(i, min(b, i + step)) for i in range(a, b, step)]


def _per_sample_gemm(wm, cols, out):
    """out = wm @ cols for a (G, O/G, K) weight and (N, G, K, L) patches: with one group as N products of the
    weight, read in place (a zero batch stride), so Ember's kernel can take them; NumPy's BLAS ran the 4-D
    broadcast as N small GEMMs of its own (LeNet-5's second layer, 32 samples: 0.17 against 0.07 ms)."""
    if wm.shape[0] != 1:
        return gemm.matmul(wm, cols, out=out)
    n, _, k, length = cols.shape
    return gemm.matmul(np.broadcast_to(wm[0], (n,) + wm.shape[1:]), cols.reshape(n, k, length),
                       out=out.reshape(n, wm.shape[1], length))


def _forward_split(x, wm, kh, kw, stride, padding, dilation, groups):
    """conv2d with the batch split over threads (batch_threads), each making its samples' patches and GEMMs."""
    n = x.shape[0]
    oh, ow = _out_hw(x, kh, kw, stride, padding, dilation)
    out = np.empty((n,) + wm.shape[:2] + (oh * ow,), np.result_type(x, wm))
    per_sample = x.shape[1] * kh * kw * oh * ow

    def chunk(a, b):
        for lo, hi in _blocks(a, b, per_sample * x.itemsize):
            buf = batch_threads.workspace((hi - lo) * per_sample, x.dtype)
            cols, _, _ = im2col_per_sample(np, x[lo:hi], kh, kw, stride, padding, dilation, groups, out=buf)
            _per_sample_gemm(wm, cols, out[lo:hi])

    batch_threads.run(chunk, n, 2 * wm.size * n * oh * ow)
    return out.reshape(n, -1, oh, ow)


# With few patch rows (an image layer's 1-3 input channels: 25-27 rows), one GEMM over the whole block is
# a skinny product that BLAS runs poorly; a GEMM per sample, summed, ran LeNet-5's first layer's weight
# gradient in 0.25 ms against 0.44 ms per thread. From about 144 rows the one large GEMM wins.
_PER_SAMPLE_WGRAD_ROWS = 32


def _weight_grad_split(x, g, kh, kw, stride, padding, dilation, groups):
    """conv2d_weight_grad as (G, K, O/G) partial products over batch chunks on threads, summed."""
    o = g.shape[1]
    per_sample = x.shape[1] * kh * kw * g.shape[2] * g.shape[3]
    per_sample_gemms = groups == 1 and x.shape[1] * kh * kw <= _PER_SAMPLE_WGRAD_ROWS

    def chunk(a, b):
        total = None
        for lo, hi in _blocks(a, b, per_sample * x.itemsize):
            buf = batch_threads.workspace((hi - lo) * per_sample, x.dtype)
            if per_sample_gemms:
                cols, _, _ = im2col_per_sample(np, x[lo:hi], kh, kw, stride, padding, dilation, 1, out=buf)
                gs = g[lo:hi].reshape(hi - lo, o, -1)
                part = gemm.matmul(gs, cols[:, 0].transpose(0, 2, 1)).sum(axis=0).T[None]  # (1, K, O)
            else:
                cols, _, _ = im2col(np, x[lo:hi], kh, kw, stride, padding, dilation, groups, out=buf)
                gm = np.ascontiguousarray(g[lo:hi].transpose(1, 0, 2, 3)).reshape(groups, o // groups, -1)
                part = _gemm(np, cols, gm.transpose(0, 2, 1))
            total = part if total is None else np.add(total, part, out=total)
        return total

    g_per_sample = g[:1].size  # O * OH * OW
    parts = batch_threads.run(chunk, x.shape[0], 2 * g_per_sample * x.shape[0] * (x.shape[1] // groups) * kh * kw)
    total = parts[0]
    for p in parts[1:]:
        total += p
    return total


class ConvTranspose2dOp(Op):
    """The adjoint of conv2d w.r.t. its input; weight is (C_in, C_out/groups, kh, kw)."""

    name = "conv_transpose2d"
    fresh_output = True
    grad_reads = {0: (1,), 1: (0,)}

    def infer(self, x, w, stride, padding, dilation, groups, out_hw):
        _check_conv(self.name, x, w, stride, padding, dilation, groups, transposed=True)
        if x.shape[1] is not None and x.shape[1] % groups:
            raise ShapeError(f"{self.name}: input channels {x.shape[1]} not divisible by groups={groups}")
        return spec((x.shape[0], w.shape[1] * groups) + tuple(out_hw), binary_dtype(x, w))

    def kernel(self, xp, x, w, stride, padding, dilation, groups, out_hw):
        out_spec = self.infer(x, w, stride, padding, dilation, groups, out_hw)
        dtype = out_spec.dtype
        x, w = upcast(x.astype(dtype, copy=False)), upcast(w.astype(dtype, copy=False))
        n, cin, h, wd = x.shape
        _, cg, kh, kw = w.shape
        if groups > 1 and cg == 1:  # the adjoint of a depthwise convolution
            gx = depthwise_compiled.input_grad(xp, x, w, groups, stride, padding, dilation, out_hw)
            if gx is not None:
                return rounded(gx, dtype)
        if xp is np and direct_conv.applies_transposed(x.shape, w.shape, x.dtype, stride, padding, dilation, groups):
            return rounded(direct_conv.input_grad_stride2(x, w, padding, out_hw), dtype)
        direct = _as_conv_padding(x.shape, w.shape, stride, padding, dilation, out_hw)
        # Both ways run the same GEMM; they differ in the patches copied: the direct convolution's im2col
        # reads Cin*kh*kw values per output pixel, col2im sums Cout*kh*kw per input pixel. A layer that
        # narrows and shrinks (LeNet's second) has far fewer of the latter.
        patches_direct = cin * kh * kw * n * out_hw[0] * out_hw[1]
        patches_col2im = cg * groups * kh * kw * n * h * wd
        flipped_shape = (cg * groups, cin // groups, kh, kw)
        if direct is not None and patches_col2im < patches_direct and col2im_available(xp, x.dtype, patches_col2im) \
                and not (xp is np and direct_conv.applies(x.shape, flipped_shape, x.dtype, (1, 1), direct, dilation,
                                                          groups)):  # it copies no patches
            direct = None
        if direct is not None:
            # Stride 1: a plain convolution with the flipped, transposed weight. One im2col and GEMM,
            # instead of a GEMM into kh*kw-times-larger columns and a col2im over every tap.
            wc = w.reshape(groups, cin // groups, cg, kh, kw).transpose(0, 2, 1, 3, 4)[..., ::-1, ::-1]
            wc = xp.ascontiguousarray(wc).reshape(flipped_shape)
            return rounded(_conv2d_op.kernel(xp, x, wc, (1, 1), direct, dilation, groups), dtype)
        wmt = xp.ascontiguousarray(w.reshape(groups, cin // groups, cg * kh * kw).transpose(0, 2, 1))
        out = xp.empty((n, cg * groups) + tuple(out_hw), x.dtype)
        per_sample = cg * groups * kh * kw * h * wd  # patch values per sample

        def part(a, b):  # samples a..b, a block at a time: a GEMM into their patches, summed into their images
            for lo, hi in _blocks(a, b, per_sample * x.itemsize, _ADJOINT_BLOCK_BYTES):
                xm = xp.ascontiguousarray(x[lo:hi].transpose(1, 0, 2, 3)).reshape(groups, cin // groups, -1)
                cols = _gemm(xp, wmt, xm, out=batch_threads.workspace((hi - lo) * per_sample, x.dtype)
                             if xp is np else None)  # (G, Cg*kh*kw, (hi-lo)*H*W)
                col2im(xp, cols, hi - lo, cg * groups, out_hw[0], out_hw[1], kh, kw, h, wd, stride, padding,
                       dilation, out=out[lo:hi])

        if n > 1 and xp is np and batch_threads.workers() > 1:
            batch_threads.run(part, n, 2 * wmt.size * n * h * wd)
        else:
            part(0, n)
        return rounded(out, dtype)

    def vjp(self, ctx, g):
        return _conv_vjp(ctx, g, transposed=True)


_conv_transpose2d_op = register(ConvTranspose2dOp())


def _as_conv_padding(x_shape, w_shape, stride, padding, dilation, out_hw):
    """The conv2d padding that computes a stride-1 conv_transpose2d, or None when there is none.

    With stride 1 the adjoint is a correlation with the flipped kernel over the input padded by
    dilation*(k-1) - padding on each side (the far side also takes any output_padding); a negative
    padding would need cropping, so those shapes keep the col2im path.
    """
    if tuple(stride) != (1, 1):
        return None
    pads = []
    for size, k, d, lo, out in ((x_shape[2], w_shape[2], dilation[0], padding[0], out_hw[0]),
                                (x_shape[3], w_shape[3], dilation[1], padding[2], out_hw[1])):
        p_lo = d * (k - 1) - lo
        p_hi = out - size + d * (k - 1) - p_lo
        if p_lo < 0 or p_hi < 0:
            return None
        pads += [p_lo, p_hi]
    return tuple(pads)


def _trim_for(image, out_hw, kernel_hw, stride, padding, dilation, groups):
    """image and padding trimmed so that a convolution over them has exactly out_hw positions.

    conv_transpose2d's output_padding adds rows and columns that no input position reaches; a
    convolution over that output (its gradients) would otherwise yield extra positions.
    """
    pad = list(padding)
    hw = list(image.shape[2:])
    for d in range(2):
        need = (out_hw[d] - 1) * stride[d] + dilation[d] * (kernel_hw[d] - 1) + 1
        cut = hw[d] + pad[2 * d] + pad[2 * d + 1] - need
        if cut > 0:
            from_pad = min(cut, pad[2 * d + 1])
            pad[2 * d + 1] -= from_pad
            hw[d] -= cut - from_pad
    if tuple(hw) != tuple(image.shape[2:]):
        image = image[:, :, : hw[0], : hw[1]]
    return image, tuple(pad)


def _conv_vjp(ctx, g, transposed: bool):
    """Gradients of conv2d and of its adjoint conv_transpose2d, each the other's mirror image: the
    input's through the other op, the weight's by correlating image and gradient (whose roles swap)."""
    a = ctx.attrs
    conv = {"stride": a["stride"], "padding": a["padding"], "dilation": a["dilation"], "groups": a["groups"]}
    gx = gw = None
    if transposed:
        g, conv["padding"] = _trim_for(g, tuple(ctx.in_shape(0)[2:]), tuple(ctx.in_shape(1)[2:]), **conv)
    if ctx.needs_grad(0):
        if transposed:
            gx = apply(_conv2d_op, g, ctx.input(1), **conv)
        else:
            gx = apply(_conv_transpose2d_op, g, ctx.input(1), **conv, out_hw=tuple(ctx.in_shape(0)[2:]))
    if ctx.needs_grad(1):
        x = ctx.input(0)
        image, grad = (g, x) if transposed else (x, g)
        gw = apply(_conv2d_weight_grad_op, image, grad, **conv, kernel_hw=tuple(ctx.in_shape(1)[2:]))
    return gx, gw


class Conv2dWeightGradOp(Op):
    """d conv2d / d weight: correlate the input with the output gradient."""

    name = "conv2d_weight_grad"
    fresh_output = True
    save_inputs = (0, 1)

    def infer(self, x, g, stride, padding, dilation, groups, kernel_hw):
        return spec((g.shape[1], x.shape[1] // groups) + tuple(kernel_hw), binary_dtype(x, g))

    def kernel(self, xp, x, g, stride, padding, dilation, groups, kernel_hw):
        dtype = binary_dtype(x, g)
        x, g = upcast(x.astype(dtype, copy=False)), upcast(g.astype(dtype, copy=False))
        kh, kw = kernel_hw
        if groups > 1 and x.shape[1] == groups:  # depthwise
            gw = depthwise_compiled.weight_grad(xp, x, g, stride, padding, dilation, kh, kw)
            if gw is not None:
                return rounded(gw, dtype)
            return rounded(depthwise.weight_grad(xp, x, g, stride, padding, dilation, kh, kw), dtype)
        o = g.shape[1]
        if xp is np and direct_conv.applies(x.shape, (o, x.shape[1] // groups, kh, kw), x.dtype, stride, padding,
                                            dilation, groups, weight_grad=True):
            return rounded(direct_conv.weight_grad(x, g, stride[0], padding, kernel_hw), dtype)
        if xp is np and winograd.applies(x.shape, (o, x.shape[1] // groups, kh, kw), x.dtype, stride, padding,
                                         dilation, groups):
            return rounded(winograd.weight_grad3x3(x, g, padding), dtype)
        if x.shape[0] > 1 and xp is np and batch_threads.workers() > 1:
            gw = _weight_grad_split(x, g, kh, kw, stride, padding, dilation, groups).transpose(0, 2, 1)
        else:
            cols, oh, ow = im2col(xp, x, kh, kw, stride, padding, dilation, groups)
            gm = xp.ascontiguousarray(g.transpose(1, 0, 2, 3)).reshape(groups, o // groups, -1)
            # (cols @ gm^T)^T: with the long N*OH*OW axis inside, BLAS is several times faster this way round.
            gw = _gemm(xp, cols, gm.transpose(0, 2, 1)).transpose(0, 2, 1)  # (G, O/G, Cg*kh*kw)
        return rounded(xp.ascontiguousarray(gw).reshape(o, x.shape[1] // groups, kh, kw), dtype)

    def vjp(self, ctx, gg):
        x, g = ctx.input(0), ctx.input(1)
        a = ctx.attrs
        common = dict(stride=a["stride"], padding=a["padding"], dilation=a["dilation"], groups=a["groups"])
        gx = apply(_conv_transpose2d_op, g, gg, out_hw=tuple(x.shape[2:]), **common) if ctx.needs_grad(0) else None
        gg_out = apply(_conv2d_op, x, gg, **common) if ctx.needs_grad(1) else None
        return gx, gg_out


_conv2d_weight_grad_op = register(Conv2dWeightGradOp())


def _padding4(padding, kernel_hw, dilation, stride, op):
    if isinstance(padding, str):
        if padding == "valid":
            return (0, 0, 0, 0)
        if padding == "same":
            if stride != (1, 1):
                raise ValueError(f"{op}: padding='same' is not supported for strided convolutions")
            out = []
            for k, d in zip(kernel_hw, dilation):
                total = d * (k - 1)
                out += [total // 2, total - total // 2]
            return tuple(out)
        raise ValueError(f"{op}: padding must be 'valid', 'same', an int or a pair, got {padding!r}")
    ph, pw = _pair(padding, "padding")
    if ph < 0 or pw < 0:
        raise ValueError(f"{op}: padding must be non-negative, got {padding}")
    return (ph, ph, pw, pw)


def conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups: int = 1):
    """2-D cross-correlation over NCHW input with an (out, in/groups, kh, kw) weight."""
    refuse_bool("conv2d", input, weight)
    if len(weight.shape) != 4:
        raise ShapeError(f"conv2d: expected a 4-D weight, got shape {fmt_shape(weight.shape)}")
    squeeze = input.ndim == 3
    if squeeze:
        input = input.unsqueeze(0)
    stride, dilation = _pair(stride, "stride"), _pair(dilation, "dilation")
    pad = _padding4(padding, tuple(weight.shape[2:]), dilation, stride, "conv2d")
    out = apply(_conv2d_op, input, weight, stride=stride, padding=pad, dilation=dilation, groups=int(groups))
    if bias is not None:
        if tuple(bias.shape) != (weight.shape[0],):
            raise ShapeError(f"conv2d: bias must have shape ({weight.shape[0]},), got {fmt_shape(bias.shape)}")
        out = channel_affine(out, None, bias)  # one pass, and its gradient one per-channel sum
    return out.squeeze(0) if squeeze else out


def conv_transpose2d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups: int = 1, dilation=1):
    """Transposed 2-D convolution (the gradient of conv2d w.r.t. its input)."""
    refuse_bool("conv_transpose2d", input, weight)
    squeeze = input.ndim == 3
    if squeeze:
        input = input.unsqueeze(0)
    if input.ndim != 4 or weight.ndim != 4:
        raise ShapeError(
            f"conv_transpose2d: expected 4-D input and weight, got {fmt_shape(input.shape)} and {fmt_shape(weight.shape)}"
        )
    stride, dilation = _pair(stride, "stride"), _pair(dilation, "dilation")
    ph, pw = _pair(padding, "padding")
    oph, opw = _pair(output_padding, "output_padding")
    if oph >= max(stride[0], dilation[0]) or opw >= max(stride[1], dilation[1]):
        raise ValueError(f"conv_transpose2d: output_padding {output_padding} must be smaller than stride or dilation")
    kh, kw = weight.shape[2], weight.shape[3]
    h, w = input.shape[2], input.shape[3]
    out_hw = (
        (h - 1) * stride[0] - 2 * ph + dilation[0] * (kh - 1) + oph + 1,
        (w - 1) * stride[1] - 2 * pw + dilation[1] * (kw - 1) + opw + 1,
    )
    if out_hw[0] <= 0 or out_hw[1] <= 0:
        raise ShapeError(f"conv_transpose2d: the output size {out_hw} is not positive for input {fmt_shape(input.shape)}")
    out = apply(_conv_transpose2d_op, input, weight, stride=stride, padding=(ph, ph, pw, pw), dilation=dilation,
                groups=int(groups), out_hw=out_hw)
    if bias is not None:
        if tuple(bias.shape) != (weight.shape[1] * int(groups),):
            raise ShapeError(f"conv_transpose2d: bias must have shape ({weight.shape[1] * int(groups)},), "
                             f"got {fmt_shape(bias.shape)}")
        out = channel_affine(out, None, bias)
    return out.squeeze(0) if squeeze else out
