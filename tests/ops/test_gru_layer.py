"""gru_layer: its bad inputs get one-line errors naming the op and the shapes or dtypes, nn.GRU at a size that runs
the compiled loops matches PyTorch, and the compiled time loops give the per-step path's values (bit for bit where each
thread's GEMMs are one call)."""

import numpy as np
import pytest

import ember as em
from ember.errors import ShapeError
from ember.ops.gru_layer import gru_layer

from .recurrent_helpers import loop_vs_steps_check


def _inputs(t=3, n=2, h=4, dtype=np.float32):
    rng = np.random.default_rng(0)
    return [em.tensor(rng.standard_normal(s).astype(dtype)) for s in ((t, n, 3 * h), (n, h), (3 * h, h), (3 * h,))]


def test_shapes_that_do_not_agree_are_named():
    xw, h0, w, b = _inputs()
    with pytest.raises(ShapeError, match=r"gru_layer: shapes do not agree: .*\(3, 2, 12\), \(2, 5\)"):
        gru_layer(xw, em.zeros(2, 5), w, b)
    with pytest.raises(ShapeError, match=r"gru_layer: shapes do not agree: .*\(12, 4\), \(8,\)"):
        gru_layer(xw, h0, w, b[:8])
    with pytest.raises(ShapeError, match=r"gru_layer: expected input projections \(T, N, 3\*H\)"):
        gru_layer(xw[0], h0, w, b)


def test_mixed_or_integer_dtypes_are_named():
    xw, h0, w, b = _inputs()
    with pytest.raises(TypeError, match="gru_layer: expected floating-point tensors of one dtype, got float32, "
                                        "float32, float32, float64"):
        gru_layer(xw, h0, w, b.double())
    with pytest.raises(TypeError, match="gru_layer"):
        gru_layer(xw.long(), h0.long(), w.long())


@pytest.mark.parametrize("backend", ["numba", "numpy"])
@pytest.mark.parametrize("bias", [True, False])
def test_a_layer_large_enough_for_the_compiled_loops_matches_torch(backend, bias):
    """nn.GRU (two layers, bidirectional, batch first: strided projections) through gru_layer at a size whose
    forward and backward run the compiled loops, and on NumPy's per-step path; states given and gradients of
    the output and the final states."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("numba")
    from ember.graph import codegen
    from ember.kernels import gru

    torch.manual_seed(0)
    t = torch.nn.GRU(16, 64, num_layers=2, bias=bias, batch_first=True, bidirectional=True)
    e = em.nn.GRU(16, 64, num_layers=2, bias=bias, batch_first=True, bidirectional=True)
    e.load_state_dict({k: em.tensor(v.detach().numpy()) for k, v in t.state_dict().items()})
    rng = np.random.default_rng(1)
    x = rng.standard_normal((8, 12, 16)).astype(np.float32)
    h0 = rng.standard_normal((4, 8, 64)).astype(np.float32) * 0.5
    assert gru.GRU.forward_loop(np, np.dtype(np.float32), 8 * 12 * 3 * 64) is not None or \
        gru.GRU.step_forward(np, np.dtype(np.float32), 8 * 12 * 3 * 64) is not None
    tx, th0 = torch.tensor(x, requires_grad=True), torch.tensor(h0, requires_grad=True)
    to, th = t(tx, th0)
    (to.sum() + (th ** 2).sum()).backward()
    try:
        codegen.set_backend(backend)
        ex, eh0 = em.tensor(x, requires_grad=True), em.tensor(h0, requires_grad=True)
        eo, eh = e(ex, eh0)
        (eo.sum() + (eh ** 2).sum()).backward()
    finally:
        codegen.set_backend(None)
    np.testing.assert_allclose(eo.detach().numpy(), to.detach().numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(eh.detach().numpy(), th.detach().numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(ex.grad.numpy(), tx.grad.numpy(), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(eh0.grad.numpy(), th0.grad.numpy(), rtol=1e-4, atol=1e-5)
    for (name, p), tp in zip(e.named_parameters(), t.parameters()):
        np.testing.assert_allclose(p.grad.numpy(), tp.grad.numpy(), rtol=1e-4, atol=1e-4, err_msg=name)


@pytest.mark.parametrize("batch_first", [True, False])
@pytest.mark.parametrize("t,n,h", [(7, 24, 96), (4, 64, 192)])
def test_the_compiled_time_loop_equals_the_step_by_step_path(monkeypatch, batch_first, t, n, h):
    """The forward's and the backward's whole time loops compiled (their GEMMs NumPy's OpenBLAS called from
    inside, the batch split over threads) give the per-step path's values bit for bit, for time-major and
    batch-first (strided) input projections, with and without the states' gradients."""
    from ember.kernels import gru
    pytest.importorskip("numba")
    from ember.ops import gru_layer as layer

    rng = np.random.default_rng(2)
    xw = rng.standard_normal((n, t, 3 * h) if batch_first else (t, n, 3 * h)).astype(np.float32)
    xw = xw.transpose(1, 0, 2) if batch_first else xw
    h0 = rng.standard_normal((n, h)).astype(np.float32) * 0.5
    w = (rng.standard_normal((3 * h, h)) * 0.1).astype(np.float32)
    b = rng.standard_normal(3 * h).astype(np.float32)
    if gru.GRU.forward_loop(np, np.float32, xw.size) is None:
        pytest.skip("NumPy's BLAS is not a bundled OpenBLAS")
    same = loop_vs_steps_check(n, 3, h)

    looped = layer._gru_layer_op.kernel(np, xw, h0, w, b)
    ghs = rng.standard_normal(looped[0].shape).astype(np.float32)
    backward = layer._gru_layer_backward_op.kernel
    gh = rng.standard_normal(h0.shape).astype(np.float32)  # the last state's own gradient
    cases = ((ghs, None), (None, None), (ghs, gh), (None, gh))
    grads = [backward(np, h0, w, *looped[:3], *g) for g in cases]
    monkeypatch.setattr(gru.GRU, "forward_loop", lambda *a: None)
    monkeypatch.setattr(gru.GRU, "backward_loop", lambda *a: None)
    assert gru.GRU.step_forward(np, np.float32, xw.size) is not None  # the per-step path runs compiled steps
    stepped = layer._gru_layer_op.kernel(np, xw, h0, w, b)
    for a, c in zip(looped, stepped):
        same(a, c)
    for g, looped_grads in zip(cases, grads):
        for a, c in zip(looped_grads, backward(np, h0, w, *stepped[:3], *g)):
            same(a, c)
    assert np.abs(grads[0][0]).max() > 0 and not grads[1][0].any()  # no output gradient: all zero


def test_half_precision_runs_in_float32_and_keeps_its_dtype():
    """bfloat16 inputs: the states come back in bfloat16 within its rounding of the float32 layer."""
    xw, h0, w, b = _inputs(t=4, n=3, h=5)
    full = gru_layer(xw, h0, w, b).numpy()
    half = gru_layer(*(a.to(em.bfloat16) for a in (xw, h0, w, b)))
    assert half.dtype == em.bfloat16
    np.testing.assert_allclose(half.float().numpy(), full, rtol=2e-2, atol=2e-2)
