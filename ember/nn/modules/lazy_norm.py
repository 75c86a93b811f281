"""The lazy batch and instance norms, PyTorch's: num_features is the channel count of the first input. Until then
weight and bias are UninitializedParameters and the running statistics UninitializedBuffers; the first forward (or
a loaded state dict) shapes them in place and the module becomes its BatchNorm*d / InstanceNorm*d."""

from __future__ import annotations

from ember import creation, dtypes
from ember.nn.modules.batchnorm import (
    BatchNorm1d,
    BatchNorm2d,
    BatchNorm3d,
    InstanceNorm1d,
    InstanceNorm2d,
    InstanceNorm3d,
    _NormBase,
)
from ember.nn.modules.lazy import LazyModuleMixin
from ember.nn.parameter import UninitializedBuffer, UninitializedParameter, is_lazy
from ember.tensor import Tensor


class _LazyNormBase(LazyModuleMixin):
    """The lazy parameters and buffers of a norm; the subclass says which input ranks it takes (`_ranks`)."""

    _ranks: tuple = ()  # (unbatched rank or None, batched rank(s)...)

    def __init__(self, eps: float = 1e-5, momentum: float | None = 0.1, affine: bool = True,
                 track_running_stats: bool = True, device=None, dtype=None, *, bias: bool = True) -> None:
        # built without weights or statistics (num_features 0), as PyTorch does, then given uninitialized ones
        _NormBase.__init__(self, 0, eps, momentum, False, False, device, dtype, bias=False)
        self.affine, self.track_running_stats = affine, track_running_stats
        if affine:
            self.weight = UninitializedParameter(device=device, dtype=dtype)
            if bias:
                self.bias = UninitializedParameter(device=device, dtype=dtype)
        if track_running_stats:
            self.running_mean = UninitializedBuffer(device=device, dtype=dtype)
            self.running_var = UninitializedBuffer(device=device, dtype=dtype)
            self.num_batches_tracked = creation.tensor(0, dtype=dtypes.int64, device=device)
        self._lazy_setup()

    def reset_parameters(self) -> None:
        if not self.has_uninitialized_params() and self.num_features != 0:
            _NormBase.reset_parameters(self)

    def _channels(self, input: Tensor) -> int:
        """The input's channel count, after checking its rank (the error names the module and the shape)."""
        raise NotImplementedError

    def initialize_parameters(self, input: Tensor, *args, **kwargs) -> None:
        """Shape weight, bias and the running statistics (the input's channels) and reset them as the norm does."""
        if self.has_uninitialized_params():
            self.num_features = self._channels(input)
            for t in (self.weight, self.bias, self.running_mean, self.running_var):
                if is_lazy(t):
                    t.materialize((self.num_features,))
            self.reset_parameters()

    def _infer_sizes(self) -> None:
        self.num_features = (self.weight if self.weight is not None else self.running_mean).shape[0]


class _LazyBatchNorm(_LazyNormBase):
    def _channels(self, input: Tensor) -> int:
        ranks = self._ranks
        if input.ndim not in ranks:
            want = " or ".join(f"{r}D" for r in ranks)
            raise ValueError(f"{type(self).__name__}: expected {want} input (got {input.ndim}D input of shape "
                             f"{tuple(input.shape)})")
        return input.shape[1]


class _LazyInstanceNorm(_LazyNormBase):
    def _channels(self, input: Tensor) -> int:
        s = self._spatial()
        if input.ndim not in (s + 1, s + 2):
            raise ValueError(f"{type(self).__name__}: expected {s + 1}D or {s + 2}D input (got {input.ndim}D input "
                             f"of shape {tuple(input.shape)})")
        # the channel dim of an unbatched input is 0 (PyTorch takes dim 1 there, the first spatial size)
        return input.shape[1] if input.ndim == s + 2 else input.shape[0]


def _lazy(base: type, eager: type, ranks: tuple = ()) -> type:
    return type(f"Lazy{eager.__name__}", (base, eager), {
        "cls_to_become": eager, "_ranks": ranks, "__module__": __name__,
        "__doc__": f"A {eager.__name__} whose num_features is its first input's channel count."})


LazyBatchNorm1d = _lazy(_LazyBatchNorm, BatchNorm1d, (2, 3))
LazyBatchNorm2d = _lazy(_LazyBatchNorm, BatchNorm2d, (4,))
LazyBatchNorm3d = _lazy(_LazyBatchNorm, BatchNorm3d, (5,))
LazyInstanceNorm1d = _lazy(_LazyInstanceNorm, InstanceNorm1d)
LazyInstanceNorm2d = _lazy(_LazyInstanceNorm, InstanceNorm2d)
LazyInstanceNorm3d = _lazy(_LazyInstanceNorm, InstanceNorm3d)
