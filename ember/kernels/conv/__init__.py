"""2-D convolution on arrays: every way Ember computes conv2d, its adjoint conv_transpose2d and its weight
gradient, and the one place that chooses among them for each call (`conv2d`, `conv_transpose2d`,
`conv2d_weight_grad`, each through `selection.choose` over its list of algorithms).

The algorithms: im2col + GEMM (the patches of every output pixel copied into a matrix, one product with the
weight; per sample where the weight is small, over the whole batch where it is large, over batch chunks on the
threads where there are several); a pointwise (1x1) convolution as a GEMM on the input as it lies; a single
sample split over the threads by bands of output rows or by halves of its input channels; Winograd's F(2x2, 3x3)
(winograd.py) and the direct convolution (direct.py), both compiled with Ember's micro-kernel; depthwise
convolutions by compiled loops (depthwise.py) or by NumPy over the taps (depthwise_taps.py); an image layer's weight
gradient, a sample's patches at a time, compiled (few_rows.py). Arrays arrive in the
dtype the product is computed in (the op casts, and rounds the result).
"""

from __future__ import annotations

import numpy as np

from ember.kernels import gemm, parallel
from ember.kernels.conv import depthwise, depthwise_taps, few_rows, winograd
from ember.kernels.conv import direct as direct_conv
from ember.kernels.conv import rows as conv_rows
from ember.kernels.conv.patches import col2im_available, col2im_compiled, im2col_compiled
from ember.kernels.selection import Algorithm, Table, algorithms, always, run_first

CONV2D = Table("conv2d", measured_on="AMD EPYC (family 26), 2 cores, OpenBLAS held to Haswell kernels, 2026-11-27", values={
    "per_sample_max_weight": (4096, "weights of at most this many values take per-sample GEMMs (memory-bound "
                                    "products); larger ones one big GEMM, which BLAS runs far better"),
    "pointwise_min_pixels": (256, "a 1x1 layer of a batch runs as a GEMM on the input as it lies from maps of this many "
                                  "pixels (on smaller maps one GEMM over the batch's patches runs BLAS better)"),
    "pointwise_avx2_max_channels": (192, "on AVX2's micro-kernel block, a float32 pointwise layer of this many "
                                         "input channels or fewer runs on Ember's GEMM (with its affine epilogue "
                                         "under the jit: MobileNetV2's batch-1 layers on 2 threads, a Zen 3, "
                                         "2026-12-04: 0.62-0.88x the time of OpenBLAS's product and the affine "
                                         "pass; 384 channels and more: 1.15-1.22x)"),
    "pointwise_avx2_min_pixels": (196, "... on maps of this many pixels or more: on 7 x 7 maps the block's 24 "
                                       "columns pad 49 to 72 (1.12-1.48x)"),
    "rows_min_pixels": (256, "a single sample's output rows are split over the threads from this many output pixels "
                             "per channel: on smaller maps each band's GEMM is too narrow and both threads read the "
                             "whole weight (ResNet-18's (1, 512, 7, 7): 2.1 ms split against 1.7)"),
    "halves_min_channels": (64, "a single sample too small to split by rows is split by halves of its input channels "
                                "from this many channels (ResNet-18's (1, 256, 14, 14) 3x3: 1.43 -> 1.30 ms)"),
    "halves_min_flops": (10e6, "... and from this much work"),
    "halves_max_weight_bytes": (8 << 20, "... and up to this weight size (a 9.4 MB weight makes the GEMMs bound by "
                                         "reading it: no gain)"),
    "patch_block_bytes": (4 << 20, "patches are made and multiplied a block of samples at a time, small enough to "
                                   "stay in cache between im2col and its GEMM ((32, 64, 32, 32) x (64, 64, 3, 3): "
                                   "21.5 -> 14.5 ms per thread)"),
    "adjoint_block_bytes": (1 << 20, "conv_transpose2d's patches are summed back by col2im right after its GEMM: "
                                     "blocks that stay in the core's cache ran ResNet-20's stride-2 input gradients "
                                     "14-20% faster than 4 MB ones"),
    "wgrad_per_sample_max_rows": (32, "a weight gradient with at most this many patch rows (an image layer's 1-3 "
                                      "input channels) takes a product per sample, summed (LeNet-5's first layer: "
                                      "0.25 against 0.44 ms per thread), ahead of the direct kernel (2 threads on a "
                                      "Zen 4: 0.27 against 0.91 ms; ResNet-20's stem 0.31 against 0.74); compiled "
                                      "(few_rows.py) at the same speed on 2 threads, with one sample's patches "
                                      "held per thread instead of 4 MB blocks"),
})


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
    return w.size <= CONV2D["per_sample_max_weight"]


def _gemm(xp, a, b, out=None):
    """Per-group a[g] @ b[g] (into `out`, a flat buffer of that many values, when given). One group is a plain
    2-D product, which BLAS runs fastest."""
    if out is not None:
        out = out.reshape(a.shape[0], a.shape[1], b.shape[2])
    if a.shape[0] == 1:
        return gemm.matmul(a[0], b[0], out=None if out is None else out[0], xp=xp)[None]
    return gemm.matmul(xp.ascontiguousarray(a), xp.ascontiguousarray(b), out=out, xp=xp)



def pointwise_takes_batch(x, w, stride, padding) -> bool:
    """Whether conv2d runs this 1x1, stride-1, unpadded convolution as a GEMM on the input as it lies (a single sample,
    or maps of pointwise_min_pixels and more) rather than by patches."""
    return w.shape[2] == w.shape[3] == 1 and tuple(stride) == (1, 1) and not any(padding) \
        and (x.shape[0] == 1 or x.shape[2] * x.shape[3] >= CONV2D["pointwise_min_pixels"])


def pointwise_on_driver(x, w, groups) -> bool:
    """Whether a pointwise convolution conv2d runs as a GEMM on its input (pointwise_takes_batch) takes Ember's GEMM
    driver: float32 NumPy arrays, one group, and on AVX-512's block every such layer, on AVX2's those of
    pointwise_avx2_max_channels inputs or fewer on maps of pointwise_avx2_min_pixels or more. The jit's conv2d_affine
    applies its epilogue on the same layers, so its values are conv2d's and channel_affine's."""
    if type(x) is not np.ndarray or x.dtype != np.float32 or w.dtype != np.float32 or groups != 1:
        return False
    if gemm.driver_enabled():
        return True
    return (x.shape[1] <= CONV2D["pointwise_avx2_max_channels"]
            and x.shape[2] * x.shape[3] >= CONV2D["pointwise_avx2_min_pixels"] and gemm.narrow_driver())


def _rows_pay(x, w, stride, padding, dilation) -> bool:
    oh, ow = _out_hw(x, w.shape[2], w.shape[3], stride, padding, dilation)
    if oh * ow < CONV2D["rows_min_pixels"] or oh < 2:
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
        cols, _, _ = im2col(np, rows, kh, kw, stride, pad, dilation, 1, out=parallel.workspace(size, rows.dtype))
        gemm.matmul(w.reshape(o, -1), cols[0], out=planes[:, a * ow:b * ow])

    parallel.parallel_for(oh, band, flops=2 * w.size * oh * ow)
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


def _halves_pay(x, w, stride, padding, dilation, groups) -> bool:
    o, c, kh, kw = w.shape
    if groups != 1 or c < CONV2D["halves_min_channels"] or w.nbytes > CONV2D["halves_max_weight_bytes"] or kh * kw == 1 \
            or _rows_pay(x, w, stride, padding, dilation):
        return False  # a 1x1 layer's patches are one strided copy: splitting it cost more than it gained
    oh, ow = _out_hw(x, kh, kw, stride, padding, dilation)
    if 2 * w.size * oh * ow < CONV2D["halves_min_flops"]:
        return False
    return not winograd.applies(x.shape, w.shape, x.dtype, stride, padding, dilation, groups)


def _forward_by_channel_halves(x, w, stride, padding, dilation):
    """conv2d of a single sample as the sum of two convolutions over halves of its input channels, one per
    batch thread (see CONV2D's halves_* thresholds)."""
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
                                out=parallel.workspace(size, x.dtype))
            # the half's weight columns as a strided view (BLAS reads it with the full row stride: no copy)
            gemm.matmul(wm[:, lo * kh * kw:hi * kh * kw], cols.reshape(-1, oh * ow), out=out[k])

    parallel.parallel_for(2, work)
    return np.add(out[0], out[1], out=out[0]).reshape(1, o, oh, ow)


def _blocks(a: int, b: int, per_sample_bytes: int, block_bytes: int | None = None):
    """[start, stop) ranges covering samples a..b, each a block whose patches fit block_bytes (at least one)."""
    step = max(1, (block_bytes or CONV2D["patch_block_bytes"]) // max(per_sample_bytes, 1))
    return [(i, min(b, i + step)) for i in range(a, b, step)]


def _per_sample_gemm(wm, cols, out):
    """out = wm @ cols for a (G, O/G, K) weight and (N, G, K, L) patches: with one group as N products of the
    weight, read in place (a zero batch stride), so Ember's kernel can take them; NumPy's BLAS ran the 4-D
    broadcast as N small GEMMs of its own (LeNet-5's second layer, 32 samples: 0.17 against 0.07 ms)."""
    if wm.shape[0] != 1:
        return gemm.matmul(wm, cols, out=out)
    n, _, k, length = cols.shape
    return gemm.matmul(wm if n == 1 else np.broadcast_to(wm[0], (n,) + wm.shape[1:]), cols.reshape(n, k, length),
                       out=out.reshape(n, wm.shape[1], length))


def _forward_split(x, wm, kh, kw, stride, padding, dilation, groups):
    """conv2d with the batch split over threads (batch_threads), each making its samples' patches and GEMMs."""
    n = x.shape[0]
    oh, ow = _out_hw(x, kh, kw, stride, padding, dilation)
    out = np.empty((n,) + wm.shape[:2] + (oh * ow,), np.result_type(x, wm))
    per_sample = x.shape[1] * kh * kw * oh * ow

    def chunk(a, b):
        for lo, hi in _blocks(a, b, per_sample * x.itemsize):
            buf = parallel.workspace((hi - lo) * per_sample, x.dtype)
            cols, _, _ = im2col_per_sample(np, x[lo:hi], kh, kw, stride, padding, dilation, groups, out=buf)
            _per_sample_gemm(wm, cols, out[lo:hi])

    parallel.parallel_for(n, chunk, flops=2 * wm.size * n * oh * ow)
    return out.reshape(n, -1, oh, ow)


def _weight_grad_split(x, g, kh, kw, stride, padding, dilation, groups):
    """conv2d_weight_grad as (G, K, O/G) partial products over batch chunks on threads, summed."""
    o = g.shape[1]
    per_sample = x.shape[1] * kh * kw * g.shape[2] * g.shape[3]
    per_sample_gemms = _few_patch_rows(x, groups, (kh, kw))

    def chunk(a, b):
        total = None
        for lo, hi in _blocks(a, b, per_sample * x.itemsize):
            buf = parallel.workspace((hi - lo) * per_sample, x.dtype)
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
    parts = parallel.parallel_for(x.shape[0], chunk, flops=2 * g_per_sample * x.shape[0] * (x.shape[1] // groups) * kh * kw)
    total = parts[0]
    for p in parts[1:]:
        total += p
    return total




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


# --- conv2d: the algorithms, in order of preference ---------------------------------------------------------------
def _depthwise(xp, x, w, stride, padding, dilation, groups):
    return groups > 1 and w.shape[1] == 1


def _run_depthwise(xp, x, w, stride, padding, dilation, groups):
    return depthwise.forward(xp, x, w, stride, padding, dilation,
                             *_out_hw(x, w.shape[2], w.shape[3], stride, padding, dilation))


def _run_pointwise(xp, x, w, stride, padding, dilation, groups):
    # A pointwise convolution is a GEMM on the input as it lies: (G, O/G, C/G) @ (N, G, C/G, H*W), no patches
    # copied; on small maps one GEMM over the whole batch runs BLAS better. One product per sample with the weight
    # read in place (_per_sample_gemm), so Ember's GEMM can take them: MobileNetV2's 1x1 layers at batch 1 took
    # 1.17 ms in all against NumPy's broadcast matmul's 1.66 (2026-11-27).
    o, n, (h, wd) = w.shape[0], x.shape[0], x.shape[2:]
    wm = w.reshape(groups, o // groups, -1)
    cols = x.reshape(n, groups, -1, h * wd)
    if xp is not np:
        return xp.matmul(wm, cols).reshape(n, o, h, wd)
    if pointwise_on_driver(x, w, groups):
        out = pointwise_on_ember_gemm(x, w)
        if out is not None:
            return out
    out = np.empty((n, groups, o // groups, h * wd), np.result_type(x, wm))
    return _per_sample_gemm(wm, cols, out).reshape(n, o, h, wd)


def pointwise_on_ember_gemm(x, w, affine=None):
    """A float32 pointwise convolution as Ember's GEMM runs it (a product per sample, the weight read in place), with
    sgemm's `affine` epilogue (scale, shift, activation) where given; None where the GEMM does not fit it."""
    from ember.kernels.sgemm import sgemm

    n, c, h, wd = x.shape
    o = w.shape[0]
    # the weight read in place for every sample (a zero batch stride); a single sample's is a plain reshape, as
    # np.broadcast_to costs 4 us, a tenth of a small layer's product
    a = w.reshape(1, o, c) if n == 1 else np.broadcast_to(w.reshape(o, c), (n, o, c))
    b = x.reshape(n, c, h * wd)
    if not gemm.fits_own(a, b):  # (a fresh output always fits)
        return None
    return sgemm(a, b, np.empty((n, o, h * wd), np.float32), affine=affine).reshape(n, o, h, wd)


def _run_batch_split(xp, x, w, stride, padding, dilation, groups):
    o, _, kh, kw = w.shape
    return _forward_split(x, w.reshape(groups, o // groups, -1), kh, kw, stride, padding, dilation, groups)


def _run_per_sample(xp, x, w, stride, padding, dilation, groups):
    # Per-sample patches: (G, O/G, K) @ (N, G, K, L) is (N, G, O/G, L), NCHW with no transposing copy; for small
    # weights the GEMMs are memory-bound and this wins.
    o, _, kh, kw = w.shape
    n = x.shape[0]
    wm = w.reshape(groups, o // groups, -1)
    cols, oh, ow = im2col_per_sample(xp, x, kh, kw, stride, padding, dilation, groups)
    if xp is not np:
        return xp.matmul(wm, cols).reshape(n, o, oh, ow)
    out = np.empty((n, groups, o // groups, oh * ow), np.result_type(x, wm))
    return _per_sample_gemm(wm, cols, out).reshape(n, o, oh, ow)


def _run_one_gemm(xp, x, w, stride, padding, dilation, groups):
    # Large weights: one big GEMM per group runs BLAS far better than many per-sample ones.
    o, _, kh, kw = w.shape
    n = x.shape[0]
    cols, oh, ow = im2col(xp, x, kh, kw, stride, padding, dilation, groups)
    out = _gemm(xp, w.reshape(groups, o // groups, -1), cols).reshape(o, n, oh, ow).transpose(1, 0, 2, 3)
    return xp.ascontiguousarray(out)


def _threads_for(xp, x) -> bool:
    return xp is np and parallel.get_num_threads() > 1


CONV2D_ALGORITHMS = algorithms("conv2d", [
    Algorithm("depthwise compiled", "groups == channels, one filter each (depthwise), Numba, float32/float64",
              lambda xp, x, w, *a: _depthwise(xp, x, w, *a) and depthwise.applies("forward", xp, x, w), _run_depthwise),
    Algorithm("depthwise taps", "depthwise, and depthwise_taps.forward_pays (a sum over the kernel's taps in NumPy)",
              lambda xp, x, w, s, p, d, g: _depthwise(xp, x, w, s, p, d, g) and depthwise_taps.forward_pays(x.shape, s, p),
              lambda xp, x, w, s, p, d, g: depthwise_taps.forward(xp, x, w, s, p, d)),
    Algorithm("pointwise GEMM", "1x1, stride 1, unpadded; a single sample, or maps of pointwise_min_pixels or more "
              "(on Ember's GEMM where pointwise_on_driver, else NumPy's BLAS)",
              lambda xp, x, w, s, p, d, g: pointwise_takes_batch(x, w, s, p), _run_pointwise),
    Algorithm("single sample by row bands", "batch 1, several threads, rows_min_pixels output pixels or more, "
              "and not Winograd's own split; each thread's bands compiled whole where Ember's GEMM driver runs "
              "(gemm.driver_enabled)",
              lambda xp, x, w, s, p, d, g: x.shape[0] == 1 and _threads_for(xp, x) and _rows_pay(x, w, s, p, d),
              lambda xp, x, w, s, p, d, g: _forward_by_rows(x, w, s, p, d, g)),
    Algorithm("single sample by channel halves", "batch 1, groups 1, halves_min_channels input channels or more, "
              "halves_min_flops of work, a weight of halves_max_weight_bytes or less, not 1x1, not Winograd; "
              "each half compiled whole where Ember's GEMM driver runs",
              lambda xp, x, w, s, p, d, g: x.shape[0] == 1 and xp is np and _halves_pay(x, w, s, p, d, g),
              lambda xp, x, w, s, p, d, g: _forward_by_channel_halves(x, w, s, p, d)),
    Algorithm("direct", "direct_conv.applies: 3x3 or 5x5, stride 1 or 2, float32, few channels (the AVX-512 or AVX2 "
              "micro-kernel, Numba)",
              lambda xp, x, w, s, p, d, g: xp is np and direct_conv.applies(x.shape, w.shape, x.dtype, s, p, d, g),
              lambda xp, x, w, s, p, d, g: direct_conv.conv2d(x, w, s[0], p)),
    Algorithm("winograd", "winograd.applies: 3x3, stride 1, float32, 8+ channels each way, enough tiles (Numba; "
              "each thread's tile rows one compiled kernel where Ember's GEMM driver runs); declines inputs that are inf, NaN or beyond 2**100 (its transforms would not keep them)",
              lambda xp, x, w, s, p, d, g: xp is np and winograd.applies(x.shape, w.shape, x.dtype, s, p, d, g),
              lambda xp, x, w, s, p, d, g: winograd.conv3x3(x, w, p)),
    Algorithm("im2col by batch chunks", "batch > 1 and several threads: each thread makes its samples' patches "
              "and GEMMs (one BLAS thread each)",
              lambda xp, x, w, *a: x.shape[0] > 1 and _threads_for(xp, x), _run_batch_split),
    Algorithm("im2col per sample", "a weight of per_sample_max_weight values or fewer",
              lambda xp, x, w, *a: _small_weight(w), _run_per_sample),
    Algorithm("im2col + one GEMM", "anything else", always, _run_one_gemm),
])


def conv2d(xp, x, w, stride, padding, dilation, groups):
    """conv2d of NCHW `x` by (O, C/groups, kh, kw) `w`, padding (top, bottom, left, right), in the arrays' dtype."""
    return run_first("conv2d", CONV2D_ALGORITHMS, xp, x, w, stride, padding, dilation, groups)


def _dense_forward(xp, x, w, stride, padding, dilation, groups):
    """conv2d by the direct convolution, Winograd or im2col + GEMM: a band's own convolution."""
    return run_first("conv2d", CONV2D_ALGORITHMS[5:], xp, x, w, stride, padding, dilation, groups)


# --- conv_transpose2d (conv2d's input gradient) -------------------------------------------------------------------
def _run_depthwise_adjoint(xp, x, w, stride, padding, dilation, groups, out_hw):
    return depthwise.input_grad(xp, x, w, groups, stride, padding, dilation, out_hw)


def _flipped_padding(xp, x, w, stride, padding, dilation, groups, out_hw):
    """The conv2d padding that computes this conv_transpose2d as a convolution with the flipped weight, or None
    where col2im's GEMM route copies fewer patches (or that padding does not exist)."""
    n, cin, h, wd = x.shape
    _, cg, kh, kw = w.shape
    direct = _as_conv_padding(x.shape, w.shape, stride, padding, dilation, out_hw)
    if direct is None:
        return None
    # Both ways run the same GEMM; they differ in the patches copied: the direct convolution's im2col reads
    # Cin*kh*kw values per output pixel, col2im sums Cout*kh*kw per input pixel. A layer that narrows and shrinks
    # (LeNet's second) has far fewer of the latter.
    patches_direct = cin * kh * kw * n * out_hw[0] * out_hw[1]
    patches_col2im = cg * groups * kh * kw * n * h * wd
    flipped_shape = (cg * groups, cin // groups, kh, kw)
    if patches_col2im < patches_direct and col2im_available(xp, x.dtype, patches_col2im) \
            and not (xp is np and direct_conv.applies(x.shape, flipped_shape, x.dtype, (1, 1), direct, dilation,
                                                      groups)):  # it copies no patches
        return None
    return direct


def _run_flipped(xp, x, w, stride, padding, dilation, groups, out_hw):
    # Stride 1: a plain convolution with the flipped, transposed weight. One im2col and GEMM, instead of a GEMM
    # into kh*kw-times-larger columns and a col2im over every tap.
    cin, (_, cg, kh, kw) = x.shape[1], w.shape
    wc = w.reshape(groups, cin // groups, cg, kh, kw).transpose(0, 2, 1, 3, 4)[..., ::-1, ::-1]
    wc = xp.ascontiguousarray(wc).reshape(cg * groups, cin // groups, kh, kw)
    direct = _flipped_padding(xp, x, w, stride, padding, dilation, groups, out_hw)
    return conv2d(xp, x, wc, (1, 1), direct, dilation, groups)


def _run_col2im(xp, x, w, stride, padding, dilation, groups, out_hw):
    n, cin, h, wd = x.shape
    _, cg, kh, kw = w.shape
    wmt = xp.ascontiguousarray(w.reshape(groups, cin // groups, cg * kh * kw).transpose(0, 2, 1))
    out = xp.empty((n, cg * groups) + tuple(out_hw), x.dtype)
    per_sample = cg * groups * kh * kw * h * wd  # patch values per sample

    def part(a, b):  # samples a..b, a block at a time: a GEMM into their patches, summed into their images
        for lo, hi in _blocks(a, b, per_sample * x.itemsize, CONV2D["adjoint_block_bytes"]):
            xm = xp.ascontiguousarray(x[lo:hi].transpose(1, 0, 2, 3)).reshape(groups, cin // groups, -1)
            cols = _gemm(xp, wmt, xm, out=parallel.workspace((hi - lo) * per_sample, x.dtype)
                         if xp is np else None)  # (G, Cg*kh*kw, (hi-lo)*H*W)
            col2im(xp, cols, hi - lo, cg * groups, out_hw[0], out_hw[1], kh, kw, h, wd, stride, padding,
                   dilation, out=out[lo:hi])

    if n > 1 and _threads_for(xp, x):
        parallel.parallel_for(n, part, flops=2 * wmt.size * n * h * wd)
    else:
        part(0, n)
    return out


CONV_TRANSPOSE2D_ALGORITHMS = algorithms("conv_transpose2d", [
    Algorithm("depthwise compiled", "the adjoint of a depthwise convolution, Numba, float32/float64; but for one "
              "filter a channel at stride 1, which the depthwise forward runs on the flipped weight in half the time",
              lambda xp, x, w, s, p, d, g, o: g > 1 and w.shape[1] == 1 and depthwise.applies("input_grad", xp, x, w)
              and not (x.shape[1] == g and _as_conv_padding(x.shape, w.shape, s, p, d, o) is not None),
              _run_depthwise_adjoint),
    Algorithm("direct, stride-2 phases", "direct_conv.applies_transposed: 3x3 stride 2, float32, few channels "
              "(the AVX-512 or AVX2 micro-kernel, Numba)",
              lambda xp, x, w, s, p, d, g, o: xp is np and direct_conv.applies_transposed(x.shape, w.shape, x.dtype,
                                                                                         s, p, d, g),
              lambda xp, x, w, s, p, d, g, o: direct_conv.input_grad_stride2(x, w, p, o)),
    Algorithm("conv2d of the flipped weight", "stride 1, where the convolution copies fewer patches than col2im",
              lambda *problem: _flipped_padding(*problem) is not None, _run_flipped),
    Algorithm("GEMM + col2im", "anything else (batch chunks on the threads)", always, _run_col2im),
])


def conv_transpose2d(xp, x, w, stride, padding, dilation, groups, out_hw):
    """conv_transpose2d of `x` by (C_in, C_out/groups, kh, kw) `w` into an output of spatial size `out_hw`."""
    return run_first("conv_transpose2d", CONV_TRANSPOSE2D_ALGORITHMS, xp, x, w, stride, padding, dilation, groups,
                     out_hw)


# --- conv2d_weight_grad -------------------------------------------------------------------------------------------
def _wshape(x, g, groups, kernel_hw):
    return (g.shape[1], x.shape[1] // groups) + tuple(kernel_hw)


def _run_wgrad_split(xp, x, g, stride, padding, dilation, groups, kernel_hw):
    kh, kw = kernel_hw
    gw = _weight_grad_split(x, g, kh, kw, stride, padding, dilation, groups).transpose(0, 2, 1)
    return np.ascontiguousarray(gw).reshape(_wshape(x, g, groups, kernel_hw))


def _run_wgrad_one_gemm(xp, x, g, stride, padding, dilation, groups, kernel_hw):
    kh, kw = kernel_hw
    o = g.shape[1]
    cols, oh, ow = im2col(xp, x, kh, kw, stride, padding, dilation, groups)
    gm = xp.ascontiguousarray(g.transpose(1, 0, 2, 3)).reshape(groups, o // groups, -1)
    # (cols @ gm^T)^T: with the long N*OH*OW axis inside, BLAS is several times faster this way round.
    gw = _gemm(xp, cols, gm.transpose(0, 2, 1)).transpose(0, 2, 1)  # (G, O/G, Cg*kh*kw)
    return xp.ascontiguousarray(gw).reshape(_wshape(x, g, groups, kernel_hw))


def _few_patch_rows(x, groups, kernel_hw):
    """Whether a weight gradient has so few patch rows (an image layer's 1-3 input channels) that per-sample GEMMs
    run it best (`wgrad_per_sample_max_rows`)."""
    return groups == 1 and x.shape[1] * kernel_hw[0] * kernel_hw[1] <= CONV2D["wgrad_per_sample_max_rows"]


def _depthwise_wgrad(xp, x, g, s, p, d, groups, kernel_hw):
    return groups > 1 and x.shape[1] == groups


CONV2D_WEIGHT_GRAD_ALGORITHMS = algorithms("conv2d_weight_grad", [
    Algorithm("depthwise compiled", "a depthwise convolution's weight, Numba, float32/float64",
              lambda xp, x, g, *a: _depthwise_wgrad(xp, x, g, *a) and depthwise.applies("weight_grad", xp, x, g),
              lambda xp, x, g, s, p, d, groups, k: depthwise.weight_grad(xp, x, g, s, p, d, *k)),
    Algorithm("depthwise taps", "a depthwise convolution's weight (NumPy over the taps)", _depthwise_wgrad,
              lambda xp, x, g, s, p, d, groups, k: depthwise_taps.weight_grad(xp, x, g, s, p, d, *k)),
    Algorithm("few rows compiled", "at most wgrad_per_sample_max_rows patch rows (an image layer), float32/float64, "
              "Numba: each thread's samples one compiled kernel, a sample's patches at a time",
              lambda xp, x, g, s, p, d, groups, k: xp is np and _few_patch_rows(x, groups, k)
              and few_rows.applies(x, g, s, d),
              lambda xp, x, g, s, p, d, groups, k: few_rows.weight_grad(x, g, k, s, p, d)),
    Algorithm("direct", "direct_conv.applies(weight_grad=True) (the AVX-512 or AVX2 micro-kernel, Numba), more than "
              "wgrad_per_sample_max_rows patch rows",
              lambda xp, x, g, s, p, d, groups, k: xp is np and not _few_patch_rows(x, groups, k)
              and direct_conv.applies(x.shape, _wshape(x, g, groups, k), x.dtype, s, p, d, groups, weight_grad=True),
              lambda xp, x, g, s, p, d, groups, k: direct_conv.weight_grad(x, g, s[0], p, k)),
    Algorithm("winograd", "winograd.applies (Numba; each thread's samples one compiled kernel where Ember's GEMM "
              "driver runs); declines inf, NaN or values beyond 2**100",
              lambda xp, x, g, s, p, d, groups, k: xp is np and winograd.applies(
                  x.shape, _wshape(x, g, groups, k), x.dtype, s, p, d, groups),
              lambda xp, x, g, s, p, d, groups, k: winograd.weight_grad3x3(x, g, p)),
    Algorithm("im2col by batch chunks", "batch > 1 and several threads: partial products summed",
              lambda xp, x, *a: x.shape[0] > 1 and _threads_for(xp, x), _run_wgrad_split),
    Algorithm("im2col + one GEMM", "anything else", always, _run_wgrad_one_gemm),
])


def conv2d_weight_grad(xp, x, g, stride, padding, dilation, groups, kernel_hw):
    """The gradient of conv2d's weight: `x` correlated with the output gradient `g`, (O, C/groups, *kernel_hw)."""
    gw = run_first("conv2d_weight_grad", CONV2D_WEIGHT_GRAD_ALGORITHMS, xp, x, g, stride, padding, dilation,
                   groups, kernel_hw)
    if xp is np and gw.dtype == np.float32 and _overflowed(gw, x, g):
        gw = _exact_weight_grad(x, g, stride, padding, dilation, groups, kernel_hw)
    return gw


def _overflowed(gw, x, g) -> bool:
    """Whether float32 sums of finite `x` and `g` reached +inf and -inf (NaN) in `gw`: each entry sums a whole
    batch's products, so values near float32's largest overflow, and the order each BLAS adds in decides which
    entries come out NaN. One pass over the small `gw` decides; x and g are read only where it has a NaN."""
    total = gw.sum(dtype=np.float64)  # NaN only where some entry is NaN (float64 holds their sum of finite ones)
    return bool(total != total) and bool(np.isfinite(x).all()) and bool(np.isfinite(g).all())


def _exact_weight_grad(x, g, stride, padding, dilation, groups, kernel_hw):
    """The weight gradient summed in float64 and rounded to float32: inf where the exact sum overflows, finite
    where it is in range (PyTorch's float32 sums give either sign of inf there, by their order)."""
    with np.errstate(over="ignore"):
        return _run_wgrad_one_gemm(np, x.astype(np.float64), g.astype(np.float64), stride, padding, dilation,
                                   groups, kernel_hw).astype(np.float32)
