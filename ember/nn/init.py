"""Weight initialisation in place (PyTorch's nn.init): the same distributions, drawn from Ember's RNG."""

from __future__ import annotations

import math
import numbers
import warnings

import numpy as np

from ember import creation, ops
from ember.autograd import grad_mode
from ember.tensor import Tensor

_LINEAR_FNS = ("linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d")


def calculate_gain(nonlinearity: str, param: float | None = None) -> float:
    """The recommended gain for a nonlinearity (e.g. sqrt(2) for relu, 5/3 for tanh)."""
    if nonlinearity in _LINEAR_FNS or nonlinearity == "sigmoid":
        return 1.0
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        if param is None:
            slope = 0.01
        elif isinstance(param, numbers.Number) and not isinstance(param, bool):
            slope = param
        else:
            raise ValueError(f"negative_slope {param} not a valid number")
        return math.sqrt(2.0 / (1 + slope**2))
    if nonlinearity == "selu":
        return 3.0 / 4
    raise ValueError(f"Unsupported nonlinearity {nonlinearity}")


def _calculate_fan_in_and_fan_out(tensor: Tensor) -> tuple[int, int]:
    if tensor.ndim < 2:
        raise ValueError("Fan in and fan out can not be computed for tensor with fewer than 2 dimensions")
    receptive = 1
    for s in tensor.shape[2:]:
        receptive *= s
    return tensor.shape[1] * receptive, tensor.shape[0] * receptive


def _calculate_correct_fan(tensor: Tensor, mode: str) -> int:
    mode = mode.lower()
    if mode not in ("fan_in", "fan_out"):
        raise ValueError(f"Mode {mode} not supported, please use one of fan_in, fan_out")
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    return fan_in if mode == "fan_in" else fan_out


@grad_mode.no_grad()
def uniform_(tensor: Tensor, a: float = 0.0, b: float = 1.0, generator=None) -> Tensor:
    """Fill with samples from U(a, b)."""
    return tensor.uniform_(a, b, generator=generator)


@grad_mode.no_grad()
def normal_(tensor: Tensor, mean: float = 0.0, std: float = 1.0, generator=None) -> Tensor:
    """Fill with samples from N(mean, std^2)."""
    return tensor.normal_(mean, std, generator=generator)


@grad_mode.no_grad()
def trunc_normal_(tensor: Tensor, mean: float = 0.0, std: float = 1.0, a: float = -2.0, b: float = 2.0,
                  generator=None) -> Tensor:
    """Fill with samples from N(mean, std^2) truncated to [a, b], drawn as PyTorch draws them: where
    [a, b] holds more than 30% of the mass, normals redrawn (a whole tensor per round) until none lies
    outside; else uniform proposals on [a, b] accepted by the density's ratio to its peak."""
    if tensor.is_meta:
        return tensor

    def norm_cdf(x: float) -> float:
        return (1.0 + math.erf(x / math.sqrt(2.0))) / 2.0

    if (mean < a - 2 * std) or (mean > b + 2 * std):
        warnings.warn("mean is more than 2 std from [a, b] in nn.init.trunc_normal_. "
                      "The distribution of values may be incorrect.", stacklevel=2)
    if norm_cdf((b - mean) / std) - norm_cdf((a - mean) / std) > 0.3:
        lo, hi = (float(np.asarray(v, dtype=tensor.dtype.np)) for v in (a, b))  # the bounds the tensor can hold
        result = tensor.normal_(mean, std, generator=generator)
        while True:
            outside = (result < lo) | (result > hi)
            if not bool(outside.any()):
                break
            result = ops.where(outside, ops.empty_like(result).normal_(mean, std, generator=generator), result)
        return tensor if result is tensor else tensor.copy_(result)
    mode = max(a, min(mean, b))
    log_peak = -0.5 * ((mode - mean) / std) ** 2

    def rejected(candidates: Tensor) -> Tensor:
        log_ratio = ((candidates - mean) / std).pow(2) * -0.5 - log_peak
        return ops.empty_like(candidates).uniform_(generator=generator).log() > log_ratio

    result = tensor.uniform_(a, b, generator=generator)
    pending = rejected(tensor)
    while bool(pending.any()):
        candidates = ops.empty_like(tensor).uniform_(a, b, generator=generator)
        result = ops.where(pending, candidates, result)
        pending = ops.where(pending, rejected(candidates), pending)
    return tensor if result is tensor else tensor.copy_(result)


@grad_mode.no_grad()
def constant_(tensor: Tensor, val: float) -> Tensor:
    """Fill with one value."""
    return tensor.fill_(val)


def ones_(tensor: Tensor) -> Tensor:
    """Fill with ones."""
    return constant_(tensor, 1.0)


def zeros_(tensor: Tensor) -> Tensor:
    """Fill with zeros."""
    return constant_(tensor, 0.0)


@grad_mode.no_grad()
def eye_(tensor: Tensor) -> Tensor:
    """Fill a 2-D tensor with the identity matrix."""
    if tensor.ndim != 2:
        raise ValueError("Only tensors with 2 dimensions are supported")
    return tensor.copy_(creation.eye(tensor.shape[0], tensor.shape[1], dtype=tensor.dtype, device=tensor.device))


@grad_mode.no_grad()
def dirac_(tensor: Tensor, groups: int = 1) -> Tensor:
    """Fill a 3-, 4- or 5-D conv weight with the Dirac delta (identity convolution) per group."""
    if tensor.ndim not in (3, 4, 5):
        raise ValueError("Only tensors with 3, 4, or 5 dimensions are supported")
    sizes = tensor.shape
    if sizes[0] % groups != 0:
        raise ValueError("dim 0 must be divisible by groups")
    out_per_group = sizes[0] // groups
    min_dim = min(out_per_group, sizes[1])
    w = np.zeros(sizes)
    centre = tuple(s // 2 for s in sizes[2:])
    for g in range(groups):
        for d in range(min_dim):
            w[(g * out_per_group + d, d) + centre] = 1
    return tensor.copy_(creation.tensor(w, dtype=tensor.dtype, device=tensor.device))


@grad_mode.no_grad()
def xavier_uniform_(tensor: Tensor, gain: float = 1.0, generator=None) -> Tensor:
    """Glorot uniform: U(-a, a) with a = gain * sqrt(6 / (fan_in + fan_out))."""
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    std = gain * math.sqrt(2.0 / float(fan_in + fan_out))
    a = math.sqrt(3.0) * std  # in PyTorch's order: the bound rounds as its does
    return tensor.uniform_(-a, a, generator=generator)


@grad_mode.no_grad()
def xavier_normal_(tensor: Tensor, gain: float = 1.0, generator=None) -> Tensor:
    """Glorot normal: N(0, std^2) with std = gain * sqrt(2 / (fan_in + fan_out))."""
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    return tensor.normal_(0.0, gain * math.sqrt(2.0 / float(fan_in + fan_out)), generator=generator)


def _kaiming_std(tensor: Tensor, a: float, mode: str, nonlinearity: str) -> float | None:
    if 0 in tensor.shape:
        warnings.warn("Initializing zero-element tensors is a no-op", stacklevel=3)
        return None
    fan = _calculate_correct_fan(tensor, mode)
    return calculate_gain(nonlinearity, a) / math.sqrt(fan)


@grad_mode.no_grad()
def kaiming_uniform_(tensor: Tensor, a: float = 0, mode: str = "fan_in", nonlinearity: str = "leaky_relu",
                     generator=None) -> Tensor:
    """He uniform: U(-b, b) with b = gain * sqrt(3 / fan)."""
    std = _kaiming_std(tensor, a, mode, nonlinearity)
    if std is None:
        return tensor
    bound = math.sqrt(3.0) * std
    return tensor.uniform_(-bound, bound, generator=generator)


@grad_mode.no_grad()
def kaiming_normal_(tensor: Tensor, a: float = 0, mode: str = "fan_in", nonlinearity: str = "leaky_relu",
                    generator=None) -> Tensor:
    """He normal: N(0, std^2) with std = gain / sqrt(fan)."""
    std = _kaiming_std(tensor, a, mode, nonlinearity)
    if std is None:
        return tensor
    return tensor.normal_(0.0, std, generator=generator)


@grad_mode.no_grad()
def orthogonal_(tensor: Tensor, gain: float = 1.0, generator=None) -> Tensor:
    """Fill with a (semi-)orthogonal matrix (the trailing dims are flattened), scaled by gain: the Q of
    the QR factorisation of normals drawn in the tensor's dtype, its columns' signs set by R's diagonal."""
    if tensor.ndim < 2:
        raise ValueError("Only tensors with 2 or more dimensions are supported")
    if tensor.numel() == 0 or tensor.is_meta:
        return tensor
    rows = tensor.shape[0]
    cols = tensor.numel() // rows
    flat = creation.empty((rows, cols), dtype=tensor.dtype).normal_(0, 1, generator=generator).numpy()
    if rows < cols:
        flat = flat.T
    q, r = np.linalg.qr(flat)
    q = q * np.sign(np.diag(r))  # makes the distribution uniform (Haar)
    if rows < cols:
        q = q.T
    tensor.copy_(creation.tensor(np.ascontiguousarray(q).reshape(tensor.shape), dtype=tensor.dtype, device=tensor.device))
    return tensor.mul_(gain)


@grad_mode.no_grad()
def sparse_(tensor: Tensor, sparsity: float, std: float = 0.01, generator=None) -> Tensor:
    """A 2-D tensor from N(0, std^2) with a fraction `sparsity` of each column set to zero (the rows to
    zero come from the default generator, as in PyTorch)."""
    if tensor.ndim != 2:
        raise ValueError("Only tensors with 2 dimensions are supported")
    if tensor.is_meta:
        return tensor
    rows, cols = tensor.shape
    num_zeros = int(math.ceil(sparsity * rows))
    tensor.normal_(0, std, generator=generator)
    for c in range(cols):
        tensor[creation.randperm(rows)[:num_zeros], c] = 0
    return tensor


# Deprecated PyTorch names without the trailing underscore.
uniform, normal, constant, eye, dirac = uniform_, normal_, constant_, eye_, dirac_
xavier_uniform, xavier_normal, kaiming_uniform, kaiming_normal, orthogonal = (
    xavier_uniform_, xavier_normal_, kaiming_uniform_, kaiming_normal_, orthogonal_,
)
