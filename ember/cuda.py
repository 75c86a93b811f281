"""`ember.cuda`: availability and synchronisation of CUDA devices (through CuPy, when installed)."""

from __future__ import annotations

from ember.backends import cuda as _cuda_backend


def is_available() -> bool:
    """True when CuPy is installed and sees a CUDA device."""
    return _cuda_backend.is_available()


def device_count() -> int:
    """How many CUDA devices are visible."""
    return _cuda_backend.device_count()


def unavailable_reason() -> str | None:
    """Why CUDA cannot be used here, or None when it can."""
    return _cuda_backend.unavailable_reason()


def synchronize(device=None) -> None:
    """Wait for all queued GPU work on a device (default cuda:0) to finish."""
    from ember.device import Device

    dev = Device("cuda" if device is None else device)
    dev.backend.synchronize()


def manual_seed(seed: int) -> None:
    """Seed the generators of all CUDA devices."""
    from ember.device import Device

    for i in range(device_count()):
        Device(f"cuda:{i}").backend.manual_seed(seed)


def manual_seed_all(seed: int) -> None:
    """Seed the generators of all CUDA devices (PyTorch's name; `manual_seed` seeds them all too)."""
    manual_seed(seed)
