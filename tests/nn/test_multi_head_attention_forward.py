"""F.multi_head_attention_forward (the function nn.MultiheadAttention runs) against PyTorch's, called with PyTorch's
positional signature: outputs, attention weights and the gradients of every input, with packed and separate
projections, bias_k/bias_v, add_zero_attn, masks, static_k/static_v and unbatched input; and its errors."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import ember as em

F, TF = em.nn.functional, torch.nn.functional
RNG = np.random.default_rng(0)
E, HEADS, L, S, N = 8, 2, 4, 5, 3


def _weights(separate: bool, bias_kv: bool) -> dict:
    w = {"in_proj_weight": None if separate else RNG.standard_normal((3 * E, E)) * 0.3,
         "in_proj_bias": RNG.standard_normal(3 * E) * 0.1,
         "bias_k": RNG.standard_normal((1, 1, E)) if bias_kv else None,
         "bias_v": RNG.standard_normal((1, 1, E)) if bias_kv else None,
         "out_proj_weight": RNG.standard_normal((E, E)) * 0.3, "out_proj_bias": RNG.standard_normal(E) * 0.1}
    for name in ("q_proj_weight", "k_proj_weight", "v_proj_weight"):
        w[name] = RNG.standard_normal((E, E)) * 0.3 if separate else None
    return w


def _call(lib, arrays: dict, flags: dict, grads: dict):
    """lib's function called positionally in PyTorch's argument order; tensors that need gradients go in `grads`."""
    def t(name):
        a = arrays.get(name)
        if a is None:
            return None
        x = (em.tensor if lib is F else torch.tensor)(a, requires_grad=a.dtype.kind == "f" and name in grads)
        grads[name] = x
        return x

    q = t("query")
    k = q if flags.get("self") else t("key")
    v = k if flags.get("self") else t("value")
    return lib.multi_head_attention_forward(
        q, k, v, E, HEADS, t("in_proj_weight"), t("in_proj_bias"), t("bias_k"), t("bias_v"),
        flags.get("add_zero_attn", False), 0.0, t("out_proj_weight"), t("out_proj_bias"), True,
        t("key_padding_mask"), flags.get("need_weights", True), t("attn_mask"), flags.get("separate", False),
        t("q_proj_weight"), t("k_proj_weight"), t("v_proj_weight"), t("static_k"), t("static_v"),
        flags.get("average", True), False)


CASES = {
    "self-attention": {"self": True},
    "cross-attention": {},
    "separate projections": {"separate": True},
    "bias_k and bias_v": {"bias_kv": True},
    "add_zero_attn and masks": {"add_zero_attn": True, "masks": True},
    "per-head weights": {"average": False, "masks": True},
    "without weights (sdpa)": {"need_weights": False, "masks": True},
    "static_k and static_v": {"static": True},
    "static_k, add_zero_attn": {"static": True, "add_zero_attn": True, "need_weights": False},
    "unbatched": {"unbatched": True},
}


@pytest.mark.parametrize("case", list(CASES))
def test_matches_torch(case: str) -> None:
    flags = CASES[case]
    arrays = _weights(flags.get("separate", False), flags.get("bias_kv", False))
    lead_q, lead_kv = ((L,), (S,)) if flags.get("unbatched") else ((L, N), (S, N))
    arrays["query"] = RNG.standard_normal(lead_q + (E,))
    arrays["key"] = RNG.standard_normal(lead_kv + (E,))
    arrays["value"] = RNG.standard_normal(lead_kv + (E,))
    if flags.get("masks"):
        arrays["attn_mask"] = np.triu(np.ones((L, S), dtype=bool), 2)
        kpm = np.zeros((N, S), dtype=bool)
        kpm[1, 3] = True
        arrays["key_padding_mask"] = kpm
    if flags.get("static"):
        arrays["static_k"] = RNG.standard_normal((N * HEADS, S + 1, E // HEADS))
        arrays["static_v"] = RNG.standard_normal((N * HEADS, S + 1, E // HEADS))
    wanted = [n for n, a in arrays.items() if a is not None and a.dtype.kind == "f"]
    ours, theirs = {n: None for n in wanted}, {n: None for n in wanted}
    out, weights = _call(F, arrays, flags, ours)
    tout, tweights = _call(TF, arrays, flags, theirs)
    np.testing.assert_allclose(out.detach().numpy(), tout.detach().numpy(), rtol=1e-9, atol=1e-10)
    if flags.get("need_weights", True):
        np.testing.assert_allclose(weights.detach().numpy(), tweights.detach().numpy(), rtol=1e-9, atol=1e-10)
    else:
        assert weights is None and tweights is None
    g = RNG.standard_normal(tuple(tout.shape))
    out.backward(em.tensor(g))
    tout.backward(torch.tensor(g))
    for name, x in ours.items():
        if x is not None and theirs[name].grad is not None:
            np.testing.assert_allclose(x.grad.numpy(), theirs[name].grad.numpy(), rtol=1e-8, atol=1e-10,
                                       err_msg=f"gradient of {name}")


def test_the_module_runs_the_same_function() -> None:
    module = em.nn.MultiheadAttention(E, HEADS, bias=True, add_bias_kv=True)
    q = em.tensor(RNG.standard_normal((L, N, E)), dtype=em.float32)
    k = em.tensor(RNG.standard_normal((S, N, E)), dtype=em.float32)
    out, weights = module(q, k, k)
    fout, fweights = F.multi_head_attention_forward(
        q, k, k, E, HEADS, module.in_proj_weight, module.in_proj_bias, module.bias_k, module.bias_v, False, 0.0,
        module.out_proj.weight, module.out_proj.bias)
    np.testing.assert_array_equal(out.detach().numpy(), fout.detach().numpy())
    np.testing.assert_array_equal(weights.detach().numpy(), fweights.detach().numpy())


BAD = {
    "bias_k with static_k": ({"bias_kv": True, "static": True}, "bias cannot be added to static key."),
    "static_k of the wrong batch": ({"static": True, "static_batch": 1},
                                    r"expecting static_k of shape \(6, S, 4\), but got \(2, 6, 4\)"),
}


@pytest.mark.parametrize("case", list(BAD))
def test_errors(case: str) -> None:
    flags, message = BAD[case]
    arrays = _weights(False, flags.get("bias_kv", False))
    arrays.update(query=RNG.standard_normal((L, N, E)), key=RNG.standard_normal((S, N, E)),
                  value=RNG.standard_normal((S, N, E)))
    batch = flags.get("static_batch", N)
    arrays["static_k"] = RNG.standard_normal((batch * HEADS, S + 1, E // HEADS))
    arrays["static_v"] = RNG.standard_normal((N * HEADS, S + 1, E // HEADS))
    with pytest.raises(AssertionError, match=message):
        _call(F, arrays, flags, {})
    with pytest.raises(AssertionError):
        _call(TF, arrays, flags, {})
    with pytest.raises(AssertionError, match="use_separate_proj_weight is True but q_proj_weight is None"):
        F.multi_head_attention_forward(em.ones(L, N, E), em.ones(S, N, E), em.ones(S, N, E), E, HEADS, None, None,
                                       None, None, False, 0.0, em.ones(E, E), None, use_separate_proj_weight=True)
