"""DDP communication hooks (PyTorch's torch.distributed.algorithms.ddp_comm_hooks): `default_hooks`."""

from ember.distributed.algorithms.ddp_comm_hooks import default_hooks

__all__ = ["default_hooks"]
