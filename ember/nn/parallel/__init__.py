"""`ember.nn.parallel`: PyTorch's import path of `DistributedDataParallel` (the class lives in ember.distributed).

Resolved on first use: ember.distributed builds on ember.nn, so importing it here eagerly would be circular.
"""

from __future__ import annotations

__all__ = ["DistributedDataParallel"]


def __getattr__(name: str):
    if name == "DistributedDataParallel":
        from ember.distributed.ddp import DistributedDataParallel

        return DistributedDataParallel
    raise AttributeError(f"module 'ember.nn.parallel' has no attribute {name!r}")
