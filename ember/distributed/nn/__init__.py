"""Differentiable collectives (`ember.distributed.nn.functional`, PyTorch's `torch.distributed.nn`)."""

from ember.distributed.nn import functional

__all__ = ["functional"]
