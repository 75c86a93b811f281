"""`ember.compile`: PyTorch's `torch.compile` entry point, compiling functions and modules through `ember.jit`."""

from __future__ import annotations

from ember.graph.jit import DEFAULT_CACHE_SIZE, JitFunction
from ember.nn.modules.module import Module

_MODES = (None, "default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")
_BACKENDS = {"inductor": None, "eager": False, "aot_eager": False}  # backend -> ember.jit's `passes`


def compile(model=None, *, fullgraph: bool = False, dynamic: bool | None = None, backend="inductor",  # noqa: A001
            mode: str | None = None, options: dict | None = None, disable: bool = False):
    """Compile a function, or a module's forward, with `ember.jit` (PyTorch's `torch.compile` signature).

    Usable as `ember.compile(fn)`, `ember.compile(model)` (an `OptimizedModule` holding the model as
    `_orig_mod`, as PyTorch's) and as a decorator with or without arguments. What the options do here:

    - `backend`: "inductor" (the default) runs ember.jit's optimizing passes (fusion into generated
      kernels, constant folding, memory planning); "eager" and "aot_eager" trace into a graph and run
      it without the optimizing passes.
    - `mode` ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs"): accepted;
      every mode compiles the same way (there is nothing to autotune and there are no CUDA graphs).
    - `dynamic`: accepted; programs are specialised to the arguments' shapes, and a new shape traces
      a new program (ember.jit keeps `cache_size` of them).
    - `fullgraph`: ember.jit has no graph breaks. With `fullgraph=False` (the default) a call whose
      Python control flow needs tensor values runs eagerly instead, where PyTorch would break the
      graph; with `fullgraph=True` it raises `ConcretizationError`, as PyTorch raises there.
    - `options`: accepted for PyTorch's signature; Ember's compiler has no such settings.
    - `disable=True` returns `model` itself.

    Compiled programs return plain values. A call whose results carry autograd history that the
    function does not backpropagate itself (a model's forward inside a training loop, followed by
    `loss.backward()`) therefore runs eagerly, so that backward works; inference (`no_grad`,
    `inference_mode`) and whole training steps (forward, backward and optimizer step in the function)
    run compiled.
    """
    if mode not in _MODES:
        raise ValueError(f"compile: unknown mode {mode!r}; expected one of {', '.join(repr(m) for m in _MODES)}")
    if backend not in _BACKENDS:
        raise ValueError(f"compile: unknown backend {backend!r}; Ember compiles with 'inductor' (ember.jit with its "
                         "optimizing passes), 'eager' or 'aot_eager' (ember.jit without them)")
    if options is not None and not isinstance(options, dict):
        raise TypeError(f"compile: options must be a dict, got {type(options).__name__}")
    settings = dict(fullgraph=bool(fullgraph), passes=_BACKENDS[backend])
    if model is None:
        return lambda m: _compile(m, disable, **settings)
    return _compile(model, disable, **settings)


def _compile(model, disable: bool, fullgraph: bool, passes):
    if disable:
        return model
    if isinstance(model, Module):
        return OptimizedModule(model, _jit(model.__call__, fullgraph, passes))
    if not callable(model):
        raise TypeError(f"compile: expected a function or an nn.Module, got {type(model).__name__}")
    return _jit(model, fullgraph, passes)


def _jit(fn, fullgraph: bool, passes) -> JitFunction:
    return JitFunction(fn, passes=passes, cache_size=DEFAULT_CACHE_SIZE, eager_fallback=not fullgraph)


class OptimizedModule(Module):
    """A module whose calls run `_orig_mod` compiled (PyTorch's wrapper of the same name).

    Parameters, buffers and the state dict are the original module's, under the `_orig_mod.` prefix
    as in PyTorch; other attributes are read from the original module.
    """

    def __init__(self, mod: Module, compiled: JitFunction) -> None:
        super().__init__()
        self._orig_mod = mod
        self.__dict__["_compiled_call"] = compiled

    def forward(self, *args, **kwargs):
        """The original module's call (with its hooks), compiled."""
        return self.__dict__["_compiled_call"](*args, **kwargs)

    def __getattr__(self, name: str):
        try:
            return super().__getattr__(name)
        except AttributeError:
            return getattr(super().__getattr__("_orig_mod"), name)
