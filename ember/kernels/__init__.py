"""Machine code on arrays: the layer under the ops that says *how* each op runs on this machine.

It takes and returns arrays and knows nothing of tensors, ops, autograd or graphs. In it: `machine` (what the
host has, detected once), `numba_loader` and `cache` (compiling kernels and keeping them on disk), the
hand-written kernels (`conv/`, `gemm`, `sgemm*`, `batch_norm`, `pooling`, `lstm`, ...), `mkl` (oneMKL's GEMM, where
the optional extra is installed), `parallel` (the one `parallel_for` and its thread pool, which also holds BLAS's
and MKL's threads), `selection` (each op's algorithms, the rule each runs under and the tables of thresholds),
`explain` and `tune_process`.
"""

from __future__ import annotations

_PUBLIC = {
    "explain": "ember.kernels.explanation", "Explanation": "ember.kernels.explanation",
    "tune_process": "ember.kernels.process",
    "parallel_for": "ember.kernels.parallel", "get_num_threads": "ember.kernels.parallel",
    "set_num_threads": "ember.kernels.parallel",
    "detect": "ember.kernels.machine", "describe": "ember.kernels.machine",
    "document": "ember.kernels.selection",
}

__all__ = sorted(_PUBLIC)


def __getattr__(name: str):
    """The public functions, imported on first use (importing Ember loads no kernel)."""
    module = _PUBLIC.get(name)
    if module is None:
        raise AttributeError(f"module 'ember.kernels' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)
