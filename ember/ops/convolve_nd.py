"""`convolve`: N-dimensional convolution of two arrays over chosen axes, with extra summed (dot) axes, in
'full', 'valid' or 'same' mode (scipy.signal.convolve's modes, HIPS autograd's axes and dot_axes).

out[a, b, n] = sum_{d, k} A[a, d, k] * B[b, d, n - k]: A's and B's other ("ignored") axes come first in the
result, A's then B's, then the convolved axes. The gradient of each operand is a convolution of the
output gradient with the other operand flipped, so the rule is this op again (and differentiates again).
"""

from __future__ import annotations

import numpy as np

from ember.dispatch import apply
from ember.errors import ShapeError, fmt_shape
from ember.op import Op, register
from ember.ops._rules import result_dtype, spec
from ember.ops.opmath import rounded, upcast

_MODES = ("full", "valid", "same")


def _layout(a_shape, b_shape, axes, dot_axes, mode):
    """(conv, dot, ignore) axes of A and of B, and the output shape; errors name the op and shapes."""
    if mode not in _MODES:
        raise ValueError(f"convolve: mode must be 'full', 'valid' or 'same', got {mode!r}")
    conv_a, conv_b = (tuple(range(len(a_shape))),) * 2 if axes is None else (tuple(axes[0]), tuple(axes[1]))
    dot_a, dot_b = tuple(dot_axes[0]), tuple(dot_axes[1])
    if len(conv_a) != len(conv_b) or len(dot_a) != len(dot_b):
        raise ShapeError(f"convolve: axes {axes} and dot_axes {dot_axes} must pair the axes of A and B")
    ign_a = tuple(i for i in range(len(a_shape)) if i not in conv_a and i not in dot_a)
    ign_b = tuple(i for i in range(len(b_shape)) if i not in conv_b and i not in dot_b)
    for i, j in zip(dot_a, dot_b):
        if a_shape[i] != b_shape[j]:
            raise ShapeError(f"convolve: dot axes {i} of A {fmt_shape(a_shape)} and {j} of B {fmt_shape(b_shape)} "
                             "differ in length")
    sizes = []
    for i, j in zip(conv_a, conv_b):
        na, nb = a_shape[i], b_shape[j]
        sizes.append(na + nb - 1 if mode == "full" else (na if mode == "same" else abs(na - nb) + 1))
    if mode == "valid":
        bigger = {a_shape[i] >= b_shape[j] for i, j in zip(conv_a, conv_b)}
        smaller = {a_shape[i] <= b_shape[j] for i, j in zip(conv_a, conv_b)}
        if False in bigger and False in smaller:
            raise ShapeError(f"convolve: in 'valid' mode one array must be at least as large as the other along "
                             f"every convolved axis, got {fmt_shape(a_shape)} and {fmt_shape(b_shape)}")
    out = tuple(a_shape[i] for i in ign_a) + tuple(b_shape[j] for j in ign_b) + tuple(sizes)
    return (conv_a, dot_a, ign_a), (conv_b, dot_b, ign_b), out


def _correlate(xp, x, y, x_axes, y_axes, out_order):
    """sum over the window of x (sliding along the paired conv axes) times y, contracting dot axes too."""
    (conv_x, dot_x, ign_x), (conv_y, dot_y, ign_y) = x_axes, y_axes
    win = xp.lib.stride_tricks.sliding_window_view(x, tuple(y.shape[j] for j in conv_y), axis=tuple(conv_x))
    # win: x's axes (conv ones now the output positions), then one window axis per conv axis
    n = win.ndim
    x_labels = list(range(n))
    y_labels = [None] * y.ndim
    nxt = n
    for k, j in enumerate(conv_y):
        y_labels[j] = x.ndim + k  # the window axis of conv pair k
    for i, j in zip(dot_x, dot_y):
        y_labels[j] = i
    for j in ign_y:
        y_labels[j] = nxt
        nxt += 1
    out_labels = [x_labels[i] for i in ign_x] + [y_labels[j] for j in ign_y] + [x_labels[i] for i in conv_x]
    out = xp.einsum(win, x_labels, y, y_labels, out_labels, optimize=True)
    return xp.transpose(out, out_order) if out_order is not None else out


def _kernel(xp, a, b, axes, dot_axes, mode):
    lay_a, lay_b, out_shape = _layout(a.shape, b.shape, axes, dot_axes, mode)
    conv_a, dot_a, ign_a = lay_a
    conv_b, dot_b, ign_b = lay_b
    if mode == "valid" and any(a.shape[i] < b.shape[j] for i, j in zip(conv_a, conv_b)):
        # slide A over B instead (convolution commutes), then put A's ignored axes first again
        out = _kernel(xp, b, a, (conv_b, conv_a), (dot_b, dot_a), mode)
        n_ib, n_ia = len(ign_b), len(ign_a)
        order = list(range(n_ib, n_ib + n_ia)) + list(range(n_ib)) + list(range(n_ib + n_ia, out.ndim))
        return xp.transpose(out, order)
    flip = [slice(None)] * b.ndim
    for j in conv_b:
        flip[j] = slice(None, None, -1)
    b_flipped = b[tuple(flip)]
    if mode != "valid":  # pad A by len(B) - 1 on both sides of each convolved axis: the full convolution
        pad = [(0, 0)] * a.ndim
        for i, j in zip(conv_a, conv_b):
            pad[i] = (b.shape[j] - 1,) * 2
        a = xp.pad(a, pad)
    out = _correlate(xp, a, b_flipped, lay_a, lay_b, None)
    if mode == "same":  # the centre of the full result, as long as A (scipy's 'same')
        start = len(ign_a) + len(ign_b)
        index = [slice(None)] * out.ndim
        for k, j in enumerate(conv_b):
            lo = (b.shape[j] - 1) // 2
            index[start + k] = slice(lo, lo + out_shape[start + k])
        out = out[tuple(index)]
    return out


class ConvolveOp(Op):
    name = "convolve"
    save_inputs = (0, 1)

    def infer(self, a, b, axes=None, dot_axes=((), ()), mode="full"):
        return spec(_layout(a.shape, b.shape, axes, dot_axes, mode)[2], result_dtype(a, b))

    def kernel(self, xp, a, b, axes=None, dot_axes=((), ()), mode="full"):
        dtype = result_dtype(a, b)
        out = _kernel(xp, upcast(a.astype(dtype, copy=False)), upcast(b.astype(dtype, copy=False)), axes, dot_axes, mode)
        return rounded(xp.ascontiguousarray(out), dtype)

    def vjp(self, ctx, g):
        a, b = ctx.input(0), ctx.input(1)
        attrs = ctx.attrs
        return (_grad(g, a, b, 0, **attrs) if ctx.needs_grad(0) else None,
                _grad(g, a, b, 1, **attrs) if ctx.needs_grad(1) else None)


_convolve_op = register(ConvolveOp())


def _grad(g, a, b, argnum, axes=None, dot_axes=((), ()), mode="full"):
    """d out / d (A or B): g convolved with the other operand flipped along its convolved axes."""
    from ember.ops.shape import flip, pad, permute

    lay_a, lay_b, _ = _layout(tuple(a.shape), tuple(b.shape), axes, dot_axes, mode)
    n_ia, n_ib = len(lay_a[2]), len(lay_b[2])
    g_ign_a = tuple(range(n_ia))
    g_ign_b = tuple(range(n_ia, n_ia + n_ib))
    g_conv = tuple(range(n_ia + n_ib, g.ndim))
    (x_lay, y_lay, y, g_ign_y) = (lay_a, lay_b, b, g_ign_b) if argnum == 0 else (lay_b, lay_a, a, g_ign_a)
    x_shape = tuple((a if argnum == 0 else b).shape)
    conv_y, _, ign_y = y_lay
    if mode == "full":
        new_mode = "valid"
    elif mode == "valid":
        new_mode = "full" if any(x_shape[i] > y.shape[j] for i, j in zip(x_lay[0], conv_y)) else "valid"
    else:  # 'same': pad g back to the full result's extent, then take the valid part
        widths = [0] * (2 * g.ndim)
        for k, j in zip(g_conv, lay_b[0]):
            lo = (b.shape[j] - 1) // 2
            widths[2 * (g.ndim - 1 - k)] = lo
            widths[2 * (g.ndim - 1 - k) + 1] = b.shape[j] - 1 - lo
        g = pad(g, widths)
        new_mode = "valid"
    result = convolve(g, flip(y, conv_y), axes=(g_conv, conv_y), dot_axes=(g_ign_y, ign_y), mode=new_mode)
    order = np.argsort(list(x_lay[2]) + list(x_lay[1]) + list(x_lay[0]))
    return permute(result, tuple(int(i) for i in order))


def convolve(A, B, axes=None, dot_axes=((), ()), mode: str = "full"):
    """The convolution of A and B over `axes` (a pair of axis lists; all of A's by default), also summing over
    the paired `dot_axes`; the result has A's other axes, then B's, then the convolved ones."""
    norm = None if axes is None else (tuple(int(i) for i in axes[0]), tuple(int(i) for i in axes[1]))
    dots = (tuple(int(i) for i in dot_axes[0]), tuple(int(i) for i in dot_axes[1]))
    return apply(_convolve_op, A, B, axes=norm, dot_axes=dots, mode=mode)
