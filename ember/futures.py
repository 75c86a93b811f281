"""`ember.futures`: PyTorch's `torch.futures` path for `Future` (it lives in ember.distributed.futures)."""

from ember.distributed.futures import Future, collect_all, wait_all

__all__ = ["Future", "collect_all", "wait_all"]
