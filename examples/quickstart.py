"""Fit a small two-layer network to a noisy sine wave with Ember's eager autograd."""

import math

import ember as em


def main() -> None:
    em.manual_seed(0)
    x = em.linspace(-math.pi, math.pi, 256).reshape(-1, 1)
    y = em.sin(x) + 0.05 * em.randn(256, 1)
    w1 = (em.randn(1, 32) * 0.5).requires_grad_()
    b1 = em.zeros(32, requires_grad=True)
    w2 = (em.randn(32, 1) * 0.2).requires_grad_()
    b2 = em.zeros(1, requires_grad=True)
    params = [w1, b1, w2, b2]
    lr = 0.05
    for step in range(1, 1501):
        pred = em.tanh(x @ w1 + b1) @ w2 + b2
        loss = ((pred - y) ** 2).mean()
        for p in params:
            p.grad = None
        loss.backward()
        with em.no_grad():
            for p in params:
                p -= lr * p.grad
        if step % 300 == 0:
            print(f"step {step:5d}  loss {loss.item():.5f}")
    print("final loss", round(loss.item(), 5))


if __name__ == "__main__":
    main()
