"""Op by op: small functions exported to ONNX, checked by onnx's full checker and run by onnxruntime
against Ember; plus the errors for ops without a mapping and for a missing onnx package."""

import sys

import numpy as np
import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

# special_values makes NaN and inf on purpose
pytestmark = pytest.mark.filterwarnings("ignore:invalid value:RuntimeWarning", "ignore:divide by zero:RuntimeWarning")

from onnx_test_helpers import close, export_and_check  # noqa: E402

import ember as em  # noqa: E402
import ember.nn.functional as F  # noqa: E402
from ember.ops.recurrent import gru_cell, lstm_cell  # noqa: E402

em.manual_seed(0)
_GRU = em.nn.GRU(3, 4, batch_first=True, bidirectional=True).requires_grad_(False)
_GRU_NO_BIAS = em.nn.GRU(3, 4, num_layers=2, bias=False).requires_grad_(False)


def _x(b, *shape, positive=False, seed=0):
    g = em.Generator().manual_seed(seed + b)
    x = em.randn(b, *shape, generator=g)
    return x.abs() + 0.1 if positive else x


CASES = {
    # elementwise
    "arith": (lambda x: (x + 1.5) * x - x / 3.0 - 2 ** x, (4, 5)),
    "unary": (lambda x: em.exp(x).sqrt() + em.sin(x) + em.cos(x) + em.tanh(x) + em.sigmoid(x) + em.abs(x).rsqrt(), (4,)),
    "rounding": (lambda x: em.floor(x * 3) + em.ceil(x) + em.round(x * 2) + em.trunc(x * 3) + em.sign(x), (6,)),
    "logs": (lambda x: em.log(x) + em.log1p(x) + em.log2(x) + em.log10(x) + em.expm1(x) + em.exp2(x), (5,), True),
    "activations": (lambda x: F.relu(x) + F.gelu(x) + F.gelu(x, approximate="tanh") + F.silu(x) + F.elu(x, 0.5)
                    + F.leaky_relu(x, 0.2) + F.softplus(x, beta=2.0) + F.hardtanh(x) + F.relu6(x * 4), (3, 7)),
    "compare": (lambda x: em.where((x > 0) & (x < 1) | (x == 0), x, -x) + (x >= 0.5).float() + (x != 2).float(), (8,)),
    "clamp_minmax": (lambda x: x.clamp(-0.5, 0.5) + x.clamp(min=0) + em.maximum(x, x * 2) + em.minimum(x, 1 - x), (6,)),
    "remainder": (lambda x: em.remainder(x * 5, 1.5) + em.fmod(x * 5, 1.5) + em.floor_divide(x * 5, 1.5), (9,)),
    "int_ops": (lambda x: ((x * 10).long() % 3 + (x * 10).long() // 4).float(), (9,)),
    "cast": (lambda x: (x * 4).int().float() + (x > 0).long(), (5,)),
    # shapes
    "reshape_permute": (lambda x: x.reshape(x.shape[0], 2, 6).permute(2, 0, 1).flatten(1), (12,)),
    "squeeze_unsqueeze": (lambda x: x.unsqueeze(1).unsqueeze(-1).squeeze(-1) * x[:, None, :], (4, 3)),
    "cat_split_chunk": (lambda x: em.cat([*x.split([2, 3], dim=1)[::-1], *x.chunk(5, dim=1)], dim=1), (5,)),
    "unbind_stack": (lambda x: em.stack(x.unbind(1)[::-1], dim=1), (3, 2)),
    "expand_repeat": (lambda x: x[:, :1].expand(x.shape[0], 4) + x.repeat(1, 2)[:, :4], (2,)),
    "flip_roll": (lambda x: x.flip(1) + x.roll(2, 1) + x.roll(-1, 0), (5,)),
    "getitem": (lambda x: x[:, 1:4, ::2] * 2 + x[:, -1:, 0:5:2] + x[..., 3][:, 1:, None] + x[None, :, 0, 1:4][0][:, None, :], (4, 6)),
    "getitem_reverse": (lambda x: x[:, ::-1] + x[:, 2].unsqueeze(1), (5,)),
    "index_select": (lambda x: x.index_select(1, em.tensor([2, 0, 1])) + x[:, em.tensor([1, 1, 0])], (3,)),
    "gather_scatter": (lambda x: x.gather(1, em.tensor([[0, 2, 1, 0]]).expand(x.shape[0], 4)), (3,)),
    "pad": (lambda x: F.pad(x, (1, 2, 0, 1), value=0.5), (2, 3)),
    "tril_triu": (lambda x: em.tril(x) + em.triu(x, 1) * 2, (4, 4)),
    "where_scalar": (lambda x: em.where(x > 0, x, 0.0), (4,)),
    "zeros_ones_like": (lambda x: em.zeros_like(x) + em.ones_like(x) * x + em.full_like(x, 3.0), (3,)),
    # reductions
    "reductions": (lambda x: x.sum(1) + x.mean(1) + x.amax(1) + x.amin(1) + x.prod(1) + x.logsumexp(1) + x.var(1)
                   + x.std(1, correction=0), (5,)),
    "reductions_keepdim": (lambda x: (x - x.mean(dim=(1, 2), keepdim=True)) / x.sum(-1, keepdim=True).abs().clamp(min=1), (3, 4)),
    "max_argmax": (lambda x: x.max(1).values + x.argmax(1).float() + x.argmin(1, keepdim=True).float().squeeze(1)
                   + x.min(dim=1).values, (6,)),
    "all_any": (lambda x: ((x > 0).all(1) | (x > 1).any(1)).float(), (6,)),
    "cumsum": (lambda x: x.cumsum(1), (6,)),
    "topk_sort": (lambda x: x.topk(3, dim=1).values + x.sort(dim=1, descending=True).values[:, :3], (6,)),
    # networks
    "softmax": (lambda x: F.softmax(x, dim=-1) + F.log_softmax(x, dim=1), (7,)),
    "matmul": (lambda x: x @ x.transpose(1, 2) + em.matmul(x, em.ones(3, 4)).sum(-1, keepdim=True), (4, 3)),
    "einsum": (lambda x: em.einsum("bij,bkj->bik", x, x), (3, 2)),
    "conv_pool": (lambda x: F.avg_pool2d(F.max_pool2d(F.conv2d(x, em.ones(4, 2, 3, 3) * 0.1, padding=1, stride=1), 2,
                                                        ceil_mode=True), 2, stride=1, padding=1), (2, 7, 7)),
    "conv_dilated_grouped": (lambda x: F.conv2d(x, em.ones(4, 1, 3, 3) * 0.1, dilation=2, groups=2, stride=2), (2, 9, 9)),
    "conv_transpose": (lambda x: F.conv_transpose2d(x, em.ones(2, 3, 3, 3) * 0.1, stride=2, padding=1,
                                                    output_padding=1), (2, 4, 4)),
    # eval batch norm with statistics computed from the input, so that they are not folded to constants
    "batch_norm_eval": (lambda x: F.batch_norm(x, x[0, :, 0, 0], x[0, :, 0, 1].abs() + 0.5, x[1, :, 0, 0],
                                               x[1, :, 1, 0], training=False), (4, 3, 5)),
    "layer_norm": (lambda x: F.layer_norm(x, (4,)) + F.layer_norm(x, (3, 4), weight=em.ones(3, 4) * 2), (3, 4)),
    "group_of_nn": (lambda x: F.adaptive_avg_pool2d(x, 1).flatten(1) + F.dropout(x, 0.5, training=False).sum((2, 3)),
                    (3, 4, 4)),
    "one_hot": (lambda x: F.one_hot((x.abs() * 3).long().clamp(max=3), 4).float(), (2,)),
    "pointwise_misc": (lambda x: em.addcmul(x, x, x, value=0.5) + em.addcdiv(x, x, x.abs() + 1, value=2.0)
                       + em.lerp(x, x * 3, 0.25) + em.frac(x * 3) + em.tan(x * 0.5) + em.square(x)
                       + em.reciprocal(x.abs() + 1), (6,)),
    "special_values": (lambda x: (em.isnan(x.log()).float() + em.isinf(1 / (x * 0)).float()
                                  + em.isfinite(x.log()).float()), (6,)),
    "bitwise": (lambda x: ((x * 8).long() & 5 | (x * 4).long() ^ 3).float() + (~(x > 0)).float(), (6,)),
    "clamp_tensor": (lambda x: em.clamp(x, x * 0 - 0.2, x.abs() * 0.5), (6,)),
    "scatter": (lambda x: em.zeros_like(x).scatter(1, em.tensor([[2, 0]]).expand(x.shape[0], 2), x[:, :2])
                + em.zeros_like(x).scatter_add(1, em.tensor([[1, 1]]).expand(x.shape[0], 2), x[:, 2:]), (4,)),
    "nll_loss": (lambda x: F.nll_loss(F.log_softmax(x, 1), em.tensor([0, 2, 1, 1])[:1].expand(x.shape[0]),
                                      reduction="sum"), (3,)),
    "cross_entropy": (lambda x: F.cross_entropy(x, em.tensor([0, 2, 1, 1])[:1].expand(x.shape[0]))
                      + F.cross_entropy(x * 2, em.tensor([2, 0, 1])[:1].expand(x.shape[0]), reduction="sum")
                      + F.cross_entropy(x, em.tensor([1, 0, 1])[:1].expand(x.shape[0]), reduction="none").sum(), (3,)),
    "binary_cross_entropy": (lambda x: F.binary_cross_entropy(em.sigmoid(x), em.sigmoid(x.flip(1)), reduction="none")
                             + F.binary_cross_entropy(em.sigmoid(x), (x > 0).float()), (5,)),
    "gaussian_nll_loss": (lambda x: F.gaussian_nll_loss(x, x.flip(1), x.abs(), reduction="none"), (5,)),
    "attention_causal": (lambda x: F.scaled_dot_product_attention(x, x * 0.5, x.flip(1), is_causal=True), (5, 4)),
    "attention_masks": (lambda x: F.scaled_dot_product_attention(x, x, x, attn_mask=em.tril(em.ones(5, 5)).bool())
                        + F.scaled_dot_product_attention(x, x, x, attn_mask=em.ones(5, 5) * 0.3, scale=0.2), (5, 4)),
    # query 2 may attend nowhere: weights 0, not Softmax's NaN
    "attention_query_attending_nowhere": (
        lambda x: F.scaled_dot_product_attention(x, x, x, attn_mask=em.tensor([[True] * 5] * 2 + [[False] * 5]
                                                                              + [[True] * 5] * 2)), (5, 4)),
    "lstm_cell": (lambda x: em.stack(lstm_cell(x, x[:, :3]), 0), (12,)),
    "gru_cell": (lambda x: gru_cell(x[:, :6], x[:, 6:9], x[:, 3:12] * 0.5, x[:, 9:12]), (12,)),
    "gru_module": (lambda x: _GRU(x)[0], (5, 3)),
    "gru_module_without_bias": (lambda x: _GRU_NO_BIAS(x)[1], (5, 3)),
    "sum_to_size": (lambda x: x.expand(x.shape[0], 3, 4).sum_to_size(x.shape[0], 1, 4) if hasattr(x, "sum_to_size")
                    else x.sum(1, keepdim=True), (1, 4)),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_op_matches_onnxruntime(name, tmp_path):
    fn, shape, *rest = CASES[name]
    positive = bool(rest and rest[0])
    export_and_check(fn, _x(2, *shape, positive=positive), tmp_path / f"{name}.onnx",
                     make_args=lambda b: _x(b, *shape, positive=positive))


@pytest.mark.parametrize("name", sorted(CASES))
def test_op_round_trips_through_load(name, tmp_path):
    fn, shape, *rest = CASES[name]
    positive = bool(rest and rest[0])
    em.onnx.export(fn, _x(2, *shape, positive=positive), tmp_path / "m.onnx", dynamic_axes={"input_0": {0: "b"}})
    program = em.onnx.load(tmp_path / "m.onnx")
    x = _x(3, *shape, positive=positive)
    got, want = program(x), fn(x)
    got, want = (got if isinstance(got, tuple) else (got,)), (want if isinstance(want, tuple) else (want,))
    for g, w in zip(got, want):
        close(g.numpy(), w.numpy())


def test_names_tuple_outputs_and_opsets(tmp_path):
    import onnx

    def f(a, b):
        return {"sum": a + b, "prod": (a * b, a.relu())}

    a, b = _x(2, 3), _x(2, 3, seed=5)
    for opset in (17, 18, 20):
        proto = em.onnx.export(f, (a, b), tmp_path / "m.onnx", input_names=["a", "b"],
                               output_names=["s", "p", "r"], dynamic_axes={"a": {0: "n"}, "b": {0: "n"}, "s": {0: "n"}},
                               opset_version=opset)
        onnx.checker.check_model(proto, full_check=True)
        assert [i.name for i in proto.graph.input] == ["a", "b"]
        assert [o.name for o in proto.graph.output] == ["s", "p", "r"]
        dim = proto.graph.input[0].type.tensor_type.shape.dim[0]
        assert dim.dim_param == "n"
        export_and_check(lambda a, b: (a + b, a * b, a.relu()), (a, b), tmp_path / "m2.onnx",
                         make_args=lambda n: (_x(n, 3), _x(n, 3, seed=5)), opset_version=opset)


def test_parameters_are_named_initializers(tmp_path):
    model = em.nn.Sequential(em.nn.Linear(3, 4), em.nn.ReLU(), em.nn.Linear(4, 2))
    proto = em.onnx.export(model, em.randn(2, 3), tmp_path / "m.onnx")
    names = {i.name for i in proto.graph.initializer}
    assert {"0.weight", "0.bias", "2.weight", "2.bias"} <= names
    from onnx import numpy_helper

    init = {i.name: numpy_helper.to_array(i) for i in proto.graph.initializer}
    np.testing.assert_array_equal(init["0.weight"], model[0].weight.detach().numpy())


def test_export_to_file_object_and_returned_value_input(tmp_path):
    import io

    import onnx

    buf = io.BytesIO()
    em.onnx.export(lambda x: (x, x * 2), em.randn(2, 2), buf, dynamic_axes={"input_0": [0]})
    proto = onnx.load_from_string(buf.getvalue())
    onnx.checker.check_model(proto, full_check=True)
    assert proto.graph.input[0].type.tensor_type.shape.dim[0].dim_param == "input_0_dynamic_axes_1"


def test_op_without_mapping_names_op_and_node(tmp_path):
    with pytest.raises(NotImplementedError, match=r"no ONNX mapping for op 'cumprod' \(node %\d+"):
        em.onnx.export(lambda x: em.cumprod(x, 0) + 1, em.randn(3), tmp_path / "m.onnx")


def test_bad_arguments(tmp_path):
    for bad in (11, 999, "18"):
        with pytest.raises(ValueError, match="opset_version must be an int from 17 to"):
            em.onnx.export(lambda x: x + 1, em.randn(3), tmp_path / "m.onnx", opset_version=bad)
    with pytest.raises(TypeError, match="example argument 1 must be a tensor"):
        em.onnx.export(lambda x, n: x + n, (em.randn(3), 2), tmp_path / "m.onnx")
    with pytest.raises(ValueError, match="dynamic axis 3 of input 'x'"):
        em.onnx.export(lambda x: x + 1, em.randn(3), tmp_path / "m.onnx", input_names=["x"], dynamic_axes={"x": [3]})


def test_missing_onnx_says_how_to_install(monkeypatch, tmp_path):
    em.onnx.export(lambda x: x + 1, em.randn(3), tmp_path / "m.onnx")
    monkeypatch.setitem(sys.modules, "onnx", None)
    with pytest.raises(ImportError, match=r'pip install "ember\[onnx\]"'):
        em.onnx.export(lambda x: x + 1, em.randn(3), tmp_path / "m.onnx")
    with pytest.raises(ImportError, match=r'pip install "ember\[onnx\]"'):
        em.onnx.load(tmp_path / "m.onnx")


def test_two_dynamic_axes_through_size_arithmetic(tmp_path):
    def f(x):
        b, t = x.shape
        return x.reshape(b * t, 1)[:, 0] * 2, em.zeros_like(x[:, :3]) + x[:, :1], x.reshape(b, t // 2, 2).sum(-1)

    export_and_check(f, em.randn(4, 6), tmp_path / "m.onnx", input_names=["x"],
                     dynamic_axes={"x": {0: "b", 1: "t"}}, make_args=lambda n: em.randn(n, 2 * n), batches=(3, 5))


def test_dynamic_axis_that_does_not_carry_is_an_error(tmp_path):
    with pytest.raises(ValueError, match=r"do not carry through op 'add' \(node %\d+\).*em.zeros_like"):
        em.onnx.export(lambda x: em.zeros(x.shape[0], 3) + x[:, :1], em.randn(4, 6), tmp_path / "m.onnx",
                       input_names=["x"], dynamic_axes={"x": {0: "b"}})


def test_jitted_function_exports(tmp_path):
    model = em.nn.Sequential(em.nn.Linear(3, 4), em.nn.GELU())
    f = em.jit(lambda x: model(x) * 2)
    f(em.randn(2, 3))  # compiled once already: export traces it afresh
    export_and_check(f, em.randn(2, 3), tmp_path / "m.onnx", make_args=lambda b: em.randn(b, 3))
