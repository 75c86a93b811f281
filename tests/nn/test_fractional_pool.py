"""F.fractional_max_pool2d/3d and FractionalMaxPool2d/3d against PyTorch with the same `_random_samples`: values,
indices (so the interval sequence), input gradients (to each window's first maximum, or its last NaN), output_ratio,
seeded draws, unbatched and empty inputs, reprs, the jit, the meta device and errors."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import ember as em

F, TF = em.nn.functional, torch.nn.functional
RNG = np.random.default_rng(0)

CASES = {  # dims, input shape, kernel_size, output_size
    "2d": (2, (2, 3, 9, 9), 3, (5, 4)),
    "2d rectangular kernel": (2, (2, 3, 11, 7), (2, 3), (6, 3)),
    "2d one output": (2, (1, 2, 5, 6), 2, 1),
    "2d kernel the input's size": (2, (1, 2, 5, 6), (5, 6), 1),
    "2d unit kernel, output the input's size": (2, (1, 2, 5, 6), 1, (5, 6)),
    "2d wide": (2, (2, 2, 30, 31), 2, (17, 16)),
    "2d unbatched": (2, (3, 10, 9), (2, 3), (4, 5)),
    "3d": (3, (2, 3, 6, 7, 8), 2, (3, 4, 5)),
    "3d uneven kernel": (3, (1, 2, 9, 8, 7), (2, 3, 2), (4, 3, 5)),
    "3d unbatched": (3, (2, 6, 5, 7), (3, 2, 2), (2, 3, 4)),
}


def _samples(dims: int, shape: tuple, dtype) -> np.ndarray:
    batch = 1 if len(shape) == dims + 1 else shape[0]
    return RNG.random((batch, shape[-dims - 1], dims)).astype(dtype)


def _both(dims: int, x: np.ndarray, samples: np.ndarray | None, **kw):
    """(ours, theirs) of (values, indices) and their input tensors."""
    ours, theirs = em.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    e_kw, t_kw = dict(kw), dict(kw)
    if samples is not None:
        e_kw["_random_samples"], t_kw["_random_samples"] = em.tensor(samples), torch.tensor(samples)
    out = getattr(F, f"fractional_max_pool{dims}d")(ours, return_indices=True, **e_kw)
    tout = getattr(TF, f"fractional_max_pool{dims}d")(theirs, return_indices=True, **t_kw)
    return out, tout, ours, theirs


def _assert_same(out, tout, ours, theirs) -> None:
    (values, indices), (tvalues, tindices) = out, tout
    assert indices.dtype is em.int64 and tuple(values.shape) == tuple(tvalues.shape)
    np.testing.assert_array_equal(indices.numpy(), tindices.numpy())
    np.testing.assert_array_equal(values.detach().numpy(), tvalues.detach().numpy())
    g = RNG.standard_normal(tuple(tvalues.shape)).astype(values.dtype.np)
    values.backward(em.tensor(g))
    tvalues.backward(torch.tensor(g))
    np.testing.assert_allclose(ours.grad.numpy(), theirs.grad.numpy(), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("case", list(CASES))
def test_fractional_max_pool_matches_torch(case: str, dtype) -> None:
    dims, shape, kernel, size = CASES[case]
    x = RNG.standard_normal(shape).astype(dtype)
    _assert_same(*_both(dims, x, _samples(dims, shape, dtype), kernel_size=kernel, output_size=size))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("dims", [2, 3])
def test_interval_sequence_matches_torch_over_many_sizes(dims: int, dtype) -> None:
    """The starts floor((i + u) * alpha) - floor(u * alpha), computed in the input's dtype as PyTorch's kernel does:
    the indices agree over random sizes, kernels, output sizes and samples."""
    for _ in range(40 if dims == 2 else 15):
        sizes = tuple(int(n) for n in RNG.integers(2, 23 if dims == 2 else 9, dims))
        kernel = tuple(int(RNG.integers(1, n + 3 - dims)) for n in sizes)
        # PyTorch's 3-D pooling wants output + kernel - 1 < input, its 2-D pooling <=
        out = tuple(int(RNG.integers(0, n - k + 3 - dims)) for n, k in zip(sizes, kernel))
        shape = (2, 3) + sizes
        x = RNG.standard_normal(shape).astype(dtype)
        (_, idx), (_, tidx), _, _ = _both(dims, x, _samples(dims, shape, dtype), kernel_size=kernel, output_size=out)
        np.testing.assert_array_equal(idx.numpy(), tidx.numpy(), err_msg=f"{sizes} {kernel} {out}")


@pytest.mark.parametrize("dims", [2, 3])
def test_ties_go_to_the_first_maximum_and_nan_to_the_last(dims: int) -> None:
    shape = (2, 2) + (7,) * dims
    x = np.ones(shape, np.float32)
    x[0, 0].flat[::5] = 3.0  # several equal maxima per window
    x[1, 1].flat[::4] = np.nan  # several NaNs per window
    x[1, 0].flat[1::3] = -np.inf
    _assert_same(*_both(dims, x, _samples(dims, shape, np.float32), kernel_size=3, output_size=3))


@pytest.mark.parametrize("dims", [2, 3])
def test_output_ratio_and_seeded_samples_match_torch(dims: int) -> None:
    shape = (2, 3, 10, 9) if dims == 2 else (2, 2, 8, 9, 7)
    x = RNG.standard_normal(shape).astype(np.float32)
    ratio = (0.5, 0.75) if dims == 2 else (0.5, 0.4, 0.75)
    _assert_same(*_both(dims, x, _samples(dims, shape, np.float32), kernel_size=2, output_ratio=ratio))
    # without _random_samples both draw them: the same after the same seed, as Ember's generator is PyTorch's
    em.manual_seed(7)
    torch.manual_seed(7)
    _assert_same(*_both(dims, x, None, kernel_size=2, output_ratio=ratio))


def test_empty_batch_and_empty_output() -> None:
    x = RNG.standard_normal((0, 3, 9, 9)).astype(np.float32)
    values, indices = F.fractional_max_pool2d(em.tensor(x), 2, output_size=3, return_indices=True)
    assert tuple(values.shape) == tuple(indices.shape) == (0, 3, 3, 3)
    x = RNG.standard_normal((2, 3, 9, 9)).astype(np.float32)
    _assert_same(*_both(2, x, _samples(2, x.shape, np.float32), kernel_size=2, output_size=0))


@pytest.mark.parametrize("dims", [2, 3])
def test_modules_match_torch(dims: int) -> None:
    shape = (2, 3, 9, 8) if dims == 2 else (2, 2, 7, 6, 8)
    samples = _samples(dims, shape, np.float32)
    name = f"FractionalMaxPool{dims}d"
    ours = getattr(em.nn, name)(2, output_ratio=0.5, return_indices=True, _random_samples=em.tensor(samples))
    theirs = getattr(torch.nn, name)(2, output_ratio=0.5, return_indices=True, _random_samples=torch.tensor(samples))
    assert repr(ours) == repr(theirs) == f"{name}()"
    assert list(ours.state_dict()) == list(theirs.state_dict()) == ["_random_samples"]
    assert ours.output_ratio == theirs.output_ratio and ours.kernel_size == theirs.kernel_size
    x = RNG.standard_normal(shape).astype(np.float32)
    out, tout = ours(em.tensor(x)), theirs(torch.tensor(x))
    np.testing.assert_array_equal(out[1].numpy(), tout[1].numpy())
    np.testing.assert_array_equal(out[0].numpy(), tout[0].numpy())
    plain = getattr(em.nn, name)(3, output_size=2)
    assert plain.output_size == getattr(torch.nn, name)(3, output_size=2).output_size
    assert tuple(plain(em.tensor(x)).shape) == shape[:2] + (2,) * dims
    assert list(plain.state_dict()) == []


def test_under_jit_and_on_meta() -> None:
    samples = em.tensor(_samples(2, (2, 3, 9, 9), np.float32))
    step = em.jit(lambda x, s: F.fractional_max_pool2d(x, 3, output_size=(4, 3), _random_samples=s).sum())
    for scale in (1.0, -2.0):
        x = em.tensor(RNG.standard_normal((2, 3, 9, 9)).astype(np.float32) * scale)
        expected = F.fractional_max_pool2d(x, 3, output_size=(4, 3), _random_samples=samples).sum()
        assert abs(float(step(x, samples)) - float(expected)) < 1e-5
    meta = em.ones(2, 3, 9, 8, device="meta")
    values, indices = F.fractional_max_pool2d(meta, 2, output_ratio=0.5, return_indices=True)
    assert tuple(values.shape) == tuple(indices.shape) == (2, 3, 4, 4) and values.device.type == "meta"
    assert tuple(F.fractional_max_pool3d(em.ones(2, 5, 6, 7, device="meta"), 2, output_size=3).shape) == (2, 3, 3, 3)


BAD = {  # call on Ember and PyTorch (the same arguments), error class, Ember's message; PyTorch raises the same class
    "5-D input to 2d": (lambda L: L.nn.functional.fractional_max_pool2d(L.ones(1, 1, 1, 4, 4), 2, output_size=2),
                        RuntimeError,
                        r"fractional_max_pool2d\(\): expected a 3D or 4D input, got shape \(1, 1, 1, 4, 4\)"),
    "3-D input to 3d": (lambda L: L.nn.functional.fractional_max_pool3d(
        L.ones(1, 4, 4), 2, output_size=2, _random_samples=L.rand(1, 1, 3)), RuntimeError,
        r"fractional_max_pool3d\(\): expected a 4D or 5D input, got shape \(1, 4, 4\)"),
    "output larger than the input": (lambda L: L.nn.functional.fractional_max_pool2d(L.ones(2, 3, 9, 9), 2,
                                                                                     output_size=(9, 3)),
                                     RuntimeError, r"fractional_max_pool2d\(\): pool height 2 too large relative to "
                                     r"input height 9 \(input shape \(2, 3, 9, 9\), output size \(9, 3\)\)"),
    "kernel larger than the input": (lambda L: L.nn.functional.fractional_max_pool3d(L.ones(1, 6, 7, 8), (2, 8, 2),
                                                                                     output_size=1),
                                     RuntimeError, r"fractional_max_pool3d\(\): pool height 8 too large relative to "
                                     r"input height 7"),
    "3d kernel as large as the input": (lambda L: L.nn.functional.fractional_max_pool3d(L.ones(1, 6, 7, 8), (6, 2, 2),
                                                                                        output_size=1),
                                        RuntimeError, r"fractional_max_pool3d\(\): pool time 6 too large relative to "
                                        r"input time 6"),
    "output_ratio above 1 in F": (lambda L: L.nn.functional.fractional_max_pool2d(L.ones(2, 3, 9, 9), 2,
                                                                                  output_ratio=(1.5, 0.5)),
                                  RuntimeError, "pool height 2 too large relative to input height 9"),
    "neither size nor ratio": (lambda L: L.nn.functional.fractional_max_pool2d(L.ones(2, 3, 9, 9), 2), ValueError,
                               "fractional_max_pool2d requires specifying either an output_size or an output_ratio"),
    "ratio of three for 2d": (lambda L: L.nn.functional.fractional_max_pool2d(L.ones(2, 3, 9, 9), 2,
                                                                              output_ratio=(0.5, 0.5, 0.5)),
                              ValueError, "fractional_max_pool2d requires output_ratio to either be a single"),
    "output_size of three for 2d": (lambda L: L.nn.functional.fractional_max_pool2d(L.ones(2, 3, 9, 9), 2,
                                                                                    output_size=(3, 3, 3)),
                                    RuntimeError, "fractional_max_pool2d: output_size must either be a single Int"),
    "empty channels": (lambda L: L.nn.functional.fractional_max_pool2d(L.ones(2, 0, 9, 9), 2, output_size=3),
                       RuntimeError, r"non-zero size for non-batch dimensions, got shape \(2, 0, 9, 9\)"),
    "samples of the wrong rank": (lambda L: L.nn.functional.fractional_max_pool2d(
        L.ones(3, 9, 9), 2, output_size=2, _random_samples=L.rand(3, 2)), RuntimeError,
        r"expected _random_samples to have 3 dimensions, got shape \(3, 2\)"),
    "samples for fewer samples": (lambda L: L.nn.functional.fractional_max_pool2d(
        L.ones(2, 3, 9, 9), 2, output_size=3, _random_samples=L.rand(1, 3, 2)), RuntimeError,
        r"_random_samples of shape \(1, 3, 2\) must be \(at least 2, 3, 2\) for input of shape \(2, 3, 9, 9\)"),
    "samples for other channels": (lambda L: L.nn.functional.fractional_max_pool2d(
        L.ones(2, 3, 9, 9), 2, output_size=3, _random_samples=L.rand(2, 1, 2)), RuntimeError,
        r"_random_samples of shape \(2, 1, 2\) must be"),
    "samples of another dtype": (lambda L: L.nn.functional.fractional_max_pool2d(
        L.ones(2, 3, 9, 9), 2, output_size=3, _random_samples=L.rand(2, 3, 2, dtype=L.float64)), RuntimeError,
        "expected _random_samples to have the input's dtype float32, got float64"),
    "module ratio of 1": (lambda L: L.nn.FractionalMaxPool2d(2, output_ratio=1.0), ValueError,
                          r"output_ratio must be between 0 and 1 \(got 1.0\)"),
    "module ratio of 0": (lambda L: L.nn.FractionalMaxPool3d(2, output_ratio=(0.5, 0, 0.5)), ValueError,
                          r"output_ratio must be between 0 and 1 \(got \(0.5, 0, 0.5\)\)"),
    "module without a size": (lambda L: L.nn.FractionalMaxPool2d(2), ValueError,
                              "FractionalMaxPool2d requires specifying either an output size, or a pooling ratio"),
    "module with both": (lambda L: L.nn.FractionalMaxPool3d(2, output_size=2, output_ratio=0.5), ValueError,
                         "only one of output_size and output_ratio may be specified"),
    "module kernel of 0": (lambda L: L.nn.FractionalMaxPool3d(0, output_size=2), ValueError,
                           "kernel_size must be greater than 0, but got 0"),
}


@pytest.mark.parametrize("case", list(BAD))
def test_errors_name_the_op_and_shapes_with_torch_error_class(case: str) -> None:
    call, error, message = BAD[case]
    with pytest.raises(error, match=message):
        call(em)
    with pytest.raises(error):
        call(torch)


def test_errors_where_torch_has_none_or_another() -> None:
    # PyTorch runs a zero kernel (a max over nothing), and reads a 2-D input's missing channel dim (IndexError)
    with pytest.raises(RuntimeError, match=r"fractional_max_pool2d\(\): kernel_size must be greater than 0"):
        F.fractional_max_pool2d(em.ones(1, 2, 5, 5), 0, output_size=2)
    with pytest.raises(RuntimeError, match=r"fractional_max_pool2d\(\): expected a 3D or 4D input, got shape \(9, 9\)"):
        F.fractional_max_pool2d(em.ones(9, 9), 2, output_size=2)
    with pytest.raises(TypeError, match="fractional_max_pool2d: input must be floating point, got int64"):
        F.fractional_max_pool2d(em.ones(1, 2, 5, 5, dtype=em.int64), 2, output_size=2)
