"""layer_norm_backward, layer norm's one-op gradient: which rule runs when, both kernels against the composite
rule, and jitted training against eager. The op table checks values, gradients and second order against
PyTorch for every dtype."""

from __future__ import annotations

import numpy as np
import pytest

import ember as em
from ember.graph import codegen


@pytest.fixture(params=["auto", "numpy"])  # auto: the compiled kernel where Numba is installed
def backend(request):
    codegen.set_backend(request.param)
    yield request.param
    codegen.set_backend(None)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape,ndims,affine", [((16, 64, 128), 1, True), ((3, 4, 5, 6), 2, True), ((7, 9), 1, False),
                                               ((2049, 512), 1, True)])  # 1 M values: rows split over threads
def test_one_op_equals_the_composite_rule(backend, dtype, shape, ndims, affine):
    rng = np.random.default_rng(0)
    x = rng.standard_normal(shape).astype(dtype) * 3 + 1
    g = rng.standard_normal(shape).astype(dtype)
    tail = shape[len(shape) - ndims:]
    params = [rng.standard_normal(tail).astype(dtype) for _ in range(2)] if affine else []

    def grads(create_graph):
        ts = [em.tensor(a, requires_grad=True) for a in [x] + params]
        y = em.nn.functional.layer_norm(ts[0], tail, *ts[1:])
        return [t.detach().numpy() for t in em.autograd.grad(y, ts, em.tensor(g), create_graph=create_graph)]

    with em.profiler.profile() as prof:
        one_op = grads(False)
    assert "layer_norm_backward" in prof.table()
    with em.profiler.profile() as prof:
        composite = grads(True)  # records the composite rule
    assert "layer_norm_backward" not in prof.table()
    tol = 2e-5 if dtype == np.float32 else 1e-12
    for a, b in zip(one_op, composite):
        assert a.dtype == b.dtype
        np.testing.assert_allclose(a, b, rtol=tol, atol=tol * np.abs(b).max())


def test_shape_error_names_the_op():
    from ember.dispatch import apply
    from ember.ops.layer_norm_backward import layer_norm_backward_op

    x = em.ones(4, 6)
    with pytest.raises(em.errors.ShapeError, match=r"layer_norm_backward: output gradient \(4, 5\)"):
        apply(layer_norm_backward_op, x, None, em.zeros(4, 1), em.ones(4, 1), em.ones(4, 5), ndims=1)


def test_jitted_training_matches_eager():
    """A LayerNorm model trained six steps with Adam, eager and jitted, the learning rate and the data
    (in place) changed between steps: the same parameters, losses and optimizer state."""

    def build():
        em.manual_seed(0)
        return em.nn.Sequential(em.nn.Linear(32, 64), em.nn.LayerNorm(64), em.nn.GELU(), em.nn.Linear(64, 8),
                                em.nn.LayerNorm(8))

    rng = np.random.default_rng(1)
    data = [rng.standard_normal((256, 32)).astype(np.float32) for _ in range(6)]
    runs = []
    for use_jit in (False, True):
        model = build()
        opt = em.optim.Adam(model.parameters(), lr=1e-2)
        x = em.tensor(np.zeros((256, 32), np.float32))

        def step():
            opt.zero_grad()
            loss = (model(x) ** 2).mean()
            loss.backward()
            opt.step()
            return loss

        run = em.jit(step) if use_jit else step
        losses = []
        for i, d in enumerate(data):
            x.copy_(em.tensor(d))
            for group in opt.param_groups:
                group["lr"] = 1e-2 / (i + 1)
            losses.append(float(run()))
        runs.append((losses, [p.detach().numpy().copy() for p in model.parameters()],
                     [s["exp_avg_sq"].numpy().copy() for s in opt.state.values()]))
    (l0, p0, s0), (l1, p1, s1) = runs
    np.testing.assert_allclose(l1, l0, rtol=1e-5)
    for a, b in zip(p1 + s1, p0 + s0):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("affine", [True, False])
def test_forward_matches_torch_on_both_kernels(backend, dtype, affine):
    """The compiled forward rows (float64 sums) and the NumPy kernel, against PyTorch, outputs and statistics."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(2)
    x = rng.standard_normal((16, 64, 128)).astype(dtype) * 5 + 3
    params = [rng.standard_normal(128).astype(dtype) for _ in range(2)] if affine else []
    y = em.nn.functional.layer_norm(em.tensor(x), (128,), *(em.tensor(p) for p in params)).numpy()
    want = torch.nn.functional.layer_norm(torch.tensor(x), (128,), *(torch.tensor(p) for p in params)).numpy()
    tol = 1e-5 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(y, want, rtol=tol, atol=tol)
    from ember.ops.nn_extra import layer_norm

    _, mean, rstd = layer_norm(em.tensor(x), 1)
    np.testing.assert_allclose(mean.numpy()[..., 0], x.astype(np.float64).mean(-1), rtol=tol)
    np.testing.assert_allclose(rstd.numpy()[..., 0], 1 / np.sqrt(x.astype(np.float64).var(-1) + 1e-5), rtol=tol)
