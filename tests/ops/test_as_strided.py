"""torch.as_strided against PyTorch: views of the storage (not of the input's view of it), writes through them,
gradients for overlapping windows and strided inputs, and one-line errors; under ember.jit an error, not a guess."""

from __future__ import annotations

import numpy as np
import pytest

import ember as em

torch = pytest.importorskip("torch")

BASE = np.arange(24, dtype=np.float64).reshape(4, 6)
# (how the input is made from a (4, 6) tensor, size, stride, storage offset)
CASES = [
    (lambda x: x, (4, 6), (6, 1), None),
    (lambda x: x, (5, 3), (4, 1), 0),  # overlapping sliding windows
    (lambda x: x, (3, 3), (1, 6), 2),
    (lambda x: x.reshape(-1), (6,), (4,), None),
    (lambda x: x.t(), (2, 3), (1, 6), None),  # a transposed input: strides count the storage
    (lambda x: x[1:, 2:], (2, 2), (1, 1), None),  # an input with a storage offset of its own
    (lambda x: x[2:], (3,), (5,), 1),
    (lambda x: x, (0, 3), (1, 1), 5),
]


@pytest.mark.parametrize("dtype", ["float32", "float64", "int64"])
@pytest.mark.parametrize("case", range(len(CASES)))
def test_values_and_gradients_match_torch(case, dtype):
    make, size, stride, offset = CASES[case]
    floating = dtype != "int64"
    a = em.tensor(BASE.astype(dtype), requires_grad=floating)
    t = torch.tensor(BASE.astype(dtype), requires_grad=floating)
    y, z = make(a).as_strided(size, stride, offset), torch.as_strided(make(t), size, stride, offset)
    assert y.dtype.name == str(z.dtype).removeprefix("torch.") and tuple(y.shape) == tuple(z.shape)
    np.testing.assert_array_equal(y.detach().numpy(), z.detach().numpy())
    if floating:
        w = np.random.default_rng(case).standard_normal(size).astype(dtype)
        (y * em.tensor(w)).sum().backward()
        (z * torch.tensor(w)).sum().backward()
        np.testing.assert_allclose(a.grad.numpy(), t.grad.numpy(), rtol=1e-6)


def test_writes_through_the_view_reach_the_input_and_expanded_inputs_share_gradients():
    a = em.zeros(8)
    em.as_strided(a, (3,), (3,), 1).add_(2.0)
    assert a.tolist() == [0, 2, 0, 0, 2, 0, 0, 2]
    x, t = em.tensor([1.0, 2.0], requires_grad=True), torch.tensor([1.0, 2.0], requires_grad=True)
    (em.as_strided(x.expand(3, 2), (2, 2), (1, 0)) * em.tensor([[1.0, 2.0], [3.0, 4.0]])).sum().backward()
    (torch.as_strided(t.expand(3, 2), (2, 2), (1, 0)) * torch.tensor([[1.0, 2.0], [3.0, 4.0]])).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), t.grad.numpy())


def test_second_derivative_against_finite_differences():
    x = em.tensor(np.random.default_rng(0).standard_normal(7), requires_grad=True)

    def f(v):
        return (em.as_strided(v, (4, 3), (1, 1)) ** 3).sum()

    (g,) = em.autograd.grad(f(x), x, create_graph=True)
    (h,) = em.autograd.grad((g * g).sum(), x)
    eps, base = 1e-6, x.detach().numpy()
    numeric = np.empty(7)
    for i in range(7):
        d = np.zeros(7)
        d[i] = eps

        def gsq(v):
            vv = em.tensor(v, requires_grad=True)
            (gg,) = em.autograd.grad(f(vv), vv)
            return float((gg * gg).sum())

        numeric[i] = (gsq(base + d) - gsq(base - d)) / (2 * eps)
    np.testing.assert_allclose(h.numpy(), numeric, rtol=1e-5, atol=1e-6)


def test_errors_and_meta_and_jit():
    with pytest.raises(ValueError, match=r"as_strided: sizes \[3\], strides \[2\] and storage offset 0 need a storage "
                                         r"of 5 elements; \(4,\)'s storage has 4"):
        em.as_strided(em.zeros(4), (3,), (2,))
    with pytest.raises(RuntimeError):  # PyTorch refuses it too
        torch.as_strided(torch.zeros(4), (3,), (2,))
    with pytest.raises(ValueError, match="as_strided: negative strides are not supported"):
        em.as_strided(em.zeros(4), (2,), (-1,))
    with pytest.raises(ValueError, match="as_strided: negative sizes are not allowed"):
        em.as_strided(em.zeros(4), (-1,), (1,))
    with pytest.raises(ValueError, match="as_strided: storage offset must be non-negative, got -1"):
        em.as_strided(em.zeros(4), (2,), (1,), -1)
    with pytest.raises(ValueError, match="mismatch in length of strides and shape"):
        em.as_strided(em.zeros(4), (2, 2), (1,))
    assert em.empty(3, 4, device="meta").as_strided((2, 2), (4, 1)).shape == (2, 2)
    b = em.tensor(BASE)
    with pytest.raises(em.errors.ConcretizationError, match="as_strided: the view depends on the memory layout"):
        em.jit(lambda v: v[1:].as_strided((2,), (1,)) * 2)(b)
    # ember.compile runs such a call eagerly, with the input's true storage offset
    assert em.compile(lambda v: v[1:].as_strided((2,), (1,)) * 2)(b).tolist() == [12.0, 14.0]
