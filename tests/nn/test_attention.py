"""MultiheadAttention against PyTorch with PyTorch's own weights: output, attention weights and the
gradients of query/key/value and every parameter, for each layout, mask kind and option."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import ember as em
from ember import nn

from .seq_helpers import RNG, assert_same_state_dict, run_pair

E, HEADS, L, S, N = 8, 2, 4, 5, 3
CAUSAL = np.triu(np.ones((L, L), dtype=bool), 1)  # True = may not attend (nn.MultiheadAttention's convention)
KPM = np.zeros((N, L), dtype=bool)
KPM[0, 3] = True
KPM[2, 1:3] = True


def randn(*shape):
    return RNG.standard_normal(shape)


def mha(**kw):
    return lambda n: n.MultiheadAttention(E, HEADS, **kw)


def self_args(batch_first=False, length=L):
    x = randn(N, length, E) if batch_first else randn(length, N, E)
    return (x, x, x)  # one array: the module sees query is key is value (the packed projection)


def cross_args(batch_first=False, kdim=E, vdim=E):
    q = randn(N, L, E) if batch_first else randn(L, N, E)
    k = randn(N, S, kdim) if batch_first else randn(S, N, kdim)
    v = randn(N, S, vdim) if batch_first else randn(S, N, vdim)
    return (q, k, v)


# (id, builder, args, forward kwargs)
CASES = [
    ("self", mha(), self_args(), {}),
    ("self-batch_first", mha(batch_first=True), self_args(True), {}),
    ("self-no_weights", mha(), self_args(), {"need_weights": False}),
    ("self-per_head_weights", mha(batch_first=True), self_args(True), {"average_attn_weights": False}),
    ("cross", mha(), cross_args(), {}),
    ("cross-batch_first", mha(batch_first=True), cross_args(True), {"need_weights": False}),
    ("kdim-vdim", mha(kdim=3, vdim=6), cross_args(kdim=3, vdim=6), {}),
    ("kdim-vdim-batch_first-nobias", mha(kdim=3, vdim=6, bias=False, batch_first=True),
     cross_args(True, kdim=3, vdim=6), {"need_weights": False}),
    ("nobias", mha(bias=False), self_args(), {}),
    ("bias_kv-zero_attn", mha(add_bias_kv=True, add_zero_attn=True), cross_args(), {"average_attn_weights": False}),
    ("bias_kv-self-no_weights", mha(add_bias_kv=True), self_args(), {"need_weights": False}),
    ("bool-causal", mha(), self_args(), {"attn_mask": CAUSAL}),
    ("bool-causal-no_weights", mha(), self_args(), {"attn_mask": CAUSAL, "need_weights": False}),
    ("is_causal-hint", mha(batch_first=True), self_args(True),
     {"attn_mask": CAUSAL, "is_causal": True, "need_weights": False}),
    ("is_causal-hint-weights", mha(), self_args(), {"attn_mask": CAUSAL, "is_causal": True}),
    ("float-mask", mha(), self_args(), {"attn_mask": np.where(CAUSAL, -np.inf, 0.0) + 0.3 * randn(L, L)}),
    ("float-mask-3d", mha(), cross_args(), {"attn_mask": randn(N * HEADS, L, S), "need_weights": False}),
    ("bool-mask-3d", mha(batch_first=True), self_args(True),
     {"attn_mask": np.broadcast_to(CAUSAL, (N * HEADS, L, L)).copy(), "average_attn_weights": False}),
    ("key_padding", mha(batch_first=True), self_args(True), {"key_padding_mask": KPM}),
    ("key_padding-no_weights", mha(), self_args(), {"key_padding_mask": KPM, "need_weights": False}),
    ("key_padding-and-causal", mha(), self_args(), {"key_padding_mask": KPM, "attn_mask": CAUSAL}),
    ("key_padding-causal-hint", mha(), self_args(),
     {"key_padding_mask": KPM, "attn_mask": CAUSAL, "is_causal": True, "need_weights": False}),
    ("float-key_padding", mha(add_bias_kv=True, add_zero_attn=True), cross_args(),
     {"key_padding_mask": randn(N, S), "attn_mask": randn(L, S)}),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_matches_torch_float64(case):
    _, builder, args, kwargs = case
    run_pair(builder, args, kwargs)


@pytest.mark.parametrize("case", [c for c in CASES if c[0] in
                                  ("self-batch_first", "cross", "kdim-vdim", "key_padding-and-causal",
                                   "is_causal-hint")], ids=lambda c: c[0])
def test_matches_torch_float32(case):
    _, builder, args, kwargs = case
    run_pair(builder, args, kwargs, dtype=np.float32)


@pytest.mark.parametrize("kwargs", [{}, {"attn_mask": CAUSAL}, {"need_weights": False}], ids=["plain", "mask", "nw"])
def test_unbatched(kwargs):
    x = randn(L, E)
    run_pair(mha(batch_first=True), (x, x, x), kwargs)
    run_pair(mha(), (randn(L, E), randn(S, E), randn(S, E)), {"key_padding_mask": KPM[2, :1].repeat(S)})


def test_dropout_eval_matches_torch_and_training_drops():
    run_pair(mha(dropout=0.5), self_args(), {}, train=False)
    em.manual_seed(0)
    m = mha(dropout=0.5)(nn)
    x = em.tensor(randn(L, N, E).astype(np.float32))
    out1, w1 = m(x, x, x, average_attn_weights=False)
    out2, _ = m(x, x, x)
    assert not np.allclose(out1.detach().numpy(), out2.detach().numpy())
    w = w1.detach().numpy()
    assert (w >= 0).all() and (w == 0).any()  # dropped weights are zero
    m.eval()
    _, w_eval = m(x, x, x, average_attn_weights=False)
    np.testing.assert_allclose(w_eval.detach().numpy().sum(-1), 1.0, rtol=1e-5)


@pytest.mark.parametrize("builder", [mha(), mha(kdim=3, vdim=5), mha(bias=False, add_bias_kv=True)],
                         ids=["packed", "separate", "bias_kv"])
def test_state_dict_layout_matches_torch(builder):
    assert_same_state_dict(builder)
    e_names = [n for n, _ in builder(nn).named_parameters()]
    assert e_names == [n for n, _ in builder(torch.nn).named_parameters()]


def test_default_init():
    m = nn.MultiheadAttention(16, 4)
    bound = math.sqrt(6.0 / (16 + 48))  # xavier_uniform_ over the (3E, E) packed weight
    w = m.in_proj_weight.detach().numpy()
    assert np.abs(w).max() <= bound and w.std() > bound / 3
    assert not m.in_proj_bias.detach().numpy().any() and not m.out_proj.bias.detach().numpy().any()
    assert m.bias_k is None and m.head_dim == 4 and m._qkv_same_embed_dim


def test_errors():
    m = nn.MultiheadAttention(8, 2)
    x = em.zeros(3, 2, 8)
    with pytest.raises(RuntimeError, match="Need attn_mask"):
        m(x, x, x, is_causal=True)
    with pytest.raises(AssertionError, match="divisible"):
        nn.MultiheadAttention(10, 3)
    with pytest.raises(RuntimeError, match="2D attn_mask"):
        m(x, x, x, attn_mask=em.zeros(2, 2))
    with pytest.raises(AssertionError, match="3-D"):
        m(x, x[0], x[0])


def test_scaled_dot_product_attention_errors_name_the_op_and_shapes():
    F = nn.functional
    q, v = em.randn(2, 4, 8), em.randn(2, 5, 3)
    with pytest.raises(ValueError, match=r"scaled_dot_product_attention: .* got \(2, 4, 8\), \(2, 5, 7\) and \(2, 5, 3\)"):
        F.scaled_dot_product_attention(q, em.randn(2, 5, 7), v)
    with pytest.raises(ValueError, match=r"attn_mask of shape \(3, 3\) does not broadcast to the scores' shape \(2, 4, 5\)"):
        F.scaled_dot_product_attention(q, em.randn(2, 5, 8), v, attn_mask=em.ones(3, 3))
    with pytest.raises(RuntimeError, match="query, key and value of one dtype, got ember.float32, ember.float32 and "
                                        "ember.float64"):
        F.scaled_dot_product_attention(q, em.randn(2, 5, 8), v.double())
    with pytest.raises(RuntimeError):  # PyTorch refuses the same
        torch.nn.functional.scaled_dot_product_attention(torch.randn(2, 4, 8), torch.randn(2, 5, 8),
                                                          torch.randn(2, 5, 3).double())


def test_causal_attention_ignores_non_finite_future_keys_like_torch():
    """Masked (future) positions are -inf whatever their score: an inf or NaN key later in the sequence
    changes nothing for the queries before it, as in PyTorch; the rows that see it match PyTorch too."""
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((2, 3, 6, 4)).astype(np.float32) for _ in range(3))
    k[:, :, 4] = np.inf
    k[:, :, 5, 0] = np.nan
    got = em.nn.functional.scaled_dot_product_attention(em.tensor(q), em.tensor(k), em.tensor(v), is_causal=True)
    want = torch.nn.functional.scaled_dot_product_attention(torch.tensor(q), torch.tensor(k), torch.tensor(v),
                                                            is_causal=True)
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5, atol=1e-6, equal_nan=True)
    assert np.isfinite(got.numpy()[:, :, :4]).all()


@pytest.mark.parametrize("mask_shape, mask_kind", [
    (None, None), ((8, 1, 64, 64), "bool"), ((1, 4, 64, 64), "float"), ((64, 64), "bool"), ((8, 4, 64, 64), "float"),
])
@pytest.mark.parametrize("causal", [False, True])
def test_attention_split_over_threads_matches_torch_and_the_unsplit_kernel(thresholds, mask_shape, mask_kind, causal):
    """Scores of 8 x 4 x 64 x 64 values are split over the batch threads by the first batch axis, each
    chunk taking its part of a per-batch mask (or all of a broadcast one): forward and gradients match
    PyTorch, and bit for bit the same op run unsplit."""
    from ember.kernels import attention

    if mask_kind is not None and causal:
        pytest.skip("PyTorch takes either a mask or is_causal")
    rng = np.random.default_rng(0)
    q, k, v, g = (rng.standard_normal((8, 4, 64, 16)).astype(np.float32) for _ in range(4))
    mask = None
    if mask_kind == "bool":
        mask = rng.random(mask_shape) < 0.8
        mask[..., 0] = True  # every row attends somewhere
    elif mask_kind == "float":
        mask = rng.standard_normal(mask_shape).astype(np.float32)
    assert q.shape[0] * 4 * 64 * 64 >= attention.ATTENTION["split_min_scores"]  # split wherever there are two cores

    def run():
        ts = [em.tensor(a, requires_grad=True) for a in (q, k, v)]
        out = em.nn.functional.scaled_dot_product_attention(
            *ts, attn_mask=None if mask is None else em.tensor(mask), is_causal=causal)
        out.backward(em.tensor(g))
        return [out.detach().numpy()] + [t.grad.numpy() for t in ts]

    split = run()
    thresholds(attention.ATTENTION, split_min_scores=1 << 40)
    whole = run()
    for a, b in zip(split, whole):
        np.testing.assert_array_equal(a, b)
    tq, tk, tv = (torch.tensor(a, requires_grad=True) for a in (q, k, v))
    out = torch.nn.functional.scaled_dot_product_attention(
        tq, tk, tv, attn_mask=None if mask is None else torch.tensor(mask), is_causal=causal)
    out.backward(torch.tensor(g))
    for got, want in zip(split, [out, tq.grad, tk.grad, tv.grad]):
        np.testing.assert_allclose(got, want.detach().numpy(), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("case", ["causal", "bool mask, a row attending nowhere", "float mask", "NaN and far-off scores",
                                  "causal, non-finite future keys"])
def test_compiled_softmax_rows_match_the_numpy_path_and_torch(monkeypatch, case):
    """float32 scores of 16K values and more take attention's row kernels (forward and gradient): values
    and gradients match PyTorch and the NumPy path, NaN rows included, and masked weights are exactly 0."""
    pytest.importorskip("numba")
    from ember.kernels import attention

    rng = np.random.default_rng(1)
    q, k, v, g = (rng.standard_normal((4, 4, 64, 16)).astype(np.float32) for _ in range(4))
    mask, causal = None, case.startswith("causal")
    if case.startswith("bool"):
        mask = rng.random((4, 1, 64, 64)) < 0.7
        mask[..., 0] = True
        mask[1, 0, 5] = False  # query 5 of batch 1 attends nowhere: weights 0, as in PyTorch
    elif case == "float mask":
        mask = (rng.standard_normal((64, 64)) * 4).astype(np.float32)
    elif case.startswith("NaN"):
        q[0, 0, 3, 0] = np.nan  # one query's scores are all NaN
        k[0, 1, 7] *= 40.0  # scores of about -500 next to ordinary ones: weights that underflow to 0
    else:
        k[:, :, 40] = np.inf
        k[:, :, 50, 0] = np.nan
    assert attention.kernel("softmax_rows", np, np.dtype(np.float32), 4 * 4 * 64 * 64) is not None

    def run():
        ts = [em.tensor(a, requires_grad=True) for a in (q, k, v)]
        out = em.nn.functional.scaled_dot_product_attention(
            *ts, attn_mask=None if mask is None else em.tensor(mask), is_causal=causal)
        out.backward(em.tensor(g))
        return [out.detach().numpy()] + [t.grad.numpy() for t in ts]

    compiled = run()
    monkeypatch.setattr(attention, "kernel", lambda *a: None)
    monkeypatch.setattr(attention, "entries", lambda *a: False)  # the one-kernel forward is a compiled path too
    monkeypatch.setattr(attention, "backward_entries", lambda *a: False)  # and so is the backward
    numpy_path = run()
    tq, tk, tv = (torch.tensor(a, requires_grad=True) for a in (q, k, v))
    out = torch.nn.functional.scaled_dot_product_attention(
        tq, tk, tv, attn_mask=None if mask is None else torch.tensor(mask), is_causal=causal)
    out.backward(torch.tensor(g))
    for got, ref, want in zip(compiled, numpy_path, [out, tq.grad, tk.grad, tv.grad]):
        finite = np.abs(ref[np.isfinite(ref)])
        tol = 1e-4 * max(1.0, float(finite.max(initial=0.0)))  # the far-off keys' gradients reach about 40
        np.testing.assert_allclose(got, ref, rtol=1e-4, atol=tol, equal_nan=True)
        np.testing.assert_allclose(got, want.detach().numpy(), rtol=1e-4, atol=tol, equal_nan=True)
        assert (np.isnan(got) == np.isnan(want.detach().numpy())).all()
    if causal:
        assert np.isfinite(compiled[0][:, :, :40]).all()


def test_a_mask_with_more_dims_than_the_scores_is_named():
    q = em.randn(2, 4, 8)
    with pytest.raises(ValueError, match=r"attn_mask of shape \(1, 2, 4, 4\) does not broadcast to the scores' "
                                         r"shape \(2, 4, 4\)"):
        nn.functional.scaled_dot_product_attention(q, em.randn(2, 4, 8), q, attn_mask=em.ones(1, 2, 4, 4))


def test_heads_split_from_one_projection_come_back_as_views_with_torchs_values():
    """q, k, v as (B, H, T, D) views of a (B, T, 3*H*D) projection (a transformer block's): the output and the
    gradients are laid out like their inputs, so merging the heads back is a view, not a copy; values and
    gradients match PyTorch."""
    b, t, h, d = 3, 7, 2, 4
    qkv = RNG.standard_normal((b, t, 3 * h * d)).astype(np.float32)
    g = RNG.standard_normal((b, t, h * d)).astype(np.float32)

    def run(lib, x):
        q, k, v = (z.reshape(b, t, h, d).transpose(1, 2) for z in x.split(h * d, dim=2))
        y = lib.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        merged = y.transpose(1, 2).reshape(b, t, h * d)
        merged.backward(lib.tensor(g))
        return y, merged

    ex, tx = em.tensor(qkv, requires_grad=True), torch.tensor(qkv, requires_grad=True)
    (ey, em_merged), (_, t_merged) = run(em, ex), run(torch, tx)
    assert not ey.is_contiguous() and ey.transpose(1, 2).is_contiguous()  # (B, T, H, D) memory
    np.testing.assert_allclose(em_merged.detach().numpy(), t_merged.detach().numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(ex.grad.numpy(), tx.grad.numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("need_weights", [True, False])
def test_multihead_attention_with_a_query_that_attends_nowhere_matches_torch(need_weights):
    """A sample whose keys are all padded, and a query whose attn_mask blocks every key: PyTorch's
    MultiheadAttention gives NaN there when it returns the weights (an explicit softmax) and zeros'
    projection when it does not (scaled_dot_product_attention); Ember's follows both."""
    torch.manual_seed(0)
    tm = torch.nn.MultiheadAttention(8, 2, batch_first=True)
    m = nn.MultiheadAttention(8, 2, batch_first=True)
    m.load_state_dict({k: em.tensor(v.detach().numpy()) for k, v in tm.state_dict().items()})
    x = RNG.standard_normal((2, 4, 8)).astype(np.float32)
    padded = np.zeros((2, 4), bool)
    padded[1] = True
    blocked = np.zeros((4, 4), bool)
    blocked[2] = True
    for kw_t, kw_e in (({"key_padding_mask": torch.tensor(padded)}, {"key_padding_mask": em.tensor(padded)}),
                       ({"attn_mask": torch.tensor(blocked)}, {"attn_mask": em.tensor(blocked)})):
        with torch.no_grad(), em.no_grad():
            want, _ = tm(torch.tensor(x), torch.tensor(x), torch.tensor(x), need_weights=need_weights, **kw_t)
            got, _ = m(em.tensor(x), em.tensor(x), em.tensor(x), need_weights=need_weights, **kw_e)
        assert np.isnan(want.numpy()).any() == need_weights
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5, atol=1e-6, equal_nan=True)


@pytest.mark.parametrize("shapes", [((8, 4, 64, 16), (8, 4, 64, 16), (8, 4, 64, 16)),
                                    ((2, 3, 50, 16), (2, 3, 70, 16), (2, 3, 70, 24)),
                                    ((6, 40, 8), (6, 72, 8), (6, 72, 8))], ids=["square", "L != S, Ev != E", "3-D"])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("threads", [1, 2])
def test_attention_as_one_compiled_kernel_each_way_matches_torch_and_the_gemm_path(monkeypatch, shapes, causal, threads):
    """Without a mask, float32 attention's forward is one compiled kernel per (batch, head) entry (scores on the GEMM
    driver, softmax, product with V), and so is its backward (the four products and the softmax's gradient): the
    output and the gradients match PyTorch's, and the path of separate GEMMs and softmax rows within float32
    rounding, split over the threads or not, with the heads as views of one (B, T, H, D) projection as a
    transformer makes them."""
    pytest.importorskip("numba")
    from ember.kernels import attention, gemm

    if not gemm.driver_enabled():
        pytest.skip("Ember's GEMM driver does not run here")
    if threads > em.get_num_threads():
        pytest.skip("one core")
    before = em.get_num_threads()
    em.set_num_threads(threads)
    rng = np.random.default_rng(3)
    q, k, v = (rng.standard_normal(s).astype(np.float32) for s in shapes)
    g = rng.standard_normal(shapes[0][:-1] + (shapes[2][-1],)).astype(np.float32)
    ran, ran_back = [], []
    real, real_back = attention.entries, attention.backward_entries
    monkeypatch.setattr(attention, "entries", lambda *a: ran.append(real(*a)) or ran[-1])
    monkeypatch.setattr(attention, "backward_entries", lambda *a: ran_back.append(real_back(*a)) or ran_back[-1])

    def run():
        # q as a (B, H, L, E) view of (B, L, H, E) memory where it has heads
        qa = q if q.ndim == 3 else np.ascontiguousarray(q.transpose(0, 2, 1, 3)).transpose(0, 2, 1, 3)
        ts = [em.tensor(a, requires_grad=True) for a in (qa, k, v)]
        out = em.nn.functional.scaled_dot_product_attention(*ts, is_causal=causal)
        out.backward(em.tensor(g))
        return [out.detach().numpy()] + [t.grad.numpy() for t in ts]

    try:
        one_kernel = run()
        assert ran == [True] and ran_back == [True]
        monkeypatch.setattr(attention, "entries", lambda *a: False)
        monkeypatch.setattr(attention, "backward_entries", lambda *a: False)
        gemm_path = run()
    finally:
        em.set_num_threads(before)
    tq, tk, tv = (torch.tensor(a, dtype=torch.float64, requires_grad=True) for a in (q, k, v))
    out = torch.nn.functional.scaled_dot_product_attention(tq, tk, tv, is_causal=causal)
    out.backward(torch.tensor(g, dtype=torch.float64))
    for got, ref, want in zip(one_kernel, gemm_path, [out, tq.grad, tk.grad, tv.grad]):
        np.testing.assert_allclose(got, want.detach().numpy(), rtol=1e-4, atol=2e-5)
        np.testing.assert_allclose(got, ref, rtol=1e-4, atol=2e-5)
