"""Distance layers: CosineSimilarity and PairwiseDistance, nn.functional's with their settings fixed."""

from __future__ import annotations

from ember.nn import functional as F
from ember.nn.modules.module import Module
from ember.tensor import Tensor


class CosineSimilarity(Module):
    """The cosine of the angle between x1 and x2 along `dim` (each norm at least eps)."""

    def __init__(self, dim: int = 1, eps: float = 1e-8) -> None:
        super().__init__()
        self.dim, self.eps = dim, eps

    def forward(self, x1: Tensor, x2: Tensor) -> Tensor:
        return F.cosine_similarity(x1, x2, self.dim, self.eps)


class PairwiseDistance(Module):
    """||x1 - x2 + eps||_p along the last dim."""

    def __init__(self, p: float = 2.0, eps: float = 1e-6, keepdim: bool = False) -> None:
        super().__init__()
        self.norm, self.eps, self.keepdim = p, eps, keepdim

    def forward(self, x1: Tensor, x2: Tensor) -> Tensor:
        return F.pairwise_distance(x1, x2, self.norm, self.eps, self.keepdim)
