"""End-to-end smoke test: a tiny model trains with eager autograd."""

import ember as em


def test_linear_regression_converges():
    em.manual_seed(0)
    x = em.randn(128, 3)
    true_w = em.tensor([[1.0], [-2.0], [0.5]])
    y = x @ true_w
    w = em.zeros(3, 1, requires_grad=True)
    for _ in range(200):
        loss = ((x @ w - y) ** 2).mean()
        w.grad = None
        loss.backward()
        with em.no_grad():
            w -= 0.1 * w.grad
    assert ((w - true_w).abs().max()).item() < 1e-3
