"""PyTorch names programs use at the top level: isclose/allclose, typed tensor classes, Tensor.type and
Tensor.data, inference_mode, torch.accelerator and torch.cuda.manual_seed_all, against PyTorch."""

import numpy as np
import pytest
import torch

import ember as em

INF, NAN = float("inf"), float("nan")
A = [1.0, INF, NAN, -INF, 1e-9, 2.0, 1e30, -0.0]
B = [1.0 + 1e-6, INF, NAN, INF, 0.0, 2.1, 1.00001e30, 0.0]


@pytest.mark.parametrize("kwargs", [{}, {"equal_nan": True}, {"rtol": 0.1}, {"atol": 0.2, "rtol": 0.0}])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_isclose_and_allclose_match_torch(kwargs, dtype):
    a, b = np.array(A, dtype), np.array(B, dtype)
    got = em.isclose(em.tensor(a), em.tensor(b), **kwargs)
    want = torch.isclose(torch.tensor(a), torch.tensor(b), **kwargs)
    assert got.dtype is em.bool and got.tolist() == want.tolist()
    assert em.tensor(a).isclose(em.tensor(b), **kwargs).tolist() == want.tolist()
    for sl in (slice(0, 2), slice(0, 3), slice(4, 6)):
        ours = em.allclose(em.tensor(a[sl]), em.tensor(b[sl]), **kwargs)
        assert ours is torch.allclose(torch.tensor(a[sl]), torch.tensor(b[sl]), **kwargs)


def test_isclose_of_integers_bools_and_broadcasting_match_torch():
    i, j = [1, 2, 3, -4], [1, 3, 10, -4]
    assert em.isclose(em.tensor(i), em.tensor(j), rtol=0.5, atol=0).tolist() == \
        torch.isclose(torch.tensor(i), torch.tensor(j), rtol=0.5, atol=0).tolist()
    assert em.isclose(em.tensor([True, False]), em.tensor([True, True])).tolist() == [True, False]
    assert em.allclose(em.ones(2, 3), em.ones(3)) is torch.allclose(torch.ones(2, 3), torch.ones(3)) is True


def test_isclose_refuses_what_torch_refuses():
    with pytest.raises(TypeError, match="isclose: input is float32 but other is int64"):
        em.isclose(em.ones(2), em.ones(2, dtype=em.int64))
    with pytest.raises(ValueError, match="rtol and atol must be non-negative"):
        em.isclose(em.ones(2), em.ones(2), rtol=-1)
    with pytest.raises(ValueError, match="shape"):
        em.allclose(em.ones(2), em.ones(3))


NAMES = ["FloatTensor", "DoubleTensor", "HalfTensor", "BFloat16Tensor", "ByteTensor", "CharTensor", "ShortTensor",
         "IntTensor", "LongTensor", "BoolTensor"]


@pytest.mark.parametrize("name", NAMES)
def test_typed_tensor_classes_match_torch(name):
    ours, theirs = getattr(em, name), getattr(torch, name)
    for args in [(), (2, 3), (em.Size([4]),), ([1, 0, 2],), ([[1.5, 0.0]],)]:
        targs = tuple(torch.Size(a) if isinstance(a, em.Size) else a for a in args)
        e, t = ours(*args), theirs(*targs)
        assert e.dtype.name == str(t.dtype).removeprefix("torch.") and e.shape == tuple(t.shape)
        if args and not isinstance(args[0], (int, em.Size)):
            assert e.tolist() == t.tolist()
    x = ours([1])
    assert isinstance(x, ours) and isinstance(x, em.Tensor)
    assert not isinstance(em.zeros(1, dtype=em.float64 if name != "DoubleTensor" else em.float32), ours)
    assert x.type() == f"ember.{name}" and torch.tensor([1]).type(theirs).type() == f"torch.{name}"
    assert em.zeros(2).type(ours).dtype is x.dtype and em.zeros(2).type(f"torch.{name}").dtype is x.dtype


def test_typed_tensor_errors():
    with pytest.raises(TypeError, match="expected a int64 tensor, got float32"):
        em.LongTensor(em.zeros(2))
    with pytest.raises(TypeError, match="expected sizes as ints"):
        em.FloatTensor([1], [2])
    assert em.LongTensor(em.tensor([3])).tolist() == [3]


def test_data_is_a_detached_alias_and_assigning_it_swaps_the_storage():
    e, t = em.zeros(2, requires_grad=True), torch.zeros(2, requires_grad=True)
    for x in (e, t):
        d = x.data
        assert not d.requires_grad and d.is_leaf
        d.add_(1)  # seen through x, and not counted as a write by x's version counter
        assert x.tolist() == [1.0, 1.0]
        assert (x._version if isinstance(x, torch.Tensor) else x._version[0]) == 0
    y = em.ones(3)
    e.data = y
    assert e.tolist() == [1.0, 1.0, 1.0] and e.requires_grad and e.is_leaf and e.shape == (3,)
    y[0] = 5.0  # e now uses y's storage
    assert e[0].item() == 5.0
    (e * 2).sum().backward()
    assert e.grad.tolist() == [2.0, 2.0, 2.0]


def test_assigning_data_to_a_view_makes_it_a_view_no_longer():
    """After `v.data = other`, v no longer aliases its old base: an in-place op on it is an ordinary in-place op on
    a non-leaf (not the error for views of leaves that require grad), and the base keeps its values."""
    w = em.zeros(6, requires_grad=True)
    v = w[1:4]
    v.data = em.ones(3)
    v.add_(1)
    assert v.tolist() == [2.0, 2.0, 2.0] and w.tolist() == [0.0] * 6
    v2 = em.arange(6.0)[1:4]
    v2.data = em.zeros(3)
    assert v2._base is None


def test_data_of_a_parameter_is_updated_by_hand_as_in_old_tutorials():
    w = em.nn.Parameter(em.ones(3))
    (w * w).sum().backward()
    w.data -= 0.1 * w.grad.data
    assert type(w.data) is em.Tensor and np.allclose(w.detach().numpy(), 0.8)


def test_data_assignment_errors():
    x = em.zeros(2, requires_grad=True)
    with pytest.raises(TypeError, match="must be set to a tensor, got list"):
        x.data = [1.0, 2.0]
    with pytest.raises(RuntimeError, match="requires grad, so its data must be floating point, got int64"):
        x.data = em.ones(2, dtype=em.int64)


def test_inference_mode_is_exported():
    assert em.inference_mode is em.autograd.inference_mode
    x = em.ones(2, requires_grad=True)
    with em.inference_mode():
        assert not (x * 2).requires_grad
    assert (x * 2).requires_grad


def test_accelerator_and_cuda_seeding_match_torch_without_a_gpu():
    if em.cuda.is_available():
        assert em.accelerator.current_accelerator().type == "cuda" and em.accelerator.device_count() >= 1
        return
    assert em.accelerator.is_available() is torch.accelerator.is_available() is False
    assert em.accelerator.current_accelerator() is torch.accelerator.current_accelerator() is None
    assert em.accelerator.device_count() == torch.accelerator.device_count() == 0
    device = em.accelerator.current_accelerator().type if em.accelerator.is_available() else "cpu"
    assert em.ones(2, device=device).device == "cpu"
    with pytest.raises(RuntimeError, match="accelerator.current_device_index: no accelerator is available"):
        em.accelerator.current_device_index()
    em.cuda.manual_seed_all(0)  # no devices to seed: nothing happens, as in PyTorch
    torch.cuda.manual_seed_all(0)


PRINT_VALUES = [[1.123456, 2.5, -3.25], [1e-5, 2.0, 3.0], [1.0, 2.0, 3000.0], [1.0, 2.0, 3.0],
                [float(v) for v in range(2000)], np.random.default_rng(0).standard_normal((20, 30)).tolist()]


@pytest.mark.parametrize("options", [{}, {"precision": 2}, {"sci_mode": True}, {"sci_mode": False},
                                     {"precision": 6, "sci_mode": False}, {"threshold": 5, "edgeitems": 1},
                                     {"linewidth": 40}, {"profile": "short"}, {"profile": "full"}])
def test_set_printoptions_prints_as_torch(options):
    try:
        em.set_printoptions(**options)
        torch.set_printoptions(**options)
        for values in PRINT_VALUES:
            assert repr(em.tensor(values)) == repr(torch.tensor(values))
        assert em.get_printoptions()["precision"] == torch._tensor_str.PRINT_OPTS.precision
    finally:
        em.set_printoptions(profile="default")
        torch.set_printoptions(profile="default")
    with pytest.raises(ValueError, match="set_printoptions: profile must be one of default, short, full"):
        em.set_printoptions(profile="long")


def test_default_device_and_precision_settings():
    try:
        em.set_default_device("meta")
        assert em.ones(2).device.type == "meta" and em.get_default_device().type == "meta"
        assert em.ones(2, device="cpu").device.type == "cpu"
        with em.device("cpu"):
            assert em.zeros(1).device.type == "cpu"  # a scope wins inside it
    finally:
        em.set_default_device(None)
    assert em.ones(1).device.type == "cpu"
    try:
        em.set_float32_matmul_precision("high")
        assert em.get_float32_matmul_precision() == "high"
    finally:
        em.set_float32_matmul_precision("highest")
    with pytest.raises(ValueError, match="set_float32_matmul_precision: expected one of highest, high, medium"):
        em.set_float32_matmul_precision("low")
    assert em.set_flush_denormal(True) is False


def test_is_inference_mode_enabled_follows_torch() -> None:
    seen = []
    for lib in (torch, em):
        states = [lib.is_inference_mode_enabled()]
        with lib.inference_mode():
            states += [lib.is_inference_mode_enabled(), lib.is_grad_enabled()]
            with lib.inference_mode(False):
                states.append(lib.is_inference_mode_enabled())
            states.append(lib.is_inference_mode_enabled())

        @lib.inference_mode()
        def inside(lib=lib):
            return lib.is_inference_mode_enabled(), lib.is_grad_enabled()

        states += [inside(), lib.is_inference_mode_enabled()]
        seen.append(states)
    assert seen[0] == seen[1]
