"""Indexing, property-based: random basic and advanced indices agree with NumPy for getitem and setitem."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import ember as em

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])

shapes = hnp.array_shapes(min_dims=1, max_dims=4, min_side=1, max_side=5)


def _array(shape, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape)


@st.composite
def basic_case(draw):
    """(shape, basic index): ints, slices (any step sign), None and ..."""
    shape = draw(shapes)
    index = draw(hnp.basic_indices(shape, allow_newaxis=True, allow_ellipsis=True))
    return shape, index


@st.composite
def advanced_case(draw):
    """(shape, index) mixing integer arrays (broadcast together) with slices and ints."""
    shape = draw(shapes)
    arrays = draw(hnp.integer_array_indices(shape, result_shape=hnp.array_shapes(min_dims=1, max_dims=2, max_side=4)))
    index = list(arrays)
    # Replace some positions by a slice or an int, keeping the index valid for `shape`.
    for k in range(len(index)):
        kind = draw(st.sampled_from(["array", "array", "slice", "int"]))
        if kind == "slice":
            index[k] = slice(draw(st.integers(0, shape[k])), None, draw(st.integers(1, 3)))
        elif kind == "int":
            index[k] = draw(st.integers(-shape[k], shape[k] - 1))
    return shape, tuple(index)


@st.composite
def mask_case(draw):
    """(shape, index): a boolean mask over the leading dims, maybe after a slice."""
    shape = draw(shapes)
    lead = draw(st.integers(1, len(shape)))
    mask = draw(hnp.arrays(np.bool_, shape[:lead]))
    if draw(st.booleans()) and lead < len(shape):
        return shape, (mask, slice(None, None, 2))
    return shape, (mask,)


def _check_getitem(shape, index, seed: int) -> None:
    a = _array(shape, seed)
    want = a[index]
    x = em.tensor(a, requires_grad=True)
    out = x[index]
    assert out.shape == want.shape
    np.testing.assert_array_equal(out.detach().numpy(), want)
    # The gradient puts (and, for repeated positions, adds) the upstream gradient back.
    g = np.random.default_rng(seed + 1).standard_normal(want.shape)
    out.backward(em.tensor(g))
    expect = np.zeros(shape)
    np.add.at(expect, index, g)
    np.testing.assert_allclose(x.grad.numpy(), expect, rtol=1e-12, atol=1e-12)


def _check_setitem(shape, index, seed: int, scalar: bool) -> None:
    a = _array(shape, seed)
    region = a[index].shape
    value = 2.5 if scalar else np.random.default_rng(seed + 2).standard_normal(region[1:] if region else ())
    want = a.copy()
    want[index] = value
    x = em.tensor(a)
    x[index] = value if scalar else em.tensor(value)
    np.testing.assert_array_equal(x.numpy(), want)


@SETTINGS
@given(case=basic_case(), seed=st.integers(0, 2**16))
def test_basic_getitem(case, seed: int) -> None:
    """Slices (negative steps too: Ember follows NumPy there), ints, None and ... match NumPy; basic indices give views."""
    shape, index = case
    _check_getitem(shape, index, seed)
    x = em.tensor(_array(shape, seed))
    view = x[index]
    if view.numel():
        view_np = view.numpy()
        assert np.shares_memory(view_np, x.numpy()), "basic indexing should give a view"


@SETTINGS
@given(case=basic_case(), seed=st.integers(0, 2**16), scalar=st.booleans())
def test_basic_setitem(case, seed: int, scalar: bool) -> None:
    """x[index] = value (a number, or a tensor broadcast to the region) matches NumPy."""
    shape, index = case
    _check_setitem(shape, index, seed, scalar)


@SETTINGS
@given(case=advanced_case(), seed=st.integers(0, 2**16))
def test_advanced_getitem(case, seed: int) -> None:
    """Integer-array indices (broadcast, mixed with slices and ints) match NumPy, gradients accumulate."""
    shape, index = case
    _check_getitem(shape, index, seed)


@SETTINGS
@given(case=advanced_case(), seed=st.integers(0, 2**16), scalar=st.booleans())
def test_advanced_setitem(case, seed: int, scalar: bool) -> None:
    """Assignment through integer arrays matches NumPy (repeated positions: the last write wins)."""
    shape, index = case
    _check_setitem(shape, index, seed, scalar)


@SETTINGS
@given(case=mask_case(), seed=st.integers(0, 2**16))
def test_mask_getitem(case, seed: int) -> None:
    """Boolean-mask indexing matches NumPy."""
    shape, index = case
    _check_getitem(shape, index, seed)


@SETTINGS
@given(case=mask_case(), seed=st.integers(0, 2**16), scalar=st.booleans())
def test_mask_setitem(case, seed: int, scalar: bool) -> None:
    """Assignment through a boolean mask matches NumPy."""
    shape, index = case
    _check_setitem(shape, index, seed, scalar)


@SETTINGS
@given(case=advanced_case(), seed=st.integers(0, 2**16))
def test_advanced_index_tensors_and_lists(case, seed: int) -> None:
    """Index arrays given as Ember tensors or nested lists index like NumPy arrays."""
    shape, index = case
    a = _array(shape, seed)
    x = em.tensor(a)
    as_tensors = tuple(em.tensor(i) if isinstance(i, np.ndarray) else i for i in index)
    as_lists = tuple(i.tolist() if isinstance(i, np.ndarray) and i.ndim else i for i in index)
    np.testing.assert_array_equal(x[as_tensors].numpy(), a[index])
    np.testing.assert_array_equal(x[as_lists].numpy(), a[tuple(np.asarray(i) if isinstance(i, list) else i
                                                                for i in as_lists)])


@SETTINGS
@given(case=advanced_case())
def test_meta_getitem_shape(case) -> None:
    """On meta, integer-array indexing gives NumPy's result shape without any data."""
    shape, index = case
    x = em.empty(*shape, device="meta")
    meta_index = tuple(em.tensor(i, device="meta") if isinstance(i, np.ndarray) else i for i in index)
    assert x[meta_index].shape == np.empty(shape)[index].shape


def test_setitem_through_view_updates_base_and_grad() -> None:
    """Writing into a view changes the base, and gradients flow through the write to both tensors."""
    base = em.zeros(3, 4)
    base[1:, ::2] = em.ones(2, 2)
    np.testing.assert_array_equal(base.numpy(), np.array([[0, 0, 0, 0], [1, 0, 1, 0], [1, 0, 1, 0]], np.float32))
    x = em.randn(3, 4, requires_grad=True)
    v = em.randn(2, requires_grad=True)
    y = x * 2
    y[0, 1:3] = v
    (y * em.arange(12).reshape(3, 4)).sum().backward()
    expect = 2 * np.arange(12.0).reshape(3, 4)
    expect[0, 1:3] = 0
    np.testing.assert_allclose(x.grad.numpy(), expect)
    np.testing.assert_allclose(v.grad.numpy(), [1.0, 2.0])


@pytest.mark.parametrize("backend", ["numpy", "auto"])  # auto: the compiled row loop where Numba is installed
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_index_add_of_many_repeated_rows_matches_torch(backend, dtype):
    """An embedding's gradient: 1600 rows of 64 values into 1000 positions, many repeated, and its gradient."""
    import torch

    from ember.graph import codegen

    rng = np.random.default_rng(0)
    base = rng.standard_normal((1000, 64)).astype(dtype)
    idx = rng.integers(0, 1000, 1600)
    src = rng.standard_normal((1600, 64)).astype(dtype)
    want = torch.tensor(base).index_add(0, torch.tensor(idx), torch.tensor(src), alpha=2).numpy()
    codegen.set_backend(backend)
    try:
        s = em.tensor(src, requires_grad=True)
        got = em.tensor(base).index_add(0, em.tensor(idx), s, alpha=2)
        got.sum().backward()
    finally:
        codegen.set_backend(None)
    tol = 1e-5 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(got.detach().numpy(), want, rtol=tol, atol=tol)
    np.testing.assert_array_equal(s.grad.numpy(), np.full(src.shape, 2, dtype))
