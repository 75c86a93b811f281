"""Broadcasting, property-based: random broadcastable shapes agree with NumPy; the others raise ShapeError."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import ember as em
from ember.errors import fmt_shape

SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])

BINARY = {
    "add": (lambda a, b: a + b, np.add),
    "sub": (lambda a, b: a - b, np.subtract),
    "mul": (lambda a, b: a * b, np.multiply),
    "maximum": (em.maximum, np.maximum),
    "lt": (lambda a, b: a < b, np.less),
    "logical_and": (em.logical_and, np.logical_and),
}


def _values(shape, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


@pytest.mark.parametrize("op", sorted(BINARY))
@SETTINGS
@given(shapes=hnp.mutually_broadcastable_shapes(num_shapes=2, max_dims=4, max_side=4), seed=st.integers(0, 2**16))
def test_broadcast_matches_numpy(op: str, shapes, seed: int) -> None:
    """Values and shape of a broadcast binary op equal NumPy's; meta gives the same shape."""
    fn, np_fn = BINARY[op]
    sa, sb = shapes.input_shapes
    a, b = _values(sa, seed), _values(sb, seed + 1)
    out = fn(em.tensor(a), em.tensor(b))
    want = np_fn(a, b)
    assert out.shape == want.shape == shapes.result_shape
    np.testing.assert_array_equal(out.numpy(), want)
    meta = fn(em.empty(*sa, device="meta"), em.empty(*sb, device="meta"))
    assert meta.shape == out.shape and meta.dtype == out.dtype


@SETTINGS
@given(shapes=hnp.mutually_broadcastable_shapes(num_shapes=3, max_dims=4, max_side=3), seed=st.integers(0, 2**16))
def test_where_broadcast_matches_numpy(shapes, seed: int) -> None:
    """where broadcasts its three operands like np.where."""
    sc, sa, sb = shapes.input_shapes
    c = np.random.default_rng(seed).random(sc) < 0.5
    a, b = _values(sa, seed), _values(sb, seed + 1)
    out = em.where(em.tensor(c), em.tensor(a), em.tensor(b))
    np.testing.assert_array_equal(out.numpy(), np.where(c, a, b))


@SETTINGS
@given(shapes=hnp.mutually_broadcastable_shapes(num_shapes=2, max_dims=4, max_side=4))
def test_broadcast_gradients_reduce_to_input_shapes(shapes) -> None:
    """Gradients of a broadcast op are summed back to each input's shape."""
    sa, sb = shapes.input_shapes
    a = em.ones(*sa, requires_grad=True)
    b = em.ones(*sb, requires_grad=True)
    (a * b).sum().backward()
    assert a.grad.shape == tuple(sa) and b.grad.shape == tuple(sb)
    n = int(np.prod(shapes.result_shape))
    assert float(a.grad.sum().item()) == n and float(b.grad.sum().item()) == n


def _not_broadcastable(sa, sb) -> bool:
    try:
        np.broadcast_shapes(sa, sb)
    except ValueError:
        return True
    return False


shape_st = hnp.array_shapes(min_dims=1, max_dims=4, min_side=1, max_side=5)


@pytest.mark.parametrize("device", ["cpu", "meta"])
@pytest.mark.parametrize("op", sorted(BINARY))
@SETTINGS
@given(sa=shape_st, sb=shape_st)
def test_non_broadcastable_raise_shape_error(op: str, device: str, sa, sb) -> None:
    """Incompatible shapes raise ShapeError (a ValueError) naming the op and both shapes."""
    assume(_not_broadcastable(sa, sb))
    fn, _ = BINARY[op]
    a, b = em.zeros(*sa, device=device), em.zeros(*sb, device=device)
    with pytest.raises(em.ShapeError) as info:
        fn(a, b)
    msg = str(info.value)
    assert isinstance(info.value, ValueError)
    assert msg.startswith(op), msg
    assert fmt_shape(sa) in msg and fmt_shape(sb) in msg, msg


@SETTINGS
@given(sa=shape_st, sb=shape_st)
def test_non_broadcastable_where_and_inplace(sa, sb) -> None:
    """where and in-place arithmetic report bad shapes the same way."""
    assume(_not_broadcastable(sa, sb))
    with pytest.raises(em.ShapeError, match="where"):
        em.where(em.zeros(*sa, dtype="bool"), em.zeros(*sa), em.zeros(*sb))
    x = em.zeros(*sa)
    with pytest.raises(ValueError) as info:
        x += em.zeros(*sb)
    assert "add" in str(info.value)
