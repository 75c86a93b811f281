"""lstm_layer: its bad inputs get one-line errors naming the op and the shapes or dtypes, and a layer large
enough for the compiled step rule matches PyTorch on both kernels."""

import numpy as np
import pytest

import ember as em
from ember.errors import ShapeError
from ember.ops.recurrent_layer import lstm_layer

from .recurrent_helpers import loop_vs_steps_check


def _inputs(t=3, n=2, h=4, dtype=np.float32):
    rng = np.random.default_rng(0)
    return [em.tensor(rng.standard_normal(s).astype(dtype)) for s in ((t, n, 4 * h), (n, h), (n, h), (4 * h, h))]


def test_shapes_that_do_not_agree_are_named():
    xw, h0, c0, w = _inputs()
    with pytest.raises(ShapeError, match=r"lstm_layer: shapes do not agree: .*\(3, 2, 16\).*\(2, 5\)"):
        lstm_layer(xw, em.zeros(2, 5), c0, w)
    with pytest.raises(ShapeError, match=r"lstm_layer: expected input projections \(T, N, 4\*H\)"):
        lstm_layer(xw[0], h0, c0, w)


def test_mixed_or_integer_dtypes_are_named():
    xw, h0, c0, w = _inputs()
    with pytest.raises(TypeError, match="lstm_layer: expected floating-point tensors of one dtype, got float32, "
                                        "float64"):
        lstm_layer(xw, h0.double(), c0, w)
    with pytest.raises(TypeError, match="lstm_layer"):
        lstm_layer(xw, h0.long(), c0.long(), w)


@pytest.mark.parametrize("backend", ["numba", "numpy"])
def test_a_layer_large_enough_for_the_compiled_step_matches_torch(backend):
    """nn.LSTM through lstm_layer, at a size whose forward and backward run the compiled steps (and on NumPy's);
    the input is batch first, so the step's input projections are strided."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("numba")
    from ember.graph import codegen
    from ember.kernels import lstm

    torch.manual_seed(0)
    t = torch.nn.LSTM(16, 64, batch_first=True)
    e = em.nn.LSTM(16, 64, batch_first=True)
    e.load_state_dict({k: em.tensor(v.detach().numpy()) for k, v in t.state_dict().items()})
    x = np.random.default_rng(1).standard_normal((8, 12, 16)).astype(np.float32)
    assert lstm.LSTM.step_backward(np, np.dtype(np.float32), 8 * 12 * 4 * 64) is not None
    assert lstm.LSTM.step_forward(np, np.dtype(np.float32), 8 * 12 * 4 * 64) is not None
    tx = torch.tensor(x, requires_grad=True)
    to, (th, tc) = t(tx)
    (to.sum() + (th ** 2).sum() + (tc ** 3).sum()).backward()
    try:
        codegen.set_backend(backend)
        ex = em.tensor(x, requires_grad=True)
        eo, (eh, ec) = e(ex)
        (eo.sum() + (eh ** 2).sum() + (ec ** 3).sum()).backward()
    finally:
        codegen.set_backend(None)
    np.testing.assert_allclose(eo.detach().numpy(), to.detach().numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(ex.grad.numpy(), tx.grad.numpy(), rtol=1e-4, atol=1e-5)
    for (name, p), tp in zip(e.named_parameters(), t.parameters()):
        np.testing.assert_allclose(p.grad.numpy(), tp.grad.numpy(), rtol=1e-4, atol=1e-4, err_msg=name)


@pytest.mark.parametrize("batch_first", [True, False])
@pytest.mark.parametrize("t,n,h", [(7, 24, 96), (4, 64, 128)])
def test_the_compiled_time_loop_equals_the_step_by_step_path(monkeypatch, batch_first, t, n, h):
    """The forward's and the backward's whole time loops compiled (their GEMMs NumPy's OpenBLAS called from
    inside, the batch split over threads) give the per-step path's values bit for bit, for time-major and
    batch-first (strided) input projections, with and without gradients of the hidden states, the last cell and the
    last hidden state."""
    pytest.importorskip("numba")
    from ember.kernels import lstm
    from ember.ops import recurrent_layer

    rng = np.random.default_rng(2)
    xw = rng.standard_normal((n, t, 4 * h) if batch_first else (t, n, 4 * h)).astype(np.float32)
    xw = xw.transpose(1, 0, 2) if batch_first else xw
    h0, c0 = (rng.standard_normal((n, h)).astype(np.float32) * 0.5 for _ in range(2))
    w = (rng.standard_normal((4 * h, h)) * 0.1).astype(np.float32)
    if lstm.LSTM.forward_loop(np, np.float32, xw.size) is None:
        pytest.skip("NumPy's BLAS is not a bundled OpenBLAS")
    same = loop_vs_steps_check(n, 4, h)

    looped = recurrent_layer._lstm_layer_op.kernel(np, xw, h0, c0, w)
    ghs = rng.standard_normal(looped[0].shape).astype(np.float32)
    gc = rng.standard_normal(c0.shape).astype(np.float32)
    gh = rng.standard_normal(h0.shape).astype(np.float32)  # the last hidden state's own gradient
    backward = recurrent_layer._lstm_layer_backward_op.kernel
    cases = ((ghs, gc, None), (ghs, None, gh), (None, gc, None), (None, None, gh))
    grads = [backward(np, h0, c0, w, looped[0], *looped[2:5], *g) for g in cases]
    monkeypatch.setattr(lstm.LSTM, "forward_loop", lambda *a: None)
    monkeypatch.setattr(lstm.LSTM, "backward_loop", lambda *a: None)
    stepped = recurrent_layer._lstm_layer_op.kernel(np, xw, h0, c0, w)
    for a, b in zip(looped, stepped):
        same(a, b)
    for g, looped_grads in zip(cases, grads):
        for a, b in zip(looped_grads, backward(np, h0, c0, w, stepped[0], *stepped[2:5], *g)):
            same(a, b)
