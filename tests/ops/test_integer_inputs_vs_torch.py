"""Integer and bool tensors given to ops defined on floating point, against PyTorch: where PyTorch refuses them
(layer_norm, softmax, gelu, the losses, ...) ember raises an error of its class naming the op and the dtype;
where it computes in floating point (sqrt, exp, sigmoid, ...) ember does too; where it keeps the integer dtype
(relu, hardtanh, max pooling, ...) so does ember. Never an integer result silently truncated."""

from __future__ import annotations

import numpy as np
import pytest

from .torch_oracle import Lib, assert_like_torch

A = [[1, 2, 3, 4], [0, 5, 2, 1]]
A4 = (np.arange(2 * 2 * 4 * 4).reshape(2, 2, 4, 4) % 5).tolist()
EYE2 = [[2, 0], [0, 2]]

# name -> call(L, dtype); the op named in errors is the name less a _suffix after "__"
CASES = {
    # normalisation
    "layer_norm": lambda L, d: L.F.layer_norm(L.t(A, d), (4,)),
    "group_norm": lambda L, d: L.F.group_norm(L.t(A4, d), 1),
    "instance_norm": lambda L, d: L.F.instance_norm(L.t(A4, d)),
    "batch_norm": lambda L, d: L.F.batch_norm(L.t(A, d), None, None, training=True),
    "batch_norm__eval": lambda L, d: L.F.batch_norm(L.t(A, d), L.t([0, 0, 0, 0], d), L.t([1, 1, 1, 1], d)),
    "rms_norm": lambda L, d: L.F.rms_norm(L.t(A, d), (4,)),
    "normalize": lambda L, d: L.F.normalize(L.t(A, d)),
    # softmax family
    "softmax": lambda L, d: L.F.softmax(L.t(A, d), 1),
    "log_softmax": lambda L, d: L.F.log_softmax(L.t(A, d), 1),
    "softmax__softmin": lambda L, d: L.F.softmin(L.t(A, d), 1),
    "softmax__with_dtype": lambda L, d: L.F.softmax(L.t(A, d), 1, dtype=L.m.float32),
    # reductions and statistics
    "mean": lambda L, d: L.m.mean(L.t(A, d)),
    "mean__dim": lambda L, d: L.t(A, d).mean(1),
    "var": lambda L, d: L.m.var(L.t(A, d)),
    "var__std": lambda L, d: L.m.std(L.t(A, d)),
    "var__var_mean": lambda L, d: L.m.var_mean(L.t(A, d))[0],
    "var__std_mean": lambda L, d: L.m.std_mean(L.t(A, d))[0],
    "logsumexp": lambda L, d: L.m.logsumexp(L.t(A, d), 1),
    "sum": lambda L, d: L.m.sum(L.t(A, d)),
    "prod": lambda L, d: L.m.prod(L.t(A, d)),
    "cumsum": lambda L, d: L.m.cumsum(L.t(A, d), 1),
    "norm": lambda L, d: L.m.norm(L.t(A, d)),
    "vector_norm": lambda L, d: L.m.linalg.vector_norm(L.t(A, d)),
    "cosine_similarity": lambda L, d: L.F.cosine_similarity(L.t(A, d), L.t(A, d)),
    "pairwise_distance": lambda L, d: L.F.pairwise_distance(L.t(A, d), L.t(A, d)),
    # linear algebra and layers
    "linear": lambda L, d: L.F.linear(L.t(A, d), L.t(A, d)),
    "matmul": lambda L, d: L.m.matmul(L.t(A, d), L.t(np.array(A).T, d)),
    "inv": lambda L, d: L.m.linalg.inv(L.t(EYE2, d)),
    "det": lambda L, d: L.m.linalg.det(L.t(EYE2, d)),
    "conv1d": lambda L, d: L.F.conv1d(L.t([A], d), L.t([A], d)),
    "conv2d": lambda L, d: L.F.conv2d(L.t(A4, d), L.t(np.array(A4)[:, :, :2, :2], d)),
    "scaled_dot_product_attention": lambda L, d: L.F.scaled_dot_product_attention(L.t([A], d), L.t([A], d),
                                                                                   L.t([A], d)),
    # pooling and resampling
    "max_pool2d": lambda L, d: L.F.max_pool2d(L.t(A4, d), 2),
    "adaptive_avg_pool2d": lambda L, d: L.F.adaptive_avg_pool2d(L.t(A4, d), 2),
    "adaptive_max_pool2d": lambda L, d: L.F.adaptive_max_pool2d(L.t(A4, d), 2),
    "interpolate__bilinear": lambda L, d: L.F.interpolate(L.t(A4, d), scale_factor=2, mode="bilinear"),
    "interpolate__nearest": lambda L, d: L.F.interpolate(L.t(A4, d), scale_factor=2, mode="nearest"),
    "dropout": lambda L, d: L.F.dropout(L.t(A, d), 0.5),
    "dropout__p0": lambda L, d: L.F.dropout(L.t(A, d), 0.0),
    "dropout__eval": lambda L, d: L.F.dropout(L.t(A, d), 0.5, training=False),
    # elementwise math: PyTorch computes these in floating point
    "sqrt": lambda L, d: L.m.sqrt(L.t(A, d)),
    "exp": lambda L, d: L.m.exp(L.t(A, d)),
    "log": lambda L, d: L.m.log(L.t(A, d)),
    "sigmoid": lambda L, d: L.m.sigmoid(L.t(A, d)),
    "tanh": lambda L, d: L.m.tanh(L.t(A, d)),
    "erf": lambda L, d: L.m.erf(L.t(A, d)),
    "reciprocal": lambda L, d: L.m.reciprocal(L.t(A, d)),
    "div": lambda L, d: L.m.div(L.t(A, d), 2),
    "pow": lambda L, d: L.m.pow(L.t(A, d), 0.5),
    "atan2": lambda L, d: L.m.atan2(L.t(A, d), L.t(A, d)),
    "lerp": lambda L, d: L.m.lerp(L.t(A, d), L.t(A, d), 0.5),
    "frac": lambda L, d: L.m.frac(L.t(A, d)),
    "floor": lambda L, d: L.m.floor(L.t(A, d)),
    "round": lambda L, d: L.m.round(L.t(A, d)),
    "abs": lambda L, d: L.m.abs(L.t(A, d)),
    "add__float_alpha": lambda L, d: L.m.add(L.t(A, d), L.t(A, d), alpha=0.5),
    "addcdiv": lambda L, d: L.m.addcdiv(L.t(A, d), L.t(A, d), L.t(A, d), value=2),
    # activations
    "relu": lambda L, d: L.F.relu(L.t(A, d)),
    "hardtanh": lambda L, d: L.F.hardtanh(L.t(A, d)),
    "hardtanh__relu6": lambda L, d: L.F.relu6(L.t(A, d)),
    "gelu": lambda L, d: L.F.gelu(L.t(A, d)),
    "silu": lambda L, d: L.F.silu(L.t(A, d)),
    "elu": lambda L, d: L.F.elu(L.t(A, d)),
    "elu__selu": lambda L, d: L.F.selu(L.t(A, d)),
    "elu__celu": lambda L, d: L.F.celu(L.t(A, d)),
    "leaky_relu": lambda L, d: L.F.leaky_relu(L.t(A, d)),
    "softplus": lambda L, d: L.F.softplus(L.t(A, d)),
    "logsigmoid": lambda L, d: L.F.logsigmoid(L.t(A, d)),
    "mish": lambda L, d: L.F.mish(L.t(A, d)),
    "hardswish": lambda L, d: L.F.hardswish(L.t(A, d)),
    "hardsigmoid": lambda L, d: L.F.hardsigmoid(L.t(A, d)),
    "glu": lambda L, d: L.F.glu(L.t(A, d)),
    "prelu": lambda L, d: L.F.prelu(L.t(A, d), L.t([1], d)),
    "softsign": lambda L, d: L.F.softsign(L.t(A, d)),
    "tanhshrink": lambda L, d: L.F.tanhshrink(L.t(A, d)),
    # losses
    "mse_loss": lambda L, d: L.F.mse_loss(L.t(A, d), L.t(A, d)),
    "l1_loss": lambda L, d: L.F.l1_loss(L.t(A, d), L.t(A, d)),
    "smooth_l1_loss": lambda L, d: L.F.smooth_l1_loss(L.t(A, d), L.t(A, d)),
    "huber_loss": lambda L, d: L.F.huber_loss(L.t(A, d), L.t(A, d)),
    "binary_cross_entropy": lambda L, d: L.F.binary_cross_entropy(L.t(A, d), L.t(A, d)),
    "binary_cross_entropy_with_logits": lambda L, d: L.F.binary_cross_entropy_with_logits(L.t(A, d), L.t(A, d)),
    "cross_entropy": lambda L, d: L.F.cross_entropy(L.t(A, d), L.t([0, 1], "int64")),
    "nll_loss": lambda L, d: L.F.nll_loss(L.t(A, d), L.t([0, 1], "int64")),
    "kl_div": lambda L, d: L.F.kl_div(L.t(A, d), L.t(A, d), reduction="sum"),
    "soft_margin_loss": lambda L, d: L.F.soft_margin_loss(L.t(A, d), L.t(A, d)),
    "poisson_nll_loss": lambda L, d: L.F.poisson_nll_loss(L.t(A, d), L.t(A, d)),
    "hinge_embedding_loss": lambda L, d: L.F.hinge_embedding_loss(L.t(A, d), L.t(A, d)),
    "margin_ranking_loss": lambda L, d: L.F.margin_ranking_loss(L.t(A, d), L.t(A, d), L.t(A, d)),
    "cosine_embedding_loss": lambda L, d: L.F.cosine_embedding_loss(L.t(A, d), L.t(A, d), L.t([1, -1], d)),
    "gaussian_nll_loss": lambda L, d: L.F.gaussian_nll_loss(L.t(A, d), L.t(A, d), L.t(A, d)),
}

# Where PyTorch computes an integer result by truncating a fractional one, ember refuses (or computes in floating
# point) instead: an average of integers (avg_pool2d), a float alpha or value applied to integers (addcmul).
NOT_TRUNCATED = {
    "avg_pool2d": lambda L, d: L.F.avg_pool2d(L.t(A4, d), 2),
    "avg_pool1d": lambda L, d: L.F.avg_pool1d(L.t([A], d), 2),
    "addcmul": lambda L, d: L.m.addcmul(L.t(A, d), L.t(A, d), L.t(A, d), value=0.5),
}

DTYPES = ("int64", "int32", "bool")


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", list(CASES))
def test_integer_input_like_torch(name: str, dtype: str) -> None:
    """PyTorch's verdict: its error class, its floating-point result, or its integer result."""
    op = name.split("__")[0]
    words = (dtype,) if op not in ("cross_entropy", "nll_loss") else ()
    # bool arithmetic inside a composite op is refused by the arithmetic op, named as PyTorch names it
    names = (op, "sub", "neg") if dtype == "bool" else op
    assert_like_torch(lambda L: CASES[name](L, dtype), names, words)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", list(NOT_TRUNCATED))
def test_no_integer_result_is_silently_truncated(name: str, dtype: str) -> None:
    """avg_pool2d of int64 is an error naming the op and dtype, not PyTorch's truncated average."""
    with pytest.raises(TypeError, match=rf"{name.removesuffix('1d').removesuffix('2d')}.*{dtype}"):
        NOT_TRUNCATED[name](Lib("ember"), dtype)
