"""The CUDA backend: CuPy arrays on NVIDIA GPUs (optional `cuda` extra).

CuPy is imported only when a cuda device is first used, so CPU-only programs never touch it.
"""

from __future__ import annotations

import numpy as np

from ember.backends.base import Backend

_cupy = None
_unavailable_reason: str | None = None


def _load_cupy():
    """Import CuPy once; remember why it is unusable if it is."""
    global _cupy, _unavailable_reason
    if _cupy is not None or _unavailable_reason is not None:
        return _cupy
    try:
        import cupy
    except ImportError as e:
        _unavailable_reason = f"CuPy is not installed ({e}); install ember[cuda]"
        return None
    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except Exception as e:  # noqa: BLE001 - CuPy raises its own runtime errors for a missing driver
        _unavailable_reason = f"CuPy could not reach a CUDA driver: {e}"
        return None
    if count == 0:
        _unavailable_reason = "CuPy found no CUDA device"
        return None
    _cupy = cupy
    return cupy


def is_available() -> bool:
    """True when CuPy imports and sees at least one CUDA device."""
    return _load_cupy() is not None


def unavailable_reason() -> str | None:
    """Why CUDA cannot be used here (None when it can)."""
    _load_cupy()
    return _unavailable_reason


def device_count() -> int:
    """How many CUDA devices CuPy sees (0 without CuPy or a driver)."""
    cupy = _load_cupy()
    return 0 if cupy is None else cupy.cuda.runtime.getDeviceCount()


class CUDABackend(Backend):
    """CuPy arrays on one GPU; kernels run on that GPU's current stream."""

    def __init__(self, device) -> None:
        super().__init__(device)
        cupy = _load_cupy()
        if cupy is None:
            raise RuntimeError(f"device {device} is not available: {_unavailable_reason}")
        if device.index >= cupy.cuda.runtime.getDeviceCount():
            raise RuntimeError(
                f"device {device} is not available: only {cupy.cuda.runtime.getDeviceCount()} CUDA device(s)"
            )
        self.xp = cupy
        self._cuda_device = cupy.cuda.Device(device.index)
        self._generator = None

    def from_host(self, array: np.ndarray):
        with self._cuda_device:
            return self.xp.asarray(array)

    def to_host(self, array) -> np.ndarray:
        return self.xp.asnumpy(array)

    def empty(self, shape, np_dtype):
        with self._cuda_device:
            return self.xp.empty(shape, dtype=np_dtype)

    def full(self, shape, value, np_dtype):
        with self._cuda_device:
            return self.xp.full(shape, value, dtype=np_dtype)

    def run(self, kernel, arrays, attrs):
        with self._cuda_device:
            return kernel(self.xp, *arrays, **attrs)

    def synchronize(self) -> None:
        with self._cuda_device:
            self.xp.cuda.get_current_stream().synchronize()

    def manual_seed(self, seed: int) -> None:
        with self._cuda_device:
            self._generator = self.xp.random.default_rng(seed)

    def random(self):
        from ember.backends.xp_draws import ArrayDraws

        if self._generator is None:
            with self._cuda_device:
                self._generator = self.xp.random.default_rng()
        return ArrayDraws(self._generator)
