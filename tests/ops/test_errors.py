"""Bad inputs raise the right built-in exception subclass, with the op, shapes, dtypes or devices named."""

from __future__ import annotations

import pytest

import ember as em


def meta(*shape, dtype=None):
    """A meta tensor (shape and dtype, no data)."""
    return em.zeros(*shape, dtype=dtype, device="meta")


x = em.randn(3, 4)

# (id, call, exception type, substrings the message must contain)
SHAPE_ERRORS = [
    ("matmul_meta_huge", lambda: meta(10000, 20000) @ meta(30000, 30000), ["matmul", "(10000, 20000)", "(30000, 30000)"]),
    ("matmul", lambda: em.zeros(2, 3) @ em.zeros(4, 5), ["matmul", "(2, 3)", "(4, 5)"]),
    ("matmul_batch", lambda: em.zeros(2, 3, 4) @ em.zeros(3, 4, 5), ["matmul", "(2, 3, 4)", "(3, 4, 5)"]),
    ("matmul_0d", lambda: em.zeros(()) @ em.zeros(3), ["matmul", "()", "(3,)"]),
    ("mm", lambda: em.mm(em.zeros(2, 3), em.zeros(2, 3)), ["mm", "(2, 3)"]),
    ("mm_ndim", lambda: em.mm(em.zeros(2, 3, 4), em.zeros(4, 3)), ["mm", "(2, 3, 4)", "(4, 3)"]),
    ("bmm", lambda: em.bmm(em.zeros(2, 3, 4), em.zeros(2, 5, 6)), ["bmm", "(2, 3, 4)", "(2, 5, 6)"]),
    ("add", lambda: em.zeros(2, 3) + em.zeros(4), ["add", "(2, 3)", "(4,)"]),
    ("add_meta", lambda: meta(2, 3) + meta(4), ["add", "(2, 3)", "(4,)"]),
    ("where", lambda: em.where(em.zeros(2, dtype="bool"), em.zeros(3), 0.0), ["where", "(2,)", "(3,)"]),
    ("cat", lambda: em.cat([em.zeros(2, 3), em.zeros(3, 4)], 0), ["cat", "(2, 3)", "(3, 4)"]),
    ("cat_meta", lambda: em.cat([meta(2, 3), meta(2, 4)]), ["cat", "(2, 3)", "(2, 4)"]),
    ("stack", lambda: em.stack([em.zeros(2, 3), em.zeros(3, 2)]), ["stack", "(2, 3)", "(3, 2)"]),
    ("reshape", lambda: x.reshape(5, 3), ["reshape", "(5, 3)", "(3, 4)"]),
    ("reshape_meta", lambda: meta(3, 4).reshape(5, -1), ["reshape", "(5, -1)"]),
    ("reshape_negative", lambda: x.reshape(-2, 6), ["reshape", "(-2, 6)"]),
    ("reshape_empty_ambiguous", lambda: em.zeros(2, 0).reshape(0, -1), ["reshape", "(0, -1)"]),
    ("view", lambda: x.view(7), ["view", "(7,)"]),
    ("expand", lambda: x.expand(3, 5), ["expand", "(3, 4)", "(3, 5)"]),
    ("conv2d_channels", lambda: em.conv2d(em.zeros(1, 3, 5, 5), em.zeros(2, 2, 3, 3)), ["conv2d", "(1, 3, 5, 5)",
                                                                                         "(2, 2, 3, 3)"]),
    ("conv2d_meta_small", lambda: em.conv2d(meta(1, 2, 2, 2), meta(2, 2, 3, 3)), ["conv2d", "(1, 2, 2, 2)"]),
    ("conv_transpose2d", lambda: em.conv_transpose2d(em.zeros(1, 4, 5, 5), em.zeros(3, 2, 3, 3)),
     ["conv_transpose2d", "(1, 4, 5, 5)", "(3, 2, 3, 3)"]),
    ("max_pool2d", lambda: em.max_pool2d(em.zeros(1, 1, 2, 2), 3), ["max_pool2d", "(1, 1, 2, 2)"]),
    ("avg_pool2d_ndim", lambda: em.avg_pool2d(em.zeros(5, 5), 2), ["avg_pool2d", "(5, 5)"]),
    ("einsum", lambda: em.einsum("ij,jk->ik", em.zeros(2, 3), em.zeros(4, 5)), ["einsum", "(2, 3)", "(4, 5)"]),
    ("gather", lambda: em.gather(x, 1, em.tensor([0, 1])), ["gather", "(3, 4)", "(2,)"]),
    ("index_select", lambda: em.index_select(x, 0, em.tensor([[0]])), ["index_select", "(1, 1)"]),
    ("scatter", lambda: em.scatter(x, 0, em.zeros(2, 4, dtype="int64"), em.zeros(1, 4)),
     ["scatter", "(2, 4)", "(1, 4)"]),
    ("masked_fill", lambda: em.masked_fill(x, em.zeros(5, dtype="bool"), 1.0), ["masked_fill", "(3, 4)", "(5,)"]),
    ("setitem", lambda: x.__setitem__(slice(0, 2), em.zeros(3, 4)), ["setitem", "(3, 4)", "(2, 4)"]),
    ("split", lambda: em.split(x, [1, 1], 0), ["split"]),
    ("unflatten", lambda: em.unflatten(x, 1, (3, 3)), ["unflatten", "(3, 3)"]),
    ("tril", lambda: em.tril(em.zeros(3)), ["tril", "(3,)"]),
    ("pad", lambda: em.pad(x, (-3, -3)), ["pad", "(3, 4)"]),
    ("repeat", lambda: x.repeat(2), ["repeat", "(3, 4)"]),
    ("topk", lambda: em.topk(x, 7), ["topk", "7"]),
]


@pytest.mark.parametrize(("call", "words"), [pytest.param(c, w, id=i) for i, c, w in SHAPE_ERRORS])
def test_shape_errors(call, words) -> None:
    """ShapeError, a ValueError, naming the op and the shapes involved."""
    with pytest.raises(em.ShapeError) as info:
        call()
    assert isinstance(info.value, ValueError)
    for w in words:
        assert w in str(info.value), f"{w!r} not in {str(info.value)!r}"


INDEX_ERRORS = [
    ("getitem_int", lambda: x[10], ["getitem", "10"]),
    ("getitem_dim1", lambda: x[:, 7], ["getitem", "7"]),
    ("getitem_too_many", lambda: x[0, 0, 0], ["getitem"]),
    ("getitem_tensor", lambda: x[em.tensor([0, 5])], ["getitem", "5"]),
    ("getitem_tensor_dim1", lambda: x[:, em.tensor([0, -9])], ["getitem", "-9"]),
    ("getitem_mask_shape", lambda: x[em.tensor([True, False])], ["getitem", "boolean"]),
    ("getitem_float", lambda: x[1.5], ["getitem", "float"]),
    ("getitem_float_tensor", lambda: x[em.tensor([0.0, 1.0])], ["getitem", "float32"]),
    ("getitem_meta", lambda: meta(3, 4)[5], ["getitem", "5", "(3, 4)"]),
    ("setitem_int", lambda: x.__setitem__(10, 1.0), ["setitem", "10"]),
    ("setitem_tensor", lambda: x.__setitem__(em.tensor([7]), 1.0), ["setitem", "7"]),
    ("setitem_meta", lambda: meta(3).__setitem__(5, 1.0), ["setitem", "5"]),
    ("gather", lambda: em.gather(x, 1, em.tensor([[0, 9]] * 3)), ["gather", "9"]),
    ("gather_negative", lambda: em.gather(x, 1, em.tensor([[0, -9]] * 3)), ["gather", "-9"]),
    ("scatter", lambda: em.scatter(x, 0, em.tensor([[5, 0, 0, 0]]), em.zeros(1, 4)), ["scatter", "5"]),
    ("scatter_add", lambda: em.scatter_add(x, 1, em.tensor([[5]]), em.zeros(1, 1)), ["scatter_add", "5"]),
    ("index_select", lambda: em.index_select(x, 0, em.tensor([3])), ["index_select", "3"]),
    ("one_hot", lambda: em.one_hot(em.tensor([0, 5]), 3), ["one_hot", "5"]),
    ("narrow", lambda: em.narrow(x, 0, 2, 5), ["narrow"]),
    ("select", lambda: em.select(x, 1, 4), ["select", "4"]),
    ("sum_dim", lambda: x.sum(5), ["sum", "5"]),
    ("mean_dim_meta", lambda: meta(3, 4).mean((0, 3)), ["mean", "3"]),
    ("softmax_dim", lambda: x.softmax(2), ["softmax", "2"]),
    ("transpose_dim", lambda: x.transpose(0, 3), ["transpose", "3"]),
    ("unsqueeze_dim", lambda: x.unsqueeze(4), ["unsqueeze", "4"]),
    ("cat_dim", lambda: em.cat([x, x], 3), ["cat", "3"]),
    ("roll_dim", lambda: em.roll(x, 1, 5), ["roll", "5"]),
    ("roll_dim_meta", lambda: em.roll(meta(3, 4), 1, 5), ["roll", "5"]),
    ("flip_dim", lambda: em.flip(x, (3,)), ["flip", "3"]),
    ("sort_dim", lambda: em.sort(x, 3), ["sort", "3"]),
    ("cumsum_dim", lambda: em.cumsum(x, -3), ["cumsum", "-3"]),
    ("max_dim", lambda: x.max(dim=2), ["max", "2"]),
    ("argmax_dim", lambda: x.argmax(-3), ["argmax", "-3"]),
]


@pytest.mark.parametrize(("call", "words"), [pytest.param(c, w, id=i) for i, c, w in INDEX_ERRORS])
def test_index_errors(call, words) -> None:
    """IndexError naming the op (and the bad index or dim)."""
    with pytest.raises(IndexError) as info:
        call()
    for w in words:
        assert w in str(info.value), f"{w!r} not in {str(info.value)!r}"


TYPE_ERRORS = [
    ("select_index", lambda: em.select(x, 1, 1.5), ["select", "int", "float"]),
    ("where_condition", lambda: em.where(em.zeros(3, 4), x, x), ["where", "bool", "float32"]),
    ("where_condition_meta", lambda: em.where(meta(3), meta(3), 0.0), ["where", "bool"]),
    ("where_python_condition", lambda: em.where(True, x, x), ["where", "bool"]),
    ("mean_int", lambda: em.mean(em.tensor([1, 2])), ["mean", "int64"]),
    ("mean_int_meta", lambda: meta(3, dtype="int32").mean(), ["mean", "int32"]),
    ("var_int", lambda: em.var(em.tensor([1, 2])), ["var", "int64"]),
    ("std_int", lambda: em.std(em.tensor([1, 2])), ["var", "int64"]),
    ("gather_float_index", lambda: em.gather(x, 1, em.zeros(3, 1)), ["gather", "float32"]),
    ("scatter_float_index", lambda: em.scatter(x, 1, em.zeros(3, 1), 1.0), ["scatter", "float32"]),
    ("index_select_float_index", lambda: em.index_select(x, 0, em.zeros(2)), ["index_select", "float32"]),
    ("masked_fill_mask", lambda: em.masked_fill(x, em.zeros(3, 4), 1.0), ["masked_fill", "bool"]),
    ("bitwise_float", lambda: em.bitwise_and(x, x), ["bitwise_and"]),
    ("avg_pool2d_int", lambda: em.avg_pool2d(em.zeros(1, 1, 4, 4, dtype="int64"), 2), ["avg_pool2d", "int64"]),
    ("one_hot_float", lambda: em.one_hot(em.zeros(3), 3), ["one_hot", "float32"]),
    ("neg_bool", lambda: -em.tensor([True]), ["neg", "bool"]),
    ("sub_bool", lambda: em.tensor([True]) - em.tensor([False]), ["sub", "bool"]),
    ("sub_bool_scalar", lambda: 1 - em.tensor([True]), ["sub", "bool"]),
    ("sum_dim_type", lambda: x.sum(1.5), ["sum", "float"]),
]


@pytest.mark.parametrize(("call", "words"), [pytest.param(c, w, id=i) for i, c, w in TYPE_ERRORS])
def test_dtype_errors(call, words) -> None:
    """TypeError naming the op and the offending dtype."""
    with pytest.raises(TypeError) as info:
        call()
    for w in words:
        assert w in str(info.value), f"{w!r} not in {str(info.value)!r}"


def _on(device, *shape, dtype=None):
    return em.zeros(*shape, dtype=dtype, device=device)


DEVICE_ERRORS = [
    ("add", lambda a, b: _on(a, 2) + _on(b, 2)),
    ("mul", lambda a, b: _on(a, 2) * _on(b, 2)),
    ("matmul", lambda a, b: _on(a, 2, 2) @ _on(b, 2, 2)),
    ("where", lambda a, b: em.where(_on(a, 2, dtype="bool"), _on(a, 2), _on(b, 2))),
    ("cat", lambda a, b: em.cat([_on(a, 2), _on(b, 2)])),
    ("gather", lambda a, b: em.gather(_on(a, 3, 4), 1, _on(b, 3, 1, dtype="int64"))),
    ("conv2d", lambda a, b: em.conv2d(_on(a, 1, 1, 3, 3), _on(b, 1, 1, 2, 2))),
    ("getitem", lambda a, b: _on(a, 3)[em.tensor([0], device=b)]),
    ("setitem", lambda a, b: _on(a, 3).__setitem__(0, _on(b, ()))),
    ("maximum", lambda a, b: em.maximum(_on(a, 2), _on(b, 2))),
    ("index_select", lambda a, b: em.index_select(_on(a, 3), 0, _on(b, 1, dtype="int64"))),
]


@pytest.mark.parametrize("devices", [("cpu", "cpu:1"), ("cpu:1", "cpu"), ("cpu", "meta")], ids=lambda d: "-".join(d))
@pytest.mark.parametrize(("op", "call"), [pytest.param(o, c, id=o) for o, c in DEVICE_ERRORS])
def test_device_mismatch(op: str, call, devices) -> None:
    """Mixing devices raises a RuntimeError naming the op and both devices."""
    a, b = devices
    with pytest.raises(RuntimeError) as info:
        call(a, b)
    assert isinstance(info.value, em.DeviceMismatchError)
    msg = str(info.value)
    assert op in msg and a in msg and b in msg, msg


DATA_DEPENDENT = [
    ("nonzero", lambda: em.nonzero(meta(3))),
    ("nonzero", lambda: em.where(meta(3, dtype="bool"))),
    ("nonzero", lambda: em.argwhere(meta(3))),
    ("getitem", lambda: meta(3)[em.zeros(3, dtype="bool", device="meta")]),
    ("getitem", lambda: em.masked_select(meta(3), em.zeros(3, dtype="bool", device="meta"))),
    ("setitem", lambda: meta(3).__setitem__(em.zeros(3, dtype="bool", device="meta"), 1.0)),
    ("item", lambda: meta(1).item()),
    ("item", lambda: float(meta(1))),
    ("item", lambda: bool(meta(1))),
    ("numpy", lambda: meta(3).numpy()),
    ("tolist", lambda: meta(3).tolist()),
    ("one_hot", lambda: em.one_hot(meta(3, dtype="int64"))),
]


@pytest.mark.parametrize(("op", "call"), [pytest.param(o, c, id=f"{o}-{k}") for k, (o, c) in enumerate(DATA_DEPENDENT)])
def test_data_dependent_on_meta(op: str, call) -> None:
    """Ops that need values raise NotImplementedError on meta, naming the op and the device."""
    with pytest.raises(NotImplementedError) as info:
        call()
    assert isinstance(info.value, em.DataDependentError)
    msg = str(info.value)
    assert msg.startswith(op), msg
    assert "meta" in msg or op == "one_hot", msg


# Inputs NumPy itself rejects: the message must still start with the op's name, never NumPy's alone.
NUMPY_LEVEL = [
    ("getitem", lambda: x[::0]),
    ("getitem", lambda: x[em.tensor([True, False])]),
    ("setitem", lambda: x.__setitem__(em.tensor([True, False, True]), em.zeros(5))),
    ("setitem", lambda: em.zeros(3).__setitem__(slice(None), em.zeros(2))),
    ("einsum", lambda: em.einsum("ij->j->i", x)),
    ("einsum", lambda: em.einsum("ij,jk", x)),
    ("pow", lambda: em.tensor([2, 3]) ** -1),
    ("floor_divide", lambda: em.tensor([2, 3]) // 0),
    ("remainder", lambda: em.tensor([2, 3]) % em.tensor([0, 1])),
    ("view", lambda: x.t().view(12)),
    ("permute", lambda: x.permute(0, 0)),
    ("pad", lambda: em.pad(x, (1,))),
    ("pad", lambda: em.pad(em.zeros(1, 2, 3), (3, 3), mode="reflect")),
    ("amax", lambda: em.zeros(0).max()),
    ("argmax", lambda: em.zeros(0, 3).argmax(0)),
    ("conv2d", lambda: em.conv2d(em.zeros(1, 2, 5, 5), em.zeros(3, 2, 3, 3), stride=0)),
    ("max_pool2d", lambda: em.max_pool2d(em.zeros(1, 1, 5, 5), 2, padding=2)),
    ("clamp", lambda: em.clamp(x)),
    ("sum", lambda: x.sum((0, 0))),
    ("gelu", lambda: em.gelu(x, approximate="fast")),
]


@pytest.mark.parametrize(("op", "call"), [pytest.param(o, c, id=f"{o}-{k}") for k, (o, c) in enumerate(NUMPY_LEVEL)])
def test_messages_name_the_op(op: str, call) -> None:
    """Every error from a bad call starts with the op's name (no bare NumPy message)."""
    with pytest.raises((ValueError, TypeError, IndexError, RuntimeError)) as info:
        call()
    assert str(info.value).startswith(op + ":"), f"{type(info.value).__name__}: {info.value}"
    assert "failed:" not in str(info.value), str(info.value)


def test_errors_are_builtin_subclasses() -> None:
    """Ember's error types are the built-in ones users already catch."""
    assert issubclass(em.ShapeError, ValueError)
    assert issubclass(em.DeviceMismatchError, RuntimeError)
    assert issubclass(em.DataDependentError, NotImplementedError)


def test_mask_indexing_on_meta_with_grad() -> None:
    """A mask index on meta is data-dependent even when the tensor records gradients."""
    with pytest.raises(NotImplementedError, match="getitem"):
        em.ones(3, device="meta", requires_grad=True)[em.zeros(3, dtype="bool", device="meta")]


def test_floating_point_results_come_quietly_as_in_pytorch():
    # log(0), 0/0 and inf*0 give IEEE results without NumPy's warnings, eagerly and in fused code;
    # a user's own NumPy code still warns.
    import subprocess
    import sys

    code = (
        "import numpy as np, ember as em\n"
        "z = em.zeros(3)\n"
        "em.log(z); z / z; em.tensor([float('inf')]) * 0; em.exp(em.full((2,), 1e4)); em.sqrt(-em.ones(2))\n"
        "f = em.jit(lambda x: em.log(x * 0) + x / x)\n"
        "f(z); f(z)\n"
        "np.log(np.zeros(1))\n"
    )
    err = subprocess.run([sys.executable, "-W", "default", "-c", code], capture_output=True, text=True).stderr
    assert err.count("RuntimeWarning") == 1 and "<string>:" in err, err
