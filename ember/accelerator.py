"""`ember.accelerator`: which accelerator this process can use (PyTorch's `torch.accelerator`); CUDA is Ember's only one."""

from __future__ import annotations

from ember.backends import cuda as _cuda
from ember.device import Device

_current = [0]  # the current accelerator's device index


def is_available() -> bool:
    """Whether an accelerator (a CUDA device, through CuPy) can be used."""
    return _cuda.is_available()


def current_accelerator(check_available: bool = False) -> Device | None:
    """The accelerator's device type as a device (`cuda`), or None when there is none.

    As in PyTorch, `check_available=True` also returns None when the accelerator is built in but unusable;
    Ember's only accelerator is usable exactly when it is available, so both give the same answer here.
    """
    return Device("cuda") if is_available() else None


def device_count() -> int:
    """How many accelerator devices are visible (0 without one)."""
    return _cuda.device_count() if is_available() else 0


def _require(what: str) -> None:
    if not is_available():
        raise RuntimeError(f"accelerator.{what}: no accelerator is available ({_cuda.unavailable_reason()})")


def current_device_index() -> int:
    """The index of the current accelerator device."""
    _require("current_device_index")
    return _current[0]


def set_device_index(device) -> None:
    """Make `device` (an index, 'cuda:N' or a device) the current accelerator device."""
    _require("set_device_index")
    index = device if isinstance(device, int) else Device(device).index
    if not 0 <= index < device_count():
        raise ValueError(f"accelerator.set_device_index: device {index} does not exist ({device_count()} visible)")
    _current[0] = index


current_device_idx = current_device_index
set_device_idx = set_device_index


def synchronize(device=None) -> None:
    """Wait for the queued work of an accelerator device (the current one by default)."""
    _require("synchronize")
    Device(f"cuda:{_current[0]}" if device is None else device).backend.synchronize()
