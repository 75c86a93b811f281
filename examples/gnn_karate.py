"""Node classification on Zachary's karate club: which faction each member joined, from the friendship graph.

A two-layer GCN (ember.nn.GCNConv) sees one-hot node ids and the 78 friendships, and four labelled
members per faction; it predicts the other 26. The same GCN is trained with PyTorch Geometric on
the same split from the same initial weights for comparison. Needs networkx (the `gnn` extra).

    python examples/gnn_karate.py
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


def karate_club():
    """(one-hot features, edge_index with both directions of every friendship, faction labels)."""
    import networkx as nx

    g = nx.karate_club_graph()
    n = g.number_of_nodes()
    edges = np.array(list(g.edges()), dtype=np.int64).T
    edge_index = np.concatenate([edges, edges[::-1]], axis=1)
    y = np.array([0 if g.nodes[i]["club"] == "Mr. Hi" else 1 for i in range(n)], dtype=np.int64)
    return np.eye(n, dtype=np.float32), edge_index, y


def main(argv=None) -> dict:
    """Train and report the test accuracy (and the reference's)."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--epochs", type=int, default=200)
    p.add_argument("--labels-per-class", type=int, default=4)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--no-reference", action="store_true", help="skip the PyTorch (Geometric) comparison")
    p.add_argument("--no-progress", action="store_true")
    args = p.parse_args(argv)
    t0 = time.perf_counter()
    em.manual_seed(args.seed)
    x, edge_index, y = karate_club()
    train_idx, test_idx = stratified_labels(y, args.labels_per_class, args.seed)
    x, edge_index, y = em.tensor(x), em.tensor(edge_index), em.tensor(y)
    train_idx, test_idx = em.tensor(train_idx), em.tensor(test_idx)
    model = Net("gcn", x.shape[1], 16, 2)
    initial = Net("gcn", x.shape[1], 16, 2)
    initial.load_state_dict(model.state_dict())
    hp = {"epochs": args.epochs, "lr": 0.01, "weight_decay": 5e-4}
    acc = train(model, x, edge_index, y, train_idx, test_idx, desc="karate GCN", progress=not args.no_progress, **hp)
    result = {"accuracy": acc, "test_nodes": int(test_idx.shape[0])}
    print(f"karate club: {x.shape[0]} members, {edge_index.shape[1] // 2} friendships, "
          f"{train_idx.shape[0]} labelled, {test_idx.shape[0]} to predict")
    if not args.no_reference:
        ref, by = reference_gcn_accuracy(initial, x, edge_index, y, train_idx, test_idx, seed=args.seed, **hp)
        if ref is not None:
            result["reference_accuracy"] = ref
            print(f"the same GCN in {by}: test accuracy {ref:.4f}")
    result["seconds"] = time.perf_counter() - t0
    print(f"final test accuracy: {acc:.4f}  ({result['seconds']:.1f}s)")
    return result


if __name__ == "__main__":
    main()
