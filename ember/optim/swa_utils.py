"""Weight averaging (PyTorch's `torch.optim.swa_utils`): `AveragedModel` (SWA, EMA), its averaging functions,
`update_bn` and the `SWALR` scheduler."""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterable
from copy import deepcopy
from typing import Any

from ember.autograd.grad_mode import no_grad
from ember.creation import tensor
from ember.dtypes import int64
from ember.nn.modules.batchnorm import _BatchNorm
from ember.nn.modules.module import Module
from ember.optim.lr_scheduler import LRScheduler, _per_group
from ember.optim.optimizer import Optimizer
from ember.tensor import Tensor

__all__ = ["AveragedModel", "update_bn", "SWALR", "get_ema_multi_avg_fn", "get_swa_multi_avg_fn", "get_ema_avg_fn",
           "get_swa_avg_fn"]


class AveragingArgumentError(ValueError, AssertionError):
    """AveragedModel was given both `avg_fn` and `multi_avg_fn`: a ValueError, and the AssertionError PyTorch
    raises, so code written for either catches it."""


def _check_decay(decay: float) -> None:
    if decay < 0.0 or decay > 1.0:
        raise ValueError(f"Invalid decay value {decay} provided. Please provide a value in [0,1] range.")


def _is_float(t: Tensor) -> bool:
    return t.is_floating_point() or t.is_complex()


def get_ema_multi_avg_fn(decay: float = 0.999) -> Callable:
    """An in-place exponential moving average of lists of tensors: ema = lerp(ema, current, 1 - decay)."""
    _check_decay(decay)

    def ema_update(ema_param_list, current_param_list, _) -> None:
        with no_grad():
            for p_ema, p_model in zip(ema_param_list, current_param_list, strict=True):
                if _is_float(p_ema):
                    p_ema.lerp_(p_model, 1 - decay)
                else:  # integer buffers: the weighted sum, truncated by the copy, as PyTorch's
                    p_ema.copy_(p_ema * decay + p_model * (1 - decay))

    return ema_update


def get_swa_multi_avg_fn() -> Callable:
    """An in-place equal-weight running average of lists of tensors: avg = lerp(avg, current, 1 / (n + 1)).

    Integer tensors (a BatchNorm's batch count with `use_buffers=True`) are averaged as the default path of
    AveragedModel averages them, where PyTorch's function raises (addcdiv refuses integer division).
    """

    def swa_update(averaged_param_list, current_param_list, num_averaged) -> None:
        weight = 1 / (num_averaged + 1)
        # PyTorch passes a tensor count's weight as a number: the 0-d tensor's value, in its dtype (float32).
        weight = weight.item() if isinstance(weight, Tensor) else weight
        with no_grad():
            for p_avg, p_model in zip(averaged_param_list, current_param_list, strict=True):
                if _is_float(p_avg):
                    p_avg.lerp_(p_model, weight)
                else:
                    p_avg.copy_(p_avg + (p_model - p_avg) / (num_averaged + 1))

    return swa_update


def get_ema_avg_fn(decay: float = 0.999) -> Callable:
    """The exponential moving average of one tensor: decay * ema + (1 - decay) * current (a new tensor)."""
    _check_decay(decay)

    def ema_update(ema_param: Tensor, current_param: Tensor, num_averaged) -> Tensor:
        with no_grad():
            return decay * ema_param + (1 - decay) * current_param

    return ema_update


def get_swa_avg_fn() -> Callable:
    """The equal-weight running average of one tensor: avg + (current - avg) / (n + 1) (a new tensor)."""

    def swa_update(averaged_param: Tensor, current_param: Tensor, num_averaged) -> Tensor:
        with no_grad():
            return averaged_param + (current_param - averaged_param) / (num_averaged + 1)

    return swa_update


def _by_device_and_dtype(averaged: list[Tensor], current: list[Tensor]) -> list[tuple[Any, list, list]]:
    """(device, averaged tensors, current tensors) for each device and dtype, in order of first appearance."""
    groups: dict[tuple, tuple[list, list]] = {}
    for a, c in zip(averaged, current):
        found = groups.setdefault((a.device, a.dtype), ([], []))
        found[0].append(a)
        found[1].append(c)
    return [(device, a, c) for (device, _), (a, c) in groups.items()]


class AveragedModel(Module):
    """A copy of `model` whose parameters (and with `use_buffers` its buffers) are a running average of the
    model's: equal-weight (SWA) by default, or by `avg_fn` (one tensor at a time, returning the new average) or
    `multi_avg_fn` (lists of tensors of one device and dtype, updated in place).

    The first `update_parameters` copies the model; `n_averaged` (an int64 buffer) counts the updates. Without
    `use_buffers` the buffers are copied from the model at each update.
    """

    def __init__(self, model: Module, device=None, avg_fn: Callable | None = None,
                 multi_avg_fn: Callable | None = None, use_buffers: bool = False) -> None:
        super().__init__()
        if avg_fn is not None and multi_avg_fn is not None:
            raise AveragingArgumentError("AveragedModel: only one of avg_fn and multi_avg_fn should be provided")
        self.module = deepcopy(model)
        if device is not None:
            self.module = self.module.to(device)
        self.register_buffer("n_averaged", tensor(0, dtype=int64, device=device))
        self.avg_fn = avg_fn
        self.multi_avg_fn = multi_avg_fn
        self.use_buffers = use_buffers

    def forward(self, *args, **kwargs):
        """The averaged copy's forward."""
        return self.module(*args, **kwargs)

    def update_parameters(self, model: Module) -> None:
        """Average `model`'s current parameters (and buffers with `use_buffers`) into this copy."""
        if self.use_buffers:
            ours = itertools.chain(self.module.parameters(), self.module.buffers())
            theirs = itertools.chain(model.parameters(), model.buffers())
        else:
            ours, theirs = self.parameters(), model.parameters()
        first = int(self.n_averaged.item()) == 0
        averaged, current = [], []
        with no_grad():
            for p_averaged, p_model in zip(ours, theirs):
                p_model_ = p_model.detach().to(p_averaged.device)
                averaged.append(p_averaged.detach())
                current.append(p_model_)
                if first:
                    averaged[-1].copy_(p_model_)
            if not first:
                self._average(averaged, current)
            if not self.use_buffers:
                for b_swa, b_model in zip(self.module.buffers(), model.buffers(), strict=True):
                    b_swa.detach().copy_(b_model.detach().to(b_swa.device))
            self.n_averaged.add_(1)

    def _average(self, averaged: list[Tensor], current: list[Tensor]) -> None:
        if self.avg_fn is not None:
            for p_averaged, p_model in zip(averaged, current, strict=True):
                p_averaged.copy_(self.avg_fn(p_averaged, p_model, self.n_averaged.to(p_averaged.device)))
            return
        for device, group_averaged, group_current in _by_device_and_dtype(averaged, current):
            n_averaged = self.n_averaged.to(device)
            if self.multi_avg_fn is not None:
                self.multi_avg_fn(group_averaged, group_current, n_averaged)
                continue
            # The default: PyTorch's path on the CPU (a division per tensor; its foreach lerp runs on GPUs only).
            swa = get_swa_avg_fn()
            for p_averaged, p_model in zip(group_averaged, group_current, strict=True):
                p_averaged.copy_(swa(p_averaged, p_model, n_averaged))


def update_bn(loader: Iterable[Any], model: Module, device=None) -> None:
    """Recompute the BatchNorm running statistics of `model` in one pass over `loader` (a cumulative average).

    Each batch is a tensor or a list/tuple whose first element is the model's input; `device` moves it first.
    """
    momenta = {}
    for module in model.modules():
        if isinstance(module, _BatchNorm):
            module.reset_running_stats()
            momenta[module] = module.momentum
    if not momenta:
        return
    was_training = model.training
    model.train()
    for module in momenta:
        module.momentum = None  # a cumulative average over the whole pass, not a moving one
    try:
        with no_grad():
            for batch in loader:
                if isinstance(batch, (list, tuple)):
                    batch = batch[0]
                if device is not None:
                    batch = batch.to(device)
                model(batch)
    finally:
        for module, momentum in momenta.items():
            module.momentum = momentum
        model.train(was_training)


class SWALR(LRScheduler):
    """Anneal each group's lr to its `swa_lr` over `anneal_epochs` epochs ('cos' or 'linear'), then hold it."""

    def __init__(self, optimizer: Optimizer, swa_lr: float | list[float], anneal_epochs: int = 10,
                 anneal_strategy: str = "cos", last_epoch: int = -1) -> None:
        for lr, group in zip(_per_group("swa_lr", optimizer, swa_lr), optimizer.param_groups):
            group["swa_lr"] = lr
        if anneal_strategy not in ("cos", "linear"):
            raise ValueError(f"anneal_strategy must be one of 'cos' or 'linear', instead got {anneal_strategy}")
        self._anneal_strategy = anneal_strategy
        if not isinstance(anneal_epochs, int) or anneal_epochs < 0:
            raise ValueError(f"anneal_epochs must be equal or greater than 0, got {anneal_epochs}")
        self.anneal_epochs = anneal_epochs
        super().__init__(optimizer, last_epoch)

    def anneal_func(self, t: float) -> float:
        """The annealing weight of swa_lr at fraction t of the annealing phase."""
        return (1 - math.cos(math.pi * t)) / 2 if self._anneal_strategy == "cos" else t

    @staticmethod
    def _get_initial_lr(lr: float, swa_lr: float, alpha: float) -> float:
        """The lr the annealing started from, recovered from the current one (so outside changes carry on)."""
        if alpha == 1:
            return swa_lr
        return (lr - alpha * swa_lr) / (1 - alpha)

    def get_lr(self) -> list[float]:
        """swa_lr * alpha + start * (1 - alpha), with alpha the anneal weight of this step, as PyTorch's."""
        self._warn_if_called_outside_step()
        step = self._step_count - 1
        if self.anneal_epochs == 0:
            step = max(1, step)
        groups = self.optimizer.param_groups
        prev_alpha = self.anneal_func(max(0, min(1, (step - 1) / max(1, self.anneal_epochs))))
        prev_lrs = [self._get_initial_lr(group["lr"], group["swa_lr"], prev_alpha) for group in groups]
        alpha = self.anneal_func(max(0, min(1, step / max(1, self.anneal_epochs))))
        return [group["swa_lr"] * alpha + lr * (1 - alpha) for group, lr in zip(groups, prev_lrs)]
