"""GCNConv, SAGEConv and GATConv against dense PyTorch implementations of the same formulas, and against
PyTorch Geometric's layers (same weights) where it is installed."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import ember as em

N, F_IN, F_OUT = 7, 5, 4


def _graph(seed: int = 0):
    """Node features and a random directed edge list with a repeated edge, a self loop and an isolated node."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((N, F_IN))
    src = rng.integers(0, N - 1, 14)
    dst = (src + rng.integers(1, N - 1, 14)) % (N - 1)  # node N-1 is isolated
    src[0], dst[0] = 2, 2  # one self loop
    src[1], dst[1] = src[2], dst[2]  # a repeated edge
    return x, np.stack([src, dst]).astype(np.int64)


def _state(module) -> dict:
    return {k: torch.tensor(v.detach().numpy()) for k, v in module.state_dict().items()}


def _dense_adjacency(edge_index: np.ndarray, weight=None) -> torch.Tensor:
    """A[target, source] summed over repeated edges."""
    a = torch.zeros(N, N, dtype=torch.float64)
    w = torch.ones(edge_index.shape[1], dtype=torch.float64) if weight is None else weight
    return a.index_put((torch.tensor(edge_index[1]), torch.tensor(edge_index[0])), w, accumulate=True)


def _torch_gcn(x, edge_index, state, weight=None):
    """PyG's GCN: self loops replace existing ones (weight 1), degrees summed at the targets."""
    a = _dense_adjacency(edge_index, weight)
    a = a - torch.diag(torch.diagonal(a)) + torch.diag(torch.where(torch.diagonal(a) != 0, torch.diagonal(a),
                                                                   torch.ones(N, dtype=torch.float64)))
    d = a.sum(1).pow(-0.5)
    return (d[:, None] * a * d[None, :]) @ (x @ state["lin.weight"].T) + state["bias"]


def test_gcn_matches_dense_formula_with_gradients() -> None:
    """Values and gradients (input, weights, edge weights) equal the dense D^-1/2 (A + I) D^-1/2 X W^T + b."""
    x, ei = _graph()
    em.manual_seed(0)
    conv = em.nn.GCNConv(F_IN, F_OUT).double()
    ex = em.tensor(x, requires_grad=True)
    w = np.random.default_rng(1).uniform(0.5, 2.0, ei.shape[1])
    ew = em.tensor(w, requires_grad=True)
    out = conv(ex, em.tensor(ei), ew)
    state = {k: v.requires_grad_() for k, v in _state(conv).items()}
    tx, tw = torch.tensor(x, requires_grad=True), torch.tensor(w, requires_grad=True)
    ref = _torch_gcn(tx, ei, state, tw)
    np.testing.assert_allclose(out.detach().numpy(), ref.detach().numpy(), rtol=1e-10, atol=1e-12)
    g = np.random.default_rng(2).standard_normal(ref.shape)
    got = em.autograd.grad(out, [ex, ew, conv.lin.weight, conv.bias], em.tensor(g))
    want = torch.autograd.grad(ref, [tx, tw, state["lin.weight"], state["bias"]], torch.tensor(g))
    for a, b in zip(got, want):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-9, atol=1e-12)


def test_sage_mean_matches_dense_formula() -> None:
    """SAGEConv: lin_l(mean of the in-neighbours) + lin_r(x); a node with no in-neighbours aggregates zeros."""
    x, ei = _graph()
    conv = em.nn.SAGEConv(F_IN, F_OUT).double()
    out = conv(em.tensor(x), em.tensor(ei))
    s = _state(conv)
    a = _dense_adjacency(ei)
    mean = (a @ torch.tensor(x)) / a.sum(1, keepdim=True).clamp_min(1)
    ref = mean @ s["lin_l.weight"].T + s["lin_l.bias"] + torch.tensor(x) @ s["lin_r.weight"].T
    np.testing.assert_allclose(out.detach().numpy(), ref.numpy(), rtol=1e-10, atol=1e-12)


def _torch_gat(x, edge_index, s, heads, concat):
    """Dense GAT: a masked softmax over each target's incoming edges (repeated edges count once per copy)."""
    keep = edge_index[0] != edge_index[1]
    ei = np.concatenate([edge_index[:, keep], np.stack([np.arange(N)] * 2)], 1)
    h = (x @ s["lin.weight"].T).reshape(N, heads, -1)
    a_src, a_dst = (h * s["att_src"]).sum(-1), (h * s["att_dst"]).sum(-1)
    e = torch.nn.functional.leaky_relu(a_src[ei[0]] + a_dst[ei[1]], 0.2)  # (E, H)
    out = torch.zeros(N, heads, h.shape[-1], dtype=x.dtype)
    for i in range(N):
        edges = np.flatnonzero(ei[1] == i)
        alpha = torch.softmax(e[edges], 0)  # (k, H)
        out[i] = (alpha[:, :, None] * h[ei[0][edges]]).sum(0)
    out = out.reshape(N, -1) if concat else out.mean(1)
    return out + s["bias"]


@pytest.mark.parametrize(("heads", "concat"), [(1, True), (3, True), (2, False)])
def test_gat_matches_dense_formula(heads: int, concat: bool) -> None:
    """GATConv's attention is a softmax over each node's incoming edges (self loop included), per head."""
    x, ei = _graph(3)
    em.manual_seed(1)
    conv = em.nn.GATConv(F_IN, F_OUT, heads=heads, concat=concat).double()
    ex = em.tensor(x, requires_grad=True)
    out = conv(ex, em.tensor(ei))
    s = {k: v.requires_grad_() for k, v in _state(conv).items()}
    tx = torch.tensor(x, requires_grad=True)
    ref = _torch_gat(tx, ei, s, heads, concat)
    np.testing.assert_allclose(out.detach().numpy(), ref.detach().numpy(), rtol=1e-9, atol=1e-12)
    (gx,) = em.autograd.grad(out.sum(), [ex])
    (tgx,) = torch.autograd.grad(ref.sum(), [tx])
    np.testing.assert_allclose(gx.numpy(), tgx.numpy(), rtol=1e-8, atol=1e-10)


def test_gat_attention_sums_to_one_per_node() -> None:
    """return_attention_weights gives the (edge_index, alpha) pair; alpha sums to 1 over each target's edges."""
    x, ei = _graph(4)
    conv = em.nn.GATConv(F_IN, F_OUT, heads=2)
    _, (edges, alpha) = conv(em.tensor(x, dtype=em.float32), em.tensor(ei), return_attention_weights=True)
    sums = em.zeros(N, 2).index_add(0, edges[1], alpha.detach())
    np.testing.assert_allclose(sums.numpy(), np.ones((N, 2)), rtol=1e-5)


def test_edge_index_errors() -> None:
    """A float, badly shaped or out-of-range edge_index is one clear error naming the layer."""
    conv = em.nn.GCNConv(F_IN, F_OUT)
    x = em.randn(N, F_IN)
    with pytest.raises(TypeError, match="GCNConv: edge_index must be an int64 tensor"):
        conv(x, em.zeros(2, 3))
    with pytest.raises(ValueError, match=r"GCNConv: edge_index must have shape \(2, E\), got \(3, 2\)"):
        conv(x, em.zeros(3, 2, dtype=em.int64))
    with pytest.raises(IndexError, match="GCNConv: edge_index holds node 9, but there are 7 nodes"):
        conv(x, em.tensor([[0, 9], [1, 2]]))
    with pytest.raises(ValueError, match="SAGEConv: aggr must be"):
        em.nn.SAGEConv(3, 4, aggr="median")


@pytest.mark.parametrize("name", ["GCNConv", "SAGEConv", "GATConv"])
def test_same_as_pytorch_geometric(name: str) -> None:
    """With the same weights (state_dict names are PyG's), the outputs equal torch_geometric.nn's layers."""
    pyg = pytest.importorskip("torch_geometric.nn")
    x, ei = _graph(5)
    kwargs = {"heads": 2} if name == "GATConv" else {}
    ours = getattr(em.nn, name)(F_IN, F_OUT, **kwargs).double()
    theirs = getattr(pyg, name)(F_IN, F_OUT, **kwargs).double()
    theirs.load_state_dict(_state(ours))
    out = ours(em.tensor(x), em.tensor(ei))
    ref = theirs(torch.tensor(x), torch.tensor(ei))
    np.testing.assert_allclose(out.detach().numpy(), ref.detach().numpy(), rtol=1e-9, atol=1e-12)
