"""batch_norm_backward and relu_backward, the one-op gradients: against the composite rule and PyTorch.

The op table checks values, gradients and second order for every dtype; here: the statistics outputs'
gradients, both kernels (compiled and NumPy), which rule runs when, and jitted training against eager.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import ember as em
from ember.graph import codegen
from ember.ops.elementwise import relu_backward
from ember.ops.nn_extra import _batch_norm_vjp_in_ops, batch_norm_train

BACKENDS = ["auto", "numpy"]  # auto: the compiled kernels where Numba is installed


@pytest.fixture(params=BACKENDS)
def backend(request):
    codegen.set_backend(request.param)
    yield request.param
    codegen.set_backend(None)


def _torch_stats(x, w, b, dims, eps=1e-5):
    mean = x.mean(dims)
    var = x.var(dims, unbiased=False)
    shape = (1, -1) + (1,) * (x.ndim - 2)
    y = (x - mean.reshape(shape)) * torch.rsqrt(var.reshape(shape) + eps)
    if w is not None:
        y = y * w.reshape(shape) + b.reshape(shape)
    return y, mean, var


@pytest.mark.parametrize("shape", [(6, 5), (1024, 6), (64, 5, 1, 1), (64, 8, 9), (16, 4, 12, 12), (4, 3, 6, 6, 6)])
@pytest.mark.parametrize("which", [(1, 1, 1), (1, 0, 0), (0, 1, 0), (0, 0, 1), (1, 1, 0), (0, 1, 1)])
@pytest.mark.parametrize("affine", [True, False])
def test_gradients_of_output_and_statistics_match_torch(backend, shape, which, affine):
    """Any mix of the gradients of (y, mean, var), with and without weight and bias, in float64."""
    r = np.random.default_rng(len(shape) * 10 + sum(which))
    x = r.standard_normal(shape) * 2.0 + 0.5
    w, b = r.standard_normal(shape[1]), r.standard_normal(shape[1])
    ups = [r.standard_normal(shape), r.standard_normal(shape[1]), r.standard_normal(shape[1])]
    ex = em.tensor(x, requires_grad=True)
    ew, eb = (em.tensor(w, requires_grad=True), em.tensor(b, requires_grad=True)) if affine else (None, None)
    tx = torch.tensor(x, requires_grad=True)
    tw, tb = (torch.tensor(w, requires_grad=True), torch.tensor(b, requires_grad=True)) if affine else (None, None)
    outs = batch_norm_train(ex, ew, eb)
    touts = _torch_stats(tx, tw, tb, (0,) + tuple(range(2, len(shape))))
    for o, t in zip(outs, touts):
        np.testing.assert_allclose(o.detach().numpy(), t.detach().numpy(), rtol=1e-10, atol=1e-11)
    picked = [i for i in range(3) if which[i]]
    e_in = [t for t in (ex, ew, eb) if t is not None]
    t_in = [t for t in (tx, tw, tb) if t is not None]
    got = em.autograd.grad([outs[i] for i in picked], e_in, [em.tensor(ups[i]) for i in picked], allow_unused=True)
    want = torch.autograd.grad([touts[i] for i in picked], t_in, [torch.tensor(ups[i]) for i in picked],
                               allow_unused=True)
    for g, t in zip(got, want):
        if t is None:  # only the statistics' gradients: weight and bias get none
            assert g is None or not np.any(g.numpy())
            continue
        np.testing.assert_allclose(g.numpy(), t.numpy(), rtol=1e-9, atol=1e-10)


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16"])
@pytest.mark.parametrize("shape", [(4, 3, 5), (512, 16), (32, 8, 8, 8)])
def test_fused_op_equals_the_composite_rule(backend, dtype, shape):
    """The one-op gradient and the rule of Ember ops give the same numbers (in the op's compute precision)."""
    r = np.random.default_rng(1)
    x = em.tensor(r.standard_normal(shape) * 3.0 + 1.0).to(getattr(em, dtype))
    w = em.tensor(r.standard_normal(shape[1])).to(getattr(em, dtype))
    gy = em.tensor(r.standard_normal(shape)).to(getattr(em, dtype))
    stat = em.float64 if dtype == "float64" else em.float32
    gmean, gvar = em.tensor(r.standard_normal(shape[1]), dtype=stat), em.tensor(r.standard_normal(shape[1]), dtype=stat)
    with em.no_grad():
        _, mean, var = batch_norm_train(x, w, None)
        from ember.dispatch import apply
        from ember.ops.nn_extra import _batch_norm_backward_op

        fused = apply(_batch_norm_backward_op, x, w, mean, var, gy, gmean, gvar, eps=1e-5)
        comp = _batch_norm_vjp_in_ops(x, w, mean, var, gy, gmean, gvar, 1e-5)
    assert fused[0].dtype == x.dtype and fused[1].dtype == mean.dtype
    low = dtype in ("float16", "bfloat16")
    tol = {"float32": 2e-5, "float64": 1e-12}.get(dtype, 1e-2 if dtype == "bfloat16" else 2e-3)
    for f, c in zip(fused, comp):
        c = c.to(f.dtype) if low else c
        scale = float(np.abs(c.to(em.float32).numpy()).max())
        np.testing.assert_allclose(f.to(em.float32).numpy(), c.to(em.float32).numpy(), rtol=tol, atol=tol * scale)


def test_create_graph_records_the_composite_rule_and_first_order_uses_one_op():
    x = em.tensor(np.random.default_rng(2).standard_normal((4, 3, 5)), requires_grad=True)
    w = em.ones(3, dtype=em.float64, requires_grad=True)
    with em.profiler.profile() as prof:
        (g,) = em.autograd.grad(em.nn.functional.batch_norm(x, None, None, w, None, training=True).pow(3).sum(), [x])
    names = {row[0] for row in prof.key_averages()}
    assert "batch_norm_backward" in names and not g.requires_grad
    (g2,) = em.autograd.grad(em.nn.functional.batch_norm(x, None, None, w, None, training=True).pow(3).sum(), [x],
                             create_graph=True)
    assert g2.requires_grad  # built from differentiable ops, so it has a gradient of its own
    np.testing.assert_allclose(g2.detach().numpy(), g.numpy(), rtol=1e-10, atol=1e-12)


def test_batch_norm_module_train_then_eval_matches_torch(backend):
    """Running statistics from training steps, then eval mode (which does not use the fused op), as in PyTorch."""
    r = np.random.default_rng(3)
    m, tm = em.nn.BatchNorm2d(4), torch.nn.BatchNorm2d(4)
    for _ in range(3):
        x = r.standard_normal((8, 4, 5, 5)).astype(np.float32) * 2.0 + 1.0
        ex, tx = em.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
        m(ex).square().sum().backward()
        tm(tx).square().sum().backward()
        np.testing.assert_allclose(ex.grad.numpy(), tx.grad.numpy(), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(m.running_mean.numpy(), tm.running_mean.numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(m.running_var.numpy(), tm.running_var.numpy(), rtol=1e-5, atol=1e-6)
    m.eval()
    tm.eval()
    x = r.standard_normal((2, 4, 5, 5)).astype(np.float32)
    np.testing.assert_allclose(m(em.tensor(x)).detach().numpy(), tm(torch.tensor(x)).detach().numpy(),
                               rtol=1e-5, atol=1e-5)


def test_relu_backward_selects_and_every_order_stays_one_op(backend):
    """0 where out <= 0, else g (NaN passes, as PyTorch); its gradient in g is itself, to every order."""
    r = np.random.default_rng(4)
    for shape in [(5,), (64, 128)]:
        out = np.maximum(r.standard_normal(shape), 0.0)
        out.reshape(-1)[:2] = [np.nan, 0.0]
        g = r.standard_normal(shape)
        want = torch.ops.aten.threshold_backward(torch.tensor(g), torch.tensor(out), 0.0)
        np.testing.assert_array_equal(relu_backward(em.tensor(g), em.tensor(out)).numpy(), want.numpy())
    x = em.tensor(r.standard_normal((6, 7)), requires_grad=True)
    tx = torch.tensor(x.detach().numpy(), requires_grad=True)
    (g,) = em.autograd.grad((em.relu(x) * x * x).sum(), [x], create_graph=True)
    (tg,) = torch.autograd.grad((torch.relu(tx) * tx * tx).sum(), [tx], create_graph=True)
    (gg,) = em.autograd.grad((g * g).sum(), [x], create_graph=True)
    (tgg,) = torch.autograd.grad((tg * tg).sum(), [tx], create_graph=True)
    (ggg,) = em.autograd.grad(gg.sum(), [x])
    (tggg,) = torch.autograd.grad(tgg.sum(), [tx])
    for a, t in ((g, tg), (gg, tgg), (ggg, tggg)):
        assert np.all(np.isfinite(a.detach().numpy())) and np.any(a.detach().numpy())
        np.testing.assert_allclose(a.detach().numpy(), t.detach().numpy(), rtol=1e-12, atol=1e-12)


def _cnn():
    nn = em.nn
    return nn.Sequential(nn.Conv2d(3, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8), nn.ReLU(),
                         nn.Conv2d(8, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8), nn.ReLU(),
                         nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 4))


@pytest.mark.parametrize("passes", [False, None])
def test_jitted_cnn_training_with_the_fused_gradients_equals_eager(passes):
    """batch_norm_backward and relu_backward as graph nodes (fused with their neighbours by the passes):
    the same losses, weights and running statistics as eager over several steps, while the learning
    rate and the input data (in place) change between them, and the same eval-mode outputs after."""
    def make():
        em.manual_seed(0)
        model = _cnn()
        return model, em.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)

    def stepper(model, opt):
        def step(x, y):
            opt.zero_grad()
            loss = em.nn.functional.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            return loss
        return step

    (m_eager, o_eager), (m_jit, o_jit) = make(), make()
    eager = stepper(m_eager, o_eager)
    jitted = em.jit(stepper(m_jit, o_jit)) if passes is None else em.jit(stepper(m_jit, o_jit), passes=passes)
    rng = np.random.default_rng(0)
    tol = {"rtol": 0, "atol": 0} if passes is False else {"rtol": 1e-4, "atol": 1e-5}
    x = em.tensor(rng.standard_normal((16, 3, 12, 12)).astype(np.float32))
    for step in range(5):
        x.mul_(0.5).add_(em.tensor(rng.standard_normal((16, 3, 12, 12)).astype(np.float32)))  # data changed in place
        y = em.tensor(rng.integers(0, 4, 16))
        np.testing.assert_allclose(jitted(x, y).item(), eager(x, y).item(), **tol)
        for opt in (o_eager, o_jit):  # a schedule's new learning rate between steps
            opt.param_groups[0]["lr"] = 0.1 / (step + 2)
    for (name, pe), pj in zip(m_eager.state_dict().items(), m_jit.state_dict().values()):
        np.testing.assert_allclose(pj.numpy(), pe.numpy(), err_msg=name, **tol)
    m_eager.eval()
    m_jit.eval()  # the running statistics the jitted steps updated, used
    with em.no_grad():
        np.testing.assert_allclose(m_jit(x).numpy(), m_eager(x).numpy(), **tol)


def test_jit_graph_has_the_one_op_gradients():
    model = _cnn()
    x = em.tensor(np.random.default_rng(0).standard_normal((4, 3, 6, 6)).astype(np.float32))

    def step(x):
        loss = model(x).sum()
        return em.autograd.grad(loss, list(model.parameters()))

    names = [n.op.name for n in em.jit(step).lower(x).nodes if n.kind == "op"]
    assert names.count("batch_norm_backward") == 2 and names.count("relu_backward") == 2
    assert "where" not in names and "gt" not in names


@pytest.mark.parametrize("shape", [(7, 3), (64, 128)])
def test_relu_backward_into_a_planned_buffer_even_its_own_input(backend, shape):
    """The out= kernel the jit's memory planner uses: into a fresh buffer, into g's or into out's."""
    from ember.op import OPS

    op = OPS["relu_backward"]
    r = np.random.default_rng(5)
    g, out = r.standard_normal(shape).astype(np.float32), r.standard_normal(shape).astype(np.float32)
    want = np.where(out > 0, g, np.float32(0))
    np.testing.assert_array_equal(op.kernel_out(np, g, out, out=np.empty_like(g)), want)
    g2, out2 = g.copy(), out.copy()
    np.testing.assert_array_equal(op.kernel_out(np, g2, out, out=g2), want)
    np.testing.assert_array_equal(op.kernel_out(np, g, out2, out=out2), want)


@pytest.mark.parametrize("shape", [(7, 3), (128, 256)])  # below and above compiled.MIN_ELEMENTS
def test_relu_into_a_planned_buffer_even_its_own_input(backend, shape):
    """relu's out= kernel into a fresh buffer and over its own input (the compiled kernel's in-place loop):
    NumPy's maximum's values, NaN kept and -0.0 made +0.0."""
    from ember.op import OPS

    op = OPS["relu"]
    x = np.random.default_rng(6).standard_normal(shape).astype(np.float32)
    x.flat[:5] = [np.nan, -0.0, 0.0, np.inf, -np.inf]
    want = np.maximum(x, np.float32(0))
    got = op.kernel_out(np, x, out=np.empty_like(x))
    np.testing.assert_array_equal(got, want)
    assert not np.signbit(got.flat[1])
    x2 = x.copy()
    got = op.kernel_out(np, x2, out=x2)
    np.testing.assert_array_equal(got, want)
    assert not np.signbit(got.flat[1])


@pytest.mark.parametrize("shape", [(8, 16, 32, 32), (32, 64, 8, 8)])  # read channel by channel, sample by sample
def test_batch_norm_split_over_threads_equals_one_thread_and_matches_torch(monkeypatch, thresholds, shape):
    """From BATCH_NORM's split_min values batch norm's channels are split over the batch threads: the
    results equal the one-thread kernels bit for bit and match PyTorch (relu's compiled backward included)."""
    pytest.importorskip("numba")
    from ember.kernels import batch_norm

    rng = np.random.default_rng(0)
    x = rng.standard_normal(shape).astype(np.float32)
    g = rng.standard_normal(x.shape).astype(np.float32)
    assert x.size >= batch_norm.BATCH_NORM["split_min"]

    def run():
        tx = em.tensor(x, requires_grad=True)
        bn = em.nn.BatchNorm2d(shape[1])
        y = em.relu(bn(tx))
        y.backward(em.tensor(g))
        return [y.detach().numpy(), tx.grad.numpy(), bn.weight.grad.numpy(), bn.bias.grad.numpy()]

    split = run()
    thresholds(batch_norm.BATCH_NORM, split_min=1 << 40, native_split_min=1 << 40)
    for a, b in zip(split, run()):
        np.testing.assert_array_equal(a, b)
    thresholds(batch_norm.BATCH_NORM, by_sample_max_plane=0)  # every map channel by channel: the same to rounding
    for a, b in zip(split, run()):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    tx = torch.tensor(x, requires_grad=True)
    tbn = torch.nn.BatchNorm2d(shape[1])
    ty = torch.relu(tbn(tx))
    ty.backward(torch.tensor(g))
    for got, want in zip(split, [ty, tx.grad, tbn.weight.grad, tbn.bias.grad]):
        np.testing.assert_allclose(got, want.detach().numpy(), rtol=1e-4, atol=1e-4)


def test_the_jit_only_batch_norm_attributes_refuse_what_they_cannot_compute():
    """batch_norm folds relu alone; batch_norm_backward's relu output needs an output gradient of the input's
    shape: each refused in one line naming the op and what was given."""
    from ember.dispatch import apply
    from ember.ops.nn_extra import _batch_norm_backward_op, _batch_norm_op

    x, w = em.randn(4, 3, 5), em.ones(3)
    with pytest.raises(ValueError, match=r"batch_norm: the only activation .* got \('clamp', 0, 6\)"):
        apply(_batch_norm_op, x, w, w, eps=1e-5, activation=("clamp", 0, 6))
    _, mean, var = apply(_batch_norm_op, x, w, w, eps=1e-5)
    with pytest.raises(em.ShapeError, match=r"batch_norm_backward: relu output \(4, 3, 6\)"):
        apply(_batch_norm_backward_op, x, w, mean, var, em.ones(4, 3, 5), None, None, em.ones(4, 3, 6), eps=1e-5)
    with pytest.raises(em.ShapeError, match="needs an output gradient"):
        apply(_batch_norm_backward_op, x, w, mean, var, None, None, None, em.ones(4, 3, 5), eps=1e-5)
