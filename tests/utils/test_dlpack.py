"""DLPack: Tensor.__dlpack__/__dlpack_device__ and em.from_dlpack share memory with NumPy and PyTorch both
ways (a write through one side shows on the other), for views, every dtype, 0-d; the errors PyTorch gives."""

import numpy as np
import pytest

import ember as em
from ember.utils.dlpack import DLPackError, from_dlpack, to_dlpack

torch = pytest.importorskip("torch")

DTYPES = ["bool", "uint8", "int8", "int16", "int32", "int64", "float16", "float32", "float64"]


def _values(dtype, shape=(2, 3)):
    return (np.arange(int(np.prod(shape))).reshape(shape) % 5 + 1).astype(dtype)


def _bump(x):
    """Write through x in place (NumPy array, torch or Ember tensor): flip a bool, add 1 otherwise."""
    if x.dtype in (np.bool_, torch.bool, em.bool):
        x[...] = ~x if not isinstance(x, em.Tensor) else x.logical_not()
    else:
        x[...] = x + 1


@pytest.mark.parametrize("dtype", DTYPES)
def test_numpy_shares_memory_both_ways(dtype):
    t = em.tensor(_values(dtype))
    a = np.from_dlpack(t)
    assert a.dtype == np.dtype(dtype) and np.shares_memory(a, t.numpy())
    _bump(a)
    np.testing.assert_array_equal(t.numpy(), a)
    src = _values(dtype)
    e = em.from_dlpack(src)
    assert e.dtype == em.tensor(src).dtype and e.shape == src.shape
    _bump(e)
    np.testing.assert_array_equal(src, e.numpy())
    assert e.numpy().ctypes.data == src.ctypes.data


@pytest.mark.parametrize("dtype", DTYPES + ["bfloat16"])
def test_torch_shares_memory_both_ways(dtype):
    if dtype == "bfloat16":
        pytest.importorskip("ml_dtypes")
    tdt = getattr(torch, dtype)
    t = em.tensor(_values(np.float32), dtype=getattr(em, dtype))
    p = torch.from_dlpack(t)
    assert p.dtype == tdt and p.data_ptr() == t.data_ptr()
    _bump(p)
    np.testing.assert_array_equal(t.float().numpy(), p.float().numpy())
    src = torch.tensor(_values(np.float32)).to(tdt)
    e = em.from_dlpack(src)
    assert e.dtype.name == dtype and e.data_ptr() == src.data_ptr()
    _bump(e)
    np.testing.assert_array_equal(e.float().numpy(), src.float().numpy())


@pytest.mark.parametrize("view", [
    lambda x: x[:, 1:],
    lambda x: x[::2, ::3],
    lambda x: x.transpose(0, 1),
    lambda x: x[1],
    lambda x: x[1, 2],  # 0-d
    lambda x: x.reshape(-1)[3:5],
])
def test_views_and_strides(view):
    base = em.arange(24.0).reshape(4, 6)
    v = view(base)
    p = torch.from_dlpack(v)
    assert tuple(p.shape) == tuple(v.shape) and p.stride() == v.stride() and p.data_ptr() == v.data_ptr()
    p.add_(100)  # seen through the base
    np.testing.assert_array_equal(base.numpy(), torch.from_dlpack(base).numpy())
    assert (view(base).numpy() >= 100).all()
    tb = torch.arange(24.0).reshape(4, 6)
    tv = view(tb)
    e = em.from_dlpack(tv)
    assert e.stride() == tv.stride() and e.data_ptr() == tv.data_ptr()
    e.mul_(-1)
    assert (view(tb) <= 0).all()


def test_zero_d_and_empty():
    t = em.tensor(3.5)
    assert torch.from_dlpack(t).item() == 3.5 and np.from_dlpack(t).shape == ()
    assert em.from_dlpack(torch.tensor(7)).item() == 7
    assert em.from_dlpack(np.zeros((0, 3), np.float32)).shape == (0, 3)
    assert torch.from_dlpack(em.zeros(0, 2)).shape == (0, 2)


def test_capsules_of_to_dlpack_both_ways():
    t = em.arange(4.0)
    p = torch.utils.dlpack.from_dlpack(to_dlpack(t))
    p[0] = 9
    assert t[0].item() == 9
    src = torch.ones(3)
    e = from_dlpack(torch.utils.dlpack.to_dlpack(src))
    e[1] = 5
    assert src[1].item() == 5


def test_copy_argument():
    t = em.arange(3.0)
    a = np.from_dlpack(t, copy=True)
    a[0] = 7
    assert t[0].item() == 0
    src = np.arange(3.0)
    e = em.from_dlpack(src, copy=True)
    e[0] = 7
    assert src[0] == 0
    assert em.from_dlpack(src, copy=False).data_ptr() == src.ctypes.data
    with pytest.raises(DLPackError, match="copy=False"):
        em.from_dlpack(src, device="meta", copy=False)
    with pytest.raises(TypeError, match="copy must be"):
        em.from_dlpack(src, copy="yes")


def test_device_argument_copies():
    e = em.from_dlpack(np.ones(3, np.float32), device="meta")
    assert e.device.type == "meta" and e.shape == (3,)


def test_dlpack_device():
    assert em.ones(2).__dlpack_device__() == (1, 0)
    assert em.ones(2, device="cpu:1").__dlpack_device__() == (1, 0)


def test_requires_grad_is_refused_as_in_pytorch():
    w = em.ones(3, requires_grad=True)
    with pytest.raises(BufferError, match="requires grad; use tensor.detach"):
        torch.from_dlpack(w)
    assert torch.from_dlpack(w.detach()).data_ptr() == w.data_ptr()
    with pytest.raises(BufferError, match="require gradient"):  # PyTorch's own refusal, passed on
        em.from_dlpack(torch.ones(3, requires_grad=True))


def test_meta_and_symbolic_tensors_have_no_memory():
    with pytest.raises(DLPackError, match="meta tensor"):
        np.from_dlpack(em.ones(2, 3, device="meta"))
    with pytest.raises(RuntimeError, match="meta tensor"):  # DLPackError is a RuntimeError too
        em.ones(2, device="meta").__dlpack__()

    @em.jit
    def f(x):
        x.__dlpack__()
        return x

    with pytest.raises(DLPackError, match="symbolic"):
        f(em.ones(2))


def test_negative_strides_are_refused_unless_copied():
    t = em.from_numpy(np.arange(4.0)[::-1])
    with pytest.raises(DLPackError, match="negative strides"):
        torch.from_dlpack(t)
    np.testing.assert_array_equal(np.from_dlpack(t, copy=True), [3, 2, 1, 0])
    e = em.from_dlpack(np.arange(4.0)[::-1])  # NumPy exports them, and Ember takes them as they are
    np.testing.assert_array_equal(e.numpy(), [3, 2, 1, 0])


def test_read_only_tensors_flagged_or_refused():
    t = em.ones(3).expand(2, 3)  # a read-only broadcast view
    a = np.from_dlpack(t)  # NumPy asks for DLPack 1.0, which flags the memory read-only
    assert not a.flags.writeable and a.strides == (0, 4)
    with pytest.raises(DLPackError, match="read-only"):
        to_dlpack(t)  # a legacy capsule can't say so
    ro = np.arange(3.0)
    ro.flags.writeable = False
    e = em.from_dlpack(ro)
    assert not e.numpy().flags.writeable


def test_unsupported_dtypes_and_objects():
    with pytest.raises(TypeError, match="from_dlpack: unsupported dtype complex64"):
        em.from_dlpack(torch.ones(2, dtype=torch.complex64))
    with pytest.raises(TypeError, match="from_dlpack: unsupported dtype uint16"):
        em.from_dlpack(np.ones(2, np.uint16))
    with pytest.raises(TypeError, match="__dlpack__"):
        em.from_dlpack([1, 2, 3])
    with pytest.raises(ValueError, match="stream must be None"):
        em.ones(2).__dlpack__(stream=1)
    with pytest.raises(DLPackError, match="DLPack device"):
        em.ones(2).__dlpack__(dl_device=(2, 0), copy=False)


def test_a_capsule_is_consumed_once():
    capsule = to_dlpack(em.ones(2))
    assert em.from_dlpack(capsule).shape == (2,)
    with pytest.raises(DLPackError, match="unused DLPack capsule"):
        em.from_dlpack(capsule)


def test_cupy_both_ways():
    cp = pytest.importorskip("cupy")
    if not em.cuda.is_available():
        pytest.skip("no CUDA device")
    x = cp.arange(6, dtype=cp.float32)
    t = em.from_dlpack(x)
    assert t.device.type == "cuda" and t.data_ptr() == x.data.ptr
    t.add_(1)
    assert float(x[0]) == 1.0
    y = cp.from_dlpack(t)
    y[1] = -5
    assert t[1].item() == -5
    assert t.__dlpack_device__() == (2, t.device.index or 0)
    p = torch.from_dlpack(t) if torch.cuda.is_available() else None
    if p is not None:
        assert p.data_ptr() == t.data_ptr()


def test_the_producer_is_released_when_the_last_view_goes():
    import gc
    import sys

    a = np.arange(4.0)
    before = sys.getrefcount(a)
    e = em.from_dlpack(a)
    view = e[1:]
    del e
    gc.collect()
    assert sys.getrefcount(a) == before + 1  # the view still holds NumPy's export of `a`
    del view
    gc.collect()
    assert sys.getrefcount(a) == before
