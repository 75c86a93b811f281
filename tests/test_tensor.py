"""Tensors: creation, attributes, conversion to NumPy/Python, repr, aliasing views and in-place ops."""

import numpy as np
import pytest
import torch

import ember as em
from ember.errors import ShapeError


# --- creation ------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "data",
    [[1, 2, 3], [1.0, 2.5], [[1, 2], [3, 4]], [True, False], 3.5, 7, True, [], [[1.0], [2.0]], (1, 2.0)],
)
def test_tensor_infers_data_and_dtype_like_torch(data):
    e, t = em.tensor(data), torch.tensor(data)
    assert e.shape == tuple(t.shape)
    assert e.dtype.name == str(t.dtype).removeprefix("torch.")
    assert e.tolist() == t.tolist()


def test_tensor_arguments():
    x = em.tensor([1, 2], dtype=em.float64, device="cpu", requires_grad=True)
    assert x.dtype is em.float64 and x.device == "cpu" and x.requires_grad and x.is_leaf
    assert em.tensor([1.5, 2.5], dtype=em.int32).tolist() == [1, 2]


def test_tensor_copies_its_data():
    a = np.array([1.0, 2.0])
    t = em.tensor(a)
    a[0] = 9
    assert t.tolist() == [1.0, 2.0]
    u = em.tensor(t)
    u[1] = 5
    assert t.tolist() == [1.0, 2.0]


def test_tensor_from_tensors_in_a_list():
    a, b = em.tensor(1.0), em.tensor(2.0)
    assert em.tensor([a, b]).tolist() == [1.0, 2.0]


def test_legacy_tensor_constructor():
    x = em.Tensor([1, 2, 3])
    assert x.dtype is em.float32 and x.tolist() == [1.0, 2.0, 3.0]
    assert em.Tensor(np.array([1, 2], dtype=np.int64)).dtype is em.float32
    assert em.Tensor(3).shape == (3,)
    assert em.Tensor(2, 3).shape == (2, 3) and em.Tensor(2, 3).dtype is em.float32
    assert em.Tensor().shape == (0,)


@pytest.mark.parametrize(
    "make, shape, dtype",
    [
        (lambda L: L.zeros(2, 3), (2, 3), "float32"),
        (lambda L: L.zeros((2, 3)), (2, 3), "float32"),
        (lambda L: L.ones([4]), (4,), "float32"),
        (lambda L: L.ones(2, dtype=L.int64), (2,), "int64"),
        (lambda L: L.full((2, 2), 7), (2, 2), "int64"),
        (lambda L: L.full((2, 2), 7.5), (2, 2), "float32"),
        (lambda L: L.full((3,), True), (3,), "bool"),
        (lambda L: L.arange(5), (5,), "int64"),
        (lambda L: L.arange(1, 10, 3), (3,), "int64"),
        (lambda L: L.arange(0, 1, 0.25), (4,), "float32"),
        (lambda L: L.arange(0.0, 5), (5,), "float32"),
        (lambda L: L.linspace(0, 1, 5), (5,), "float32"),
        (lambda L: L.linspace(-1, 1, 1), (1,), "float32"),
        (lambda L: L.eye(3), (3, 3), "float32"),
        (lambda L: L.eye(2, 4), (2, 4), "float32"),
        (lambda L: L.zeros_like(L.ones(2, 3, dtype=L.int32)), (2, 3), "int32"),
        (lambda L: L.ones_like(L.ones(2, dtype=L.float64)), (2,), "float64"),
        (lambda L: L.full_like(L.ones(3), 4), (3,), "float32"),
        (lambda L: L.zeros(0, 3), (0, 3), "float32"),
    ],
)
def test_factories_match_torch(make, shape, dtype):
    e, t = make(em), make(torch)
    assert e.shape == tuple(t.shape) == shape
    assert e.dtype.name == str(t.dtype).removeprefix("torch.") == dtype
    np.testing.assert_allclose(e.numpy(), t.numpy(), rtol=1e-6)


def test_empty_has_shape_and_dtype():
    x = em.empty(2, 3, dtype=em.float64)
    assert x.shape == (2, 3) and x.dtype is em.float64
    assert em.empty((4,)).shape == (4,)


def test_factory_requires_grad_and_bad_sizes():
    assert em.zeros(2, requires_grad=True).requires_grad
    with pytest.raises(ValueError):
        em.zeros(-1)
    with pytest.raises(TypeError):
        em.zeros(2.5)


@pytest.mark.parametrize(
    "draw",
    [
        lambda: em.rand(3, 4),
        lambda: em.randn(3, 4),
        lambda: em.randn((2, 2), dtype=em.float64),
        lambda: em.randint(0, 10, (5,)),
        lambda: em.randint(7, (5,)),
        lambda: em.normal(2.0, 3.0, (4,)),
        lambda: em.normal(em.zeros(3), 1.0),
    ],
)
def test_random_is_reproducible_with_manual_seed(draw):
    em.manual_seed(123)
    a = draw()
    b = draw()
    em.manual_seed(123)
    c = draw()
    assert a.tolist() == c.tolist() and a.shape == b.shape
    assert a.tolist() != b.tolist() or a.numel() == 0


def test_random_distributions():
    em.manual_seed(0)
    u = em.rand(10000)
    assert u.dtype is em.float32 and 0 <= u.min().item() and u.max().item() < 1
    n = em.randn(10000)
    assert abs(n.mean().item()) < 0.05 and abs(n.std().item() - 1) < 0.05
    r = em.randint(3, 8, (1000,))
    assert r.dtype is em.int64 and r.min().item() == 3 and r.max().item() == 7
    g = em.normal(5.0, 0.5, (10000,))
    assert abs(g.mean().item() - 5) < 0.05 and abs(g.std().item() - 0.5) < 0.05


def test_generator_is_independent_of_global_seed():
    gen = em.Generator().manual_seed(7)
    a = em.randn(4, generator=gen)
    em.manual_seed(0)
    gen.manual_seed(7)
    assert em.randn(4, generator=gen).tolist() == a.tolist()


# --- NumPy and Python interop -----------------------------------------------------------------------
def test_from_numpy_shares_memory_both_ways():
    a = np.zeros(3, dtype=np.float32)
    t = em.from_numpy(a)
    assert t.dtype is em.float32
    a[0] = 5
    t[1] = 6
    assert t.tolist() == [5.0, 6.0, 0.0] and a.tolist() == [5.0, 6.0, 0.0]
    t.add_(1)
    assert a.tolist() == [6.0, 7.0, 1.0]
    assert em.from_numpy(np.zeros(2)).dtype is em.float64
    with pytest.raises(TypeError):
        em.from_numpy([1, 2])


def test_numpy_shares_memory_and_refuses_grad_tensors():
    t = em.ones(2, 2)
    n = t.numpy()
    n[0, 0] = 9
    assert t[0, 0].item() == 9
    g = em.ones(2, requires_grad=True)
    with pytest.raises(RuntimeError, match="detach"):
        g.numpy()
    assert g.detach().numpy().tolist() == [1.0, 1.0]


def test_item_and_tolist():
    assert em.tensor([2.5]).item() == 2.5 and isinstance(em.tensor(3).item(), int)
    assert isinstance(em.tensor(True).item(), bool)
    with pytest.raises(ValueError, match="one-element"):
        em.ones(2).item()
    assert em.tensor([[1, 2], [3, 4]]).tolist() == [[1, 2], [3, 4]]
    assert em.tensor(1.5).tolist() == 1.5


def test_array_protocol():
    t = em.tensor([1.0, 2.0])
    a = np.asarray(t)
    assert isinstance(a, np.ndarray) and a.dtype == np.float32 and a.tolist() == [1.0, 2.0]
    assert np.asarray(t, dtype=np.float64).dtype == np.float64
    c = np.array(t)
    c[0] = 7
    assert t[0].item() == 1.0  # np.array copies
    assert float(em.tensor([2.0])) == 2.0 and int(em.tensor(3)) == 3
    assert [10, 20, 30][em.tensor(1)] == 20


def test_python_protocols():
    x = em.tensor([[1, 2], [3, 4]])
    assert len(x) == 2 and [r.tolist() for r in x] == [[1, 2], [3, 4]]
    assert bool(em.tensor([1])) and not bool(em.tensor(0.0))
    with pytest.raises(RuntimeError, match="ambiguous"):
        bool(x)
    with pytest.raises(TypeError):
        len(em.tensor(1.0))
    assert f"{em.tensor(3.14159):.2f}" == "3.14"


# --- attributes --------------------------------------------------------------------------------------
def test_attributes():
    x = em.ones(2, 3, 4)
    assert x.shape == (2, 3, 4) and x.ndim == 3 and x.dim() == 3
    assert x.numel() == 24 and x.size() == (2, 3, 4) and x.size(1) == 3 and x.size(-1) == 4
    assert x.dtype is em.float32 and x.device == em.device("cpu")
    assert not x.requires_grad and x.grad is None and x.is_leaf and x.grad_fn is None
    assert x.element_size() == 4 and x.nbytes == 96
    assert x.is_floating_point() and not em.ones(1, dtype=em.int8).is_floating_point()
    assert x.stride() == (12, 4, 1) and x.is_contiguous()


def test_attributes_of_results():
    w = em.ones(2, requires_grad=True)
    y = w * 2
    assert y.requires_grad and not y.is_leaf and y.grad_fn is not None
    assert not (w.detach() * 2).requires_grad


# --- repr ------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "make",
    [
        lambda L: L.tensor([1.5, -2.7]),
        lambda L: L.tensor([1.0, 2.0]),
        lambda L: L.tensor(3.5),
        lambda L: L.tensor([[1, 2], [3, 4]]),
        lambda L: L.tensor([True, False]),
        lambda L: L.tensor([1.0, 2.0], dtype=L.float64),
        lambda L: L.tensor([1, 2], dtype=L.int32),
        lambda L: L.tensor([1e-5, 1.0]),
        lambda L: L.tensor([float("nan"), 1.5, float("inf")]),
        lambda L: L.zeros(0),
        lambda L: L.zeros(2, 0),
        lambda L: L.arange(2000),
        lambda L: L.arange(2000.0),
        lambda L: L.arange(3000).reshape(1000, 3),
        lambda L: L.linspace(-1, 1, 16).reshape(2, 8),
    ],
)
def test_repr_matches_torch(make):
    assert repr(make(em)) == repr(make(torch)).replace("torch.", "ember.")


def test_repr_shows_autograd_and_device():
    x = em.ones(2, requires_grad=True)
    assert repr(x) == "tensor([1., 1.], requires_grad=True)"
    assert "grad_fn=<mulBackward>" in repr(x * 2)
    assert repr(em.ones(2, device="cpu:1")) == "tensor([1., 1.], device='cpu:1')"
    assert str(em.tensor([1, 2])) == "tensor([1, 2])"


def test_repr_on_meta():
    assert repr(em.ones((2, 3), device="meta")) == "tensor(..., device='meta', size=(2, 3))"
    assert repr(em.ones(2, device="meta", dtype=em.int64)) == "tensor(..., device='meta', size=(2,), dtype=ember.int64)"


# --- views and aliasing -------------------------------------------------------------------------------
def test_writes_through_views_are_seen_everywhere():
    x = em.arange(12).reshape(3, 4)
    y = x  # another reference
    x[1][2] = 5
    x.T[0, 0] = 7
    assert y[1, 2].item() == 5 and y[0, 0].item() == 7
    row = x[2]
    row[0] = -1
    assert x[2, 0].item() == -1


@pytest.mark.parametrize(
    "make_view, index",
    [
        (lambda x: x[1], (3,)),
        (lambda x: x[:, 1], (2,)),
        (lambda x: x[1:, ::2], (1, 1)),
        (lambda x: x[..., 2], (0,)),
        (lambda x: x[None, 1], (0, 1)),
        (lambda x: x[1, 2], ()),
        (lambda x: x.reshape(12), (5,)),
        (lambda x: x.view(2, 6), (1, 0)),
        (lambda x: x.view(-1), (7,)),
        (lambda x: x.flatten(), (11,)),
        (lambda x: x.T, (2, 1)),
        (lambda x: x.t(), (0, 2)),
        (lambda x: x.transpose(0, 1), (3, 2)),
        (lambda x: x.permute(1, 0), (1, 1)),
        (lambda x: x.unsqueeze(0), (0, 2, 2)),
        (lambda x: x.unsqueeze(-1).squeeze(-1), (1, 3)),
        (lambda x: x[None].squeeze(0), (0, 1)),
        (lambda x: x.narrow(1, 1, 2), (2, 0)),
        (lambda x: x.select(1, -1), (2,)),
        (lambda x: x.view(2, 6), (1, 5)),
        (lambda x: x.flatten(), (7,)),
        (lambda x: x.mT, (3, 2)),
        (lambda x: x.unbind(0)[1], (2,)),
        (lambda x: x.split(2, 1)[1], (0, 1)),
        (lambda x: x.chunk(3)[2], (0, 0)),
        (lambda x: x.detach(), (0, 0)),
        (lambda x: x.T.T, (2, 3)),
        (lambda x: x[1:][0][1:], (0,)),
    ],
)
def test_view_ops_alias_like_torch(make_view, index):
    e, t = em.zeros(3, 4), torch.zeros(3, 4)
    ve, vt = make_view(e), make_view(t)
    assert ve.shape == tuple(vt.shape)
    ve[index] = 1.0
    vt[index] = 1.0
    assert e.tolist() == t.tolist()
    e.mul_(0).add_(2)
    t.mul_(0).add_(2)
    assert ve.tolist() == vt.tolist()


def test_diagonal_is_a_view():
    x, t = em.zeros(3, 3), torch.zeros(3, 3)
    x.diagonal()[1] = 4
    t.diagonal()[1] = 4
    assert x.tolist() == t.tolist()


def test_expand_is_a_view_that_sees_writes_but_refuses_them():
    o = em.zeros(1, 3)
    e = o.expand(4, 3)
    o[0, 1] = 5
    assert e[3, 1].item() == 5 and e.shape == (4, 3)
    with pytest.raises(RuntimeError, match="read-only"):
        e[0, 0] = 1
    assert o.expand(2, 3).clone().add_(1).tolist() == [[1, 6, 1], [1, 6, 1]]


def test_copies_do_not_alias():
    x = em.zeros(3, 4)
    for make in (lambda t: t[[0, 1]], lambda t: t[t > -1], lambda t: t.clone(), lambda t: t.T.reshape(12),
                 lambda t: t.contiguous() * 1):
        c = make(x)
        c.fill_(3)
        assert x.sum().item() == 0


def test_checked_permutations_are_remembered_per_rank():
    # permute remembers the dims it has checked: the same dims on a tensor of another rank are checked again
    assert em.zeros(2, 3).permute(1, 0).shape == (3, 2)
    with pytest.raises(ShapeError, match="permute"):
        em.zeros(2, 3, 4).permute(1, 0)
    with pytest.raises(ValueError, match="permutation"):
        em.zeros(2, 3).permute(0, 0)
    assert em.zeros(2, 3, 4).permute(-1, 0, 1).shape == (4, 2, 3) == em.zeros(2, 3, 4).permute(2, 0, 1).shape


def test_view_of_non_contiguous_needs_reshape():
    x = em.zeros(3, 4).T
    assert not x.is_contiguous() and x.stride() == (1, 4)
    with pytest.raises(RuntimeError, match="reshape"):
        x.view(12)
    assert x.reshape(12).shape == (12,)
    assert x.contiguous().is_contiguous()


# --- in-place operations ------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "op",
    [
        lambda x, L: x.add_(2),
        lambda x, L: x.add_(L.ones(3), alpha=3),
        lambda x, L: x.sub_(0.5),
        lambda x, L: x.sub_(L.ones(3), alpha=2),
        lambda x, L: x.mul_(4),
        lambda x, L: x.mul_(L.tensor([1.0, 2.0, 3.0])),
        lambda x, L: x.div_(2),
        lambda x, L: x.zero_(),
        lambda x, L: x.fill_(3),
        lambda x, L: x.fill_(L.tensor(2.5)),
        lambda x, L: x.copy_(L.tensor([1.0, 2.0, 3.0])),
        lambda x, L: x.copy_(L.tensor([7])),
        lambda x, L: x.clamp_(-0.5, 0.5),
        lambda x, L: x.clamp_(min=0),
        lambda x, L: x.exp_(),
        lambda x, L: x.neg_(),
    ],
)
def test_inplace_ops_return_self_and_match_torch(op):
    vals = [-1.0, 0.25, 2.0]
    e, t = em.tensor(vals), torch.tensor(vals)
    alias = e
    assert op(e, em) is e
    op(t, torch)
    np.testing.assert_allclose(alias.numpy(), t.numpy(), rtol=1e-6)


def test_inplace_ops_write_through_views():
    x = em.zeros(2, 3)
    x[0].add_(1)
    x[:, 2].mul_(5).add_(em.tensor([1.0, 2.0]))
    x.T[1].fill_(4)
    x[1, 0].copy_(em.tensor(9.0))
    assert x.tolist() == [[1.0, 4.0, 6.0], [9.0, 4.0, 2.0]]


def test_augmented_assignment_mutates_the_same_object():
    x = em.ones(3)
    alias = x
    ident = id(x)
    x += 1
    x *= 3
    x -= em.tensor([1.0, 2.0, 3.0])
    x /= 2
    assert id(x) == ident and alias.tolist() == [2.5, 2.0, 1.5]
    y = x
    x = x + 1  # plain assignment makes a new tensor
    assert y.tolist() == [2.5, 2.0, 1.5]


def test_augmented_assignment_on_an_indexed_view():
    x = em.zeros(2, 3)
    x[0] += 1
    x[:, 1] *= 4
    x[1, 2] -= 2
    assert x.tolist() == [[1.0, 4.0, 1.0], [0.0, 0.0, -2.0]]


def test_inplace_dtype_rules_follow_torch():
    for make, op in [
        (lambda L: L.tensor([1, 2, 3]), lambda x, L: x.div_(2)),
        (lambda L: L.tensor([1, 2, 3]), lambda x, L: x.add_(1.5)),
        (lambda L: L.tensor([True]), lambda x, L: x.add_(1)),
    ]:
        with pytest.raises(RuntimeError):
            op(make(torch), torch)
        with pytest.raises((RuntimeError, TypeError)):
            op(make(em), em)
    i = em.tensor([1, 2, 3])
    i.add_(2)
    i.mul_(em.tensor([2], dtype=em.int32))
    f = em.zeros(3)
    f.add_(em.tensor([1, 2, 3]))
    assert i.tolist() == [6, 8, 10] and i.dtype is em.int64 and f.tolist() == [1.0, 2.0, 3.0]


def test_inplace_shape_errors():
    x = em.zeros(3)
    with pytest.raises(ValueError):
        x.add_(em.zeros(2, 3))
    with pytest.raises(ValueError):
        x[0:2] = em.zeros(3)


def test_setitem_forms():
    x = em.zeros(3, 4)
    x[0] = 1
    x[1, :2] = em.tensor([2.0, 3.0])
    x[x > 2] = 9
    x[[2, 2], [0, 3]] = em.tensor([4.0, 5.0])
    x[:, -1] = np.array([6.0, 7.0, 8.0])
    x[..., 1] = x[..., 1] + 10
    t = torch.zeros(3, 4)
    t[0] = 1
    t[1, :2] = torch.tensor([2.0, 3.0])
    t[t > 2] = 9
    t[[2, 2], [0, 3]] = torch.tensor([4.0, 5.0])
    t[:, -1] = torch.tensor([6.0, 7.0, 8.0])
    t[..., 1] = t[..., 1] + 10
    assert x.tolist() == t.tolist()


def test_version_counter_counts_writes():
    x = em.zeros(2)
    v0 = x._version[0]
    x.add_(1)
    x[0] = 3
    x += 1
    assert x._version[0] == v0 + 3
    y = x + 1
    assert x._version[0] == v0 + 3 and y._version[0] == 0


def test_flatten_with_nothing_to_merge_returns_the_input_as_pytorch_does():
    import torch

    t = torch.randn(3, 4, requires_grad=True)
    x = em.tensor(t.detach().numpy(), requires_grad=True)
    for args in ((1,), (0, 0), (1, -1), (-1, -1)):
        assert (torch.flatten(t, *args) is t) == (em.flatten(x, *args) is x) == True  # noqa: E712
    assert em.flatten(x, 0).shape == (12,) and em.nn.Flatten()(x) is x
    em.nn.Flatten()(x).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.ones((3, 4), np.float32))
    assert em.flatten(em.tensor(2.0)).shape == (1,)  # a 0-d input still becomes 1-d
