"""`SyncBatchNorm`: batch normalisation whose statistics cover the batches of every rank of a group.

In training the per-channel sum and count are all-reduced, then the sum of squared deviations from
that mean (two passes, as single-process batch norm computes the variance). The collectives are the
differentiable ops of ember.distributed.nn, so the backward pass all-reduces the gradients of the
statistics: with DistributedDataParallel the result equals single-process BatchNorm on the whole
batch. Outside training, or in a world of one, it is ordinary BatchNorm.
"""

from __future__ import annotations

from ember import creation, ops
from ember.autograd import grad_mode
from ember.distributed.group import resolve, state
from ember.distributed.nn.functional import all_reduce
from ember.nn.modules.batchnorm import _BatchNorm
from ember.nn.parameter import Parameter


class SyncBatchNorm(_BatchNorm):
    """Batch norm over (N, C, ...) input with statistics over all ranks of `process_group` (PyTorch's class)."""

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float | None = 0.1, affine: bool = True,
                 track_running_stats: bool = True, process_group=None, device=None, dtype=None) -> None:
        super().__init__(num_features, eps, momentum, affine, track_running_stats, device, dtype)
        self.process_group = process_group

    def _check_input_dim(self, input) -> None:
        if input.ndim < 2:
            raise ValueError(f"expected at least 2D input (got {input.ndim}D input)")

    def forward(self, input):
        self._check_input_dim(input)
        if not self.training or state.world is None:
            return super().forward(input)
        pg = resolve(self.process_group, "SyncBatchNorm")
        if pg.size() == 1:
            return super().forward(input)
        factor = 0.0 if self.momentum is None else self.momentum
        if self.track_running_stats and self.num_batches_tracked is not None:
            self.num_batches_tracked.add_(1)
            if self.momentum is None:
                factor = 1.0 / float(self.num_batches_tracked)
        c = input.shape[1]
        dims = [0] + list(range(2, input.ndim))
        shape = (1, c) + (1,) * (input.ndim - 2)
        count = creation.full((1,), float(input.numel() // c if c else 0), dtype=input.dtype, device=input.device)
        totals = all_reduce(ops.cat([input.sum(dim=dims), count]), group=pg)
        n = totals[c]
        mean = totals[:c] / n
        centred = input - mean.reshape(shape)
        var = all_reduce((centred * centred).sum(dim=dims), group=pg) / n
        out = centred * ops.rsqrt(var + self.eps).reshape(shape)
        if self.weight is not None:
            out = out * self.weight.reshape(shape)
        if self.bias is not None:
            out = out + self.bias.reshape(shape)
        if self.track_running_stats and self.running_mean is not None:
            with grad_mode.no_grad():
                self.running_mean.mul_(1.0 - factor).add_(mean.detach().to(self.running_mean.dtype) * factor)
                unbiased = (var.detach() * n / (n - 1)).to(self.running_var.dtype)
                self.running_var.mul_(1.0 - factor).add_(unbiased * factor)
        return out

    @classmethod
    def convert_sync_batchnorm(cls, module, process_group=None):
        """`module` with every BatchNorm*d replaced by a SyncBatchNorm holding the same parameters and buffers."""
        if isinstance(module, _BatchNorm) and not isinstance(module, SyncBatchNorm):
            w = module.weight
            new = cls(module.num_features, module.eps, module.momentum, module.affine, module.track_running_stats,
                      process_group, device=w.device if w is not None else None, dtype=w.dtype if w is not None else None)
            with grad_mode.no_grad():
                if module.affine:
                    new.weight = Parameter(module.weight.detach().clone(), requires_grad=module.weight.requires_grad)
                    if module.bias is not None:
                        new.bias = Parameter(module.bias.detach().clone(), requires_grad=module.bias.requires_grad)
                if module.track_running_stats:
                    new.running_mean.copy_(module.running_mean)
                    new.running_var.copy_(module.running_var)
                    new.num_batches_tracked.copy_(module.num_batches_tracked)
            new.train(module.training)
            return new
        for name, child in list(module.named_children()):
            converted = cls.convert_sync_batchnorm(child, process_group)
            if converted is not child:
                module.add_module(name, converted)
        return module
