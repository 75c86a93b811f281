"""cross_entropy as one op (log_softmax and nll_loss fused): when it runs, both kernels (compiled float32 and
NumPy) against PyTorch and against the two-op path, non-finite logits, ignored targets, errors, second order
and jitted training against eager. The op table checks the functional for every dtype."""

from __future__ import annotations

import numpy as np
import pytest

import ember as em
from ember.graph import codegen

F = em.nn.functional


@pytest.fixture(params=["auto", "numpy"])  # auto: the compiled kernels where Numba is installed
def backend(request):
    codegen.set_backend(request.param)
    yield request.param
    codegen.set_backend(None)


def _logits(rng, shape, dtype):
    x = (rng.standard_normal(shape) * 4).astype(dtype)
    if shape[0] >= 6 and shape[1] >= 3:  # a -inf among finite logits, +inf, a row of -inf, a NaN
        x[0, 1], x[1, 0], x[2, :], x[3, 2] = -np.inf, np.inf, -np.inf, np.nan
    return x


CASES = [((16, 4), {}), ((16, 4), {"reduction": "sum"}), ((16, 4), {"reduction": "none"}),
         ((37, 10), {"ignore_index": 3}), ((37, 10), {"ignore_index": 3, "reduction": "none"}),
         ((37, 10), {"ignore_index": 3, "reduction": "sum"}), ((512, 65), {}), ((6, 3), {"reduction": "none"}),
         ((6, 3), {"reduction": "sum"})]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape,kw", CASES)
def test_matches_torch_on_both_kernels(backend, dtype, shape, kw):
    """Loss and gradient against PyTorch (NaN where PyTorch has NaN), for a random output gradient."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(shape[0])
    x = _logits(rng, shape, dtype) if shape == (6, 3) else (rng.standard_normal(shape) * 4).astype(dtype)
    t = rng.integers(0, shape[1], shape[0])
    ex, tx = em.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    with em.profiler.profile() as prof:
        loss = F.cross_entropy(ex, em.tensor(t), **kw)
    assert "cross_entropy" in prof.table() and "log_softmax" not in prof.table()
    want = torch.nn.functional.cross_entropy(tx, torch.tensor(t), **kw)
    g = rng.standard_normal(tuple(want.shape)).astype(dtype)
    loss.backward(em.tensor(g))
    want.backward(torch.tensor(g))
    tol = 2e-6 if dtype == np.float32 else 1e-13
    np.testing.assert_allclose(loss.detach().numpy(), want.detach().numpy(), rtol=tol, atol=tol)
    np.testing.assert_allclose(ex.grad.numpy(), tx.grad.numpy(), rtol=tol, atol=tol)
    assert loss.dtype == ex.dtype and ex.grad.dtype == ex.dtype


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_one_op_equals_the_two_op_path(backend, dtype):
    """Against log_softmax then nll_loss: equal (float64 runs the same NumPy kernels), or within float32
    rounding where the compiled pass runs."""
    rng = np.random.default_rng(1)
    x = (rng.standard_normal((64, 10)) * 3).astype(dtype)
    t = rng.integers(0, 10, 64)
    t[::7] = -100
    fused_x, two_op_x = em.tensor(x, requires_grad=True), em.tensor(x, requires_grad=True)
    fused = F.cross_entropy(fused_x, em.tensor(t))
    two_op = F.nll_loss(F.log_softmax(two_op_x, 1), em.tensor(t))
    fused.backward()
    two_op.backward()
    exact = dtype == np.float64 or backend == "numpy"
    tol = 0 if exact else 2e-6
    np.testing.assert_allclose(fused.detach().numpy(), two_op.detach().numpy(), rtol=tol, atol=tol)
    np.testing.assert_allclose(fused_x.grad.numpy(), two_op_x.grad.numpy(), rtol=tol, atol=tol)


@pytest.mark.parametrize("reduction,want", [("mean", np.nan), ("sum", 0.0)])
def test_every_target_ignored(backend, reduction, want):
    """As PyTorch: the mean of no samples is NaN and the sum 0, and the gradient is 0."""
    x = em.randn(5, 3, requires_grad=True)
    loss = F.cross_entropy(x, em.full((5,), 2, dtype=em.int64), ignore_index=2, reduction=reduction)
    np.testing.assert_equal(float(loss), want)
    loss.backward()
    assert not x.grad.numpy().any()


def test_second_order_matches_torch():
    """A gradient built with create_graph=True differentiates again to PyTorch's second derivative."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(3)
    x = rng.standard_normal((7, 5))
    t = np.array([0, 4, 2, -100, 1, 3, 3])
    probe = rng.standard_normal((7, 5))
    results = []
    for lib, make in ((em, lambda a: em.tensor(a, requires_grad=True)), (torch, lambda a: torch.tensor(a, requires_grad=True))):
        xs = make(x)
        loss = lib.nn.functional.cross_entropy(xs, lib.tensor(t), reduction="sum")
        (g,) = lib.autograd.grad(loss, [xs], create_graph=True)
        (gg,) = lib.autograd.grad((g * lib.tensor(probe)).sum(), [xs])
        results.append((g.detach().numpy(), gg.detach().numpy()))
    for a, b in zip(*results):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-14)


def test_errors_name_the_op_and_the_values(backend):
    for dtype in (em.float32, em.float64):  # the compiled pass (float32 with Numba) and the NumPy kernels
        with pytest.raises(IndexError, match=r"^cross_entropy: Target 3 is out of bounds for 3 classes\.$"):
            F.cross_entropy(em.randn(4, 3, dtype=dtype), em.tensor([0, 1, 2, 3]))
        with pytest.raises(IndexError, match=r"^cross_entropy: Target -5 is out of bounds for 3 classes\.$"):
            F.cross_entropy(em.randn(4, 3, dtype=dtype), em.tensor([0, -5, 2, 1]))
    with pytest.raises(ValueError, match=r"Expected input batch_size \(4\) to match target batch_size \(3\)"):
        F.cross_entropy(em.randn(4, 3), em.tensor([0, 1, 2]))
    from ember.dispatch import apply
    from ember.ops.cross_entropy import _cross_entropy_op

    with pytest.raises(em.errors.ShapeError, match=r"cross_entropy: expected logits \(N, C\) and targets \(N,\)"):
        apply(_cross_entropy_op, em.randn(4, 3), em.zeros(3, dtype=em.int64), ignore_index=-100, reduction="mean")


def test_other_cases_keep_the_two_op_path():
    """Class weights, label smoothing, probability targets, 1-D and (N, C, d) logits and float16 compose
    log_softmax and the loss, as before."""
    t = em.tensor([0, 2, 1, 1])
    for call in (lambda x: F.cross_entropy(x, t, weight=em.ones(3)), lambda x: F.cross_entropy(x, t, label_smoothing=0.1),
                 lambda x: F.cross_entropy(x, em.softmax(em.randn(4, 3), 1)),
                 lambda x: F.cross_entropy(x[0], t[0]), lambda x: F.cross_entropy(x.reshape(4, 3, 1), t.reshape(4, 1)),
                 lambda x: F.cross_entropy(x.half(), t)):
        with em.profiler.profile() as prof:
            call(em.randn(4, 3, requires_grad=True)).backward()
        assert "log_softmax" in prof.table()


def test_jitted_training_matches_eager():
    """A classifier trained six steps with SGD, eager and jitted, the learning rate, the data (in place) and
    the targets (some ignored) changed between steps: the same losses, parameters and momentum buffers."""

    def build():
        em.manual_seed(0)
        return em.nn.Sequential(em.nn.Linear(20, 32), em.nn.ReLU(), em.nn.Linear(32, 5))

    rng = np.random.default_rng(4)
    data = [(rng.standard_normal((48, 20)).astype(np.float32), rng.integers(-1, 5, 48)) for _ in range(6)]
    runs = []
    for use_jit in (False, True):
        model = build()
        opt = em.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        x, y = em.zeros(48, 20), em.zeros(48, dtype=em.int64)

        def step():
            opt.zero_grad()
            loss = F.cross_entropy(model(x), y, ignore_index=-1)
            loss.backward()
            opt.step()
            return loss

        run = em.jit(step) if use_jit else step
        losses = []
        for i, (d, labels) in enumerate(data):
            x.copy_(em.tensor(d))
            y.copy_(em.tensor(labels))
            for group in opt.param_groups:
                group["lr"] = 0.1 / (i + 1)
            losses.append(float(run()))
        runs.append((losses, [p.detach().numpy().copy() for p in model.parameters()],
                     [s["momentum_buffer"].numpy().copy() for s in opt.state.values()]))
    (l0, p0, s0), (l1, p1, s1) = runs
    np.testing.assert_allclose(l1, l0, rtol=1e-6)
    for a, b in zip(p1 + s1, p0 + s0):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-7)
