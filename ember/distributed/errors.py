"""The errors of ember.distributed (PyTorch's names): both are RuntimeErrors."""

from __future__ import annotations


class DistError(RuntimeError):
    """A distributed operation was called wrongly or could not complete (torch.distributed.DistError)."""


class DistBackendError(DistError):
    """The MPI engine failed, or another rank failed, died or left while this one waited on it.

    `failed_rank` names the rank that failed first (None when the engine itself failed).
    """

    def __init__(self, message: str, failed_rank: int | None = None) -> None:
        super().__init__(message)
        self.failed_rank = failed_rank
