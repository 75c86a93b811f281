"""Spectral normalisation (Miyato et al., 2018), PyTorch's hook-based `nn.utils.spectral_norm`: a weight is divided
by its largest singular value, estimated by power iteration on vectors u and v kept as buffers (one step per
training-mode forward, none in eval mode)."""

from __future__ import annotations

from ember import creation, ops
from ember.autograd import grad_mode
from ember.nn.utils.weight_norm import hook_key, remove_hook
from ember.tensor import Tensor


def _normalize(x: Tensor, eps: float) -> Tensor:
    return x / ops.clamp_min(ops.norm(x), eps)


class SpectralNorm:
    """The forward pre-hook spectral_norm registers: it sets module.<name> to <name>_orig / sigma."""

    def __init__(self, name: str = "weight", n_power_iterations: int = 1, dim: int = 0, eps: float = 1e-12) -> None:
        if n_power_iterations <= 0:
            raise ValueError(f"spectral_norm: n_power_iterations must be positive, got {n_power_iterations}")
        self.name, self.n_power_iterations, self.dim, self.eps = name, n_power_iterations, dim, eps

    def reshape_weight_to_matrix(self, weight: Tensor) -> Tensor:
        """The weight as a matrix of `dim`'s size rows."""
        if self.dim != 0:
            weight = weight.movedim(self.dim, 0)
        return weight.reshape(weight.shape[0], -1)

    def compute_weight(self, module, do_power_iteration: bool) -> Tensor:
        """<name>_orig / sigma, sigma = u . (W v), after the power iteration's steps updated u and v in place."""
        weight = getattr(module, self.name + "_orig")
        u, v = getattr(module, self.name + "_u"), getattr(module, self.name + "_v")
        mat = self.reshape_weight_to_matrix(weight)
        if do_power_iteration:
            with grad_mode.no_grad():
                for _ in range(self.n_power_iterations):
                    v.copy_(_normalize(ops.mv(mat.T, u), self.eps))
                    u.copy_(_normalize(ops.mv(mat, v), self.eps))
            u, v = u.clone(), v.clone()  # the gradient reads these values, not the buffers the next step changes
        return weight / ops.dot(u, ops.mv(mat, v))

    @staticmethod
    def apply(module, name: str, n_power_iterations: int, dim: int, eps: float) -> SpectralNorm:
        """Move module.<name> to <name>_orig, add the u and v buffers (random unit vectors) and register the hook."""
        if hook_key(module, SpectralNorm, name) is not None:
            raise RuntimeError(f"spectral_norm: {type(module).__name__}.{name} already has spectral norm")
        weight = module._parameters.get(name)
        if weight is None:
            raise ValueError(f"spectral_norm: {type(module).__name__} has no parameter {name!r}")
        fn = SpectralNorm(name, n_power_iterations, dim, eps)
        with grad_mode.no_grad():
            h, w = fn.reshape_weight_to_matrix(weight).shape
            u = _normalize(creation.randn(h, dtype=weight.dtype, device=weight.device), eps)
            v = _normalize(creation.randn(w, dtype=weight.dtype, device=weight.device), eps)
        del module._parameters[name]
        module.register_parameter(name + "_orig", weight)
        setattr(module, name, weight.detach())
        module.register_buffer(name + "_u", u)
        module.register_buffer(name + "_v", v)
        module.register_forward_pre_hook(fn)
        return fn

    def remove(self, module) -> None:
        """Make module.<name> a plain parameter again, holding the normalised weight."""
        from ember.nn.parameter import Parameter

        with grad_mode.no_grad():
            weight = self.compute_weight(module, do_power_iteration=False)
        delattr(module, self.name)
        del module._parameters[self.name + "_orig"]
        del module._buffers[self.name + "_u"]
        del module._buffers[self.name + "_v"]
        setattr(module, self.name, Parameter(weight.detach()))

    def __call__(self, module, inputs) -> None:
        setattr(module, self.name, self.compute_weight(module, do_power_iteration=module.training))


def spectral_norm(module, name: str = "weight", n_power_iterations: int = 1, eps: float = 1e-12, dim: int | None = None):
    """Divide module.<name> by its spectral norm at every forward (its input dim, dim 1, for transposed
    convolutions; dim 0 otherwise, unless given); returns the module."""
    if dim is None:
        dim = 1 if type(module).__name__.startswith("ConvTranspose") else 0
    SpectralNorm.apply(module, name, n_power_iterations, dim, eps)
    return module


def remove_spectral_norm(module, name: str = "weight"):
    """Undo spectral_norm: module.<name> a parameter again, holding the normalised weight; returns the module."""
    return remove_hook("remove_spectral_norm", module, SpectralNorm, name)
