"""PyTorch's `nn.utils.parametrizations`: weight_norm and spectral_norm as parametrizations (nn.utils.parametrize), the
forms PyTorch recommends over the hook-based ones (weight_norm.py, spectral_norm.py)."""

from __future__ import annotations

from ember import creation, ops
from ember.autograd import grad_mode
from ember.nn.modules.module import Module
from ember.nn.utils import parametrize
from ember.nn.utils.weight_norm import norm_except_dim
from ember.tensor import Tensor


class _WeightNorm(Module):
    """weight = g * v / ||v|| (the norm over every dim but `dim`), from the originals (g, v)."""

    def __init__(self, dim: int | None = 0) -> None:
        super().__init__()
        self.dim = -1 if dim is None else dim

    def forward(self, weight_g: Tensor, weight_v: Tensor) -> Tensor:
        return weight_v * (weight_g / norm_except_dim(weight_v, 2, self.dim))

    def right_inverse(self, weight: Tensor) -> tuple:
        return norm_except_dim(weight, 2, self.dim), weight


def weight_norm(module: Module, name: str = "weight", dim: int | None = 0) -> Module:
    """Reparametrise module.<name> as g * v / ||v|| (originals parametrizations.<name>.original0 = g and original1
    = v); returns the module."""
    return parametrize.register_parametrization(module, name, _WeightNorm(dim), unsafe=True)


def _normalize(x: Tensor, eps: float) -> Tensor:
    return x / ops.clamp_min(ops.norm(x), eps)


class _SpectralNorm(Module):
    """weight / sigma, sigma its largest singular value estimated by power iteration on the buffers _u and _v (a step
    per training-mode read, fifteen when made); a 1-D weight is normalised instead."""

    def __init__(self, weight: Tensor, n_power_iterations: int = 1, dim: int = 0, eps: float = 1e-12) -> None:
        super().__init__()
        if n_power_iterations <= 0:
            raise ValueError(f"spectral_norm: n_power_iterations must be positive, got {n_power_iterations}")
        self.dim = dim if dim >= 0 else dim + weight.ndim
        self.eps = eps
        if weight.ndim > 1:
            self.n_power_iterations = n_power_iterations
            mat = self._matrix(weight)
            h, w = mat.shape
            self.register_buffer("_u", _normalize(creation.randn(h, dtype=weight.dtype, device=weight.device), eps))
            self.register_buffer("_v", _normalize(creation.randn(w, dtype=weight.dtype, device=weight.device), eps))
            self._power_method(mat, 15)

    def _matrix(self, weight: Tensor) -> Tensor:
        if self.dim != 0:
            weight = weight.movedim(self.dim, 0)
        return weight.reshape(weight.shape[0], -1)

    def _power_method(self, mat: Tensor, iterations: int) -> None:
        with grad_mode.no_grad():
            for _ in range(iterations):
                self._u.copy_(_normalize(ops.mv(mat, self._v), self.eps))
                self._v.copy_(_normalize(ops.mv(mat.T, self._u), self.eps))

    def forward(self, weight: Tensor) -> Tensor:
        if weight.ndim == 1:
            return weight / ops.clamp_min(ops.norm(weight), self.eps)
        mat = self._matrix(weight)
        if self.training:
            self._power_method(mat, self.n_power_iterations)
        u, v = self._u.clone(), self._v.clone()  # the gradient reads these values, not the buffers
        return weight / ops.dot(u, ops.mv(mat, v))

    def right_inverse(self, value: Tensor) -> Tensor:
        return value


def spectral_norm(module: Module, name: str = "weight", n_power_iterations: int = 1, eps: float = 1e-12,
                  dim: int | None = None) -> Module:
    """Divide module.<name> by its spectral norm at every read (dim 1 for transposed convolutions, else 0, unless
    given); returns the module."""
    weight = getattr(module, name, None)
    if not isinstance(weight, Tensor):
        raise ValueError(f"spectral_norm: {type(module).__name__} has no parameter or buffer {name!r}")
    if dim is None:
        dim = 1 if type(module).__name__.startswith("ConvTranspose") else 0
    return parametrize.register_parametrization(module, name, _SpectralNorm(weight, n_power_iterations, dim, eps))
