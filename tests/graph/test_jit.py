"""ember.jit: tracing, caching per signature, captured state, training steps, control-flow errors."""

import numpy as np
import pytest

import ember as em


def test_forward_matches_eager_and_is_cached_per_signature():
    w = em.randn(4, 3)

    @em.jit
    def f(x):
        return (x @ w.to(x.dtype)).relu().sum(1)

    x = em.randn(5, 4)
    np.testing.assert_allclose(f(x).numpy(), (x @ w).relu().sum(1).numpy(), rtol=1e-6)
    f(em.randn(5, 4))
    assert f.trace_count == 1
    f(em.randn(6, 4))  # new shape: retrace
    assert f.trace_count == 2
    f(em.randn(6, 4).double())  # new dtype: retrace
    assert f.trace_count == 3


def test_closure_tensors_are_inputs_not_constants():
    w = em.ones(3)

    @em.jit
    def f(x):
        return x * w

    x = em.ones(3)
    assert f(x).tolist() == [1, 1, 1]
    w.mul_(5)
    assert f(x).tolist() == [5, 5, 5]


def test_in_place_updates_of_outside_tensors_are_applied_after_each_call():
    counter = em.zeros(())

    @em.jit
    def bump(x):
        counter.add_(1)
        x_sum = x.sum()
        return x_sum + counter

    x = em.ones(2)
    assert bump(x).item() == 3
    assert bump(x).item() == 4
    assert counter.item() == 2


def test_training_step_equals_eager():
    em.manual_seed(0)
    w = em.randn(3, 2, requires_grad=True)
    b = em.zeros(2, requires_grad=True)
    w_e = w.detach().clone().requires_grad_()
    b_e = b.detach().clone().requires_grad_()

    def make_step(w, b):
        def step(x, y):
            loss = ((x @ w + b - y) ** 2).mean()
            w.grad = None
            b.grad = None
            loss.backward()
            with em.no_grad():
                w.sub_(0.1 * w.grad)
                b.sub_(0.1 * b.grad)
            return loss

        return step

    jitted, eager = em.jit(make_step(w, b)), make_step(w_e, b_e)
    x, y = em.randn(8, 3), em.randn(8, 2)
    for _ in range(5):
        lj, le = jitted(x, y), eager(x, y)
        assert lj.item() == pytest.approx(le.item(), rel=1e-6)
    np.testing.assert_allclose(w.detach().numpy(), w_e.detach().numpy(), rtol=1e-6)
    np.testing.assert_allclose(w.grad.numpy(), w_e.grad.numpy(), rtol=1e-6)
    assert jitted.trace_count == 1


def test_value_dependent_python_control_flow_raises_a_clear_error():
    @em.jit
    def f(x):
        if x.sum() > 0:
            return x
        return -x

    with pytest.raises(em.ConcretizationError, match=r"em(ber)?\.where|static_argnums"):
        f(em.ones(3))


def test_static_argnums_specialise_on_python_values():
    def f(x, n):
        for _ in range(n):
            x = x * 2
        return x

    g = em.jit(f, static_argnums=1)
    assert g(em.ones(2), 3).tolist() == [8, 8]
    assert g(em.ones(2), 1).tolist() == [2, 2]
    assert g.trace_count == 2


def test_grad_composes_with_jit():
    def loss(w, x):
        return ((x @ w) ** 2).sum()

    g = em.jit(em.grad(loss))
    w, x = em.randn(3, 1), em.randn(4, 3)
    np.testing.assert_allclose(g(w, x).numpy(), em.grad(loss)(w, x).numpy(), rtol=1e-5)
    vg = em.jit(em.value_and_grad(loss))
    v, gw = vg(w, x)
    assert v.item() == pytest.approx(loss(w, x).item(), rel=1e-6)


def test_lower_returns_the_graph_and_works_on_meta():
    w = em.ones((20_000, 30_000), device="meta")

    @em.jit
    def f(x):
        return (x @ w).relu()

    graph = f.lower(em.ones((8, 20_000), device="meta"))
    text = graph.dump()
    assert "matmul" in text and "float32[8, 30000] @meta" in text


@pytest.mark.parametrize("make_opt", [
    lambda ps: em.optim.SGD(ps, lr=0.1, momentum=0.9, nesterov=True, weight_decay=1e-3),
    lambda ps: em.optim.Adam(ps, lr=0.01, weight_decay=1e-3),
    lambda ps: em.optim.AdamW(ps, lr=0.01),
    lambda ps: em.optim.RMSprop(ps, lr=0.01, momentum=0.5, centered=True),
    lambda ps: em.optim.Adagrad(ps, lr=0.1, lr_decay=0.01),
])
def test_jitted_optimizer_step_equals_eager(make_opt):
    em.manual_seed(1)
    w = em.randn(4, 3, requires_grad=True)
    b = em.zeros(3, requires_grad=True)
    w_e, b_e = w.detach().clone().requires_grad_(), b.detach().clone().requires_grad_()
    opt, opt_e = make_opt([w, b]), make_opt([w_e, b_e])

    def make_step(w, b, opt):
        def step(x, y):
            opt.zero_grad()
            loss = ((x @ w + b).tanh() - y).pow(2).mean()
            loss.backward()
            opt.step()
            return loss

        return step

    jitted, eager = em.jit(make_step(w, b, opt)), make_step(w_e, b_e, opt_e)
    x, y = em.randn(16, 4), em.randn(16, 3)
    for _ in range(6):
        lj, le = jitted(x, y), eager(x, y)
        assert lj.item() == pytest.approx(le.item(), rel=1e-5, abs=1e-7)
    np.testing.assert_allclose(w.detach().numpy(), w_e.detach().numpy(), rtol=1e-5, atol=1e-6)
    assert jitted.trace_count <= 2  # the first call creates optimizer state; the second traces the steady state


def test_randomness_inside_jit_is_fresh_on_every_call():
    @em.jit
    def noisy(x):
        return x + em.randn(3) + em.rand(3) * 0

    x = em.zeros(3)
    a, b = noisy(x), noisy(x)
    assert noisy.trace_count == 1
    assert a.tolist() != b.tolist()


def test_dropout_masks_differ_between_jitted_calls():
    drop = em.nn.Dropout(0.5)
    drop.train()
    f = em.jit(lambda x: drop(x))
    x = em.ones(1000)
    m1, m2 = (f(x) == 0).numpy(), (f(x) == 0).numpy()
    assert 300 < m1.sum() < 700 and (m1 != m2).any()
    drop.eval()
    assert (f(x) == 1).all().item()  # eval mode is a new signature: retraced, no dropout
    assert f.trace_count == 2


def test_batchnorm_training_step_and_running_stats_equal_eager():
    def build():
        em.manual_seed(3)
        return em.nn.Sequential(em.nn.Conv2d(2, 4, 3, padding=1), em.nn.BatchNorm2d(4), em.nn.ReLU(),
                                em.nn.Flatten(), em.nn.Linear(4 * 6 * 6, 3))

    def make_step(model, opt):
        def step(x, y):
            opt.zero_grad()
            loss = em.nn.functional.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            return loss

        return step

    m_j, m_e = build(), build()
    jitted = em.jit(make_step(m_j, em.optim.SGD(m_j.parameters(), lr=0.1, momentum=0.9)))
    eager = make_step(m_e, em.optim.SGD(m_e.parameters(), lr=0.1, momentum=0.9))
    x, y = em.randn(8, 2, 6, 6), em.randint(0, 3, (8,))
    for _ in range(4):
        assert jitted(x, y).item() == pytest.approx(eager(x, y).item(), rel=1e-5)
    bn_j, bn_e = m_j[1], m_e[1]
    np.testing.assert_allclose(bn_j.running_mean.numpy(), bn_e.running_mean.numpy(), rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(bn_j.running_var.numpy(), bn_e.running_var.numpy(), rtol=1e-5)
    assert bn_j.num_batches_tracked.item() == bn_e.num_batches_tracked.item() == 4
    m_j.eval()
    m_e.eval()
    f = em.jit(lambda x: m_j(x))
    np.testing.assert_allclose(f(x).numpy(), m_e(x).detach().numpy(), rtol=1e-5, atol=1e-6)
