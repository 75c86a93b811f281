"""Every index-taking op against PyTorch for good and bad indices: in range, negative (which PyTorch refuses in
gather, scatter, index_select, index_add, embedding and one_hot, and reads from the end in indexing and
take_along_dim), past either end, and index tensors of each dtype (int64, int32, int16, uint8, bool, float32)."""

from __future__ import annotations

import numpy as np
import pytest

import ember as em

from .torch_oracle import assert_like_torch

X = np.arange(12, dtype=np.float32).reshape(3, 4) / 4  # the indexed tensor: 3 rows, 4 columns
SRC = np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4)


def _x(L, grad=True):
    return L.t(X, grad=grad)


def _copy(L):
    """X to write into in place (not a leaf: PyTorch refuses in-place writes to leaves that require grad)."""
    return L.t(X)


# op -> (size of the indexed dimension, call(L, a, b, dtype)): `a` and `b` are the two index values.
OPS = {
    "embedding": (3, lambda L, a, b, dt: L.F.embedding(L.t([[a, b]], dt), _x(L))),
    "embedding_padding": (3, lambda L, a, b, dt: L.F.embedding(L.t([a, b], dt), _x(L), padding_idx=-1)),
    "gather_dim0": (3, lambda L, a, b, dt: L.m.gather(_x(L), 0, L.t([[a, b, a, b]], dt))),
    "gather_dim1": (4, lambda L, a, b, dt: L.m.gather(_x(L), 1, L.t([[a, b]] * 3, dt))),
    "index_select_dim0": (3, lambda L, a, b, dt: L.m.index_select(_x(L), 0, L.t([a, b], dt))),
    "index_select_dim1": (4, lambda L, a, b, dt: L.m.index_select(_x(L), 1, L.t([a, b], dt))),
    "index_select_1d": (12, lambda L, a, b, dt: L.m.index_select(L.t(X.ravel(), grad=True), 0, L.t([a, b], dt))),
    "scatter": (3, lambda L, a, b, dt: L.m.scatter(_x(L), 0, L.t([[a, b, b, a]], dt), L.t(SRC[:1], grad=True))),
    "scatter_value": (4, lambda L, a, b, dt: L.m.scatter(_x(L), 1, L.t([[a], [b], [a]], dt), 5.0)),
    "scatter_add": (3, lambda L, a, b, dt: L.m.scatter_add(_x(L), 0, L.t([[a, b, a, b]] * 2, dt),
                                                           L.t(SRC[:2], grad=True))),
    "scatter_reduce_sum": (3, lambda L, a, b, dt: L.m.scatter_reduce(_x(L), 0, L.t([[a, b, a, b]], dt),
                                                                     L.t(SRC[:1], grad=True), "sum")),
    "scatter_reduce_amax": (4, lambda L, a, b, dt: L.m.scatter_reduce(_x(L), 1, L.t([[a, b]] * 3, dt),
                                                                      L.t(SRC[:, :2], grad=True), "amax")),
    "index_add": (3, lambda L, a, b, dt: L.m.index_add(_x(L), 0, L.t([a, b], dt), L.t(SRC[:2], grad=True))),
    "index_reduce": (3, lambda L, a, b, dt: L.m.index_reduce(_x(L), 0, L.t([a, b], dt), L.t(SRC[:2], grad=True),
                                                             "prod")),
    "index_put": (3, lambda L, a, b, dt: _x(L).index_put((L.t([a, b], dt),), L.t(7.0))),
    "index_put_accumulate": (4, lambda L, a, b, dt: _x(L).index_put((L.t([1, 2], "int64"), L.t([a, b], dt)),
                                                                    L.t([1.0, 2.0]), accumulate=True)),
    "getitem_dim0": (3, lambda L, a, b, dt: _x(L)[L.t([a, b], dt)]),
    "getitem_dim1": (4, lambda L, a, b, dt: _x(L)[:, L.t([a, b], dt)]),
    "getitem_pair": (4, lambda L, a, b, dt: _x(L)[L.t([0, 2], "int64"), L.t([a, b], dt)]),
    "setitem": (3, lambda L, a, b, dt: _setitem(_copy(L), (L.t([a, b], dt),), -1.0)),
    "take_along_dim": (3, lambda L, a, b, dt: L.m.take_along_dim(_x(L), L.t([[a, b, a, b]], dt), 0)),
    "take_along_dim_broadcast": (4, lambda L, a, b, dt: L.m.take_along_dim(_x(L), L.t([[a, b]], dt), 1)),
    "take_along_dim_flat": (12, lambda L, a, b, dt: L.m.take_along_dim(_x(L), L.t([a, b], dt))),
    "one_hot": (3, lambda L, a, b, dt: L.F.one_hot(L.t([a, b], dt), 3)),
    "nll_loss": (4, lambda L, a, b, dt: L.F.nll_loss(_x(L)[:2], L.t([a, b], dt))),
    "cross_entropy": (4, lambda L, a, b, dt: L.F.cross_entropy(_x(L)[:2], L.t([a, b], dt), reduction="none")),
    "cross_entropy_weighted": (4, lambda L, a, b, dt: L.F.cross_entropy(_x(L)[:2], L.t([a, b], dt),
                                                                        weight=L.t([1.0, 2.0, 3.0, 4.0]))),
    "scatter_": (3, lambda L, a, b, dt: _copy(L).scatter_(0, L.t([[a, b, b, a]], dt), 2.0)),
    "scatter_add_": (3, lambda L, a, b, dt: _copy(L).scatter_add_(0, L.t([[a, b, a, b]], dt), L.t(SRC))),
    "index_add_": (3, lambda L, a, b, dt: _copy(L).index_add_(0, L.t([a, b], dt), L.t(SRC[:2]))),
    "index_put_": (3, lambda L, a, b, dt: _copy(L).index_put_((L.t([a, b], dt),), L.t(7.0))),
}

# The op name an error must carry where it is not the row's name (less a _dim0/_dim1 suffix). Scatter rows give a
# src no larger than the index: PyTorch's backward of a larger src fails ("returned an invalid gradient").
ERROR_NAMES = {"embedding_padding": "embedding", "index_put_accumulate": "index_put", "getitem_pair": "getitem",
               "take_along_dim_broadcast": "take_along_dim", "take_along_dim_flat": "gather",
               "cross_entropy_weighted": ("cross_entropy", "nll_loss"), "scatter_": "scatter", "scatter_add_": "scatter_add",
               "index_add_": "index_add", "index_put_": "index_put", "scatter_value": "scatter",
               "scatter_reduce_sum": "scatter_reduce", "scatter_reduce_amax": "scatter_reduce",
               "index_select_1d": "index_select"}


def _setitem(x, index, value):
    x[index] = value
    return x


def _name(op: str):
    return ERROR_NAMES.get(op, op.removesuffix("_dim0").removesuffix("_dim1"))


# variant -> (a, b, dtype) for a dimension of size n
VARIANTS = {
    "in_range": lambda n: (n - 1, 0, "int64"),
    "negative": lambda n: (-1, 0, "int64"),
    "before_start": lambda n: (-n - 1, 0, "int64"),
    "past_end": lambda n: (n, 0, "int64"),
    "int32": lambda n: (n - 1, 0, "int32"),
    "int32_negative": lambda n: (-1, 0, "int32"),
    "int16": lambda n: (1, 0, "int16"),
    "uint8": lambda n: (1, 0, "uint8"),
    "bool": lambda n: (True, False, "bool"),
    "float32": lambda n: (1, 0, "float32"),
}

# Where PyTorch returns without an error but reads memory it should not: take_along_dim with a dim does not check
# its (broadcast) index, and gives row (i mod size) for an index past either end. Ember refuses.
EMBER_STRICTER = {
    ("take_along_dim", "before_start"), ("take_along_dim", "past_end"),
    ("take_along_dim_broadcast", "before_start"), ("take_along_dim_broadcast", "past_end"),
}

INT64_ONLY = {"take_along_dim", "take_along_dim_broadcast", "one_hot", "nll_loss", "cross_entropy",
              "cross_entropy_weighted"}  # int32 is a dtype error there, not a position

CASES = [pytest.param(op, v, id=f"{op}-{v}") for op in OPS for v in VARIANTS]


@pytest.mark.parametrize(("op", "variant"), CASES)
def test_index_like_torch(op: str, variant: str) -> None:
    """Same result and gradients, or an error of PyTorch's class naming the op (and the bad index)."""
    n, call = OPS[op]
    a, b, dtype = VARIANTS[variant](n)
    if (op, variant) in EMBER_STRICTER:
        with pytest.raises(IndexError, match=rf"take_along_dim: index {a} is out of bounds for dimension \d with size {n}"):
            call(_EmberLib(), a, b, dtype)
        return
    bad_value = variant in ("negative", "before_start", "past_end") or (variant == "int32_negative" and op not in INT64_ONLY)
    words = (str(a),) if bad_value and not op.startswith(("nll_loss", "cross_entropy")) else ()
    assert_like_torch(lambda L: call(L, a, b, dtype), _name(op), words)


class _EmberLib:
    """The ember side of torch_oracle.Lib, for calls only ember makes."""

    m, F = em, em.nn.functional

    def t(self, values, dtype="float32", grad=False):
        return em.tensor(np.asarray(values, dtype=dtype), requires_grad=grad)


def test_uint8_index_is_a_mask_for_tensors_and_positions_for_ember_numpy_arrays():
    """PyTorch reads a uint8 index tensor as a mask (with a deprecation warning); NumPy reads a uint8 array as
    positions, and ember.numpy follows NumPy."""
    import ember.numpy as enp

    with pytest.warns(UserWarning, match="uint8"):
        picked = em.tensor([10.0, 20.0, 30.0])[em.tensor([1, 0, 1], dtype=em.uint8)]
    assert picked.tolist() == [10.0, 30.0]
    arr = enp.array([10.0, 20.0, 30.0])
    assert arr[enp.array([1, 0, 1], dtype="uint8")].tolist() == [20.0, 10.0, 20.0]
    assert arr[enp.array([2], dtype="int16")].tolist() == [30.0]


@pytest.mark.parametrize("bad", [-1, 3])
def test_a_bad_index_under_jit_raises_what_eager_raises(bad: int) -> None:
    """The index is only known when the program runs: the kernel's error keeps its class (an IndexError, and a
    RuntimeError as PyTorch's), naming the op."""
    fns = [lambda x, i: em.index_select(x, 0, i), lambda x, i: em.nn.functional.embedding(i, x),
           lambda x, i: em.gather(x, 0, i.reshape(1, 2).expand(1, 2))]
    for fn in fns:
        jitted = em.jit(fn)
        x = em.tensor(X)
        jitted(x, em.tensor([0, 1]))
        with pytest.raises(IndexError, match=f"index {bad} is out of bounds") as info:
            jitted(x, em.tensor([bad, 0]))
        assert isinstance(info.value, RuntimeError)
