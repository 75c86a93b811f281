"""Graph convolution layers: GCNConv, SAGEConv (mean aggregation) and GATConv, with PyTorch Geometric's
arguments and parameter names, so a state_dict moves between the two.

Each takes node features x (N, F) and an `edge_index` (2, E) of (source, target) pairs; messages
flow from source to target (see `ember/nn/graph.py`).
"""

from __future__ import annotations

from ember import creation, ops, sparse
from ember.nn import functional as F
from ember.nn import graph, init
from ember.nn.modules.linear import Linear
from ember.nn.modules.module import Module
from ember.nn.parameter import Parameter
from ember.tensor import Tensor


def _glorot_linear(in_channels: int, out_channels: int, bias: bool) -> Linear:
    """A Linear layer with Xavier/Glorot-uniform weights and zero bias (PyTorch Geometric's initialisation)."""
    lin = Linear(in_channels, out_channels, bias=bias)
    init.xavier_uniform_(lin.weight)
    if bias:
        init.zeros_(lin.bias)
    return lin


class GCNConv(Module):
    """Kipf & Welling's graph convolution: out = D^-1/2 (A + I) D^-1/2 x W^T + b, propagated by sparse.mm."""

    def __init__(self, in_channels: int, out_channels: int, improved: bool = False, add_self_loops: bool = True,
                 normalize: bool = True, bias: bool = True) -> None:
        super().__init__()
        self.in_channels, self.out_channels = in_channels, out_channels
        self.improved, self.add_self_loops, self.normalize = improved, add_self_loops, normalize
        self.lin = _glorot_linear(in_channels, out_channels, bias=False)
        if bias:
            self.bias = Parameter(creation.zeros(out_channels))
        else:
            self.register_parameter("bias", None)

    def forward(self, x: Tensor, edge_index: Tensor, edge_weight: Tensor | None = None) -> Tensor:
        n = x.shape[0]
        graph.check_edge_index("GCNConv", edge_index, n)
        h = self.lin(x)
        if self.normalize:
            adj = graph.gcn_norm(edge_index, edge_weight, n, add_self_loops=self.add_self_loops,
                                 improved=self.improved, dtype=h.dtype)
        else:
            w = edge_weight if edge_weight is not None else creation.ones(edge_index.shape[1], dtype=h.dtype)
            adj = sparse.sparse_coo_tensor(ops.stack([edge_index[1], edge_index[0]]), w, (n, n))
        out = sparse.mm(adj, h)
        return out + self.bias if self.bias is not None else out

    def extra_repr(self) -> str:
        return f"{self.in_channels}, {self.out_channels}"


class SAGEConv(Module):
    """GraphSAGE: out = lin_l(aggregate of the neighbours' x) + lin_r(x), aggregated by mean (or max, sum)."""

    def __init__(self, in_channels: int, out_channels: int, aggr: str = "mean", normalize: bool = False,
                 root_weight: bool = True, bias: bool = True) -> None:
        super().__init__()
        if aggr not in ("mean", "max", "sum", "add", "min"):
            raise ValueError(f"SAGEConv: aggr must be 'mean', 'max', 'min' or 'sum', got {aggr!r}")
        self.in_channels, self.out_channels = in_channels, out_channels
        self.aggr, self.normalize, self.root_weight = aggr, normalize, root_weight
        self.lin_l = Linear(in_channels, out_channels, bias=bias)
        self.lin_r = Linear(in_channels, out_channels, bias=False) if root_weight else None

    def forward(self, x: Tensor, edge_index: Tensor) -> Tensor:
        n = x.shape[0]
        graph.check_edge_index("SAGEConv", edge_index, n)
        neighbours = graph.aggregate(x.index_select(0, edge_index[0]), edge_index[1], n, self.aggr)
        out = self.lin_l(neighbours)
        if self.lin_r is not None:
            out = out + self.lin_r(x)
        return F.normalize(out, p=2.0, dim=-1) if self.normalize else out

    def extra_repr(self) -> str:
        return f"{self.in_channels}, {self.out_channels}, aggr={self.aggr!r}"


class GATConv(Module):
    """Graph attention (Velickovic et al.): each node averages its neighbours' features, weighted by a softmax
    over its incoming edges of LeakyReLU(a_src . W x_j + a_dst . W x_i), per head."""

    def __init__(self, in_channels: int, out_channels: int, heads: int = 1, concat: bool = True,
                 negative_slope: float = 0.2, dropout: float = 0.0, add_self_loops: bool = True,
                 bias: bool = True) -> None:
        super().__init__()
        self.in_channels, self.out_channels, self.heads, self.concat = in_channels, out_channels, heads, concat
        self.negative_slope, self.dropout, self.add_self_loops = negative_slope, dropout, add_self_loops
        self.lin = _glorot_linear(in_channels, heads * out_channels, bias=False)
        self.att_src = Parameter(init.xavier_uniform_(creation.empty(1, heads, out_channels)))
        self.att_dst = Parameter(init.xavier_uniform_(creation.empty(1, heads, out_channels)))
        if bias:
            self.bias = Parameter(creation.zeros(heads * out_channels if concat else out_channels))
        else:
            self.register_parameter("bias", None)

    def forward(self, x: Tensor, edge_index: Tensor, return_attention_weights: bool = False):
        n, h, c = x.shape[0], self.heads, self.out_channels
        graph.check_edge_index("GATConv", edge_index, n)
        if self.add_self_loops:
            edge_index, _ = graph.add_remaining_self_loops(edge_index, None, num_nodes=n)
        source, target = edge_index[0], edge_index[1]
        hx = self.lin(x).reshape(n, h, c)
        score_src = (hx * self.att_src).sum(-1)  # (N, H)
        score_dst = (hx * self.att_dst).sum(-1)
        alpha = F.leaky_relu(score_src.index_select(0, source) + score_dst.index_select(0, target),
                             self.negative_slope)
        alpha = graph.segment_softmax(alpha, target, n)  # (E, H): sums to 1 over each node's incoming edges
        alpha = F.dropout(alpha, p=self.dropout, training=self.training)
        out = graph.aggregate(hx.index_select(0, source) * alpha.unsqueeze(-1), target, n, "sum")
        out = out.reshape(n, h * c) if self.concat else out.mean(1)
        if self.bias is not None:
            out = out + self.bias
        return (out, (edge_index, alpha)) if return_attention_weights else out

    def extra_repr(self) -> str:
        return f"{self.in_channels}, {self.out_channels}, heads={self.heads}"


__all__ = ["GATConv", "GCNConv", "SAGEConv"]
