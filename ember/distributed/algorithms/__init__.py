"""Algorithms on top of DistributedDataParallel (PyTorch's torch.distributed.algorithms): communication hooks."""
