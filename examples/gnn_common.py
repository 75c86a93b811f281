"""Shared by the node-classification examples: the networks, full-batch training, and the same GCN trained
with PyTorch Geometric (or, without it, a dense PyTorch GCN) on the same split, from the same initial weights."""

from __future__ import annotations

import numpy as np

import ember as em
from ember.nn import functional as F
from ember.train import progress_bar


class Net(em.nn.Module):
    """Two graph convolutions ('gcn', 'sage' or 'gat') with ReLU and dropout between them."""

    def __init__(self, kind: str, in_dim: int, hidden: int, classes: int, dropout: float = 0.5) -> None:
        super().__init__()
        if kind == "gcn":
            self.conv1, self.conv2 = em.nn.GCNConv(in_dim, hidden), em.nn.GCNConv(hidden, classes)
        elif kind == "sage":
            self.conv1, self.conv2 = em.nn.SAGEConv(in_dim, hidden), em.nn.SAGEConv(hidden, classes)
        elif kind == "gat":
            heads = 4
            self.conv1 = em.nn.GATConv(in_dim, hidden // heads, heads=heads, dropout=dropout)
            self.conv2 = em.nn.GATConv(hidden, classes, heads=1, dropout=dropout)
        else:
            raise ValueError(f"unknown model {kind!r}: expected gcn, sage or gat")
        self.dropout = dropout

    def forward(self, x, edge_index):
        x = F.dropout(x, self.dropout, self.training)
        x = F.relu(self.conv1(x, edge_index))
        x = F.dropout(x, self.dropout, self.training)
        return self.conv2(x, edge_index)


def train(model, x, edge_index, y, train_idx, test_idx, *, epochs: int, lr: float, weight_decay: float,
          desc: str, progress: bool = True) -> float:
    """Full-batch training on the labelled nodes; returns the accuracy on the test nodes."""
    opt = em.optim.Adam(model.parameters(), lr=lr, weight_decay=weight_decay)
    bar = progress_bar(range(epochs), epochs, desc, progress)
    for epoch in bar:
        model.train()
        opt.zero_grad()
        loss = F.cross_entropy(model(x, edge_index)[train_idx], y[train_idx])
        loss.backward()
        opt.step()
        if progress and epoch % 10 == 0:
            bar.set_postfix(loss=f"{loss.item():.3f}")
    model.eval()
    with em.no_grad():
        pred = model(x, edge_index).argmax(1)
    return float((pred[test_idx] == y[test_idx]).float().mean().item())


def reference_gcn_accuracy(model: Net, x, edge_index, y, train_idx, test_idx, *, epochs: int, lr: float,
                           weight_decay: float, seed: int) -> tuple[float | None, str]:
    """The same GCN (same initial weights: pass `model` untrained) trained in PyTorch: (test accuracy, by what).

    PyTorch Geometric's GCNConv if it is installed, else a dense PyTorch implementation of the same layer.
    """
    try:
        import torch
    except ImportError:
        return None, "PyTorch is not installed"
    torch.manual_seed(seed)
    try:
        from torch_geometric.nn import GCNConv

        convs = [GCNConv(model.conv1.in_channels, model.conv1.out_channels),
                 GCNConv(model.conv2.in_channels, model.conv2.out_channels)]
        by = "PyTorch Geometric's GCNConv"
    except ImportError:
        convs, by = None, "a dense PyTorch GCN (PyTorch Geometric is not installed)"
    state = {k: torch.tensor(v.detach().numpy()) for k, v in model.state_dict().items()}
    tx, ty = torch.tensor(x.numpy()), torch.tensor(y.numpy())
    ei = torch.tensor(edge_index.numpy())
    params = {k: v.clone().requires_grad_() for k, v in state.items()}
    if convs is not None:
        for i, conv in enumerate(convs, 1):
            conv.load_state_dict({"lin.weight": state[f"conv{i}.lin.weight"], "bias": state[f"conv{i}.bias"]})
        layers = [lambda h, c=c: c(h, ei) for c in convs]
        trainable = [p for c in convs for p in c.parameters()]
    else:
        n = tx.shape[0]
        a = torch.zeros(n, n).index_put((ei[1], ei[0]), torch.ones(ei.shape[1]), accumulate=True)
        a = a * (1 - torch.eye(n)) + torch.eye(n)
        d = a.sum(1).pow(-0.5)
        adj = d[:, None] * a * d[None, :]
        layers = [lambda h, i=i: adj @ (h @ params[f"conv{i}.lin.weight"].T) + params[f"conv{i}.bias"] for i in (1, 2)]
        trainable = list(params.values())
    opt = torch.optim.Adam(trainable, lr=lr, weight_decay=weight_decay)
    p = model.dropout

    def forward(training: bool):
        h = torch.nn.functional.dropout(tx, p, training)
        h = torch.relu(layers[0](h))
        h = torch.nn.functional.dropout(h, p, training)
        return layers[1](h)

    tr, te = torch.tensor(train_idx.numpy()), torch.tensor(test_idx.numpy())
    for _ in range(epochs):
        opt.zero_grad()
        torch.nn.functional.cross_entropy(forward(True)[tr], ty[tr]).backward()
        opt.step()
    with torch.no_grad():
        pred = forward(False).argmax(1)
    return float((pred[te] == ty[te]).float().mean()), by


def stratified_labels(y: np.ndarray, per_class: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(train, test) node ids: `per_class` labelled nodes of every class, the rest for testing."""
    rng = np.random.default_rng(seed)
    train = np.concatenate([rng.permutation(np.flatnonzero(y == c))[:per_class] for c in np.unique(y)])
    test = np.setdiff1d(np.arange(len(y)), train)
    return np.sort(train), test
