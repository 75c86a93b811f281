"""`ember.nn.parallel`: PyTorch's import path of `DistributedDataParallel` (the class lives in ember.distributed)
and of `DataParallel`.

Resolved on first use: ember.distributed builds on ember.nn, so importing it here eagerly would be circular.
"""

from __future__ import annotations

__all__ = ["DataParallel", "DistributedDataParallel"]


def __getattr__(name: str):
    if name == "DataParallel":
        from ember.nn.modules.data_parallel import DataParallel

        return DataParallel
    if name == "DistributedDataParallel":
        from ember.distributed.ddp import DistributedDataParallel

        return DistributedDataParallel
    raise AttributeError(f"module 'ember.nn.parallel' has no attribute {name!r}")
