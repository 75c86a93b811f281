"""Batch normalisation with running statistics (BatchNorm1d, 2d, 3d) and instance normalisation (InstanceNorm1d, 2d, 3d)."""

from __future__ import annotations

from ember import creation, dtypes
from ember.dispatch import is_tracing
from ember.nn import functional as F
from ember.nn import init
from ember.nn.modules.module import Module
from ember.nn.parameter import Parameter
from ember.tensor import Tensor


class _NormBase(Module):
    """Parameters and running-statistics buffers shared by the batch and instance norms."""

    _version = 2  # version 2 added num_batches_tracked

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float | None = 0.1, affine: bool = True,
                 track_running_stats: bool = True, device=None, dtype=None, *, bias: bool = True) -> None:
        super().__init__()
        self.num_features = num_features
        self.eps = eps
        self.momentum = momentum
        self.affine = affine
        self.track_running_stats = track_running_stats
        if affine:
            self.weight = Parameter(creation.empty(num_features, device=device, dtype=dtype))
            if bias:
                self.bias = Parameter(creation.empty(num_features, device=device, dtype=dtype))
            else:
                self.register_parameter("bias", None)
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)
        if track_running_stats:
            self.register_buffer("running_mean", creation.zeros(num_features, device=device, dtype=dtype))
            self.register_buffer("running_var", creation.ones(num_features, device=device, dtype=dtype))
            self.register_buffer("num_batches_tracked", creation.tensor(0, dtype=dtypes.int64, device=device))
        else:
            self.register_buffer("running_mean", None)
            self.register_buffer("running_var", None)
            self.register_buffer("num_batches_tracked", None)
        self.reset_parameters()

    def reset_running_stats(self) -> None:
        """Running mean 0, running variance 1, no batches seen."""
        if self.track_running_stats:
            self.running_mean.zero_()
            self.running_var.fill_(1)
            self.num_batches_tracked.zero_()

    def reset_parameters(self) -> None:
        """Reset the running statistics; weight to ones and bias to zeros."""
        self.reset_running_stats()
        if self.affine:
            init.ones_(self.weight)
            if self.bias is not None:
                init.zeros_(self.bias)

    def _check_input_dim(self, input: Tensor) -> None:
        raise NotImplementedError

    def extra_repr(self) -> str:
        return (f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, affine={self.affine}, "
                f"bias={self.bias is not None}, track_running_stats={self.track_running_stats}")

    def _load_from_state_dict(self, state_dict: dict, prefix: str, local_metadata: dict, strict: bool,
                              missing_keys: list, unexpected_keys: list, error_msgs: list) -> None:
        version = local_metadata.get("version", None)
        if (version is None or version < 2) and self.track_running_stats:
            # state dicts from before num_batches_tracked existed start counting at 0
            key = prefix + "num_batches_tracked"
            if key not in state_dict:
                state_dict[key] = creation.tensor(0, dtype=dtypes.int64)
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                                      error_msgs)


class _BatchNorm(_NormBase):
    def forward(self, input: Tensor) -> Tensor:
        self._check_input_dim(input)
        if not self.training:  # eval by the running statistics, read once (each read goes through __getattr__)
            mean, var = self.running_mean, self.running_var
            if mean is not None or var is not None:
                return F.batch_norm(input, mean, var, self.weight, self.bias, False, 0.0, self.eps)
        factor = 0.0 if self.momentum is None else self.momentum
        if self.training and self.track_running_stats and self.num_batches_tracked is not None:
            self.num_batches_tracked.add_(1)
            if self.momentum is None:  # cumulative moving average
                count = self.num_batches_tracked
                # under ember.jit the count is only known when the graph runs: keep it a (float64) tensor
                factor = 1.0 / (count.to(dtypes.float64) if is_tracing() else float(count))
        use_batch_stats = self.training or (self.running_mean is None and self.running_var is None)
        track = not self.training or self.track_running_stats
        return F.batch_norm(input, self.running_mean if track else None, self.running_var if track else None,
                            self.weight, self.bias, use_batch_stats, factor, self.eps)


class BatchNorm1d(_BatchNorm):
    """Batch norm over (N, C) or (N, C, L) input, per channel."""

    def _check_input_dim(self, input: Tensor) -> None:
        if input.ndim not in (2, 3):
            raise ValueError(f"expected 2D or 3D input (got {input.ndim}D input)")


class BatchNorm2d(_BatchNorm):
    """Batch norm over (N, C, H, W) input, per channel."""

    def _check_input_dim(self, input: Tensor) -> None:
        if input.ndim != 4:
            raise ValueError(f"expected 4D input (got {input.ndim}D input)")


class BatchNorm3d(_BatchNorm):
    """Batch norm over (N, C, D, H, W) input: statistics per channel over the batch and the volume."""

    def _check_input_dim(self, input: Tensor) -> None:
        if input.ndim != 5:
            raise ValueError(f"expected 5D input (got {input.ndim}D input)")


class _InstanceNorm(_NormBase):
    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float | None = 0.1, affine: bool = False,
                 track_running_stats: bool = False, device=None, dtype=None, *, bias: bool = True) -> None:
        super().__init__(num_features, eps, momentum, affine, track_running_stats, device, dtype, bias=bias)

    def _spatial(self) -> int:
        raise NotImplementedError

    def forward(self, input: Tensor) -> Tensor:
        s = self._spatial()
        if input.ndim not in (s + 1, s + 2):
            raise ValueError(f"expected {s + 1}D or {s + 2}D input (got {input.ndim}D input)")
        unbatched = input.ndim == s + 1
        if unbatched:
            input = input.unsqueeze(0)
        use_input_stats = self.training or not self.track_running_stats
        out = F.instance_norm(input, self.running_mean, self.running_var, self.weight, self.bias, use_input_stats,
                              0.0 if self.momentum is None else self.momentum, self.eps)
        return out.squeeze(0) if unbatched else out


class InstanceNorm1d(_InstanceNorm):
    """Instance norm over (N, C, L) input: each channel of each sample on its own."""

    def _spatial(self) -> int:
        return 1


class InstanceNorm2d(_InstanceNorm):
    """Instance norm over (N, C, H, W) input: each channel of each sample on its own."""

    def _spatial(self) -> int:
        return 2


class InstanceNorm3d(_InstanceNorm):
    """Normalise each sample's channels over their volume: (N, C, D, H, W) or (C, D, H, W)."""

    def _spatial(self) -> int:
        return 3
