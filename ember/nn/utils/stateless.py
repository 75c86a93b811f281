"""`functional_call`: a module run with other tensors in place of its parameters and buffers (PyTorch's
`torch.func.functional_call`), for meta-learning, ensembles and gradients with respect to parameters as plain
arguments (with ember.grad); the module's own tensors are back in place afterwards, whatever the call raised."""

from __future__ import annotations

from ember.nn.modules.module import Module


def _owner(module: Module, dotted: str) -> tuple:
    *path, attr = dotted.split(".")
    for name in path:
        child = module._modules.get(name)
        if child is None:
            raise ValueError(f"functional_call: {type(module).__name__} has no submodule {name!r} (in {dotted!r})")
        module = child
    if attr not in module._parameters and attr not in module._buffers:
        raise ValueError(f"functional_call: {type(module).__name__} has no parameter or buffer {attr!r} (in "
                         f"{dotted!r})")
    return module, attr


def functional_call(module: Module, parameters_and_buffers, args=(), kwargs=None, *, tie_weights: bool = True,
                    strict: bool = False):
    """module(*args, **kwargs) with each named tensor of `parameters_and_buffers` (a dict, or a tuple of dicts) in
    place of the module's own; with strict, every parameter and buffer must be given."""
    dicts = parameters_and_buffers if isinstance(parameters_and_buffers, (tuple, list)) else (parameters_and_buffers,)
    given: dict = {}
    for d in dicts:
        for name, value in d.items():
            if name in given:
                raise ValueError(f"functional_call: {name!r} is given more than once")
            given[name] = value
    if strict:
        names = {n for n, _ in module.named_parameters(remove_duplicate=False)}
        names |= {n for n, _ in module.named_buffers(remove_duplicate=False)}
        missing = sorted(names - set(given))
        if missing:
            raise ValueError(f"functional_call: strict, and no tensor was given for {', '.join(missing)}")
    if tie_weights:  # a tensor shared by several names takes the value given for any of them
        shared: dict = {}
        for name, tensor in list(module.named_parameters(remove_duplicate=False)) + list(
                module.named_buffers(remove_duplicate=False)):
            shared.setdefault(id(tensor), []).append(name)
        for names in shared.values():
            values = [given[n] for n in names if n in given]
            if values:
                for n in names:
                    given.setdefault(n, values[0])
    saved = []
    try:
        for name, value in given.items():
            owner, attr = _owner(module, name)
            store = owner._parameters if attr in owner._parameters else owner._buffers
            saved.append((store, attr, store[attr]))
            store[attr] = value
        return module(*(args if isinstance(args, tuple) else (args,)), **(kwargs or {}))
    finally:
        for store, attr, original in reversed(saved):
            store[attr] = original
