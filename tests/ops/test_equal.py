"""ember.equal is torch.equal (one Python bool: same shape and values); ember.eq stays elementwise."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import ember as em

NAN = float("nan")
CASES = [
    ("same", [1.0, 2.0], [1.0, 2.0]),
    ("one value differs", [1.0, 2.0], [1.0, 2.5]),
    ("broadcastable shapes", [1.0, 2.0], [[1.0, 2.0]]),
    ("other lengths", [1.0, 2.0], [1.0, 2.0, 3.0]),
    ("int and float of the same values", np.array([1, 2]), [1.0, 2.0]),
    ("float32 and float64", np.array([0.1, 2.0], np.float32), np.array([0.1, 2.0], np.float32).astype(np.float64)),
    ("nan equals nothing", [NAN, 1.0], [NAN, 1.0]),
    ("signed zeros", [-0.0], [0.0]),
    ("0-d", 3.0, 3.0),
    ("empty", np.zeros((0, 2)), np.zeros((0, 2))),
    ("bools", [True, False], [True, False]),
]


@pytest.mark.parametrize(("a", "b"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_equal_is_torch_equal(a, b) -> None:
    expected = torch.equal(torch.tensor(np.asarray(a)), torch.tensor(np.asarray(b)))
    got = em.equal(em.tensor(np.asarray(a)), em.tensor(np.asarray(b)))
    assert type(got) is bool
    assert got == expected
    assert em.tensor(np.asarray(a)).equal(em.tensor(np.asarray(b))) == expected


def test_eq_stays_elementwise() -> None:
    out = em.eq(em.tensor([1.0, 2.0]), em.tensor([1.0, 3.0]))
    assert out.dtype == em.bool and out.tolist() == [True, False]


def test_equal_needs_two_tensors() -> None:
    with pytest.raises(TypeError, match="equal: expected two tensors"):
        em.equal(em.tensor([1.0]), [1.0])
