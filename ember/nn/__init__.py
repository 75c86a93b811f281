"""Neural-network building blocks with PyTorch's interface: Module, layers, losses, init, utils."""

from ember.nn import functional, graph, init, parallel, utils
from ember.nn.modules import *  # noqa: F403
from ember.nn.modules import __all__ as _modules_all
from ember.nn.parameter import Parameter

__all__ = ["Parameter", "functional", "graph", "init", "parallel", "utils"] + list(_modules_all)


def __getattr__(name: str):
    # nn.SyncBatchNorm as in PyTorch; it lives in ember.distributed, which builds on this package
    if name == "SyncBatchNorm":
        from ember.distributed.sync_batchnorm import SyncBatchNorm

        return SyncBatchNorm
    raise AttributeError(f"module 'ember.nn' has no attribute {name!r}")
