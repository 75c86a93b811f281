"""Devices: cpu, logical cpu:N, meta (shapes only), moving tensors, mixing errors, CUDA availability."""

import time
import tracemalloc

import numpy as np
import pytest

import ember as em
from ember.errors import DataDependentError, DeviceMismatchError


def test_device_names_and_identity():
    assert em.device("cpu") is em.device("cpu:0") and em.device("cpu:0") == "cpu"
    assert str(em.device("cpu:0")) == "cpu" and str(em.device("cpu:1")) == "cpu:1"
    assert em.device("cpu:1") != em.device("cpu") and em.device("cpu", 1) is em.device("cpu:1")
    assert em.device("meta").type == "meta" and repr(em.device("cpu:2")) == "device(type='cpu', index=2)"
    for bad in ("tpu", "cpu:x", "meta:1"):
        with pytest.raises(ValueError):
            em.device(bad)


def test_default_device_scope():
    assert em.zeros(1).device == "cpu"
    with em.device("cpu:2"):
        assert em.zeros(1).device == "cpu:2" and em.randn(2).device == "cpu:2"
        assert em.tensor([1.0]).device == "cpu:2"
    assert em.zeros(1).device == "cpu"


def test_meta_tensor_is_instant_and_uses_no_memory():
    tracemalloc.start()
    try:
        start = time.perf_counter()
        x = em.ones((1_000_000, 2_000_000), device="meta")
        elapsed = time.perf_counter() - start
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert elapsed < 0.5 and peak < 1_000_000
    assert x.shape == (1_000_000, 2_000_000) and x.device == "meta" and x.dtype is em.float32
    assert x.numel() == 2 * 10**12
    assert repr(x) == "tensor(..., device='meta', size=(1000000, 2000000))"


def test_ops_on_meta_compute_shapes_and_dtypes():
    a = em.ones((1_000_000, 2_000_000), device="meta")
    b = em.ones((2_000_000, 3), device="meta", dtype=em.float64)
    c = a.double() @ b
    assert c.shape == (1_000_000, 3) and c.dtype is em.float64 and c.device == "meta"
    with pytest.raises(em.errors.DtypeError, match=r"matmul: .*float32 \(1000000, 2000000\), other float64"):
        a @ b  # refused by the shape rule, as on the CPU
    assert a.sum(1).shape == (1_000_000,) and a.T.shape == (2_000_000, 1_000_000)
    assert (a[:10, 5] + 1).shape == (10,)
    assert em.zeros_like(a).device == "meta" and em.randn(3, device="meta").shape == (3,)
    assert em.arange(10, device="meta").dtype is em.int64
    with pytest.raises(ValueError, match="matmul"):
        a @ a


def test_meta_gradients_have_shapes():
    w = em.ones(3, 4, device="meta", requires_grad=True)
    (w * 2).sum().backward()
    assert w.grad.shape == (3, 4) and w.grad.device == "meta"


@pytest.mark.parametrize(
    "name, fn",
    [
        ("nonzero", lambda m: m.nonzero()),
        ("boolean-mask", lambda m: m[m > 0]),
        ("boolean-mask", lambda m: m.masked_select(m > 0)),
        ("item", lambda m: m[0, 0].item()),
        ("numpy", lambda m: m.numpy()),
        ("tolist", lambda m: m.tolist()),
        ("item", lambda m: bool(m[0, 0])),
        ("item", lambda m: float(m[0, 0])),
        ("__array__", lambda m: np.asarray(m)),
    ],
)
def test_data_dependent_ops_on_meta_raise(name, fn):
    m = em.ones(3, 4, device="meta")
    with pytest.raises(NotImplementedError) as info:
        fn(m)
    assert isinstance(info.value, DataDependentError)
    msg = str(info.value)
    assert name in msg and "meta" in msg


def test_to_own_device_returns_the_same_tensor():
    x = em.ones(3)
    assert x.to("cpu") is x and x.to("cpu:0") is x and x.cpu() is x and x.to(em.device("cpu")) is x
    y = em.ones(2, device="cpu:1")
    assert y.to("cpu:1") is y


def test_to_another_device_copies():
    x = em.tensor([1.0, 2.0, 3.0])
    y = x.to("cpu:1")
    assert y.device == "cpu:1" and y.tolist() == x.tolist()
    y[0] = 10.0
    assert x[0].item() == 1.0
    z = y.cpu()
    assert z.device == "cpu"
    z[1] = 20.0
    assert y[1].item() == 2.0
    w = x.to("cpu:1", em.float64)
    assert w.device == "cpu:1" and w.dtype is em.float64
    assert x.to(device="cpu:2").device == "cpu:2"


def test_to_meta_and_back():
    x = em.ones(2, 3)
    m = x.to("meta")
    assert m.device == "meta" and m.shape == (2, 3)
    with pytest.raises(NotImplementedError, match="meta"):
        m.to("cpu")


def test_gradients_flow_across_devices():
    x = em.tensor([1.0, 2.0], requires_grad=True)
    y = x.to("cpu:1") * 3
    assert y.device == "cpu:1"
    y.sum().backward()
    assert x.grad.device == "cpu" and x.grad.tolist() == [3.0, 3.0]


@pytest.mark.parametrize(
    "op, fn",
    [
        ("add", lambda a, b: a + b),
        ("mul", lambda a, b: a * b),
        ("matmul", lambda a, b: a.reshape(1, 3) @ b.reshape(3, 1)),
        ("where", lambda a, b: em.where(a > 0, a, b)),
        ("cat", lambda a, b: em.cat([a, b])),
        ("setitem", lambda a, b: a.__setitem__(0, b[0])),
        ("add_", lambda a, b: a.add_(b)),
    ],
)
@pytest.mark.parametrize("other", ["cpu:1", "meta"])
def test_mixing_devices_raises_naming_op_and_devices(op, fn, other):
    a, b = em.ones(3), em.ones(3, device=other)
    with pytest.raises(RuntimeError) as info:
        fn(a, b)
    msg = str(info.value)
    assert op in msg and "cpu" in msg and other in msg
    if op not in ("setitem",):
        assert isinstance(info.value, DeviceMismatchError)


def test_copy_across_devices_is_allowed():
    a = em.zeros(3)
    a.copy_(em.ones(3, device="cpu:1"))
    assert a.tolist() == [1.0, 1.0, 1.0]


def test_cuda_is_unavailable_here_with_a_clear_reason():
    assert em.cuda.is_available() is False
    assert em.cuda.device_count() == 0
    reason = em.cuda.unavailable_reason()
    assert "CuPy" in reason
    for make in (lambda: em.ones(2, device="cuda"), lambda: em.ones(2).to("cuda:0"), lambda: em.ones(2).cuda()):
        with pytest.raises(RuntimeError, match="CuPy") as info:
            make()
        assert "cuda" in str(info.value)
