"""`multi_head_attention_forward`, PyTorch's F.multi_head_attention_forward: the computation nn.MultiheadAttention
runs on its parameters, here where both F and the module import it. Internally the heads are laid out as
(N, heads, L, head_dim) and the scores come from one batched matmul."""

from __future__ import annotations

import math

from ember import creation, dtypes, ops
from ember.ops.split import split, unbind
from ember.tensor import Tensor


def _canonical_mask(mask: Tensor | None, name: str, dtype) -> Tensor | None:
    """A bool mask (True = may not attend) as an additive float mask (-inf there); float masks as they are."""
    if mask is None:
        return None
    if mask.dtype == dtypes.bool_:
        return creation.zeros(tuple(mask.shape), dtype=dtype, device=mask.device).masked_fill(mask, float("-inf"))
    if not mask.dtype.is_floating_point:
        raise AssertionError(f"only bool and floating types of {name} are supported")
    return mask.to(dtype)


def _check_shapes(query: Tensor, key: Tensor, value: Tensor, key_padding_mask, attn_mask, num_heads: int) -> bool:
    """PyTorch's shape rules for the inputs and masks; returns whether the input is batched."""
    if query.ndim == 3:
        if key.ndim != 3 or value.ndim != 3:
            raise AssertionError("For batched (3-D) `query`, expected `key` and `value` to be 3-D but found "
                                 f"{key.ndim}-D and {value.ndim}-D tensors respectively")
        if key_padding_mask is not None and key_padding_mask.ndim != 2:
            raise AssertionError("For batched (3-D) `query`, expected `key_padding_mask` to be `None` or 2-D but "
                                 f"found {key_padding_mask.ndim}-D tensor instead")
        if attn_mask is not None and attn_mask.ndim not in (2, 3):
            raise AssertionError("For batched (3-D) `query`, expected `attn_mask` to be `None`, 2-D or 3-D but "
                                 f"found {attn_mask.ndim}-D tensor instead")
        return True
    if query.ndim == 2:
        if key.ndim != 2 or value.ndim != 2:
            raise AssertionError("For unbatched (2-D) `query`, expected `key` and `value` to be 2-D but found "
                                 f"{key.ndim}-D and {value.ndim}-D tensors respectively")
        if key_padding_mask is not None and key_padding_mask.ndim != 1:
            raise AssertionError("For unbatched (2-D) `query`, expected `key_padding_mask` to be `None` or 1-D but "
                                 f"found {key_padding_mask.ndim}-D tensor instead")
        if attn_mask is not None:
            if attn_mask.ndim not in (2, 3):
                raise AssertionError("For unbatched (2-D) `query`, expected `attn_mask` to be `None`, 2-D or 3-D "
                                     f"but found {attn_mask.ndim}-D tensor instead")
            expected = (num_heads, query.shape[0], key.shape[0])
            if attn_mask.ndim == 3 and tuple(attn_mask.shape) != expected:
                raise AssertionError(f"Expected `attn_mask` shape to be {expected} but got {tuple(attn_mask.shape)}")
        return False
    raise AssertionError(f"query should be unbatched 2D or batched 3D tensor but received {query.ndim}-D query tensor")


def _heads(x: Tensor, num_heads: int, batch_first: bool, parts: int = 1) -> tuple:
    """(L, N, parts*E) or (N, L, parts*E) -> `parts` tensors (N, heads, L, head_dim), as views."""
    a, b, e = x.shape
    x = x.reshape(a, b, parts, num_heads, e // (parts * num_heads))
    x = x.permute(2, 0, 3, 1, 4) if batch_first else x.permute(2, 1, 3, 0, 4)
    return unbind(x, 0)


def _append_along_seq(x: Tensor, row: Tensor, batch_first: bool) -> Tensor:
    """x (L, N, E) or (N, L, E) with one more position along L: row (1, 1, E) for every batch entry."""
    n = x.shape[0] if batch_first else x.shape[1]
    shape = (n, 1, x.shape[2]) if batch_first else (1, n, x.shape[2])
    return ops.cat([x, row.expand(shape).to(x.dtype)], 1 if batch_first else 0)


def _static_heads(x: Tensor, name: str, bsz: int, num_heads: int, head_dim: int) -> Tensor:
    """A given (N * heads, S, head_dim) key or value as (N, heads, S, head_dim)."""
    if x.ndim != 3 or x.shape[0] != bsz * num_heads or x.shape[2] != head_dim:
        raise AssertionError(f"expecting {name} of shape ({bsz * num_heads}, S, {head_dim}), but got "
                             f"{tuple(x.shape)}")
    return x.reshape(bsz, num_heads, x.shape[1], head_dim)


def multi_head_attention_forward(query: Tensor, key: Tensor, value: Tensor, embed_dim_to_check: int, num_heads: int,
                                 in_proj_weight: Tensor | None, in_proj_bias: Tensor | None,
                                 bias_k: Tensor | None, bias_v: Tensor | None, add_zero_attn: bool,
                                 dropout_p: float, out_proj_weight: Tensor, out_proj_bias: Tensor | None,
                                 training: bool = True, key_padding_mask: Tensor | None = None,
                                 need_weights: bool = True, attn_mask: Tensor | None = None,
                                 use_separate_proj_weight: bool = False, q_proj_weight: Tensor | None = None,
                                 k_proj_weight: Tensor | None = None, v_proj_weight: Tensor | None = None,
                                 static_k: Tensor | None = None, static_v: Tensor | None = None,
                                 average_attn_weights: bool = True, is_causal: bool = False, *,
                                 batch_first: bool = False) -> tuple[Tensor, Tensor | None]:
    """Multi-head attention as PyTorch computes it; inputs are (L, N, E), (N, L, E) with batch_first, or (L, E).

    Masks: a bool attn_mask or key_padding_mask marks with True the positions that may NOT be attended
    (the opposite of scaled_dot_product_attention's bool mask); float masks are added to the scores.
    is_causal is a hint that attn_mask is the causal mask, which must still be given. static_k and static_v,
    (N * num_heads, S, head_dim), replace the projected keys and values.
    """
    from ember.nn import functional as F  # F re-exports this function, so it is imported here, not at the top

    batched = _check_shapes(query, key, value, key_padding_mask, attn_mask, num_heads)
    if not batched:
        batch_first = False
        query, key, value = query.unsqueeze(1), key.unsqueeze(1), value.unsqueeze(1)
        if key_padding_mask is not None:
            key_padding_mask = key_padding_mask.unsqueeze(0)
    if batch_first:
        bsz, tgt_len, embed_dim = query.shape
        src_len = key.shape[1]
    else:
        tgt_len, bsz, embed_dim = query.shape
        src_len = key.shape[0]
    dtype = query.dtype
    key_padding_mask = _canonical_mask(key_padding_mask, "key_padding_mask", dtype)
    if is_causal and attn_mask is None:
        raise RuntimeError("Need attn_mask if specifying the is_causal hint. You may use the Transformer module "
                           "method `generate_square_subsequent_mask` to create this mask.")
    if is_causal and key_padding_mask is None and not need_weights:
        attn_mask = None  # scaled_dot_product_attention builds the causal mask itself
    else:
        attn_mask = _canonical_mask(attn_mask, "attn_mask", dtype)
        if key_padding_mask is not None:
            is_causal = False  # the merged mask is no longer causal
    if embed_dim != embed_dim_to_check:
        raise AssertionError(f"was expecting embedding dimension of {embed_dim_to_check}, but got {embed_dim}")
    head_dim = embed_dim // num_heads
    if head_dim * num_heads != embed_dim:
        raise AssertionError(f"embed_dim {embed_dim} not divisible by num_heads {num_heads}")

    # --- input projections --------------------------------------------------------------
    packed = None
    if use_separate_proj_weight:
        if tuple(key.shape[:2]) != tuple(value.shape[:2]):
            raise AssertionError(f"key's sequence and batch dims {tuple(key.shape[:2])} do not match value's "
                                 f"{tuple(value.shape[:2])}")
        for name, w in (("q_proj_weight", q_proj_weight), ("k_proj_weight", k_proj_weight),
                        ("v_proj_weight", v_proj_weight)):
            if w is None:
                raise AssertionError(f"use_separate_proj_weight is True but {name} is None")
        b_q = b_k = b_v = None
        if in_proj_bias is not None:
            b_q, b_k, b_v = split(in_proj_bias, embed_dim, 0)
        q, k, v = (F.linear(query, q_proj_weight, b_q), F.linear(key, k_proj_weight, b_k),
                   F.linear(value, v_proj_weight, b_v))
    else:
        if tuple(key.shape) != tuple(value.shape):
            raise AssertionError(f"key shape {tuple(key.shape)} does not match value shape {tuple(value.shape)}")
        if in_proj_weight is None:
            raise AssertionError("use_separate_proj_weight is False but in_proj_weight is None")
        if query is key and key is value and bias_k is None:
            # self-attention: one matmul for q, k and v, and one reshape into heads
            packed = F.linear(query, in_proj_weight, in_proj_bias)
        else:
            w_q, w_kv = split(in_proj_weight, (embed_dim, 2 * embed_dim), 0)
            b_q = b_kv = None
            if in_proj_bias is not None:
                b_q, b_kv = split(in_proj_bias, (embed_dim, 2 * embed_dim), 0)
            q = F.linear(query, w_q, b_q)
            if key is value:
                k, v = split(F.linear(key, w_kv, b_kv), embed_dim, -1)
            else:
                w_k, w_v = split(w_kv, embed_dim, 0)
                b_k, b_v = (None, None) if b_kv is None else split(b_kv, embed_dim, 0)
                k, v = F.linear(key, w_k, b_k), F.linear(value, w_v, b_v)

    # --- masks: attn_mask to (1 or N, 1 or heads, L, S) --------------------------------------
    if attn_mask is not None:
        if attn_mask.ndim == 2:
            if tuple(attn_mask.shape) != (tgt_len, src_len):
                raise RuntimeError(f"The shape of the 2D attn_mask is {tuple(attn_mask.shape)}, but should be "
                                   f"{(tgt_len, src_len)}.")
            attn_mask = attn_mask.reshape(1, 1, tgt_len, src_len)
        else:
            if tuple(attn_mask.shape) != (bsz * num_heads, tgt_len, src_len):
                raise RuntimeError(f"The shape of the 3D attn_mask is {tuple(attn_mask.shape)}, but should be "
                                   f"{(bsz * num_heads, tgt_len, src_len)}.")
            attn_mask = attn_mask.reshape(bsz, num_heads, tgt_len, src_len)
    if bias_k is not None and bias_v is not None:
        if static_k is not None or static_v is not None:
            raise AssertionError(f"bias cannot be added to static {'key' if static_k is not None else 'value'}.")
        k = _append_along_seq(k, bias_k, batch_first)
        v = _append_along_seq(v, bias_v, batch_first)
        attn_mask = None if attn_mask is None else F.pad(attn_mask, (0, 1))
        key_padding_mask = None if key_padding_mask is None else F.pad(key_padding_mask, (0, 1))
    elif bias_k is not None or bias_v is not None:
        raise AssertionError("bias_k and bias_v must both be given or both be None")

    if packed is not None:
        q, k, v = _heads(packed, num_heads, batch_first, 3)
    else:
        (q,), (k,), (v,) = (_heads(t, num_heads, batch_first) for t in (q, k, v))
    k = k if static_k is None else _static_heads(static_k, "static_k", bsz, num_heads, head_dim)
    v = v if static_v is None else _static_heads(static_v, "static_v", bsz, num_heads, head_dim)
    if add_zero_attn:
        zeros = creation.zeros((bsz, num_heads, 1, head_dim), dtype=k.dtype, device=k.device)
        k, v = ops.cat([k, zeros], 2), ops.cat([v, zeros], 2)
        attn_mask = None if attn_mask is None else F.pad(attn_mask, (0, 1))
        key_padding_mask = None if key_padding_mask is None else F.pad(key_padding_mask, (0, 1))
    src_len = k.shape[2]
    if key_padding_mask is not None:
        if tuple(key_padding_mask.shape) != (bsz, src_len):
            raise AssertionError(f"Expected key_padding_mask of shape {(bsz, src_len)}, but got "
                                 f"{tuple(key_padding_mask.shape)}")
        kpm = key_padding_mask.reshape(bsz, 1, 1, src_len)
        attn_mask = kpm if attn_mask is None else attn_mask + kpm
    if not training:
        dropout_p = 0.0

    # --- attention -------------------------------------------------------------------------
    weights = None
    if need_weights:
        scores = ops.matmul(q * math.sqrt(1.0 / head_dim), k.transpose(-2, -1))
        if attn_mask is not None:
            scores = scores + attn_mask
        weights = ops.softmax(scores, -1)
        if dropout_p > 0.0:
            weights = F.dropout(weights, dropout_p, True)
        out = ops.matmul(weights, v)
        if average_attn_weights:
            weights = weights.mean(1)
        if not batched:
            weights = weights.squeeze(0)
    else:
        out = F.scaled_dot_product_attention(q, k, v, attn_mask, dropout_p, is_causal)
    # (N, heads, L, head_dim) -> (L, N, E) or (N, L, E), then the output projection on rows
    out = out.permute(0, 2, 1, 3) if batch_first else out.permute(2, 0, 1, 3)
    lead = tuple(out.shape[:2])
    out = F.linear(out.reshape(-1, embed_dim), out_proj_weight, out_proj_bias).reshape(lead + (embed_dim,))
    if not batched:
        out = out.squeeze(1)
    return out, weights
