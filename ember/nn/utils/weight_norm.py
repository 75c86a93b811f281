"""Weight normalisation (Salimans and Kingma, 2016), PyTorch's hook-based `nn.utils.weight_norm`: a parameter w is
replaced by a magnitude g and a direction v, w = g * v / ||v||, recomputed before every forward."""

from __future__ import annotations

from ember import ops
from ember.nn.parameter import Parameter
from ember.tensor import Tensor


def norm_except_dim(v: Tensor, pow: float = 2, dim: int = 0) -> Tensor:
    """The p-norm of v over every dim but `dim` (kept, the others of size 1); over all of v for dim -1."""
    if dim == -1:
        return ops.norm(v, pow)
    dim = dim % v.ndim
    others = tuple(d for d in range(v.ndim) if d != dim)
    return ops.norm(v, pow, others, True)


class WeightNorm:
    """The forward pre-hook weight_norm registers: it sets module.<name> from <name>_g and <name>_v."""

    def __init__(self, name: str, dim: int) -> None:
        self.name = name
        self.dim = dim

    def compute_weight(self, module) -> Tensor:
        """g * v / ||v|| from the module's parameters."""
        g, v = getattr(module, self.name + "_g"), getattr(module, self.name + "_v")
        return v * (g / norm_except_dim(v, 2, self.dim))

    @staticmethod
    def apply(module, name: str, dim: int) -> WeightNorm:
        """Replace module.<name> by <name>_g and <name>_v and register the hook."""
        if hook_key(module, WeightNorm, name) is not None:
            raise RuntimeError(f"weight_norm: {type(module).__name__}.{name} already has weight norm")
        weight = module._parameters.get(name)
        if weight is None:
            raise ValueError(f"weight_norm: {type(module).__name__} has no parameter {name!r}")
        fn = WeightNorm(name, -1 if dim is None else dim)
        del module._parameters[name]
        module.register_parameter(name + "_g", Parameter(norm_except_dim(weight, 2, fn.dim).detach()))
        module.register_parameter(name + "_v", Parameter(weight.detach()))
        setattr(module, name, fn.compute_weight(module))
        module.register_forward_pre_hook(fn)
        return fn

    def remove(self, module) -> None:
        """Make module.<name> a plain parameter again, holding the current weight."""
        weight = self.compute_weight(module).detach()
        delattr(module, self.name)
        del module._parameters[self.name + "_g"]
        del module._parameters[self.name + "_v"]
        setattr(module, self.name, Parameter(weight))

    def __call__(self, module, inputs) -> None:
        setattr(module, self.name, self.compute_weight(module))


def weight_norm(module, name: str = "weight", dim: int | None = 0):
    """Reparametrise module.<name> as <name>_g * <name>_v / ||<name>_v|| (the norm over every dim but `dim`; over
    the whole tensor for dim None); returns the module."""
    WeightNorm.apply(module, name, dim)
    return module


def hook_key(module, kind: type, name: str):
    """The key of the forward pre-hook of type `kind` (WeightNorm, SpectralNorm) on module.<name>, or None."""
    for key, hook in module._forward_pre_hooks.items():
        if isinstance(hook, kind) and hook.name == name:
            return key
    return None


def remove_hook(op: str, module, kind: type, name: str):
    """Undo the reparametrisation of type `kind` on module.<name> (`op` names the call in its error)."""
    key = hook_key(module, kind, name)
    if key is None:
        raise ValueError(f"{op}: {op.removeprefix('remove_')} of {name!r} not found in {type(module).__name__}")
    module._forward_pre_hooks.pop(key).remove(module)
    return module


def remove_weight_norm(module, name: str = "weight"):
    """Undo weight_norm: module.<name> a parameter again, with its current value; returns the module."""
    return remove_hook("remove_weight_norm", module, WeightNorm, name)
