"""CrossMapLRN2d: PyTorch's legacy local response normalisation across channels (see nn._cross_map_lrn)."""

from __future__ import annotations

from ember.nn._cross_map_lrn import cross_map_lrn2d
from ember.nn.modules.module import Module
from ember.tensor import Tensor


class CrossMapLRN2d(Module):
    """x / (k + alpha / size * sum of x**2 over nearby channels)**beta for (N, C, H, W) input, with the legacy
    Lua Torch windows that torch.nn.CrossMapLRN2d keeps (nn.LocalResponseNorm is the usual form)."""

    def __init__(self, size: int, alpha: float = 1e-4, beta: float = 0.75, k: float = 1) -> None:
        super().__init__()
        self.size, self.alpha, self.beta, self.k = size, alpha, beta, k

    def forward(self, input: Tensor) -> Tensor:
        return cross_map_lrn2d(input, self.size, self.alpha, self.beta, self.k)

    def extra_repr(self) -> str:
        return f"{self.size}, alpha={self.alpha}, beta={self.beta}, k={self.k}"
