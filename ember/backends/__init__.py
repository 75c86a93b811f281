"""Hardware backends: one array module plus memory and copies per kind of device.

Backends import nothing from the layers above them.
"""

from __future__ import annotations

from ember.backends.base import Backend
from ember.backends.meta import MetaArray


def backend_for(device) -> Backend:
    """The backend object that serves `device` (created once per device)."""
    if getattr(device, "job", None) is not None:
        from ember.backends.remote import RemoteBackend

        return RemoteBackend(device)
    if device.type == "cpu":
        from ember.backends.cpu import CPUBackend

        return CPUBackend(device)
    if device.type == "meta":
        from ember.backends.meta import MetaBackend

        return MetaBackend(device)
    if device.type == "cuda":
        from ember.backends.cuda import CUDABackend

        return CUDABackend(device)
    raise ValueError(f"no backend for device {device}")


__all__ = ["Backend", "MetaArray", "backend_for"]
