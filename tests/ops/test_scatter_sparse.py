"""scatter_reduce, segment_reduce and sparse COO tensors: errors, COO semantics and graph mode (values and
gradients are in the op table)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import ember as em


def test_scatter_reduce_errors() -> None:
    """A bad reduction, mixed dtypes and an out-of-range index each give one clear error naming the op."""
    x, i = em.zeros(3), em.tensor([0, 2])
    with pytest.raises(ValueError, match="scatter_reduce: reduce argument must be either sum, prod, mean, amax or amin"):
        x.scatter_reduce(0, i, em.ones(2), "max")
    with pytest.raises(TypeError, match="scatter_reduce: expected self.dtype to be equal to src.dtype"):
        x.scatter_reduce(0, i, em.ones(2, dtype=em.float64), "sum")
    with pytest.raises(IndexError, match="scatter_reduce: index 5 is out of bounds for dimension 0 with size 3"):
        x.scatter_reduce(0, em.tensor([5]), em.ones(1), "sum")
    with pytest.raises(TypeError, match="scatter_reduce: index must be an int64 or int32 tensor"):
        x.scatter_reduce(0, em.tensor([0.0]), em.ones(1), "sum")


def test_scatter_reduce_on_meta_and_in_jit() -> None:
    """The shape rule runs on meta, and a jitted function gives the eager values and gradients."""
    m = em.zeros(4, 3, device="meta").scatter_reduce(0, em.zeros(6, 3, dtype=em.int64, device="meta"),
                                                      em.zeros(6, 3, device="meta"), "amax")
    assert m.shape == (4, 3) and m.device.type == "meta"

    index = em.tensor([0, 2, 2, 1, 0])
    src = em.randn(5, 2, requires_grad=True)

    def f(s):
        return em.zeros(3, 2).index_reduce(0, index, s, "mean", include_self=False).tanh().sum()

    eager = f(src)
    (g_eager,) = em.autograd.grad(eager, [src])
    traced = em.jit(lambda s: em.autograd.grad(f(s), [s])[0])
    np.testing.assert_allclose(traced(src).numpy(), g_eager.numpy(), rtol=1e-6)


def test_segment_reduce_errors() -> None:
    """Lengths that do not add up, negative lengths and unsupported arguments name segment_reduce."""
    data = em.randn(5, 2)
    with pytest.raises(ValueError, match="segment_reduce: expected the lengths to sum to data.size"):
        em.segment_reduce(data, "sum", lengths=em.tensor([2, 2]))
    with pytest.raises(ValueError, match="segment_reduce: lengths contains negative value"):
        em.segment_reduce(data, "sum", lengths=em.tensor([6, -1]))
    with pytest.raises(ValueError, match="segment_reduce: reduce argument must be"):
        em.segment_reduce(data, "median", lengths=em.tensor([5]))
    with pytest.raises(ValueError, match="segment_reduce: expected axis to be the last dimension of lengths"):
        em.segment_reduce(data, "sum", lengths=em.tensor([5]), axis=1)
    with pytest.raises(ValueError, match="give exactly one of lengths and offsets"):
        em.segment_reduce(data, "sum")


def _coo():
    i = np.array([[0, 1, 1, 0, 2], [2, 0, 0, 2, 1]])
    v = np.array([1.0, 2.0, 3.0, 4.0, 5.0])
    return i, v


def test_sparse_coo_semantics_match_torch() -> None:
    """Uncoalesced repeats, coalesce, to_dense, indices() refusal and shape inference follow torch.sparse."""
    i, v = _coo()
    s = em.sparse_coo_tensor(i, v, (3, 4))
    t = torch.sparse_coo_tensor(torch.tensor(i), torch.tensor(v), (3, 4))
    assert not s.is_coalesced() and s._nnz() == 5 and s.sparse_dim() == 2 and s.dense_dim() == 0
    with pytest.raises(RuntimeError, match="Cannot get indices on an uncoalesced tensor"):
        s.indices()
    c, tc = s.coalesce(), t.coalesce()
    assert c.is_coalesced() and c._nnz() == tc._nnz() == 3
    np.testing.assert_array_equal(c.indices().numpy(), tc.indices().numpy())
    np.testing.assert_array_equal(c.values().numpy(), tc.values().numpy())
    np.testing.assert_array_equal(s.to_dense().numpy(), t.to_dense().numpy())
    assert em.sparse_coo_tensor(i, v).shape == tuple(torch.sparse_coo_tensor(torch.tensor(i), torch.tensor(v)).shape)


def test_sparse_errors() -> None:
    """Inconsistent nnz, coordinates out of range, and bad mm operands each give one clear error."""
    i, v = _coo()
    with pytest.raises(ValueError, match="indices and values must have same nnz, but got nnz from indices: 5, nnz "
                                         "from values: 3"):
        em.sparse_coo_tensor(i, v[:3], (3, 4))
    with pytest.raises(ValueError, match="size is inconsistent with indices: for dim 0, size is 2 but found index 2"):
        em.sparse_coo_tensor(i, v, (2, 4))
    with pytest.raises(ValueError, match="found negative index -1 for dim 1"):
        em.sparse_coo_tensor([[0], [-1]], [1.0], (2, 2))
    with pytest.raises(TypeError, match="indices must be an int64 tensor"):
        em.sparse_coo_tensor(i.astype(np.float32), v, (3, 4))
    s = em.sparse_coo_tensor(i, v, (3, 4))
    with pytest.raises(ValueError, match=r"sparse.mm: sparse \(3, 4\) and dense \(3, 2\) shapes cannot be multiplied"):
        em.sparse.mm(s, em.zeros(3, 2, dtype=em.float64))
    with pytest.raises(TypeError, match="sparse.mm: the sparse values are float64 and the dense matrix is float32"):
        em.sparse.mm(s, em.zeros(4, 2))
    with pytest.raises(TypeError, match="first argument must be a sparse COO tensor"):
        em.sparse.mm(em.zeros(3, 4), em.zeros(4, 2))


def test_sparse_mm_learns_values() -> None:
    """Values created with requires_grad=True collect gradients, as torch.sparse_coo_tensor's do."""
    i, v = _coo()
    s = em.sparse_coo_tensor(i, v, (3, 4), requires_grad=True)
    d = em.randn(4, 2, dtype=em.float64)
    (s @ d).sum().backward()
    expected = d.sum(1).numpy()[i[1]]
    np.testing.assert_allclose(s._values().grad.numpy(), expected)
