"""Message passing on graphs: self loops, GCN normalisation and the softmax over each node's incoming edges.

A graph is an `edge_index`, an int64 (2, E) tensor of (source, target) pairs, as in PyTorch
Geometric: a message flows from edge_index[0] to edge_index[1] and is reduced at the target. The
layers that use these helpers are in `ember/nn/modules/graph.py`.
"""

from __future__ import annotations

from ember import creation, ops, sparse
from ember.errors import ShapeError, fmt_shape
from ember.sparse import SparseCOOTensor
from ember.tensor import Tensor


def check_edge_index(op: str, edge_index: Tensor, num_nodes: int) -> None:
    """Raise a clear error unless edge_index is an int (2, E) tensor of node ids in [0, num_nodes)."""
    if not isinstance(edge_index, Tensor) or edge_index.dtype.is_floating_point or edge_index.dtype.name == "bool":
        raise TypeError(f"{op}: edge_index must be an int64 tensor of shape (2, E), got "
                        f"{getattr(edge_index, 'dtype', type(edge_index).__name__)}")
    if edge_index.ndim != 2 or edge_index.shape[0] != 2:
        raise ShapeError(f"{op}: edge_index must have shape (2, E), got {fmt_shape(edge_index.shape)}")
    if edge_index.device.type != "meta" and edge_index.shape[1]:
        lo, hi = int(edge_index.min().item()), int(edge_index.max().item())
        if lo < 0 or hi >= num_nodes:
            raise IndexError(f"{op}: edge_index holds node {lo if lo < 0 else hi}, but there are {num_nodes} nodes")


def add_remaining_self_loops(edge_index: Tensor, edge_weight: Tensor | None = None, fill_value: float = 1.0,
                             num_nodes: int | None = None) -> tuple[Tensor, Tensor | None]:
    """Edges with one self loop per node: existing loops keep their weight, the others get `fill_value`."""
    n = num_nodes if num_nodes is not None else int(edge_index.max().item()) + 1
    keep = edge_index[0] != edge_index[1]
    loops = creation.arange(n, device=edge_index.device)
    out_index = ops.cat([edge_index[:, keep], ops.stack([loops, loops])], dim=1)
    if edge_weight is None:
        return out_index, None
    loop_weight = creation.full((n,), fill_value, dtype=edge_weight.dtype, device=edge_weight.device)
    is_loop = ~keep
    if bool(is_loop.any().item()):
        loop_weight = loop_weight.index_put((edge_index[0][is_loop],), edge_weight[is_loop])
    return out_index, ops.cat([edge_weight[keep], loop_weight])


def gcn_norm(edge_index: Tensor, edge_weight: Tensor | None, num_nodes: int, *, add_self_loops: bool = True,
             improved: bool = False, dtype=None) -> SparseCOOTensor:
    """The GCN propagation matrix D^-1/2 (A + I) D^-1/2 as a sparse (target, source) matrix (Kipf & Welling).

    Degrees are summed at the targets; `improved` gives self loops weight 2. Gradients reach edge_weight.
    """
    if edge_weight is None:
        edge_weight = creation.ones(edge_index.shape[1], dtype=dtype, device=edge_index.device)
    if add_self_loops:
        edge_index, edge_weight = add_remaining_self_loops(edge_index, edge_weight, 2.0 if improved else 1.0,
                                                           num_nodes)
    source, target = edge_index[0], edge_index[1]
    deg = creation.zeros(num_nodes, dtype=edge_weight.dtype, device=edge_weight.device).index_add(0, target, edge_weight)
    inv_sqrt = deg.pow(-0.5)
    inv_sqrt = inv_sqrt.masked_fill(deg == 0, 0.0)  # isolated nodes: no inf
    norm = inv_sqrt[source] * edge_weight * inv_sqrt[target]
    return sparse.sparse_coo_tensor(ops.stack([target, source]), norm, (num_nodes, num_nodes))


def segment_softmax(src: Tensor, index: Tensor, num_nodes: int) -> Tensor:
    """Softmax of edge scores `src` (E, ...) over the edges that share a target `index` (E,)."""
    expanded = index.reshape(-1, *([1] * (src.ndim - 1))).expand(*src.shape)
    base = creation.zeros(num_nodes, *src.shape[1:], dtype=src.dtype, device=src.device)
    # The shift only keeps exp() in range; softmax does not depend on it, so it needs no gradient.
    top = base.scatter_reduce(0, expanded, src.detach(), "amax", include_self=False)
    e = (src - top.index_select(0, index)).exp()
    total = base.index_add(0, index, e)
    return e / (total.index_select(0, index) + 1e-16)


def aggregate(messages: Tensor, target: Tensor, num_nodes: int, reduce: str = "sum") -> Tensor:
    """Reduce edge messages (E, ...) at their targets: 'sum', 'mean', 'max' or 'min' (0 where no edge arrives)."""
    reduces = {"sum": "sum", "add": "sum", "mean": "mean", "max": "amax", "min": "amin"}
    if reduce not in reduces:
        raise ValueError(f"aggregate: reduce must be one of sum, mean, max or min, got {reduce!r}")
    base = creation.zeros(num_nodes, *messages.shape[1:], dtype=messages.dtype, device=messages.device)
    if reduces[reduce] == "sum":
        return base.index_add(0, target, messages)
    if reduces[reduce] == "mean":  # a sum and a count: cheaper than a scattered mean, and the same values
        count = creation.zeros(num_nodes, dtype=messages.dtype, device=messages.device).index_add(
            0, target, creation.ones(target.shape[0], dtype=messages.dtype, device=messages.device))
        return base.index_add(0, target, messages) / count.clamp_min(1.0).reshape(-1, *([1] * (messages.ndim - 1)))
    return base.index_reduce(0, target, messages, reduces[reduce], include_self=False)


__all__ = ["add_remaining_self_loops", "aggregate", "check_edge_index", "gcn_norm", "segment_softmax"]
