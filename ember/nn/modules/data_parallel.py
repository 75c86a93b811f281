"""`DataParallel`: PyTorch's single-process wrapper, so scripts written for it run unchanged. Ember has one compute
device per process here, so the wrapped module runs on its own device, whole batches at once (split over that
device's threads); several devices or hosts are DistributedDataParallel's job (ember.distributed)."""

from __future__ import annotations

from ember.nn.modules.module import Module


class DataParallel(Module):
    """Wraps `module` (reachable as .module, its state_dict keys prefixed "module.", as PyTorch's) and runs it."""

    def __init__(self, module: Module, device_ids=None, output_device=None, dim: int = 0) -> None:
        super().__init__()
        if device_ids is not None and len(list(device_ids)) > 1:
            raise ValueError(f"DataParallel: one device per process here, got device_ids={list(device_ids)}; use "
                             "ember.distributed's DistributedDataParallel with one process per device")
        self.module = module
        self.device_ids, self.output_device, self.dim = device_ids, output_device, dim

    def forward(self, *inputs, **kwargs):
        return self.module(*inputs, **kwargs)
