"""Neural-network building blocks with PyTorch's interface: Module, layers, losses, init, utils."""

from ember.nn import functional, graph, init, utils
from ember.nn.modules import *  # noqa: F403
from ember.nn.modules import __all__ as _modules_all
from ember.nn.parameter import Parameter

__all__ = ["Parameter", "functional", "graph", "init", "utils"] + list(_modules_all)
