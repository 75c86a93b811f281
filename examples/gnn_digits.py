"""Node classification on a k-nearest-neighbour graph of the 1,797 scikit-learn digits, from 10 labels per class.

Each 8x8 digit is a node joined to its 8 nearest neighbours (Euclidean, pixels in [0, 1]); GCN,
GraphSAGE (mean aggregation) and GAT networks see every node's pixels and the graph, and 100
labelled nodes, and predict the other 1,697. A multilayer perceptron on the same 100 labels, which
cannot use the graph, is the baseline; the GCN is also trained with PyTorch Geometric (same split,
same initial weights). Needs scikit-learn (the `datasets` extra).

    python examples/gnn_digits.py
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from gnn_common import Net, reference_gcn_accuracy, stratified_labels, train  # noqa: E402

import ember as em  # noqa: E402
from ember.nn import functional as F  # noqa: E402


def knn_graph(x: np.ndarray, k: int) -> np.ndarray:
    """edge_index (2, E) joining every point to its k nearest neighbours, in both directions, without repeats."""
    sq = (x * x).sum(1)
    dist = sq[:, None] + sq[None, :] - 2 * x @ x.T
    np.fill_diagonal(dist, np.inf)
    nearest = np.argsort(dist, axis=1)[:, :k]
    src = np.repeat(np.arange(len(x)), k)
    pairs = np.unique(np.concatenate([np.stack([src, nearest.ravel()]), np.stack([nearest.ravel(), src])], 1), axis=1)
    return pairs.astype(np.int64)


class MLP(em.nn.Module):
    """The baseline without the graph (same hidden size and dropout)."""

    def __init__(self, in_dim: int, hidden: int, classes: int, dropout: float = 0.5) -> None:
        super().__init__()
        self.fc1, self.fc2, self.dropout = em.nn.Linear(in_dim, hidden), em.nn.Linear(hidden, classes), dropout

    def forward(self, x, edge_index):
        x = F.relu(self.fc1(F.dropout(x, self.dropout, self.training)))
        return self.fc2(F.dropout(x, self.dropout, self.training))


def main(argv=None) -> dict:
    """Train the three graph networks and the baseline; report their test accuracies."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--epochs", type=int, default=100)
    p.add_argument("--k", type=int, default=8, help="neighbours per node")
    p.add_argument("--labels-per-class", type=int, default=10)
    p.add_argument("--models", default="gcn,sage,gat,mlp")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--no-reference", action="store_true", help="skip the PyTorch Geometric comparison")
    p.add_argument("--no-progress", action="store_true")
    args = p.parse_args(argv)
    from sklearn.datasets import load_digits

    t0 = time.perf_counter()
    digits = load_digits()
    x_np, y_np = (digits.data / 16.0).astype(np.float32), digits.target.astype(np.int64)
    edge_index = knn_graph(x_np, args.k)
    train_idx, test_idx = stratified_labels(y_np, args.labels_per_class, args.seed)
    x, y, ei = em.tensor(x_np), em.tensor(y_np), em.tensor(edge_index)
    tr, te = em.tensor(train_idx), em.tensor(test_idx)
    print(f"digits k-NN graph: {len(x_np)} nodes, {edge_index.shape[1]} directed edges (k={args.k}), "
          f"{len(train_idx)} labelled, {len(test_idx)} to predict")
    hp = {"epochs": args.epochs, "lr": 0.01, "weight_decay": 5e-4}
    result = {}
    for kind in args.models.split(","):
        em.manual_seed(args.seed)
        model = MLP(64, 64, 10) if kind == "mlp" else Net(kind, 64, 64, 10)
        initial = None
        if kind == "gcn" and not args.no_reference:
            initial = Net("gcn", 64, 64, 10)
            initial.load_state_dict(model.state_dict())
        acc = train(model, x, ei, y, tr, te, desc=f"digits {kind.upper()}", progress=not args.no_progress, **hp)
        result[kind] = acc
        print(f"{kind.upper():>4}: test accuracy {acc:.4f}")
        if initial is not None:
            ref, by = reference_gcn_accuracy(initial, x, ei, y, tr, te, seed=args.seed, **hp)
            if ref is not None:
                result["gcn_reference"] = ref
                print(f"      the same GCN in {by}: test accuracy {ref:.4f}")
    result["seconds"] = time.perf_counter() - t0
    best = max((k for k in result if k in ("gcn", "sage", "gat")), key=result.get, default=None)
    if best is not None:
        print(f"final test accuracy: {result[best]:.4f} ({best.upper()}; MLP without the graph: "
              f"{result.get('mlp', float('nan')):.4f})  ({result['seconds']:.1f}s)")
    return result


if __name__ == "__main__":
    main()
