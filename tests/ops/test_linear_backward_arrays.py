"""linear's gradient rule computes on the arrays themselves in plain eager backward (no create_graph): the same
values, bit for bit, as the rule's dispatched ops, which still run for double backward and for every input they do
not cover. Under the profiler the array path runs too, each product and sum recorded as an event."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import ember as em
from ember.ops import nn_extra

F = em.nn.functional


def _grads(x_shape, dtype, bias, x_grad, dispatched, out_features=7, monkeypatch=None):
    rng = np.random.default_rng(len(x_shape) * 10 + bias)
    x = em.tensor(rng.standard_normal(x_shape).astype(dtype), requires_grad=x_grad)
    w = em.tensor(rng.standard_normal((out_features, x_shape[-1])).astype(dtype), requires_grad=True)
    b = em.tensor(rng.standard_normal(out_features).astype(dtype), requires_grad=True) if bias else None
    y = F.linear(x, w, b)
    g = em.tensor(rng.standard_normal(tuple(y.shape)).astype(dtype))
    if dispatched:  # the array path declines: the rule dispatches its ops
        with monkeypatch.context() as m:
            m.setattr(nn_extra, "_linear_grads", lambda *a: None)
            with em.profiler.profile() as prof:
                y.backward(g)
        assert "matmul" in [e.name for e in prof.events]
    else:
        y.backward(g)
    return [t.grad.numpy().copy() if t is not None and t.grad is not None else None for t in (x, w, b)]


@pytest.mark.parametrize("x_shape", [(5, 6), (2, 3, 6), (1, 6)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("x_grad", [True, False])
def test_array_gradients_equal_the_dispatched_rule_bit_for_bit(x_shape, dtype, bias, x_grad, monkeypatch):
    calls = []
    fast = nn_extra._linear_grads
    monkeypatch.setattr(nn_extra, "_linear_grads", lambda *a: calls.append(1) or fast(*a))
    got = _grads(x_shape, dtype, bias, x_grad, dispatched=False)
    assert calls  # the array path ran
    want = _grads(x_shape, dtype, bias, x_grad, dispatched=True, monkeypatch=monkeypatch)
    for a, b in zip(got, want):
        assert (a is None) == (b is None)
        if a is not None:
            assert a.dtype == dtype
            np.testing.assert_array_equal(a, b)


def test_array_gradients_match_pytorch_and_double_backward_takes_the_rule():
    rng = np.random.default_rng(3)
    xs, ws, bs = (rng.standard_normal(s) for s in ((4, 3, 5), (6, 5), (6,)))
    x, w, b = (em.tensor(a, requires_grad=True) for a in (xs, ws, bs))
    tx, tw, tb = (torch.tensor(a, requires_grad=True) for a in (xs, ws, bs))
    (F.linear(x, w, b) ** 2).sum().backward()
    (torch.nn.functional.linear(tx, tw, tb) ** 2).sum().backward()
    for e, t in ((x, tx), (w, tw), (b, tb)):
        np.testing.assert_allclose(e.grad.numpy(), t.grad.numpy(), rtol=1e-12, atol=1e-12)
    # create_graph: the rule's ops are recorded, so a second derivative exists (and matches PyTorch's)
    gw, = em.autograd.grad((F.linear(x, w, b) ** 2).sum(), [w], create_graph=True)
    tgw, = torch.autograd.grad((torch.nn.functional.linear(tx, tw, tb) ** 2).sum(), [tw], create_graph=True)
    gw.sum().backward()
    tgw.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-12, atol=1e-12)


def test_low_precision_gradients_take_the_rule():
    x = em.ones((3, 4), dtype=em.bfloat16, requires_grad=True)
    w = em.ones((2, 4), dtype=em.bfloat16, requires_grad=True)
    F.linear(x, w).sum().backward()
    assert x.grad.dtype == em.bfloat16 and w.grad.dtype == em.bfloat16
    np.testing.assert_array_equal(x.grad.float().numpy(), np.full((3, 4), 2.0, np.float32))


def test_a_large_bias_gradient_splits_over_the_threads_with_the_rules_bits(monkeypatch):
    # (2048, 128) output gradient: 256K values, where the sum over rows runs as compiled chunks
    from ember.kernels import elementwise, parallel

    before = parallel.get_num_threads()
    em.set_num_threads(2)
    calls = []
    split = elementwise.leading_sum
    monkeypatch.setattr(elementwise, "leading_sum", lambda *a: calls.append(1) or split(*a))
    try:
        got = _grads((2048, 16), np.float32, True, True, dispatched=False, out_features=128)
        want = _grads((2048, 16), np.float32, True, True, dispatched=True, out_features=128, monkeypatch=monkeypatch)
    finally:
        em.set_num_threads(before)
    assert calls
    for a, b in zip(got, want):
        assert a.tobytes() == b.tobytes()


def test_under_the_profiler_the_array_path_runs_and_records_its_products(monkeypatch):
    calls = []
    fast = nn_extra._linear_grads
    monkeypatch.setattr(nn_extra, "_linear_grads", lambda *a: calls.append(1) or fast(*a))
    x = em.randn(8, 6, requires_grad=True)
    layer = em.nn.Linear(6, 5)
    with em.profiler.profile() as prof:
        layer(x).sum().backward()
    names = [e.name for e in prof.events if e.cat != "range"]
    assert calls and names.count("matmul") == 2 and "transpose" not in names, names
    assert names.count("sum") == 2, names  # the loss's sum and the bias gradient
