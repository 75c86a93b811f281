"""Tensor layouts, PyTorch's `torch.layout` values: `strided` (dense) and `sparse_coo`."""

from __future__ import annotations


class layout:
    """How a tensor's values are stored (torch.layout)."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"ember.{self.name}"

    def __reduce__(self):
        return self.name  # pickled as the module-level singleton


strided = layout("strided")
sparse_coo = layout("sparse_coo")
