"""channel_affine (eval-mode batch norm's one pass): compiled and NumPy kernels agree bit for bit, and
eval-mode batch norm built on it matches PyTorch, values and gradients. The op table checks every dtype."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import ember as em
from ember.graph import codegen
from ember.kernels import batch_norm
from ember.ops.channel_affine import _channel_affine_op, channel_affine


def _numpy_affine(x, scale, shift):
    with_backend = codegen.get_backend()
    codegen.set_backend("numpy")
    try:
        return _channel_affine_op.kernel(np, x, scale, shift)
    finally:
        codegen.set_backend(with_backend)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("parts", ["scale_shift", "scale", "shift"])
@pytest.mark.parametrize("split", [False, True])
def test_compiled_pass_equals_numpy_product_and_sum(dtype, parts, split, thresholds):
    pytest.importorskip("numba")
    if split:  # rows over the batch threads
        thresholds(batch_norm.CHANNEL_AFFINE, split_min=0)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((3, 7, 33, 29)).astype(dtype)  # 20K values: the compiled path
    x.reshape(-1)[:3] = [np.nan, -0.0, np.inf]
    scale = rng.standard_normal(7).astype(dtype) if "scale" in parts else None
    shift = rng.standard_normal(7).astype(dtype) if "shift" in parts else None
    fast = batch_norm.channel_affine(np, x, scale, shift)
    assert fast is not None
    ref = _numpy_affine(x, scale, shift)
    np.testing.assert_array_equal(fast, ref)
    expected = x if scale is None else x * scale.reshape(1, -1, 1, 1)
    expected = expected if shift is None else expected + shift.reshape(1, -1, 1, 1)
    np.testing.assert_array_equal(fast, expected)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(3, 7, 33, 29), (40, 5, 90), (2, 3, 4, 700, 2)])
def test_per_channel_sum_is_one_compiled_pass_accumulating_in_float64(dtype, shape):
    """A bias's gradient, sum over every dim but 1: compiled from 16K values, nearer the exact sum than NumPy's."""
    pytest.importorskip("numba")
    rng = np.random.default_rng(1)
    x = (rng.standard_normal(shape) + 3.0).astype(dtype)
    axes = (0,) + tuple(range(2, x.ndim))
    exact = x.astype(np.float64).sum(axis=axes)
    fast = batch_norm.channel_sum(np, x, axes, False)
    assert fast is not None and fast.dtype == dtype and fast.shape == (shape[1],)
    if dtype == np.float32:
        np.testing.assert_array_equal(fast, exact.astype(dtype))  # float64 totals, rounded once
    else:
        np.testing.assert_allclose(fast, exact, rtol=1e-14)
    kept = em.tensor(x).sum(dim=axes, keepdim=True).numpy()
    assert kept.shape == (1, shape[1]) + (1,) * (x.ndim - 2)
    np.testing.assert_array_equal(kept.reshape(-1), fast)
    np.testing.assert_array_equal(em.tensor(x).sum_to_size(*kept.shape).numpy(), kept)
    assert batch_norm.channel_sum(np, x[:, :, ::2], axes, False) is None  # not contiguous: NumPy's reduce
    assert batch_norm.channel_sum(np, x, axes[:-1], False) is None  # not every other dim


def test_conv_bias_is_one_pass_and_its_gradient_one_sum():
    conv = em.nn.Conv2d(3, 6, 3)
    x = em.randn(2, 3, 40, 40)
    with em.profiler.profile() as prof:
        conv(x).sum().backward()
    names = [e.name for e in prof.events if e.cat != "range"]
    assert "add" not in names and names.count("channel_affine") == 1, names
    tconv = torch.nn.Conv2d(3, 6, 3)
    with torch.no_grad():
        tconv.weight.copy_(torch.from_numpy(conv.weight.detach().numpy()))
        tconv.bias.copy_(torch.from_numpy(conv.bias.detach().numpy()))
    tconv(torch.from_numpy(x.numpy())).sum().backward()
    np.testing.assert_allclose(conv.bias.grad.numpy(), tconv.bias.grad.numpy(), rtol=1e-6)
    np.testing.assert_allclose(conv.weight.grad.numpy(), tconv.weight.grad.numpy(), rtol=1e-4, atol=1e-3)


def test_conv_rejects_a_bias_of_the_wrong_shape():
    x, w = em.randn(1, 4, 5, 5), em.randn(4, 3, 2, 2)
    with pytest.raises(em.ShapeError, match=r"conv_transpose2d: bias must have shape \(3,\)"):
        em.nn.functional.conv_transpose2d(x, w, em.randn(4))
    with pytest.raises(em.ShapeError, match=r"conv2d: bias must have shape \(4,\)"):
        em.nn.functional.conv2d(em.randn(1, 3, 5, 5), w, em.randn(3))


def test_eval_batch_norm_matches_pytorch_with_gradients():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 8, 40, 40)).astype(np.float32)  # 25.6K values: the compiled path
    stats = [rng.standard_normal(8).astype(np.float32), rng.uniform(0.5, 2, 8).astype(np.float32)]
    w, b = rng.standard_normal(8).astype(np.float32), rng.standard_normal(8).astype(np.float32)
    g = rng.standard_normal(x.shape).astype(np.float32)
    ex, ew, eb = (em.tensor(a, requires_grad=True) for a in (x, w, b))
    tx, tw, tb = (torch.tensor(a, requires_grad=True) for a in (x, w, b))
    out = em.nn.functional.batch_norm(ex, em.tensor(stats[0]), em.tensor(stats[1]), ew, eb, training=False)
    ref = torch.nn.functional.batch_norm(tx, torch.tensor(stats[0]), torch.tensor(stats[1]), tw, tb, training=False)
    np.testing.assert_allclose(out.detach().numpy(), ref.detach().numpy(), rtol=1e-5, atol=1e-5)
    out.backward(em.tensor(g))
    ref.backward(torch.tensor(g))
    for mine, theirs in ((ex, tx), (ew, tw), (eb, tb)):
        np.testing.assert_allclose(mine.grad.numpy(), theirs.grad.numpy(), rtol=1e-4, atol=1e-3)


def test_eval_batch_norm_is_one_pass_over_the_input():
    bn = em.nn.BatchNorm2d(4).eval()
    x = em.randn(2, 4, 8, 8)
    with em.profiler.profile() as prof:
        bn(x)
    big = [e.name for e in prof.events if e.cat != "range" and e.shapes and tuple(e.shapes[0]) == (2, 4, 8, 8)]
    assert big == ["channel_affine"]


def test_channel_affine_rejects_a_scale_of_the_wrong_size():
    with pytest.raises(em.errors.ShapeError, match=r"channel_affine: scale must have shape \(3,\)"):
        channel_affine(em.ones(2, 3, 4), em.ones(4))
    with pytest.raises(em.errors.ShapeError, match=r"channel_affine: shift must have shape \(3,\)"):
        channel_affine(em.ones(2, 3, 4), None, em.ones(2))
    with pytest.raises(ValueError, match="channel_affine: expected a scale, a shift or both, got neither"):
        channel_affine(em.ones(2, 3, 4), None, None)


@pytest.mark.parametrize("training", [False, True])
@pytest.mark.parametrize("bad", ["running_mean", "running_var", "weight", "bias"])
def test_batch_norm_names_a_per_channel_tensor_of_the_wrong_shape(bad, training):
    x = em.randn(2, 4, 3, 3)
    tensors = {"running_mean": em.zeros(4), "running_var": em.ones(4), "weight": em.ones(4), "bias": em.zeros(4)}
    tensors[bad] = em.ones(4, 1) if bad == "running_mean" else em.ones(5)
    with pytest.raises(ValueError, match=rf"batch_norm: {bad} should have shape \(4,\).*\(2, 4, 3, 3\)"):
        em.nn.functional.batch_norm(x, training=training, **tensors)


def _ops_run(fn):
    with em.profiler.profile() as prof:
        out = fn()
    return out, [e.name for e in prof.events if e.cat != "range"]


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16"])
@pytest.mark.parametrize("shape", [(2, 5, 3, 4), (2, 24, 24, 24)])  # NumPy's pass; the compiled one
@pytest.mark.parametrize("affine", [True, False])
def test_eval_batch_norm_without_gradients_is_one_op_with_the_two_ops_values(dtype, shape, affine):
    rng = np.random.default_rng(2)
    c = shape[1]
    x = em.tensor(rng.standard_normal(shape)).to(getattr(em, dtype))
    p = np.float32 if dtype == "float16" else dtype  # a float16 input's parameters in float32, as PyTorch allows
    stats = [em.tensor(rng.standard_normal(c).astype(p)), em.tensor(rng.uniform(0.5, 2, c).astype(p))]
    wb = [em.tensor(rng.standard_normal(c).astype(p), requires_grad=True) for _ in range(2)] if affine \
        else [None, None]
    with em.no_grad():
        fused, ops = _ops_run(lambda: em.nn.functional.batch_norm(x, *stats, *wb, training=False))
    assert "batch_norm_inference" in ops and "channel_affine" not in ops
    xg = x.detach().requires_grad_()  # an input that needs a gradient: the two ops
    two, ops = _ops_run(lambda: em.nn.functional.batch_norm(xg, *stats, *wb, training=False))
    assert "batch_norm_inference" not in ops and "channel_affine" in ops and "batch_norm_scale_shift" in ops
    assert fused.dtype == two.dtype == x.dtype
    np.testing.assert_array_equal(fused.numpy(), two.detach().numpy())
    ref = torch.nn.functional.batch_norm(torch.tensor(x.float().numpy()),
                                         *(torch.tensor(t.detach().numpy()).float() for t in stats),
                                         *(None if t is None else torch.tensor(t.detach().numpy()).float() for t in wb))
    np.testing.assert_allclose(fused.float().numpy(), ref.numpy(), rtol=1e-2 if dtype == "float16" else 1e-5, atol=1e-2 if dtype == "float16" else 1e-5)


def test_eval_batch_norm_module_follows_changed_statistics_between_calls():
    bn = em.nn.BatchNorm2d(3).eval()
    tbn = torch.nn.BatchNorm2d(3).eval()
    x = np.random.default_rng(3).standard_normal((2, 3, 4, 4)).astype(np.float32)
    with em.no_grad(), torch.no_grad():
        for step in range(3):
            out, ref = bn(em.tensor(x)), tbn(torch.tensor(x))
            np.testing.assert_allclose(out.numpy(), ref.numpy(), rtol=1e-5, atol=1e-6)
            for mine, theirs in ((bn.running_mean, tbn.running_mean), (bn.running_var, tbn.running_var),
                                 (bn.weight, tbn.weight), (bn.bias, tbn.bias)):
                change = np.float32(0.5 + step)
                mine.mul_(change).add_(0.25)  # in place, as a loaded state dict or an optimizer step writes them
                theirs.mul_(change).add_(0.25)
        bn.train(), tbn.train()  # training mode between: batch statistics, running ones updated
        np.testing.assert_allclose(bn(em.tensor(x)).numpy(), tbn(torch.tensor(x)).numpy(), rtol=1e-4, atol=1e-5)
        bn.eval(), tbn.eval()
        np.testing.assert_allclose(bn(em.tensor(x)).numpy(), tbn(torch.tensor(x)).numpy(), rtol=1e-5, atol=1e-5)


def test_eval_batch_norm_traced_by_the_jit_keeps_the_two_ops():
    bn = em.nn.BatchNorm2d(4).eval()
    x = em.randn(2, 4, 8, 8)
    f = em.jit(bn)
    with em.no_grad():
        want = bn(x)
        got = f(x)
        names = [n.op.name for n in f.lower(x).nodes if n.kind == "op"]
    np.testing.assert_array_equal(got.numpy(), want.numpy())
    assert "batch_norm_inference" not in names and "channel_affine" in names


def test_eval_batch_norm_without_gradients_names_the_devices_of_a_mismatch():
    bn = em.nn.BatchNorm2d(3).eval()
    with em.no_grad(), pytest.raises(em.errors.DeviceMismatchError, match=r"batch_norm.*cpu:1.*cpu"):
        bn(em.ones(2, 3, 4, 4, device="cpu:1"))
