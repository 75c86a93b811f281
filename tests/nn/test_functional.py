"""nn.functional against torch.nn.functional: activations, linear/conv/pool, norms, attention, resampling."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import ember as em
from ember.nn import functional as F

from .helpers import RNG, assert_close, randn

tF = torch.nn.functional


def _run(em_fn, t_fn, inputs: list, grad_positions=None, atol: float = 1e-5, rtol: float = 1e-4):
    """Call both with the same inputs (numpy arrays become tensors); compare output and gradients."""
    if grad_positions is None:
        grad_positions = [i for i, a in enumerate(inputs) if isinstance(a, np.ndarray) and a.dtype.kind == "f"]
    e_in, t_in = [], []
    for i, a in enumerate(inputs):
        if isinstance(a, np.ndarray):
            e_in.append(em.tensor(a, requires_grad=i in grad_positions))
            t_in.append(torch.tensor(a, requires_grad=i in grad_positions))
        else:
            e_in.append(a)
            t_in.append(a)
    out, tout = em_fn(*e_in), t_fn(*t_in)
    assert_close(out, tout, atol, rtol, "forward")
    if grad_positions:
        g = RNG.standard_normal(tuple(tout.shape)).astype(np.float32)
        out.backward(em.tensor(g))
        tout.backward(torch.tensor(g))
        for i in grad_positions:
            assert_close(e_in[i].grad, t_in[i].grad, atol, rtol, f"grad of input {i}")
    return out, tout


_F64 = {F: em.float64, tF: torch.float64}
ACTIVATIONS = [
    ("relu", lambda f: (lambda x: f.relu(x))),
    ("relu6", lambda f: (lambda x: f.relu6(x * 4))),
    ("leaky_relu", lambda f: (lambda x: f.leaky_relu(x, 0.1))),
    ("elu", lambda f: (lambda x: f.elu(x, 1.5))),
    ("selu", lambda f: (lambda x: f.selu(x))),
    ("celu", lambda f: (lambda x: f.celu(x, 0.5))),
    ("gelu", lambda f: (lambda x: f.gelu(x))),
    ("gelu_tanh", lambda f: (lambda x: f.gelu(x, approximate="tanh"))),
    ("silu", lambda f: (lambda x: f.silu(x))),
    ("mish", lambda f: (lambda x: f.mish(x))),
    ("hardswish", lambda f: (lambda x: f.hardswish(x * 3))),
    ("hardsigmoid", lambda f: (lambda x: f.hardsigmoid(x * 3))),
    ("hardtanh", lambda f: (lambda x: f.hardtanh(x, -0.3, 0.6))),
    ("sigmoid", lambda f: (lambda x: f.sigmoid(x))),
    ("tanh", lambda f: (lambda x: f.tanh(x))),
    ("logsigmoid", lambda f: (lambda x: f.logsigmoid(x * 10))),
    ("softplus", lambda f: (lambda x: f.softplus(x, beta=3.0, threshold=2.0))),
    ("softsign", lambda f: (lambda x: f.softsign(x))),
    ("tanhshrink", lambda f: (lambda x: f.tanhshrink(x))),
    ("threshold", lambda f: (lambda x: f.threshold(x, 0.2, 5.0))),
    ("softmax", lambda f: (lambda x: f.softmax(x, dim=-1))),
    ("softmax0", lambda f: (lambda x: f.softmax(x, 0))),
    ("softmin", lambda f: (lambda x: f.softmin(x, 1))),
    ("log_softmax", lambda f: (lambda x: f.log_softmax(x, dim=1))),
    ("log_softmax_f64", lambda f: (lambda x: f.log_softmax(x, dim=1, dtype=_F64[f]))),
    ("glu", lambda f: (lambda x: f.glu(x, -1))),
    ("normalize", lambda f: (lambda x: f.normalize(x, dim=1))),
    ("normalize_p1", lambda f: (lambda x: f.normalize(x, p=1.0, dim=-1))),
]


@pytest.mark.parametrize(("name", "make"), ACTIVATIONS, ids=[a[0] for a in ACTIVATIONS])
def test_activation_functions(name, make) -> None:
    for shape in [(3, 4), (2, 3, 6)]:
        _run(make(F), make(tF), [randn(*shape)])


def test_prelu_cosine_pairwise() -> None:
    _run(F.prelu, tF.prelu, [randn(2, 3, 4), np.abs(randn(3))])
    _run(F.cosine_similarity, tF.cosine_similarity, [randn(4, 5), randn(4, 5)])
    _run(lambda a, b: F.cosine_similarity(a, b, dim=-1), lambda a, b: tF.cosine_similarity(a, b, dim=-1),
         [randn(2, 3, 5), randn(2, 3, 5)])
    _run(F.pairwise_distance, tF.pairwise_distance, [randn(4, 5), randn(4, 5)])


def test_linear_and_bilinear() -> None:
    _run(F.linear, tF.linear, [randn(4, 3), randn(5, 3), randn(5)])
    _run(F.linear, tF.linear, [randn(2, 4, 3), randn(5, 3)])
    _run(F.bilinear, tF.bilinear, [randn(4, 2), randn(4, 3), randn(5, 2, 3), randn(5)])


@pytest.mark.parametrize("kwargs", [{}, {"stride": 2, "padding": 1}, {"dilation": 2, "groups": 2}, {"padding": "same"},
                                    {"padding": "valid"}])
def test_conv1d_conv2d(kwargs) -> None:
    _run(lambda x, w, b: F.conv1d(x, w, b, **kwargs), lambda x, w, b: tF.conv1d(x, w, b, **kwargs),
         [randn(2, 4, 9), randn(6, 4 // kwargs.get("groups", 1), 3), randn(6)])
    _run(lambda x, w, b: F.conv2d(x, w, b, **kwargs), lambda x, w, b: tF.conv2d(x, w, b, **kwargs),
         [randn(2, 4, 7, 6), randn(6, 4 // kwargs.get("groups", 1), 3, 3), randn(6)])


@pytest.mark.parametrize("kwargs", [{}, {"stride": 2, "padding": 1, "output_padding": 1}, {"groups": 2},
                                    {"dilation": 2}])
def test_conv_transpose(kwargs) -> None:
    g = kwargs.get("groups", 1)
    _run(lambda x, w, b: F.conv_transpose1d(x, w, b, **kwargs), lambda x, w, b: tF.conv_transpose1d(x, w, b, **kwargs),
         [randn(2, 4, 5), randn(4, 6 // g, 3), randn(6)])
    _run(lambda x, w, b: F.conv_transpose2d(x, w, b, **kwargs), lambda x, w, b: tF.conv_transpose2d(x, w, b, **kwargs),
         [randn(2, 4, 5, 4), randn(4, 6 // g, 3, 3), randn(6)])


def test_pooling_functions() -> None:
    x = randn(2, 3, 9, 8)
    _run(lambda a: F.max_pool2d(a, 3, 2, 1), lambda a: tF.max_pool2d(a, 3, 2, 1), [x])
    _run(lambda a: F.avg_pool2d(a, 2, ceil_mode=True), lambda a: tF.avg_pool2d(a, 2, ceil_mode=True), [x])
    _run(lambda a: F.avg_pool2d(a, 3, divisor_override=4), lambda a: tF.avg_pool2d(a, 3, divisor_override=4), [x])
    _run(lambda a: F.adaptive_avg_pool2d(a, (4, 3)), lambda a: tF.adaptive_avg_pool2d(a, (4, 3)), [x])
    _run(lambda a: F.adaptive_avg_pool2d(a, (None, 2)), lambda a: tF.adaptive_avg_pool2d(a, (None, 2)), [x])
    _run(lambda a: F.adaptive_max_pool2d(a, 2), lambda a: tF.adaptive_max_pool2d(a, 2), [x])
    y = randn(2, 3, 11)
    _run(lambda a: F.max_pool1d(a, 2, ceil_mode=True), lambda a: tF.max_pool1d(a, 2, ceil_mode=True), [y])
    _run(lambda a: F.avg_pool1d(a, 3, 2), lambda a: tF.avg_pool1d(a, 3, 2), [y])
    _run(lambda a: F.adaptive_avg_pool1d(a, 4), lambda a: tF.adaptive_avg_pool1d(a, 4), [y])


@pytest.mark.parametrize("shape", [(6, 3), (4, 3, 5), (2, 3, 4, 4)])
def test_batch_norm_function(shape) -> None:
    c = shape[1]
    rm, rv = randn(c), np.abs(randn(c)) + 0.5
    erm, erv = em.tensor(rm), em.tensor(rv)
    trm, trv = torch.tensor(rm), torch.tensor(rv)
    _run(lambda x, w, b: F.batch_norm(x, erm, erv, w, b, training=True, momentum=0.2),
         lambda x, w, b: tF.batch_norm(x, trm, trv, w, b, training=True, momentum=0.2),
         [randn(*shape), randn(c), randn(c)])
    assert_close(erm, trm)
    assert_close(erv, trv)
    _run(lambda x, w, b: F.batch_norm(x, erm, erv, w, b, training=False, eps=1e-3),
         lambda x, w, b: tF.batch_norm(x, trm, trv, w, b, training=False, eps=1e-3),
         [randn(*shape), randn(c), randn(c)])
    _run(lambda x: F.batch_norm(x, None, None, training=True), lambda x: tF.batch_norm(x, None, None, training=True),
         [randn(*shape)])


def test_norm_functions() -> None:
    _run(lambda x, w, b: F.layer_norm(x, (4,), w, b), lambda x, w, b: tF.layer_norm(x, (4,), w, b),
         [randn(3, 5, 4), randn(4), randn(4)])
    _run(lambda x: F.layer_norm(x, [5, 4]), lambda x: tF.layer_norm(x, [5, 4]), [randn(3, 5, 4)])
    _run(lambda x, w, b: F.group_norm(x, 3, w, b, 1e-3), lambda x, w, b: tF.group_norm(x, 3, w, b, 1e-3),
         [randn(2, 6, 3, 2), randn(6), randn(6)])
    _run(lambda x, w: F.rms_norm(x, (4,), w), lambda x, w: tF.rms_norm(x, (4,), w), [randn(3, 4), randn(4)])
    _run(lambda x: F.instance_norm(x), lambda x: tF.instance_norm(x), [randn(2, 3, 5, 4)])
    with pytest.raises(ValueError, match="normalized_shape"):
        F.layer_norm(em.randn(3, 5), (4,))
    with pytest.raises(ValueError, match="divisible"):
        F.group_norm(em.randn(2, 5, 3), 2)


def test_embedding_and_one_hot() -> None:
    idx = np.array([[1, 0, 3], [2, 2, 4]])
    _run(lambda i, w: F.embedding(i, w), lambda i, w: tF.embedding(i, w), [idx, randn(5, 3)])
    _run(lambda i, w: F.embedding(i, w, padding_idx=2), lambda i, w: tF.embedding(i, w, padding_idx=2),
         [idx, randn(5, 3)])
    np.testing.assert_array_equal(F.one_hot(em.tensor(idx), 6).numpy(), tF.one_hot(torch.tensor(idx), 6).numpy())
    np.testing.assert_array_equal(F.one_hot(em.tensor(idx)).numpy(), tF.one_hot(torch.tensor(idx)).numpy())


@pytest.mark.parametrize("mode", ["constant", "reflect", "replicate", "circular"])
def test_pad(mode) -> None:
    kwargs = {"value": 1.5} if mode == "constant" else {}
    _run(lambda x: F.pad(x, (1, 2, 2, 1), mode=mode, **kwargs), lambda x: tF.pad(x, (1, 2, 2, 1), mode=mode, **kwargs),
         [randn(2, 3, 4, 5)])


def test_dropout_function_modes() -> None:
    x = em.ones(10, 10)
    assert F.dropout(x, 0.5, training=False) is x
    assert F.dropout(x, 0.0) is x
    with pytest.raises(ValueError):
        F.dropout(x, -0.1)
    em.manual_seed(0)
    y = F.dropout1d(em.ones(4, 8, 5), 0.5).numpy()
    assert np.all((y == 0).all(-1) | (y == 2.0).all(-1))
    z = em.ones(6, 6)
    F.dropout(z, 0.5, inplace=True)
    assert set(np.unique(z.numpy())) <= {0.0, 2.0}


# --- attention -------------------------------------------------------------------------------------------------
SDPA_CASES = [
    ("plain", (2, 3, 5, 4), (2, 3, 6, 4), {}),
    ("causal", (2, 3, 5, 4), (2, 3, 5, 4), {"is_causal": True}),
    ("causal-rect", (1, 2, 3, 4), (1, 2, 5, 4), {"is_causal": True}),
    ("scale", (2, 5, 4), (2, 6, 4), {"scale": 0.3}),
    ("bool-mask", (2, 3, 5, 4), (2, 3, 6, 4), {"mask": "bool"}),
    ("float-mask", (2, 3, 5, 4), (2, 3, 6, 4), {"mask": "float"}),
    ("gqa", (2, 4, 5, 4), (2, 2, 6, 4), {"enable_gqa": True}),
]


@pytest.mark.parametrize(("name", "qshape", "kshape", "opts"), SDPA_CASES, ids=[c[0] for c in SDPA_CASES])
def test_scaled_dot_product_attention(name, qshape, kshape, opts) -> None:
    q, k, v = randn(*qshape), randn(*kshape), randn(*kshape[:-1], 3)
    opts = dict(opts)
    mask = opts.pop("mask", None)
    em_mask = t_mask = None
    if mask == "bool":
        m = RNG.random((qshape[-2], kshape[-2])) > 0.3
        m[:, 0] = True  # every query sees at least one key
        em_mask, t_mask = em.tensor(m), torch.tensor(m)
    elif mask == "float":
        m = randn(qshape[-2], kshape[-2])
        em_mask, t_mask = em.tensor(m), torch.tensor(m)
    _run(lambda a, b, c: F.scaled_dot_product_attention(a, b, c, attn_mask=em_mask, **opts),
         lambda a, b, c: tF.scaled_dot_product_attention(a, b, c, attn_mask=t_mask, **opts), [q, k, v])


def test_sdpa_dropout_and_errors() -> None:
    q = em.randn(1, 4, 8)
    em.manual_seed(0)
    a = F.scaled_dot_product_attention(q, q, q, dropout_p=0.5)
    em.manual_seed(0)
    b = F.scaled_dot_product_attention(q, q, q, dropout_p=0.5)
    np.testing.assert_array_equal(a.numpy(), b.numpy())
    assert not np.allclose(a.numpy(), F.scaled_dot_product_attention(q, q, q).numpy())
    with pytest.raises(ValueError):
        F.scaled_dot_product_attention(q, q, q, attn_mask=em.ones(4, 4), is_causal=True)


# --- resampling ---------------------------------------------------------------------------------------------------
INTERP_CASES = [
    ("nearest-scale", (2, 3, 4, 5), {"scale_factor": 2}),
    ("nearest-size", (2, 3, 4, 5), {"size": (7, 3)}),
    ("nearest-frac", (1, 2, 5, 5), {"scale_factor": 1.7}),
    ("nearest-exact", (1, 2, 5, 6), {"size": (8, 4), "mode": "nearest-exact"}),
    ("bilinear", (2, 3, 4, 5), {"scale_factor": 2, "mode": "bilinear"}),
    ("bilinear-down", (1, 2, 8, 7), {"size": (3, 4), "mode": "bilinear"}),
    ("bilinear-ac", (1, 2, 4, 5), {"size": (7, 9), "mode": "bilinear", "align_corners": True}),
    ("linear", (2, 3, 6), {"scale_factor": 1.5, "mode": "linear"}),
    ("nearest-1d", (2, 3, 6), {"size": 10}),
]


@pytest.mark.parametrize(("name", "shape", "kwargs"), INTERP_CASES, ids=[c[0] for c in INTERP_CASES])
def test_interpolate(name, shape, kwargs) -> None:
    _run(lambda x: F.interpolate(x, **kwargs), lambda x: tF.interpolate(x, **kwargs), [randn(*shape)])


_BN_DTYPES = ["float32", "float64", "float16", "bfloat16"]


@pytest.mark.parametrize("training", [False, True])
@pytest.mark.parametrize("input_dtype", _BN_DTYPES)
@pytest.mark.parametrize("param_dtype", _BN_DTYPES + ["int64"])
@pytest.mark.parametrize("which", ["statistics", "weight alone", "weight and bias, no statistics"])
def test_batch_norm_refuses_parameter_dtypes_where_pytorch_does(training, input_dtype, param_dtype, which):
    """The statistics, weight and bias share one dtype, the input's or float32 for a float16/bfloat16 input; any
    other mix is a one-line error naming them, where it computed in a promoted dtype before."""
    if getattr(em, input_dtype) is None or getattr(em, param_dtype) is None:
        pytest.skip("bfloat16 needs ml_dtypes")
    if which == "weight and bias, no statistics" and not training:
        pytest.skip("eval needs the statistics")

    def call(lib, functional):
        x = lib.ones(2, 3, 4, 4).to(getattr(lib, input_dtype))
        own, other = getattr(lib, input_dtype), getattr(lib, param_dtype)
        if which == "statistics":
            args = (lib.zeros(3, dtype=other), lib.ones(3, dtype=other), None, None)
        elif which == "weight alone":
            args = (lib.zeros(3, dtype=own), lib.ones(3, dtype=own), lib.ones(3, dtype=other), None)
        else:
            args = (None, None, lib.ones(3, dtype=other), lib.zeros(3, dtype=other))
        return functional.batch_norm(x, *args, training=training)

    try:
        call(torch, torch.nn.functional)
        torch_refuses = False
    except RuntimeError:
        torch_refuses = True
    if torch_refuses:
        with pytest.raises(em.errors.DtypeError, match=f"batch_norm: .*{param_dtype}"):
            call(em, em.nn.functional)
    else:
        assert call(em, em.nn.functional).dtype == getattr(em, input_dtype)
