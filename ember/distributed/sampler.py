"""`DistributedSampler`, where ember.distributed's users found it first: the one in `ember.data.distributed`
(PyTorch's `torch.utils.data.distributed.DistributedSampler`)."""

from ember.data.distributed import DistributedSampler

__all__ = ["DistributedSampler"]
