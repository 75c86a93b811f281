"""TF1's variable initializers: callables `(shape, dtype=None, partition_info=None) -> tensor` of the default graph.

Random initializers build random ops, so a variable's initializer draws afresh each time it runs
(seeded by the op seed and the graph seed as TF's rule says). The fan sizes follow TF: for a
matrix [in, out]; for a convolution kernel [..., in, out], each times the receptive field.
"""

from __future__ import annotations

import math

import numpy as np

from ember import dtypes as dt
from ember.v1.constant_ops import (
    constant,
    ones,
    random_normal,
    random_uniform,
    static_shape,
    truncated_normal,
    zeros,
)

# A standard normal truncated to two standard deviations has this standard deviation.
_TRUNCATED_STDDEV = 0.87962566103423978


def _dims(shape) -> tuple:
    dims = static_shape(shape, "initializer")
    if None in dims:
        raise ValueError(f"initializer: the shape {tuple(shape)} must be fully known")
    return dims


def _float_dtype(dtype, default, what: str):
    dtype = dt.as_dtype(dtype if dtype is not None else default)
    if not dtype.is_floating_point:
        raise ValueError(f"{what}: expected a floating-point dtype, got {dtype.name}")
    return dtype


def compute_fans(shape) -> tuple:
    """(fan_in, fan_out) of a weight of this shape, as TF computes them."""
    if len(shape) < 1:
        return 1, 1
    if len(shape) == 1:
        return shape[0], shape[0]
    if len(shape) == 2:
        return shape[0], shape[1]
    receptive = math.prod(shape[:-2])
    return shape[-2] * receptive, shape[-1] * receptive


class Initializer:
    """Base of TF1's initializers."""

    def __call__(self, shape, dtype=None, partition_info=None):
        raise NotImplementedError

    def get_config(self) -> dict:
        """The arguments that rebuild this initializer."""
        return {}

    @classmethod
    def from_config(cls, config: dict):
        """An initializer from `get_config()`'s result."""
        return cls(**config)


class Zeros(Initializer):
    """All zeros."""

    def __init__(self, dtype=dt.float32) -> None:
        self.dtype = dt.as_dtype(dtype)

    def __call__(self, shape, dtype=None, partition_info=None):
        return zeros(_dims(shape), dtype=dtype or self.dtype)


class Ones(Initializer):
    """All ones."""

    def __init__(self, dtype=dt.float32) -> None:
        self.dtype = dt.as_dtype(dtype)

    def __call__(self, shape, dtype=None, partition_info=None):
        return ones(_dims(shape), dtype=dtype or self.dtype)


class Constant(Initializer):
    """A given value: a scalar fills the shape; a list or array with as many elements is reshaped to it."""

    def __init__(self, value=0, dtype=dt.float32, verify_shape: bool = False) -> None:
        self.value = value
        self.dtype = dt.as_dtype(dtype)
        self.verify_shape = verify_shape

    def __call__(self, shape, dtype=None, partition_info=None, verify_shape=None):
        dims = _dims(shape)
        arr = np.asarray(self.value)
        verify = self.verify_shape if verify_shape is None else verify_shape
        if verify and arr.shape != dims:
            raise TypeError(f"Expected Tensor's shape: {dims}, got {arr.shape}.")
        if arr.size not in (1, math.prod(dims)):
            raise ValueError(f"constant_initializer: {arr.size} values do not fill shape {dims}")
        return constant(arr, dtype=dtype or self.dtype, shape=dims)

    def get_config(self) -> dict:
        return {"value": self.value, "dtype": self.dtype.name, "verify_shape": self.verify_shape}


class RandomNormal(Initializer):
    """Normal samples with `mean` and `stddev`."""

    def __init__(self, mean=0.0, stddev=1.0, seed=None, dtype=dt.float32) -> None:
        self.mean, self.stddev, self.seed = mean, stddev, seed
        self.dtype = dt.as_dtype(dtype)

    def __call__(self, shape, dtype=None, partition_info=None):
        dtype = _float_dtype(dtype, self.dtype, "random_normal_initializer")
        return random_normal(_dims(shape), self.mean, self.stddev, dtype, seed=self.seed)


class TruncatedNormal(Initializer):
    """Normal samples with `mean` and `stddev`, redrawn beyond two standard deviations."""

    def __init__(self, mean=0.0, stddev=1.0, seed=None, dtype=dt.float32) -> None:
        self.mean, self.stddev, self.seed = mean, stddev, seed
        self.dtype = dt.as_dtype(dtype)

    def __call__(self, shape, dtype=None, partition_info=None):
        dtype = _float_dtype(dtype, self.dtype, "truncated_normal_initializer")
        return truncated_normal(_dims(shape), self.mean, self.stddev, dtype, seed=self.seed)


class RandomUniform(Initializer):
    """Uniform samples in [minval, maxval)."""

    def __init__(self, minval=0.0, maxval=None, seed=None, dtype=dt.float32) -> None:
        self.minval, self.maxval, self.seed = minval, maxval, seed
        self.dtype = dt.as_dtype(dtype)

    def __call__(self, shape, dtype=None, partition_info=None):
        dtype = dt.as_dtype(dtype or self.dtype)
        return random_uniform(_dims(shape), self.minval, self.maxval, dtype, seed=self.seed)


class VarianceScaling(Initializer):
    """Samples scaled to the weight's fans: stddev = sqrt(scale / n), n = fan_in, fan_out or their mean."""

    def __init__(self, scale=1.0, mode="fan_in", distribution="truncated_normal", seed=None,
                 dtype=dt.float32) -> None:
        if scale <= 0.0:
            raise ValueError(f"variance_scaling_initializer: scale must be positive, got {scale}")
        if mode not in ("fan_in", "fan_out", "fan_avg"):
            raise ValueError(f"variance_scaling_initializer: mode must be fan_in, fan_out or fan_avg, got {mode!r}")
        distribution = distribution.lower()
        if distribution == "normal":
            distribution = "truncated_normal"  # TF1's name for it
        if distribution not in ("truncated_normal", "untruncated_normal", "uniform"):
            raise ValueError(f"variance_scaling_initializer: unknown distribution {distribution!r}")
        self.scale, self.mode, self.distribution, self.seed = scale, mode, distribution, seed
        self.dtype = dt.as_dtype(dtype)

    def __call__(self, shape, dtype=None, partition_info=None):
        dims = _dims(shape)
        dtype = _float_dtype(dtype, self.dtype, "variance_scaling_initializer")
        fan_in, fan_out = compute_fans(dims)
        n = {"fan_in": fan_in, "fan_out": fan_out, "fan_avg": (fan_in + fan_out) / 2.0}[self.mode]
        scale = self.scale / max(1.0, n)
        if self.distribution == "truncated_normal":
            return truncated_normal(dims, 0.0, math.sqrt(scale) / _TRUNCATED_STDDEV, dtype, seed=self.seed)
        if self.distribution == "untruncated_normal":
            return random_normal(dims, 0.0, math.sqrt(scale), dtype, seed=self.seed)
        limit = math.sqrt(3.0 * scale)
        return random_uniform(dims, -limit, limit, dtype, seed=self.seed)

    def get_config(self) -> dict:
        return {"scale": self.scale, "mode": self.mode, "distribution": self.distribution, "seed": self.seed,
                "dtype": self.dtype.name}


class GlorotUniform(VarianceScaling):
    """Uniform in [-limit, limit], limit = sqrt(6 / (fan_in + fan_out)) (Xavier/Glorot)."""

    def __init__(self, seed=None, dtype=dt.float32) -> None:
        super().__init__(1.0, "fan_avg", "uniform", seed, dtype)

    def get_config(self) -> dict:
        return {"seed": self.seed, "dtype": self.dtype.name}


class GlorotNormal(VarianceScaling):
    """Truncated normal with stddev sqrt(2 / (fan_in + fan_out)) (Xavier/Glorot)."""

    def __init__(self, seed=None, dtype=dt.float32) -> None:
        super().__init__(1.0, "fan_avg", "truncated_normal", seed, dtype)

    def get_config(self) -> dict:
        return {"seed": self.seed, "dtype": self.dtype.name}


def he_normal(seed=None) -> VarianceScaling:
    """Truncated normal with stddev sqrt(2 / fan_in)."""
    return VarianceScaling(2.0, "fan_in", "truncated_normal", seed)


def he_uniform(seed=None) -> VarianceScaling:
    """Uniform with limit sqrt(6 / fan_in)."""
    return VarianceScaling(2.0, "fan_in", "uniform", seed)


def lecun_normal(seed=None) -> VarianceScaling:
    """Truncated normal with stddev sqrt(1 / fan_in)."""
    return VarianceScaling(1.0, "fan_in", "truncated_normal", seed)


def lecun_uniform(seed=None) -> VarianceScaling:
    """Uniform with limit sqrt(3 / fan_in)."""
    return VarianceScaling(1.0, "fan_in", "uniform", seed)


# TF1's lower-case names for the classes.
zeros_initializer = Zeros
ones_initializer = Ones
constant_initializer = Constant
random_normal_initializer = RandomNormal
truncated_normal_initializer = TruncatedNormal
random_uniform_initializer = RandomUniform
variance_scaling_initializer = VarianceScaling
glorot_uniform_initializer = GlorotUniform
glorot_normal_initializer = GlorotNormal
