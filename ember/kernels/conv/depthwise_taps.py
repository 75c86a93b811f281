"""Depthwise convolution (one input channel per group) computed directly, tap by tap.

im2col would copy every input kh*kw times and then run C tiny GEMMs; here each kernel tap is one
multiply-add over a strided view of the padded input, so memory traffic stays a few passes over
the image. These are the NumPy paths, used without Numba (with it, depthwise.py's loops run):
conv2d's weight gradient uses them when in_channels == groups; its forward (and so the stride-1 input
gradient) where `forward_pays` says so.
"""

from __future__ import annotations


def _taps(xp, x, kh, kw, stride, pad, dil):
    """(i, j, view) for each kernel tap: the (N, C, OH, OW) input elements that tap multiplies."""
    pt, pb, pl, pr = pad
    if pt or pb or pl or pr:
        x = xp.pad(x, ((0, 0), (0, 0), (pt, pb), (pl, pr)))
    h, w = x.shape[2], x.shape[3]
    oh = (h - dil[0] * (kh - 1) - 1) // stride[0] + 1
    ow = (w - dil[1] * (kw - 1) - 1) // stride[1] + 1
    for i in range(kh):
        r0 = i * dil[0]
        for j in range(kw):
            c0 = j * dil[1]
            yield i, j, x[:, :, r0 : r0 + stride[0] * (oh - 1) + 1 : stride[0], c0 : c0 + stride[1] * (ow - 1) + 1 : stride[1]]


def forward_pays(x_shape, stride, pad) -> bool:
    """Whether the tap-by-tap forward beats im2col + per-channel GEMMs for this shape (measured on 2
    cores: it wins for stride 1 up to 28x28 maps; strided views and larger maps favour im2col)."""
    return tuple(stride) == (1, 1) and (x_shape[2] + pad[0] + pad[1]) * (x_shape[3] + pad[2] + pad[3]) <= 32 * 32


def forward(xp, x, w, stride, pad, dil):
    """conv2d of x (N, C, H, W) with w (C*m, 1, kh, kw), groups=C: (N, C*m, OH, OW)."""
    n, c = x.shape[0], x.shape[1]
    o, _, kh, kw = w.shape
    m = o // c
    wk = w.reshape(c, m, kh, kw)[None, :, :, :, :, None, None]  # (1, C, m, kh, kw, 1, 1)
    out = tmp = None
    for i, j, v in _taps(xp, x, kh, kw, stride, pad, dil):
        # (N, C, 1, OH, OW) against the m filters of each channel; a 4-D product when m == 1 (faster)
        v = v[:, :, None] if m > 1 else v
        wij = wk[:, :, :, i, j] if m > 1 else wk[:, :, 0, i, j]
        if out is None:
            out = v * wij
            tmp = xp.empty_like(out)
        else:
            xp.multiply(v, wij, out=tmp)
            out += tmp
    return out.reshape(n, o, out.shape[-2], out.shape[-1])


def weight_grad(xp, x, g, stride, pad, dil, kh, kw):
    """d conv2d / d weight for the depthwise case: (C*m, 1, kh, kw) from x (N, C, H, W) and g (N, C*m, OH, OW)."""
    n, c = x.shape[0], x.shape[1]
    o = g.shape[1]
    g5 = g.reshape(n, c, o // c, g.shape[2], g.shape[3])
    gw = xp.empty((c, o // c, kh, kw), dtype=g.dtype)
    for i, j, v in _taps(xp, x, kh, kw, stride, pad, dil):
        gw[:, :, i, j] = xp.einsum("nchw,ncmhw->cm", v, g5)
    return gw.reshape(o, 1, kh, kw)
