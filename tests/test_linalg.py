"""ember.linalg beyond the op table: errors as PyTorch raises them, gradients at zero, low precision, graphs."""

import numpy as np
import pytest
import torch

import ember as em

RNG = np.random.default_rng(0)


def test_the_namespace_is_torch_linalgs():
    for name in ("norm", "vector_norm", "matrix_norm", "inv", "solve", "det", "slogdet", "svd", "qr", "cholesky",
                 "eigh", "lstsq", "pinv", "svdvals", "eigvalsh", "multi_dot", "vecdot"):
        assert hasattr(torch.linalg, name) and callable(getattr(em.linalg, name)), name
    assert issubclass(em.linalg.LinAlgError, RuntimeError) and em.LinAlgError is em.linalg.LinAlgError


def test_the_2_norm_of_a_zero_vector_has_a_zero_gradient_as_in_pytorch():
    e, t = em.zeros(2, 3, requires_grad=True), torch.zeros(2, 3, requires_grad=True)
    em.linalg.vector_norm(e, dim=-1).sum().backward()
    torch.linalg.vector_norm(t, dim=-1).sum().backward()
    assert e.grad.tolist() == t.grad.tolist() == [[0.0] * 3] * 2


@pytest.mark.parametrize(("call", "error", "message"), [
    (lambda: em.linalg.inv(em.zeros(2, 2)), em.linalg.LinAlgError, "linalg.inv: the input matrix is singular"),
    (lambda: em.linalg.solve(em.zeros(2, 2), em.ones(2)), em.linalg.LinAlgError, "linalg.solve: .* singular"),
    (lambda: em.linalg.cholesky(-em.eye(2)), em.linalg.LinAlgError,
     "linalg.cholesky: the input is not positive-definite"),
    (lambda: em.linalg.inv(em.ones(2, 3)), em.ShapeError,
     "linalg.inv: A must be batches of square matrices, but they are 2 by 3 matrices"),
    (lambda: em.linalg.det(em.ones(3)), em.ShapeError, r"linalg.det: A must have at least 2 dimensions, got shape \(3,\)"),
    (lambda: em.linalg.inv(em.ones(2, 2, dtype=em.int64)), TypeError,
     "linalg.inv: expected a floating point tensor as input, got int64"),
    (lambda: em.linalg.solve(em.eye(3), em.ones(2, 2)), em.ShapeError, r"linalg.solve: A is \(3, 3\) but B"),
    (lambda: em.linalg.solve(em.eye(2), em.ones(2, dtype=em.float64)), TypeError, "both need the same dtype"),
    (lambda: em.linalg.qr(em.ones(2, 2), mode="full"), ValueError, "linalg.qr: mode must be"),
    (lambda: em.linalg.eigh(em.eye(2), UPLO="X"), ValueError, "UPLO must be 'L' or 'U'"),
    (lambda: em.linalg.lstsq(em.ones(3, 2), em.ones(3, 1), driver="lapack"), ValueError, "driver must be one of"),
    (lambda: em.linalg.vector_norm(em.ones(2), "fro"), TypeError, "ord must be a number"),
    (lambda: em.linalg.vector_norm(em.ones(0, 2), float("inf"), 0), em.ShapeError, "inf norm of an empty slice"),
    (lambda: em.linalg.matrix_norm(em.ones(2, 2), 3), ValueError, "linalg.matrix_norm: ord must be"),
    (lambda: em.linalg.norm(em.ones(2, 2, 2), 2), em.ShapeError, "without dim, ord=2 needs a 1-D or 2-D input"),
])
def test_bad_inputs_are_named(call, error, message):
    with pytest.raises(error, match=message):
        call()


def test_qr_derivatives_that_do_not_exist_are_refused_as_in_pytorch():
    a = em.tensor(RNG.standard_normal((4, 3)), requires_grad=True)
    with pytest.raises(RuntimeError, match="not computed when mode='r'"):
        em.linalg.qr(a, mode="r").R.sum().backward()
    with pytest.raises(RuntimeError, match="mode='complete' and the input has more rows than columns"):
        em.linalg.qr(a, mode="complete").Q.sum().backward()


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_low_precision_inputs_are_computed_in_float32_and_rounded_once(dtype):
    a = RNG.standard_normal((3, 3)) + 3 * np.eye(3)
    low = em.tensor(a, dtype=getattr(em, dtype))
    exact = np.linalg.inv(low.float().numpy().astype(np.float64))
    got = em.linalg.inv(low)
    assert got.dtype is low.dtype
    np.testing.assert_allclose(got.float().numpy(), exact, rtol=2e-2, atol=2e-2)
    w = em.tensor(RNG.standard_normal(5), dtype=getattr(em, dtype), requires_grad=True)
    em.linalg.vector_norm(w).backward()
    assert w.grad.dtype is w.dtype


def test_linalg_runs_in_traced_training_steps():
    a0 = RNG.standard_normal((3, 3)) + 3 * np.eye(3)
    b = em.tensor(RNG.standard_normal((3, 2)))

    def loss(a):
        x = em.linalg.solve(a, b)
        return (x * x).sum() + em.linalg.slogdet(a).logabsdet + em.linalg.matrix_norm(a, "nuc")

    eager_a = em.tensor(a0, requires_grad=True)
    loss(eager_a).backward()

    @em.jit
    def step(a):
        value = loss(a)
        value.backward()
        return value, a.grad

    traced_a = em.tensor(a0, requires_grad=True)
    value, grad = step(traced_a)
    np.testing.assert_allclose(value.item(), loss(eager_a).item(), rtol=1e-12)
    np.testing.assert_allclose(grad.numpy(), eager_a.grad.numpy(), rtol=1e-10)
