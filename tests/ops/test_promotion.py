"""Type promotion follows PyTorch: result dtypes of binary ops over a grid of dtypes and operand kinds."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch

import ember as em
from ember import dtypes as dt

DTYPES = [d.name for d in dt.ALL_DTYPES]  # bool, uint8, int8, ..., float16, bfloat16 (when available), float32, float64
SCALARS = [True, 3, 2.5]


def _operands(device: str = "cpu"):
    """(label, ember operand, torch operand): 1-D and 0-d tensors of every dtype, and Python scalars."""
    out = []
    for name in DTYPES:
        for shape in ((2,), ()):
            e = em.ones(*shape, dtype=name, device=device)
            t = torch.ones(shape, dtype=getattr(torch, name))
            out.append((f"{name}{list(shape)}", e, t))
    for s in SCALARS:
        out.append((repr(s), s, s))
    return out


BINARY = {
    "add": lambda a, b: a + b,
    "mul": lambda a, b: a * b,
    "sub": lambda a, b: a - b,
    "div": lambda a, b: a / b,
    "lt": lambda a, b: a < b,
    "eq": lambda a, b: a == b,
    "maximum": lambda a, b: (em if isinstance(a, em.Tensor) else torch).maximum(a, b),
}


def _torch_dtype(fn, a, b):
    try:
        return str(fn(a, b).dtype).replace("torch.", "")
    except (RuntimeError, TypeError):
        return None


@pytest.mark.parametrize("op", sorted(BINARY))
def test_binary_result_dtype(op: str) -> None:
    """Every (dtype, kind) pair gives PyTorch's result dtype (or an error where PyTorch has one)."""
    fn = BINARY[op]
    bad = []
    for (la, ea, ta), (lb, eb, tb) in itertools.product(_operands(), repeat=2):
        if not isinstance(ea, em.Tensor) and not isinstance(eb, em.Tensor):
            continue
        if op == "maximum" and not (isinstance(ea, em.Tensor) and isinstance(eb, em.Tensor)):
            continue  # torch.maximum takes tensors only
        want = _torch_dtype(fn, ta, tb)
        try:
            got = fn(ea, eb).dtype.name
        except (TypeError, RuntimeError, ValueError):
            got = None
        if got != want:
            bad.append(f"{la} {op} {lb}: ember {got}, torch {want}")
    assert not bad, f"{len(bad)} mismatches:\n" + "\n".join(bad[:40])


@pytest.mark.parametrize("op", ["add", "div", "lt"])
def test_meta_result_dtype_matches_cpu(op: str) -> None:
    """The shape rule (all meta runs) promotes exactly as the kernels do."""
    fn = BINARY[op]
    pairs = zip(itertools.product(_operands(), repeat=2), itertools.product(_operands("meta"), repeat=2))
    for ((la, ca, _), (lb, cb, _)), ((_, ma, _), (_, mb, _)) in pairs:
        if not isinstance(ca, em.Tensor) and not isinstance(cb, em.Tensor):
            continue
        try:
            want = fn(ca, cb).dtype
        except (TypeError, RuntimeError, ValueError):
            continue
        assert fn(ma, mb).dtype == want, f"{la} {op} {lb} on meta"


def test_promote_types_matches_torch() -> None:
    """em.promote_types agrees with torch.promote_types on every pair."""
    for a, b in itertools.product(DTYPES, repeat=2):
        want = str(torch.promote_types(getattr(torch, a), getattr(torch, b))).replace("torch.", "")
        assert em.promote_types(getattr(em, a), getattr(em, b)).name == want, (a, b)


def test_result_type_matches_torch() -> None:
    """dtypes.result_type (tensor, 0-d tensor, scalar categories) agrees with torch.result_type."""
    for (la, _, ta), (lb, _, tb) in itertools.product(_operands(), repeat=2):
        if not isinstance(ta, torch.Tensor) and not isinstance(tb, torch.Tensor):
            continue
        want = str(torch.result_type(ta, tb)).replace("torch.", "")
        ops = [(dt.get_dtype(str(t.dtype).replace("torch.", "")), t.ndim) if isinstance(t, torch.Tensor) else t
               for t in (ta, tb)]
        assert dt.result_type(*ops).name == want, (la, lb)


@pytest.mark.parametrize(
    ("a", "b", "want"),
    [
        (("int64", (3,)), ("float32", (3,)), "float32"),
        (("float32", (3,)), 2.5, "float32"),
        (("int64", (3,)), 1.5, "float32"),
        (("int32", (3,)), 7, "int32"),
        (("uint8", (3,)), ("int8", (3,)), "int16"),
        (("int64", (3,)), ("float16", (3,)), "float16"),
        (("float16", (3,)), ("float64", ()), "float16"),
        (("int8", (3,)), ("int64", ()), "int8"),
        (("bool", (3,)), 2, "int64"),
        (("bool", (3,)), ("bool", (3,)), "bool"),
    ],
)
def test_promotion_examples(a, b, want: str) -> None:
    """The documented examples: int64 + float32 -> float32, float32 * 2.5 -> float32, ..."""
    ea = em.ones(*a[1], dtype=a[0]) if isinstance(a, tuple) else a
    eb = em.ones(*b[1], dtype=b[0]) if isinstance(b, tuple) else b
    assert (ea + eb).dtype.name == want
    assert (eb * ea).dtype.name == want


def test_comparisons_give_bool() -> None:
    """Comparisons of any dtypes give bool tensors."""
    x = em.tensor(np.arange(4), dtype="int8")
    for out in (x < 2.5, x == x, x.float() >= x, em.ne(x, 1)):
        assert out.dtype == em.bool


def test_where_promotes_branches() -> None:
    """where's result dtype is the promotion of its two branches (scalars weakly typed)."""
    c = em.tensor([True, False])
    assert em.where(c, em.ones(2, dtype="int32"), em.ones(2, dtype="float16")).dtype == em.float16
    assert em.where(c, em.ones(2, dtype="int32"), 2.5).dtype == em.float32
    assert em.where(c, em.ones(2, dtype="float64"), 0).dtype == em.float64
    assert em.where(c, em.ones(2, dtype="uint8"), em.ones(2, dtype="int8")).dtype == em.int16
