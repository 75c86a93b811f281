"""Scaled dot-product attention as one op: softmax(Q K^T * scale + mask) V, forward and backward.

Composed of ops, attention costs a matmul, a scale, a mask, a softmax and a second matmul forward
and about twice that backward, each a dispatch and a saved intermediate. Here the forward is one
kernel that keeps the attention weights for the backward pass, and the gradient of Q, K and V is
one kernel too (`scaled_dot_product_attention_backward`). Under `create_graph=True` the gradient is
written in Ember ops instead, so higher derivatives exist. Inputs share their batch dims
(..., L, E), (..., S, E), (..., S, Ev); the mask (bool: True attends; float: added) broadcasts to
(..., L, S). `nn.functional.scaled_dot_product_attention` uses this op when there is no dropout.
"""

from __future__ import annotations

import numpy as np

from ember.autograd.grad_mode import state as grad_state
from ember.dispatch import apply
from ember.dtypes import bool_
from ember.errors import ShapeError, fmt_shape
from ember.kernels import attention, gemm
from ember.op import Op, register
from ember.ops._rules import FLOAT_NP, spec
from ember.ops.opmath import rounded, upcast


def _swap(x):
    return np.swapaxes(x, -1, -2)


def _causal_blocked(xp, L: int, S: int):
    """True above the diagonal of an (L, S) score matrix (top-left aligned, as PyTorch's is_causal)."""
    return xp.triu(xp.ones((L, S), dtype=bool), 1)


def _weights(xp, q, k, mask, scale: float, causal: bool, out, softmax=None):
    """Softmax attention weights (..., L, S) in q's (float32 or float64) dtype, written into `out` (C-contiguous);
    `softmax`: attention_compiled's row kernel, when the call runs it."""
    s = gemm.matmul(q * q.dtype.type(scale), _swap(k), out=out, xp=xp)
    if mask is not None:
        if mask.dtype == np.bool_:
            xp.copyto(s, s.dtype.type(-np.inf), where=~mask)
        else:
            s += upcast(mask).astype(s.dtype, copy=False)
    if softmax is not None:
        softmax(attention.rows(s), causal)
        return s
    if causal:  # a masked copy over the blocked half: 10x faster than assigning through a boolean index
        xp.copyto(s, s.dtype.type(-np.inf), where=_causal_blocked(xp, s.shape[-2], s.shape[-1]))
    peak = s.max(axis=-1, keepdims=True)
    nowhere = peak == -np.inf  # rows that attend nowhere: weights 0 (output 0), as PyTorch's attention gives
    peak[nowhere] = 0
    with np.errstate(invalid="ignore"):  # a NaN score still makes its row NaN
        s -= peak
        xp.exp(s, out=s)
        sums = _row_sums(xp, s)
        sums[nowhere] = 1
        s /= sums
    return s


def safe_softmax(scores):
    """softmax over the last dim in Ember ops, with 0 for rows whose scores are all -inf (where softmax is NaN):
    PyTorch's attention weights for a query that may attend nowhere. The gradient through such rows is 0."""
    from ember.ops.activation import softmax

    nowhere = (scores == float("-inf")).all(-1, keepdim=True)
    return softmax(scores.masked_fill(nowhere, 0.0), -1).masked_fill(nowhere, 0.0)


def _chunk(mask, ndim: int, a: int, b):
    """The mask's part for batch chunk a:b (a mask without that axis broadcasts over it)."""
    if mask is None or b is None or mask.ndim < ndim or mask.shape[0] == 1:
        return mask
    return mask[a:b]


def _row_sums(xp, a):
    """Sums over the last axis, keepdims, as a product with a ones column: NumPy's reduction over short
    rows (attention's 64 keys) runs 5x slower than the GEMM."""
    return xp.matmul(a, xp.ones((a.shape[-1], 1), a.dtype))


class ScaledDotProductAttentionOp(Op):
    """Outputs (attention output (..., L, Ev), attention weights (..., L, S), kept for the gradient)."""

    name = "scaled_dot_product_attention"
    n_outputs = 2
    fresh_output = True
    save_inputs = (0, 1, 2, 3)
    save_outputs = (1,)

    def infer(self, q, k, v, mask, scale, causal):
        if len(q.shape) < 2 or len(k.shape) != len(q.shape) or len(v.shape) != len(q.shape) \
                or tuple(q.shape[:-2]) != tuple(k.shape[:-2]) or tuple(k.shape[:-2]) != tuple(v.shape[:-2]) \
                or q.shape[-1] != k.shape[-1] or k.shape[-2] != v.shape[-2]:
            raise ShapeError(f"{self.name}: expected query (..., L, E), key (..., S, E) and value (..., S, Ev) with "
                             f"the same batch dims, got {fmt_shape(q.shape)}, {fmt_shape(k.shape)} and "
                             f"{fmt_shape(v.shape)}")
        if not (q.dtype == k.dtype == v.dtype) or q.dtype not in FLOAT_NP:
            raise TypeError(f"{self.name}: expected query, key and value of one floating dtype, got {q.dtype}, "
                            f"{k.dtype} and {v.dtype}")
        lead, L, S = tuple(q.shape[:-2]), q.shape[-2], k.shape[-2]
        if mask is not None:
            try:
                if len(mask.shape) > len(lead) + 2:
                    raise ValueError
                np.broadcast_shapes(tuple(mask.shape), lead + (L, S))
            except ValueError:
                raise ShapeError(f"{self.name}: attn_mask of shape {fmt_shape(mask.shape)} does not broadcast to the "
                                 f"scores' shape {fmt_shape(lead + (L, S))}") from None
        stat = np.dtype(np.float32) if q.dtype.itemsize < 4 else q.dtype
        return spec(lead + (L, v.shape[-1]), q.dtype), spec(lead + (L, S), stat)

    def kernel(self, xp, q, k, v, mask, scale, causal):
        dtype = q.dtype
        q, k, v = upcast(q), upcast(k), upcast(v)
        p = xp.empty(q.shape[:-1] + (k.shape[-2],), q.dtype)
        out = _laid_out_like(xp, q, q.shape[:-1] + (v.shape[-1],), q.dtype)
        if mask is None and attention.entries(xp, q, k, v, p, out, scale, causal):
            return rounded(out, dtype), p
        softmax = attention.kernel("softmax_rows", xp, p.dtype, p.size)  # one path for every chunk

        def work(a, b):
            _weights(xp, q[a:b], k[a:b], _chunk(mask, q.ndim, a, b), scale, causal, out=p[a:b], softmax=softmax)
            gemm.matmul(p[a:b], v[a:b], out=out[a:b], xp=xp)

        attention.by_batch(xp, work, q.shape, p.size)
        return rounded(out, dtype), p

    def vjp(self, ctx, g_out, g_p=None):
        q, k, v, mask = (ctx.input(i) for i in range(4))
        scale = ctx.attrs["scale"]
        p = ctx.output_at(1)
        if grad_state.enabled or g_p is not None:  # create_graph: a gradient made of differentiable ops
            return _vjp_in_ops(q, k, v, mask, p, g_out, g_p, scale, ctx)
        dq, dk, dv = apply(_sdpa_backward_op, q, k, v, p, g_out, scale=scale)
        dmask = None
        if mask is not None and ctx.needs_grad(3):
            dmask = _mask_grad(_score_grad(p, g_out @ v.transpose(-2, -1)), mask)
        return dq, dk, dv, dmask


class ScaledDotProductAttentionBackwardOp(Op):
    """(dQ, dK, dV) of attention from Q, K, V, the attention weights P and the output's gradient."""

    name = "scaled_dot_product_attention_backward"
    n_outputs = 3
    fresh_output = True
    differentiable = False  # under create_graph the ops of _vjp_in_ops are recorded instead

    def infer(self, q, k, v, p, g, scale):
        return spec(tuple(q.shape), q.dtype), spec(tuple(k.shape), k.dtype), spec(tuple(v.shape), v.dtype)

    def kernel(self, xp, q, k, v, p, g, scale):
        dtype = q.dtype
        q, k, v, g = upcast(q), upcast(k), upcast(v), upcast(g).astype(p.dtype, copy=False)
        dq, dk, dv = (_laid_out_like(xp, a, a.shape, p.dtype) for a in (q, k, v))
        if attention.backward_entries(xp, q, k, v, p, g, dq, dk, dv, scale):
            return rounded(dq, dtype), rounded(dk, dtype), rounded(dv, dtype)
        sc = p.dtype.type(scale)
        grad_rows = attention.kernel("softmax_grad_rows", xp, p.dtype, p.size)
        if grad_rows is not None:
            p = np.ascontiguousarray(p)

        def work(a, b):
            pa, ga = p[a:b], g[a:b]
            gemm.matmul(_swap(pa), ga, out=dv[a:b], xp=xp)
            dp = gemm.matmul(ga, _swap(v[a:b]), xp=xp)
            if grad_rows is not None:
                grad_rows(attention.rows(dp), attention.rows(pa))
            else:
                dp -= _row_sums(xp, dp * pa)
                dp *= pa  # now the scores' gradient
            gemm.matmul(dp, k[a:b], out=dq[a:b], xp=xp)
            dq[a:b] *= sc
            gemm.matmul(_swap(dp), q[a:b], out=dk[a:b], xp=xp)
            dk[a:b] *= sc

        attention.by_batch(xp, work, q.shape, p.size)
        return rounded(dq, dtype), rounded(dk, dtype), rounded(dv, dtype)


def _laid_out_like(xp, a, shape, dtype):
    """An empty array of `shape` whose axes lie in memory in the order of `a`'s. Heads split from a (B, T, H*D)
    projection arrive as (B, H, T, D) views of (B, T, H, D) memory: results laid out the same way go back to
    (B, T, H*D) (the output's transpose and reshape, the gradients' through the split) as free views, where
    contiguous ones were each copied (a transformer step: eight 0.5 MB copies, and a concatenation of copies)."""
    return xp.empty_like(a, dtype=dtype, order="K", shape=shape)


_sdpa_op = register(ScaledDotProductAttentionOp())
_sdpa_backward_op = register(ScaledDotProductAttentionBackwardOp())


def _score_grad(p, dp):
    """The scores' gradient from the weights' (softmax's rule), in Ember ops."""
    from ember.ops.reduction import sum as _sum

    return p * (dp - _sum(dp * p, -1, keepdim=True))


def _mask_grad(ds, mask):
    from ember.ops.shape import sum_to_size

    return sum_to_size(ds, *tuple(mask.shape)).to(mask.dtype)


def _vjp_in_ops(q, k, v, mask, p, g_out, g_p, scale, ctx):
    """The gradient in Ember ops (recorded, so it can be differentiated again): P is recomputed from
    Q, K and the mask so that the gradient's own gradient reaches them."""
    from ember.ops.linalg import matmul

    s = matmul(q * scale, k.transpose(-2, -1))
    if ctx.attrs["causal"]:
        from ember.tensor import Tensor

        blocked = Tensor._make(q.device.backend.from_host(_causal_blocked(np, s.shape[-2], s.shape[-1])), q.device)
        s = s.masked_fill(blocked, float("-inf"))
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf")) if mask.dtype == bool_ else s + mask
    p = safe_softmax(s)
    dp = None
    if g_out is not None:
        dp = matmul(g_out, v.transpose(-2, -1))
    if g_p is not None:
        dp = g_p if dp is None else dp + g_p
    ds = _score_grad(p, dp) if dp is not None else None
    dv = matmul(p.transpose(-2, -1), g_out) if g_out is not None else None
    dq = matmul(ds, k) * scale if ds is not None else None
    dk = matmul(ds.transpose(-2, -1), q) * scale if ds is not None else None
    dmask = _mask_grad(ds, mask) if mask is not None and ds is not None and ctx.needs_grad(3) else None
    return dq, dk, dv, dmask


def scaled_dot_product_attention(query, key, value, attn_mask=None, scale: float = 1.0, is_causal: bool = False):
    """softmax(Q K^T * scale + mask) V as one op (no dropout; batch dims of Q, K, V equal)."""
    return apply(_sdpa_op, query, key, value, attn_mask, scale=float(scale), causal=bool(is_causal))[0]
