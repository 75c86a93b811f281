"""dtypes: the supported set, PyTorch's type promotion, defaults and conversions."""

import itertools

import numpy as np
import pytest
import torch

import ember as em

NAMES = ["bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32", "float64"]


def edt(name):
    return em.bool if name == "bool" else getattr(em, name)


def tdt(name):
    return getattr(torch, name)


def name_of(dtype) -> str:
    return str(dtype).removeprefix("torch.").removeprefix("ember.")


def test_supported_dtypes():
    for name in NAMES:
        d = edt(name)
        assert d is not None and d.name == name and repr(d) == f"ember.{name}"
        x = em.zeros(2, dtype=d)
        assert x.dtype is d and x.element_size() == tdt(name).itemsize
    assert em.float32.is_floating_point and em.bfloat16.is_floating_point and not em.int64.is_floating_point
    assert (em.float, em.double, em.half, em.long, em.int, em.short) == (
        em.float32, em.float64, em.float16, em.int64, em.int32, em.int16)


def test_dtype_lookup_accepts_names_and_numpy_types():
    assert em.zeros(1, dtype="float64").dtype is em.float64
    assert em.zeros(1, dtype=np.int16).dtype is em.int16
    assert em.zeros(1, dtype=float).dtype is em.float32 and em.zeros(1, dtype=int).dtype is em.int64
    with pytest.raises(TypeError):
        em.zeros(1, dtype="complex64")


@pytest.mark.parametrize("a, b", list(itertools.product(NAMES, NAMES)))
def test_promotion_of_two_tensors_matches_torch(a, b):
    ea, eb = em.ones(2, dtype=edt(a)), em.ones(2, dtype=edt(b))
    ta, tb = torch.ones(2, dtype=tdt(a)), torch.ones(2, dtype=tdt(b))
    assert em.promote_types(edt(a), edt(b)) is edt(name_of(torch.promote_types(tdt(a), tdt(b))))
    for op in ("add", "mul", "maximum"):
        assert name_of(getattr(em, op)(ea, eb).dtype) == name_of(getattr(torch, op)(ta, tb).dtype), op
    assert name_of((ea / eb).dtype) == name_of((ta / tb).dtype)
    assert name_of((ea == eb).dtype) == "bool"
    # a 0-d tensor only wins by being of a higher category
    e0, t0 = em.ones((), dtype=edt(b)), torch.ones((), dtype=tdt(b))
    assert name_of((ea * e0).dtype) == name_of((ta * t0).dtype)


@pytest.mark.parametrize("a", NAMES)
@pytest.mark.parametrize("scalar", [True, 2, 2.5])
def test_promotion_with_python_scalars_matches_torch(a, scalar):
    e, t = em.ones(3, dtype=edt(a)), torch.ones(3, dtype=tdt(a))
    assert name_of((e * scalar).dtype) == name_of((t * scalar).dtype)
    assert name_of((scalar + e).dtype) == name_of((scalar + t).dtype)


def test_default_dtype_is_float32_and_can_change():
    assert em.get_default_dtype() is em.float32
    assert em.tensor([1.0]).dtype is em.float32 and em.zeros(1).dtype is em.float32
    assert (em.tensor([1, 2]) * 0.5).dtype is em.float32
    em.set_default_dtype(em.float64)
    try:
        assert em.tensor([1.0]).dtype is em.float64 and em.ones(2).dtype is em.float64
        assert em.randn(2).dtype is em.float64
    finally:
        em.set_default_dtype(em.float32)
    with pytest.raises(TypeError):
        em.set_default_dtype(em.int32)


@pytest.mark.parametrize("np_dtype", [np.float64, np.float32, np.float16, np.int32, np.int64, np.int8, np.uint8,
                                      np.bool_, np.int16])
def test_numpy_arrays_keep_their_dtype(np_dtype):
    a = np.zeros(3, dtype=np_dtype)
    assert em.tensor(a).dtype.np == np.dtype(np_dtype)
    assert em.from_numpy(a).dtype.np == np.dtype(np_dtype)
    assert em.tensor(a).dtype.name == name_of(torch.tensor(a).dtype)


def test_float64_numpy_array_stays_float64():
    x = em.tensor(np.array([0.1, 0.2]))
    assert x.dtype is em.float64 and x.tolist() == [0.1, 0.2]
    assert em.tensor(np.float64(1.5)).dtype is em.float64


def test_unsupported_numpy_dtypes_are_rejected():
    for a in (np.zeros(2, dtype=np.complex64), np.zeros(2, dtype=np.uint16), np.array(["a"])):
        with pytest.raises(TypeError):
            em.tensor(a)


@pytest.mark.parametrize(
    "method, target",
    [("float", "float32"), ("double", "float64"), ("half", "float16"), ("long", "int64"), ("int", "int32"),
     ("short", "int16"), ("bool", "bool"), ("byte", "uint8"), ("bfloat16", "bfloat16")],
)
def test_cast_methods_match_torch(method, target):
    vals = [1.5, -2.7, 0.0, 3.0]
    e, t = getattr(em.tensor(vals), method)(), getattr(torch.tensor(vals), method)()
    assert e.dtype.name == target == name_of(t.dtype)
    np.testing.assert_array_equal(np.asarray(e.float()), t.float().numpy())


def test_to_dtype():
    x = em.tensor([1.25, 2.5])
    assert x.to(em.float64).dtype is em.float64
    assert x.to(dtype=em.int32).tolist() == [1, 2]
    assert x.to(np.float16).dtype is em.float16
    assert x.to(em.float32) is x  # no change: the same tensor
    assert x.to(em.float32, copy=True) is not x
    assert x.to(em.ones(1, dtype=em.float64)).dtype is em.float64
    assert x.type_as(em.ones(1, dtype=em.int8)).dtype is em.int8
    assert x.double().float().tolist() == x.tolist()


def test_cast_is_differentiable_between_float_types():
    x = em.tensor([1.0, 2.0], requires_grad=True)
    y = x.double() * 3
    y.sum().backward()
    assert y.dtype is em.float64 and x.grad.dtype is em.float32 and x.grad.tolist() == [3.0, 3.0]


def test_bfloat16_arithmetic_and_conversion():
    x = em.tensor([1.0, 2.5, -3.0], dtype=em.bfloat16)
    t = torch.tensor([1.0, 2.5, -3.0], dtype=torch.bfloat16)
    y, ty = x * x + 1, t * t + 1
    assert y.dtype is em.bfloat16 and y.tolist() == ty.tolist()
    assert (x + em.ones(3)).dtype is em.float32
    assert x.float().tolist() == [1.0, 2.5, -3.0]
    assert isinstance(x[0].item(), float)


def test_integer_arithmetic_overflow_wraps_like_torch():
    e = em.tensor([127], dtype=em.int8) + 1
    t = torch.tensor([127], dtype=torch.int8) + 1
    assert e.tolist() == t.tolist() and e.dtype is em.int8


def test_reductions_of_integers_and_bools():
    for name in ("bool", "uint8", "int8", "int32", "int64"):
        e, t = em.ones(3, dtype=edt(name)), torch.ones(3, dtype=tdt(name))
        assert name_of(e.sum().dtype) == name_of(t.sum().dtype)
    assert (em.tensor([1, 2]) / 2).dtype is em.float32
    assert (em.tensor([5, -5]) // 2).tolist() == [2, -3]
