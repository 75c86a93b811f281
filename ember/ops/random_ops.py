"""Random draws as ops (normal, uniform, truncated normal, integers), drawn afresh at every run.

An op takes no array input, or one `like` input whose shape fills the unknown (None) dimensions
of `shape` at run time (dropout on a batch of unknown size). Kernels draw from the generator of
the device they run on: the default `ember.Generator` on the CPU (PyTorch's streams), the backend's
draws on CUDA; a `seed` attribute gives the op a private, reproducible stream instead. The ops are `stateful`, so
graph passes must never merge, fold or drop two draws, and not differentiable.
"""

from __future__ import annotations

import threading

import numpy as np

from ember.backends.meta import MetaArray
from ember.device import as_device
from ember.errors import DtypeError, ShapeError, fmt_shape
from ember.op import Op, register
from ember.ops._rules import FLOAT_NP, spec
from ember.random import Generator, host_rng
from ember.tensor import Tensor


class SeedStream:
    """A private generator per device, started from one seed: an op with a seed repeats its draws."""

    def __init__(self, seed: int) -> None:
        self.seed = int(seed)
        self._rngs: dict = {}
        self._lock = threading.Lock()

    def rng(self, xp):
        """The draws of this stream for the array module `xp` (and the current CUDA device)."""
        key = "cpu" if xp is np else ("cuda", xp.cuda.runtime.getDevice())
        rng = self._rngs.get(key)
        if rng is None:
            with self._lock:
                rng = self._rngs.get(key)
                if rng is None:
                    rng = self._rngs[key] = _seeded(xp, self.seed)
        return rng

    def __repr__(self) -> str:
        return f"seed({self.seed})"


def _seeded(xp, seed: int):
    """A private stream from `seed`: an ember.Generator on the CPU, the array module's generator elsewhere."""
    if xp is np:
        return Generator().manual_seed(seed)
    from ember.backends.xp_draws import ArrayDraws

    return ArrayDraws(xp.random.default_rng(seed))


def _generator(xp, seed):
    """Where a kernel draws from: the op's own stream, or the device's default generator."""
    if seed is not None:
        return seed.rng(xp)
    if xp is np:
        return host_rng()
    return as_device(f"cuda:{xp.cuda.runtime.getDevice()}").backend.random()


def _resolve_shape(op: str, shape, like) -> tuple:
    """`shape` with each None taken from the same position of `like` (None stays None in rules)."""
    shape = tuple(shape)
    if any(d is None for d in shape):
        if like is None:
            raise ShapeError(f"{op}: shape {fmt_shape(shape)} has unknown dimensions and no `like` input to take them from")
        if len(like.shape) != len(shape):
            raise ShapeError(f"{op}: shape {fmt_shape(shape)} and like's shape {fmt_shape(like.shape)} differ in rank")
        shape = tuple(lk if d is None else d for d, lk in zip(shape, like.shape))
    return shape


def _work_dtype(dtype: np.dtype) -> np.dtype:
    """The dtype draws are made in: the op's own for float32/float64, float32 for narrower floats."""
    return dtype if dtype in (np.dtype(np.float32), np.dtype(np.float64)) else np.dtype(np.float32)


class RandomOp(Op):
    """Shared rule and kernel: subclasses say how to `draw` from a generator."""

    differentiable = False
    stateful = True  # each run draws new numbers: never merge, fold or prune as pure
    fresh_output = True  # results are new memory (the memory planner may reuse them in place)
    float_only = True

    def infer(self, *like, shape, dtype, seed=None, **params):
        dtype = np.dtype(dtype)
        if self.float_only and dtype not in FLOAT_NP:
            raise DtypeError(f"{self.name}: dtype must be floating point, got {dtype.name}")
        return spec(_resolve_shape(self.name, shape, like[0] if like else None), dtype)

    def kernel(self, xp, *like, shape, dtype, seed=None, **params):
        shape = _resolve_shape(self.name, shape, like[0] if like else None)
        out = self.draw(xp, _generator(xp, seed), shape, np.dtype(dtype), **params)
        return out.astype(dtype, copy=False)

    def draw(self, xp, rng, shape, dtype, **params):
        """An array of `shape` and `dtype` drawn from `rng`."""
        raise NotImplementedError


class RandomNormalOp(RandomOp):
    """Normal samples with mean `mean` and standard deviation `std`."""

    name = "random_normal"

    def draw(self, xp, rng, shape, dtype, mean=0.0, std=1.0):
        return rng.normal(shape, _work_dtype(dtype), mean, std)


random_normal_op = register(RandomNormalOp())


class TruncatedNormalOp(RandomOp):
    """Normal samples, redrawn until each lies within two standard deviations of the mean (as TF)."""

    name = "truncated_normal"

    def draw(self, xp, rng, shape, dtype, mean=0.0, std=1.0):
        work = _work_dtype(dtype)
        z = rng.normal(shape, work)
        bad = xp.abs(z) > 2
        while bool(bad.any()):
            z[bad] = rng.normal((int(bad.sum()),), work)
            bad = xp.abs(z) > 2
        return z * work.type(std) + work.type(mean)


truncated_normal_op = register(TruncatedNormalOp())


class RandomUniformOp(RandomOp):
    """Uniform samples in [low, high)."""

    name = "random_uniform"

    def draw(self, xp, rng, shape, dtype, low=0.0, high=1.0):
        return rng.uniform(shape, _work_dtype(dtype), low, high)


random_uniform_op = register(RandomUniformOp())


class RandomIntegersOp(RandomOp):
    """Integers uniform in [low, high)."""

    name = "random_integers"
    float_only = False

    def infer(self, *like, shape, dtype, seed=None, low=0, high=None):
        if np.dtype(dtype).kind not in "iu":
            raise TypeError(f"{self.name}: dtype must be an integer type, got {np.dtype(dtype).name}")
        if high is None or low >= high:
            raise ValueError(f"{self.name}: need low < high, got low={low}, high={high}")
        return super().infer(*like, shape=shape, dtype=dtype)

    def draw(self, xp, rng, shape, dtype, low=0, high=None):
        return rng.integers(int(low), int(high), shape, np.int64)


random_integers_op = register(RandomIntegersOp())


# --- eager draws -----------------------------------------------------------------------------
def _eager(op: Op, shape, dtype, device, seed, **params) -> Tensor:
    from ember.dtypes import as_dtype

    device = as_device(device)
    attrs = dict(shape=tuple(d if isinstance(d, int) else int(d) for d in shape), dtype=as_dtype(dtype).np,
                 seed=None if seed is None else SeedStream(seed), **params)
    out = op.infer(**attrs)
    if device.backend.abstract:
        return Tensor._make(MetaArray(out.shape, out.dtype), device)
    return Tensor._make(device.backend.run(op.kernel, [], attrs), device)


def random_normal(shape, mean: float = 0.0, std: float = 1.0, dtype=np.float32, device=None,
                  seed: int | None = None) -> Tensor:
    """A tensor of normal samples (eager)."""
    return _eager(random_normal_op, shape, dtype, device, seed, mean=float(mean), std=float(std))


def truncated_normal(shape, mean: float = 0.0, std: float = 1.0, dtype=np.float32, device=None,
                     seed: int | None = None) -> Tensor:
    """A tensor of normal samples within two standard deviations of the mean (eager)."""
    return _eager(truncated_normal_op, shape, dtype, device, seed, mean=float(mean), std=float(std))


def random_uniform(shape, low: float = 0.0, high: float = 1.0, dtype=np.float32, device=None,
                   seed: int | None = None) -> Tensor:
    """A tensor of uniform samples in [low, high) (eager)."""
    return _eager(random_uniform_op, shape, dtype, device, seed, low=float(low), high=float(high))


def random_integers(shape, low: int, high: int, dtype=np.int64, device=None, seed: int | None = None) -> Tensor:
    """A tensor of integers uniform in [low, high) (eager)."""
    return _eager(random_integers_op, shape, dtype, device, seed, low=int(low), high=int(high))
