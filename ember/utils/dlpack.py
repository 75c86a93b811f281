"""`torch.utils.dlpack`'s path: `from_dlpack` and `to_dlpack` (ember/dlpack.py holds them)."""

from ember.dlpack import DLPackError, from_dlpack, to_dlpack

__all__ = ["DLPackError", "from_dlpack", "to_dlpack"]
