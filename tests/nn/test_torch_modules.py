"""PyTorch layers and functions programs reach for beyond the core set, against PyTorch: the padding layers, the
shrink activations, RReLU, Softmax2d, the distance layers, Dropout3d and the alpha dropouts, ChannelShuffle, the
older Upsampling names, adaptive max pooling with indices, pdist, the in-place activation functions, affine_grid,
grid_sample and bicubic resizing (values, gradients, reprs and errors)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import ember as em
from tests.nn.helpers import compare_module, randn

F = em.nn.functional
pytestmark = pytest.mark.filterwarnings("ignore:`nn.functional.upsample_:UserWarning")

# name: (build(lib) -> module, input shapes); every module runs forward and backward in both libraries
CASES = {
    "ZeroPad1d": (lambda L: L.nn.ZeroPad1d((2, -1)), [(2, 3, 5)]),
    "ZeroPad2d": (lambda L: L.nn.ZeroPad2d((1, 2, 0, 3)), [(2, 3, 4, 5)]),
    "ZeroPad2d 2-D input": (lambda L: L.nn.ZeroPad2d(1), [(4, 5)]),
    "ZeroPad3d": (lambda L: L.nn.ZeroPad3d(1), [(1, 2, 3, 4, 2)]),
    "ConstantPad1d": (lambda L: L.nn.ConstantPad1d(2, 3.5), [(2, 4)]),
    "ConstantPad2d": (lambda L: L.nn.ConstantPad2d((1, 0, 2, 1), -1.0), [(1, 2, 3, 4)]),
    "ConstantPad3d": (lambda L: L.nn.ConstantPad3d((1, 0, 2, 1, 0, 1), 0.5), [(2, 2, 3, 4)]),
    "ReflectionPad1d": (lambda L: L.nn.ReflectionPad1d((3, 1)), [(2, 3, 5)]),
    "ReflectionPad2d": (lambda L: L.nn.ReflectionPad2d((1, 2, 2, 0)), [(2, 3, 4, 5)]),
    "ReflectionPad2d unbatched": (lambda L: L.nn.ReflectionPad2d(2), [(3, 4, 5)]),
    "ReflectionPad3d": (lambda L: L.nn.ReflectionPad3d(1), [(1, 2, 3, 4, 3)]),
    "ReplicationPad1d": (lambda L: L.nn.ReplicationPad1d((4, 1)), [(2, 3, 2)]),
    "ReplicationPad2d": (lambda L: L.nn.ReplicationPad2d((1, 2, 3, 0)), [(2, 3, 4, 5)]),
    "ReplicationPad3d": (lambda L: L.nn.ReplicationPad3d((1, 0, 2, 1, 0, 2)), [(2, 3, 4, 2)]),
    "CircularPad1d": (lambda L: L.nn.CircularPad1d((3, 1)), [(2, 3, 5)]),
    "CircularPad2d": (lambda L: L.nn.CircularPad2d((1, 2, 2, 0)), [(2, 3, 4, 5)]),
    "CircularPad3d": (lambda L: L.nn.CircularPad3d(1), [(1, 2, 3, 4, 3)]),
    "Hardshrink": (lambda L: L.nn.Hardshrink(0.3), [(4, 5)]),
    "Softshrink": (lambda L: L.nn.Softshrink(0.7), [(4, 5)]),
    "RReLU eval": (lambda L: L.nn.RReLU(0.1, 0.3).eval(), [(4, 5)]),
    "Softmax2d": (lambda L: L.nn.Softmax2d(), [(2, 3, 4, 5)]),
    "Softmax2d unbatched": (lambda L: L.nn.Softmax2d(), [(3, 4, 5)]),
    "CosineSimilarity": (lambda L: L.nn.CosineSimilarity(dim=2, eps=1e-6), [(2, 3, 4), (2, 3, 4)]),
    "PairwiseDistance": (lambda L: L.nn.PairwiseDistance(p=1.5, keepdim=True), [(5, 4), (5, 4)]),
    "Dropout3d eval": (lambda L: L.nn.Dropout3d(0.5).eval(), [(2, 3, 2, 2, 2)]),
    "AlphaDropout eval": (lambda L: L.nn.AlphaDropout(0.5).eval(), [(4, 5)]),
    "FeatureAlphaDropout eval": (lambda L: L.nn.FeatureAlphaDropout(0.5).eval(), [(2, 3, 4)]),
    "ChannelShuffle": (lambda L: L.nn.ChannelShuffle(3), [(2, 6, 2, 3)]),
    "UpsamplingNearest2d": (lambda L: L.nn.UpsamplingNearest2d(scale_factor=2), [(1, 2, 3, 4)]),
    "UpsamplingBilinear2d": (lambda L: L.nn.UpsamplingBilinear2d(size=(5, 7)), [(1, 2, 3, 4)]),
    "AdaptiveMaxPool1d": (lambda L: L.nn.AdaptiveMaxPool1d(3), [(2, 3, 7)]),
}


@pytest.mark.parametrize("name", list(CASES))
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_module_matches_torch(name: str, dtype) -> None:
    build, shapes = CASES[name]
    em_mod, t_mod = build(em), build(torch)
    training = em_mod.training
    compare_module(em_mod, t_mod, *(randn(*s, dtype=dtype) for s in shapes), train=training, atol=1e-6)
    assert repr(em_mod) == repr(t_mod)


def _both(fn, *arrays, grad: bool = True):
    """fn(F) on Ember and on PyTorch tensors of `arrays`: (outputs, input gradients) of each, the gradients of the
    sum of the first output times a fixed random weight."""
    results = []
    for lib, make in ((F, em.tensor), (torch.nn.functional, torch.tensor)):
        xs = [make(a.copy(), requires_grad=grad) for a in arrays]
        out = fn(lib, *xs)
        first = out[0] if isinstance(out, tuple) else out
        grads = []
        if grad:
            w = np.random.default_rng(1).standard_normal(tuple(first.shape)).astype(arrays[0].dtype)
            (first * make(w)).sum().backward()
            grads = [np.asarray(x.grad.numpy()) for x in xs]
        outs = out if isinstance(out, tuple) else (out,)
        results.append(([np.asarray(o.detach().numpy()) for o in outs], grads))
    return results


FUNCTIONS = {
    "hardshrink edges": (lambda L, x: L.hardshrink(x, 0.5), [np.array([np.nan, 0.5, -0.5, 0.6, -0.6, np.inf, 0.0])]),
    "softshrink edges": (lambda L, x: L.softshrink(x, 0.5), [np.array([np.nan, 0.5, -0.5, 0.7, -0.7, -np.inf, 0.0])]),
    "rrelu eval": (lambda L, x: L.rrelu(x, 0.2, 0.4), [np.array([-2.0, -0.0, 0.0, 3.0, np.nan])]),
    "pdist p2": (lambda L, x: L.pdist(x), [np.random.default_rng(2).standard_normal((5, 3))]),
    "pdist p1 repeated row": (lambda L, x: L.pdist(x, 1.0), [np.array([[1.0, 2.0], [1.0, 2.0], [0.5, -1.0]])]),
    "pdist p inf": (lambda L, x: L.pdist(x, float("inf")), [np.random.default_rng(3).standard_normal((4, 3))]),
    "channel_shuffle": (lambda L, x: L.channel_shuffle(x, 2), [np.arange(24.0).reshape(1, 4, 3, 2)]),
    "adaptive_max_pool2d indices": (lambda L, x: L.adaptive_max_pool2d(x, (3, 2), return_indices=True),
                                    [np.round(np.random.default_rng(4).standard_normal((2, 3, 7, 5)))]),
    "adaptive_max_pool2d divisible indices": (lambda L, x: L.adaptive_max_pool2d(x, 2, return_indices=True),
                                              [np.random.default_rng(5).standard_normal((1, 2, 4, 6))]),
    "adaptive_max_pool1d indices": (lambda L, x: L.adaptive_max_pool1d(x, 4, return_indices=True),
                                    [np.round(np.random.default_rng(6).standard_normal((2, 3, 9)))]),
    "max_pool2d_with_indices": (lambda L, x: L.max_pool2d_with_indices(x, 3, 2, 1),
                                [np.random.default_rng(7).standard_normal((1, 2, 6, 5))]),
    "max_pool1d_with_indices": (lambda L, x: L.max_pool1d_with_indices(x, 2),
                                [np.random.default_rng(8).standard_normal((1, 2, 6))]),
    "upsample_bilinear": (lambda L, x: L.upsample_bilinear(x, scale_factor=2),
                          [np.random.default_rng(9).standard_normal((1, 2, 3, 3))]),
    "upsample_nearest": (lambda L, x: L.upsample_nearest(x, size=(4, 5)),
                         [np.random.default_rng(10).standard_normal((1, 2, 3, 3))]),
}

_R = np.random.default_rng(11)
for _mode in ("bilinear", "nearest", "bicubic"):
    for _padding in ("zeros", "border", "reflection"):
        for _corners in (False, True):
            FUNCTIONS[f"grid_sample {_mode} {_padding} align_corners={_corners}"] = (
                lambda L, x, g, m=_mode, p=_padding, c=_corners: L.grid_sample(x, g, m, p, c),
                [_R.standard_normal((2, 3, 5, 6)), _R.uniform(-1.5, 1.5, (2, 4, 7, 2))])
FUNCTIONS["grid_sample at pixel centres"] = (lambda L, x, g: L.grid_sample(x, g, align_corners=True),
                                             [_R.standard_normal((1, 2, 3, 3)),
                                              np.stack(np.meshgrid([-1.0, 0.0, 1.0], [-1.0, 0.0, 1.0]), -1)[None]])
for _corners in (False, True):
    FUNCTIONS[f"affine_grid 2-D align_corners={_corners}"] = (
        lambda L, t, c=_corners: L.affine_grid(t, (2, 3, 4, 5), c), [_R.standard_normal((2, 2, 3))])
    FUNCTIONS[f"affine_grid 3-D align_corners={_corners}"] = (
        lambda L, t, c=_corners: L.affine_grid(t, (2, 1, 3, 4, 2), c), [_R.standard_normal((2, 3, 4))])
    for _size in ((7, 9), (3, 2)):
        FUNCTIONS[f"bicubic to {_size} align_corners={_corners}"] = (
            lambda L, x, s=_size, c=_corners: L.interpolate(x, s, mode="bicubic", align_corners=c),
            [_R.standard_normal((2, 3, 5, 6))])
FUNCTIONS["bicubic by scale factors"] = (lambda L, x: L.interpolate(x, scale_factor=(0.5, 1.7), mode="bicubic"),
                                         [_R.standard_normal((1, 2, 6, 5))])


@pytest.mark.parametrize("name", list(FUNCTIONS))
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_function_matches_torch(name: str, dtype) -> None:
    fn, arrays = FUNCTIONS[name]
    (ours, our_grads), (theirs, their_grads) = _both(fn, *(a.astype(dtype) for a in arrays))
    for got, want in zip(ours, theirs):
        assert got.dtype == want.dtype or (got.dtype.kind == want.dtype.kind == "i"), (got.dtype, want.dtype)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    for got, want in zip(our_grads, their_grads):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 if dtype == np.float32 else 1e-10)


def test_shrink_keeps_half_precision() -> None:
    x = em.tensor([0.2, -0.9, 0.7], dtype=em.float16)
    assert F.hardshrink(x).dtype == em.float16 and F.softshrink(x).dtype == em.float16


@pytest.mark.parametrize("inplace", ["elu_", "selu_", "celu_", "leaky_relu_", "hardtanh_", "rrelu_"])
def test_inplace_activation_functions_write_their_input(inplace: str) -> None:
    data = np.array([-2.0, -0.5, 0.0, 1.5, 3.0], np.float32)
    x, tx = em.tensor(data), torch.tensor(data)
    out = getattr(F, inplace)(x)
    getattr(torch.nn.functional, inplace)(tx)
    assert out is x
    np.testing.assert_allclose(x.numpy(), tx.numpy(), rtol=1e-6)


def test_threshold_inplace() -> None:
    x = em.tensor([-1.0, 0.5, 2.0])
    F.threshold_(x, 0.6, -3.0)
    np.testing.assert_array_equal(x.numpy(), [-3.0, -3.0, 2.0])


def test_rrelu_training_draws_a_slope_per_negative_value() -> None:
    em.manual_seed(0)
    x = em.tensor(-np.linspace(0.5, 4.0, 2000).astype(np.float32), requires_grad=True)
    out = F.rrelu(x, 0.1, 0.3, training=True)
    slopes = (out / x).detach().numpy()
    assert slopes.min() >= 0.1 - 1e-6 and slopes.max() <= 0.3 + 1e-6 and slopes.std() > 0.04
    out.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), slopes, rtol=1e-6)  # each value's own slope
    positive = em.tensor([1.0, 2.0])
    np.testing.assert_array_equal(F.rrelu(positive, training=True).numpy(), [1.0, 2.0])
    assert not np.array_equal(F.rrelu(x, 0.1, 0.3, training=True).detach().numpy(), out.detach().numpy())


@pytest.mark.parametrize("feature", [False, True])
def test_alpha_dropout_keeps_mean_and_variance(feature: bool) -> None:
    em.manual_seed(0)
    x = em.randn(64, 256, 8) if feature else em.randn(200_000)
    p = 0.2
    out = (F.feature_alpha_dropout if feature else F.alpha_dropout)(x, p, training=True).numpy()
    alpha = 1.6732632423543772 * 1.0507009873554805
    a = 1 / np.sqrt((alpha ** 2 * p + 1) * (1 - p))
    kept = np.isclose(out, a * x.numpy() + alpha * a * p, atol=1e-5)
    dropped_value = -alpha * a + alpha * a * p
    assert np.all(kept | np.isclose(out, dropped_value, atol=1e-5))
    assert abs(1 - kept.mean() - p) < 0.02
    assert abs(out.mean()) < 0.02 and abs(out.std() - 1) < 0.02
    if feature:  # whole channels dropped together
        assert np.all(kept.all(axis=2) | ~kept.any(axis=2))
    zeros = F.alpha_dropout(x, 1.0, training=True).numpy()
    np.testing.assert_array_equal(zeros, np.zeros_like(zeros))


def test_dropout3d_drops_whole_channels() -> None:
    em.manual_seed(0)
    out = F.dropout3d(em.ones(4, 16, 2, 3, 3), 0.5).numpy().reshape(4, 16, -1)
    assert set(np.unique(out)) <= {0.0, 2.0}
    assert np.all((out == 0).all(axis=2) | (out == 2).all(axis=2))


def test_spatial_transformer_identity_reads_the_image_back() -> None:
    x = em.tensor(randn(2, 3, 6, 5))
    theta = em.tensor(np.tile(np.array([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]], np.float32), (2, 1, 1)))
    for corners in (False, True):
        grid = F.affine_grid(theta, x.shape, align_corners=corners)
        np.testing.assert_allclose(F.grid_sample(x, grid, align_corners=corners).numpy(), x.numpy(), atol=1e-6)


def test_upsample_module_takes_bicubic() -> None:
    x = randn(1, 2, 3, 4)
    got = em.nn.Upsample(scale_factor=2, mode="bicubic")(em.tensor(x)).numpy()
    want = torch.nn.Upsample(scale_factor=2, mode="bicubic")(torch.tensor(x)).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


BAD = {
    "grid_sample mode": (lambda: F.grid_sample(em.ones(1, 1, 2, 2), em.zeros(1, 1, 1, 2), mode="area"), ValueError,
                         "grid_sample: mode must be one of bilinear, nearest, bicubic"),
    "grid_sample padding": (lambda: F.grid_sample(em.ones(1, 1, 2, 2), em.zeros(1, 1, 1, 2), padding_mode="wrap"),
                            ValueError, "grid_sample: padding_mode must be one of zeros, border, reflection"),
    "grid_sample 5-D": (lambda: F.grid_sample(em.ones(1, 1, 2, 2, 2), em.zeros(1, 1, 1, 1, 3)), Exception,
                        "grid_sample: expected input .N, C, H, W. and grid .N, Ho, Wo, 2."),
    "grid_sample batch": (lambda: F.grid_sample(em.ones(2, 1, 2, 2), em.zeros(1, 1, 1, 2)), Exception,
                          "got input .2, 1, 2, 2. and grid .1, 1, 1, 2."),
    "grid_sample dtypes": (lambda: F.grid_sample(em.ones(1, 1, 2, 2), em.zeros(1, 1, 1, 2, dtype=em.float64)),
                           Exception, "grid_sample: expected float input and grid of one dtype, got float32 and float64"),
    "affine_grid theta": (lambda: F.affine_grid(em.ones(2, 2, 3), (3, 1, 4, 4)), Exception,
                          r"affine_grid: theta must have shape \(3, 2, 3\) for size \(3, 1, 4, 4\)"),
    "affine_grid size": (lambda: F.affine_grid(em.ones(1, 2, 3), (1, 4, 4)), ValueError,
                         "affine_grid: size must be"),
    "bicubic 3-D": (lambda: F.interpolate(em.ones(1, 1, 4), scale_factor=2, mode="bicubic"), ValueError,
                    "interpolate: mode 'bicubic' takes 4-D input"),
    "interpolate mode": (lambda: F.interpolate(em.ones(1, 1, 4, 4), scale_factor=2, mode="cubic"), ValueError,
                         "interpolate: mode must be nearest"),
    "ZeroPad2d of 3 values": (lambda: em.nn.ZeroPad2d((1, 2, 3)), ValueError, "ZeroPad2d: padding must be an int or 4"),
    "ReflectionPad2d of a 2-D input": (lambda: em.nn.ReflectionPad2d(1)(em.ones(3, 3)), ValueError,
                                       "ReflectionPad2d: expected a 3-D or 4-D"),
    "ReflectionPad1d wider than the input": (lambda: em.nn.ReflectionPad1d(3)(em.ones(1, 2, 3)), ValueError,
                                             "reflect padding"),
    "softshrink below zero": (lambda: F.softshrink(em.ones(2), -1.0), ValueError, "softshrink: lambd must be >= 0"),
    "shrink of integers": (lambda: F.hardshrink(em.tensor([1, 2])), Exception, "hardshrink"),
    "rrelu bounds": (lambda: F.rrelu(em.ones(2), 0.5, 0.1), ValueError, "rrelu: expected 0 <= lower <= upper"),
    "channel_shuffle groups": (lambda: F.channel_shuffle(em.ones(1, 5, 2, 2), 2), ValueError,
                               "channel_shuffle: the channels"),
    "pdist of 3-D": (lambda: F.pdist(em.ones(2, 3, 4)), ValueError, "pdist: expected a 2-D input"),
    "Softmax2d of 2-D": (lambda: em.nn.Softmax2d()(em.ones(2, 3)), ValueError, "Softmax2d: expected a 3-D or 4-D"),
    "alpha dropout p": (lambda: F.alpha_dropout(em.ones(2), 1.5, True), ValueError, "dropout probability"),
    "feature alpha dropout of 1-D": (lambda: F.feature_alpha_dropout(em.ones(3), 0.5, True), ValueError,
                                     "feature_alpha_dropout: expected an input with a channel dim"),
}


@pytest.mark.parametrize("name", list(BAD))
def test_bad_inputs_raise_one_line_errors(name: str) -> None:
    make, error, message = BAD[name]
    with pytest.raises(error, match=message) as info:
        make()
    assert "\n" not in str(info.value)


def test_data_parallel_wraps_the_module_as_torch_does() -> None:
    ours, theirs = em.nn.DataParallel(em.nn.Linear(3, 2)), torch.nn.DataParallel(torch.nn.Linear(3, 2))
    assert sorted(ours.state_dict()) == sorted(theirs.state_dict()) == ["module.bias", "module.weight"]
    assert repr(ours) == repr(theirs) and em.nn.parallel.DataParallel is em.nn.DataParallel
    x = em.ones(4, 3)
    np.testing.assert_array_equal(ours(x).detach().numpy(), ours.module(x).detach().numpy())
    with pytest.raises(ValueError, match="DataParallel: one device per process here"):
        em.nn.DataParallel(em.nn.Linear(3, 2), device_ids=[0, 1])
    assert isinstance(em.nn.NLLLoss2d(), em.nn.NLLLoss)


MORE_BAD = {  # the remaining reachable bad inputs of this file's siblings' layers and functions
    "embedding_bag mode": (lambda: F.embedding_bag(em.tensor([[1]]), em.ones(3, 2), mode="median"),
                           "embedding_bag: mode must be one of sum, mean, max, got 'median'"),
    "embedding_bag weights shape": (lambda: F.embedding_bag(em.tensor([[1, 2]]), em.ones(3, 2), mode="sum",
                                                            per_sample_weights=em.ones(3)),
                                    r"embedding_bag: per_sample_weights must have the input's shape \(1, 2\)"),
    "EmbeddingBag padding_idx": (lambda: em.nn.EmbeddingBag(3, 2, padding_idx=5),
                                 "Padding_idx must be within num_embeddings"),
    "ctc blank": (lambda: F.ctc_loss(em.ones(5, 2, 4).log_softmax(-1), em.tensor([[1, 2], [2, 3]]), [5, 5], [2, 2],
                                     blank=4), "ctc_loss: blank 4 is not one of the 4 classes"),
    "ctc reduction": (lambda: F.ctc_loss(em.ones(5, 2, 4).log_softmax(-1), em.tensor([[1, 2], [2, 3]]), [5, 5],
                                         [2, 2], reduction="avg"), "ctc_loss: reduction must be"),
    "ctc concatenated lengths": (lambda: F.ctc_loss(em.ones(5, 2, 4).log_softmax(-1), em.tensor([1, 2, 3]), [5, 5],
                                                    [2, 2]), "ctc_loss: 1-D targets hold 3 labels"),
    "unpool dims": (lambda: F.max_unpool2d(em.ones(4, 4), em.zeros(4, 4, dtype=em.int64), 2),
                    r"max_unpool2d: expected a 4-D \(batched\) or 3-D input"),
    "unpool indices": (lambda: F.max_unpool2d(em.ones(1, 1, 2, 2), em.zeros(1, 1, 2, 1, dtype=em.int64), 2),
                       "max_unpool2d: indices must have the input's shape"),
    "unpool output_size": (lambda: F.max_unpool2d(em.ones(1, 1, 2, 2), em.zeros(1, 1, 2, 2, dtype=em.int64), 2,
                                                  output_size=(9, 9)), "max_unpool2d: output_size"),
    "conv_transpose3d weight": (lambda: F.conv_transpose3d(em.ones(1, 2, 2, 2, 2), em.ones(3, 2, 1, 1, 1)),
                                "conv_transpose3d: expected a"),
    "conv_transpose3d output_padding": (lambda: F.conv_transpose3d(em.ones(1, 2, 2, 2, 2), em.ones(2, 2, 1, 1, 1),
                                                                   output_padding=1),
                                        "conv_transpose3d: output_padding 1 must be smaller"),
    "conv3d same strided": (lambda: F.conv3d(em.ones(1, 1, 4, 4, 4), em.ones(1, 1, 2, 2, 2), stride=2,
                                             padding="same"), "conv3d: padding='same' is not supported"),
    "affine_grid dtype": (lambda: F.affine_grid(em.ones(1, 2, 3, dtype=em.int64), (1, 1, 2, 2)),
                          "affine_grid: theta must be a float tensor, got int64"),
    "window length": (lambda: em.hann_window(-1), "hann_window: window_length must be non-negative"),
    "vander N": (lambda: em.vander(em.ones(3), -1), "vander: N must be non-negative"),
    "trapezoid x and dx": (lambda: em.trapezoid(em.ones(3), em.ones(3), dx=1.0), "trapezoid: pass x or dx"),
    "index_fill bounds": (lambda: em.index_fill(em.ones(2, 2), 1, em.tensor([2]), 0.0),
                          r"index_fill: index \[2\] is out of bounds for dim 1 of size 2"),
}


@pytest.mark.parametrize("name", list(MORE_BAD))
def test_more_bad_inputs_raise_one_line_errors(name: str) -> None:
    make, message = MORE_BAD[name]
    with pytest.raises(Exception, match=message) as info:
        make()
    assert "\n" not in str(info.value)
