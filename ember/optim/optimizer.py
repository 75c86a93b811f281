"""`Optimizer`: the base class of every optimizer (parameter groups, per-parameter state, state dicts)."""

from __future__ import annotations

import functools
import inspect
import warnings
from collections import defaultdict
from collections.abc import Callable, Iterable
from copy import deepcopy
from itertools import chain
from typing import Any

from ember import dispatch, ops
from ember.autograd.grad_mode import enable_grad, no_grad
from ember.autograd.zero_grad import zero_grads
from ember.creation import tensor
from ember.dtypes import float32, float64, get_default_dtype
from ember.optim import implementation
from ember.tensor import Tensor


class _Required:
    """Marker for a hyperparameter that has no default and must be given per group."""

    def __repr__(self) -> str:
        return "<required parameter>"


required = _Required()

# Sets are refused (PyTorch accepts them at the top level): their order, and so the parameter
# indices of a state dict, changes between runs.
_SET_MESSAGE = ("optimizer parameters need to be organized in ordered collections, but the ordering of "
                "tensors in sets changes between runs; use a list instead")


ParamsT = Iterable[Tensor] | Iterable[dict[str, Any]]  # what an optimizer optimizes (PyTorch's name)


class Optimizer:
    """Base class of all optimizers, with PyTorch's interface.

    `params` is an iterable of tensors (or of `(name, tensor)` pairs), or of dicts that each
    define a parameter group; a group's own options override `defaults`. A subclass says what is its
    own and the base class does the rest: its options (the constructor's arguments, `defaults_from`), the
    ones that must not be negative (`_nonnegative`; `_check_options` adds other rules, and `betas` are
    checked wherever they appear), its per-parameter state (`_state`, `_optional_state`, `_new_state`) and
    its update, PyTorch's functional form (`_functional`), which `step` calls under `ember.no_grad()` with
    the state lists and the group's options. An optimizer with another kind of step overrides `step`.
    """

    _fused_kernel = False  # whether fused=True has a compiled update to run (optim/fused.py)
    _nonnegative: tuple[str, ...] = ()  # options that must be >= 0
    # The state made for a parameter at its first step with a gradient, in PyTorch's order: a step count for
    # "step", zeros like the parameter for the rest (unless `_new_state` says otherwise); and the state made
    # only while an option is on (name -> option), such as Adam's max_exp_avg_sq with amsgrad.
    _state: tuple[str, ...] = ()
    _optional_state: dict[str, str] = {}
    # The update of a group, PyTorch's functional form: (params, grads, state lists by `_argument` name, options
    # by keyword); a staticmethod. None: the subclass overrides `_update` or `step`.
    _functional = None

    def __init__(self, params: ParamsT, defaults: dict[str, Any]) -> None:
        self._check_options(defaults)
        implementation.check(type(self).__name__, defaults, self._fused_kernel)
        self.defaults = defaults
        self.state: defaultdict[Tensor, dict[str, Any]] = defaultdict(dict)
        self.param_groups: list[dict[str, Any]] = []
        self._step_count = 0
        self._state_version = 0  # bumped when groups or state are replaced: compiled steps retrace
        if isinstance(params, Tensor):
            raise TypeError(
                f"{type(self).__name__}: params should be an iterable of Tensors or dicts, but got a Tensor"
            )
        if isinstance(params, (set, frozenset)):
            raise TypeError(_SET_MESSAGE)
        groups = list(params)
        if not groups:
            raise ValueError(f"{type(self).__name__}: optimizer got an empty parameter list")
        if not isinstance(groups[0], dict):
            groups = [{"params": groups}]
        for group in groups:
            self.add_param_group(group)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        step = cls.__dict__.get("step")
        if step is not None and not getattr(step, "_counted", False):
            cls.step = _counted(step)

    # --- hyperparameters -----------------------------------------------------------------
    def _check_options(self, options: dict[str, Any]) -> None:
        """Raise ValueError for an invalid hyperparameter (subclasses extend this)."""
        self._require_nonneg(options, *self._nonnegative)
        betas = options.get("betas")
        if betas is not None:
            if len(betas) != 2:
                raise self._invalid("betas", betas, "a pair (beta1, beta2)")
            for i, beta in enumerate(betas):
                if not 0.0 <= beta < 1.0:
                    raise self._invalid(f"beta parameter at index {i}", beta, "0 <= beta < 1")

    def _invalid(self, what: str, value: Any, expected: str) -> ValueError:
        return ValueError(f"{type(self).__name__}: invalid {what}: {value} (expected {expected})")

    def _require_nonneg(self, options: dict[str, Any], *names: str) -> None:
        labels = {"lr": "learning rate", "eps": "epsilon value"}
        for name in names:
            if name in options and not isinstance(options[name], _Required) and not options[name] >= 0.0:
                raise self._invalid(labels.get(name, f"{name} value"), options[name], f"{name} >= 0")

    # --- groups ----------------------------------------------------------------------------
    def add_param_group(self, param_group: dict[str, Any]) -> None:
        """Add a parameter group (a dict with 'params' and optional per-group options)."""
        if not isinstance(param_group, dict):
            raise TypeError(f"param_group must be a dict, but got {type(param_group).__name__}")
        params = param_group["params"]
        if isinstance(params, Tensor):
            params = [params]
        elif isinstance(params, (set, frozenset)):
            raise TypeError(_SET_MESSAGE)
        else:
            params = list(params)
        names = [p[0] for p in params if isinstance(p, tuple)]
        params = [p[1] if isinstance(p, tuple) else p for p in params]
        if names and len(names) != len(params):
            raise ValueError("all optimizer params should be with/without names; some param names are missing")
        for p in params:
            if not isinstance(p, Tensor):
                raise TypeError(f"optimizer can only optimize Tensors, but one of the params is {type(p).__name__}")
            if not (p.is_leaf or getattr(p, "retains_grad", False)):
                raise ValueError("can't optimize a non-leaf Tensor")
        group = dict(param_group)
        group["params"] = params
        if names:
            group["param_names"] = names
        for name, default in self.defaults.items():
            if default is required and name not in group:
                raise ValueError(f"parameter group didn't specify a value of required optimization parameter {name}")
            group.setdefault(name, default)
        self._check_options(group)
        implementation.check(type(self).__name__, group, self._fused_kernel)
        if len({id(p) for p in params}) != len(params):
            warnings.warn("optimizer contains a parameter group with duplicate parameters", stacklevel=3)
        seen = {id(p) for g in self.param_groups for p in g["params"]}
        if any(id(p) in seen for p in params):
            raise ValueError("some parameters appear in more than one parameter group")
        if any(("param_names" in g) != bool(names) for g in self.param_groups):
            raise ValueError("all optimizer param groups should be with/without names")
        # The caller's dict is updated too, as in PyTorch, so it reflects the defaults filled in.
        param_group.update(group)
        self.param_groups.append(param_group)
        self._state_version = getattr(self, "_state_version", 0) + 1

    # --- gradients -------------------------------------------------------------------------
    def zero_grad(self, set_to_none: bool = True) -> None:
        """Reset the gradients of all optimized tensors (to None by default, else to zeros)."""
        zero_grads(chain.from_iterable(group["params"] for group in self.param_groups), set_to_none)

    def step(self, closure: Callable[[], Any] | None = None) -> Any:
        """Perform one optimization step; `closure` re-evaluates the model and returns the loss."""
        loss = self._eval_closure(closure)
        with no_grad():
            for index, group in enumerate(self.param_groups):
                # State is made eagerly even inside ember.jit: the trace captures it like a parameter,
                # so the first trace of a training step is already its steady state.
                with dispatch.outside_trace():
                    self._init_group(group)
                params = [p for p in group["params"] if p.grad is not None]
                tracer = dispatch.current_tracer()
                if tracer is None:
                    self._update(group, params, group)
                    continue
                tracer.guard(functools.partial(_structure, self, index))
                for device, on_device in _by_device(params):
                    self._update(group, on_device, hyperparameters(self, index, device))
        return loss

    def _init_group(self, group: dict[str, Any]) -> None:
        """Create the missing state of the group's parameters that have gradients."""
        for p in group["params"]:
            if p.grad is not None:
                self._init_state(p, group)

    def _init_state(self, param: Tensor, group: dict[str, Any]) -> None:
        """Create the state `param` lacks: `_state`, and the `_optional_state` whose option is on."""
        state = self.state[param]
        for name in self._state:
            if name not in state:
                state[name] = self._new_state(name, param, group)
        for name, option in self._optional_state.items():
            if group[option] and name not in state:
                state[name] = self._new_state(name, param, group)

    def _new_state(self, name: str, param: Tensor, group: dict[str, Any]) -> Tensor:
        """A parameter's fresh state `name`: a step count for "step", else zeros like the parameter."""
        return _step_counter(param) if name == "step" else ops.zeros_like(param)

    def _update(self, group: dict[str, Any], params: list[Tensor], hp: dict[str, Any]) -> None:
        """Update `params` (a group's parameters that have gradients) by `_functional`; `hp` holds the group's
        options as numbers, or under ember.jit as 0-d tensors on the parameters' device (`hyperparameters`)."""
        if self._functional is None:
            raise NotImplementedError(f"{type(self).__name__} implements neither step(), _update() nor _functional")
        states = [self.state[p] for p in params]
        lists = {_argument(name): [s.get(name) for s in states] for name in (*self._state, *self._optional_state)}
        self._functional(params, [p.grad for p in params], **lists, **_keyword_options(self._functional, hp))

    @staticmethod
    def _eval_closure(closure: Callable[[], Any] | None) -> Any:
        if closure is None:
            return None
        with enable_grad():
            return closure()

    # --- state dicts -----------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """The optimizer state: {'state': {index: {...}}, 'param_groups': [{..., 'params': [index, ...]}]}.

        As in PyTorch, the state tensors are referenced, not copied; `load_state_dict` copies them.
        """
        index: dict[int, int] = {}
        start = 0

        def pack(group: dict[str, Any]) -> dict[str, Any]:
            nonlocal start
            packed = {k: v for k, v in group.items() if k != "params"}
            for i, p in enumerate(group["params"], start):
                index.setdefault(id(p), i)
            packed["params"] = [index[id(p)] for p in group["params"]]
            start += len(packed["params"])
            return packed

        groups = [pack(g) for g in self.param_groups]
        state = {(index[id(k)] if isinstance(k, Tensor) else k): v for k, v in self.state.items()}
        return {"state": state, "param_groups": groups}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Load a state from `state_dict()`; parameters are matched by position in the groups.

        Unlike PyTorch, state tensors are always copied, so the loaded optimizer never shares
        buffers with the one that produced the dict.
        """
        groups = self.param_groups
        saved_groups = deepcopy(state_dict["param_groups"])
        if len(groups) != len(saved_groups):
            raise ValueError("loaded state dict has a different number of parameter groups")
        for g, sg in zip(groups, saved_groups):
            if len(g["params"]) != len(sg["params"]):
                raise ValueError(
                    "loaded state dict contains a parameter group that doesn't match the size of optimizer's group"
                )
        id_map = dict(zip(chain.from_iterable(g["params"] for g in saved_groups),
                          chain.from_iterable(g["params"] for g in groups)))

        def cast(param: Tensor, value: Any, key: Any = None) -> Any:
            if isinstance(value, Tensor):
                # `step` keeps its own dtype; every other floating state follows the parameter.
                if key != "step" and param.is_floating_point() and value.is_floating_point():
                    value = value.to(param.dtype)
                return value.to(param.device).clone()
            if isinstance(value, dict):
                return {k: cast(param, v, k) for k, v in value.items()}
            if isinstance(value, (list, tuple)):
                return type(value)(cast(param, v) for v in value)
            return deepcopy(value)

        state: defaultdict[Any, dict[str, Any]] = defaultdict(dict)
        for k, v in state_dict["state"].items():
            if k in id_map:
                param = id_map[k]
                state[param] = cast(param, v)
            else:
                state[k] = v

        def update_group(group: dict[str, Any], new_group: dict[str, Any]) -> dict[str, Any]:
            new_group["params"] = group["params"]
            if "param_names" in group and "param_names" not in new_group:
                new_group["param_names"] = group["param_names"]
            return new_group

        self.__setstate__({"state": state, "param_groups": [update_group(g, ng) for g, ng in zip(groups, saved_groups)]})

    def __getstate__(self) -> dict[str, Any]:
        return {"defaults": self.defaults, "state": self.state, "param_groups": self.param_groups}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self.__dict__.setdefault("_step_count", 0)
        self._state_version = self.__dict__.get("_state_version", 0) + 1

    def __repr__(self) -> str:
        lines = [f"{type(self).__name__} ("]
        for i, group in enumerate(self.param_groups):
            lines.append(f"Parameter Group {i}")
            lines.extend(f"    {k}: {group[k]}" for k in sorted(group) if k not in ("params", "param_names"))
        lines.append(")")
        return "\n".join(lines)


def defaults_from(arguments: dict[str, Any]) -> dict[str, Any]:
    """An optimizer's defaults from its constructor's arguments (`locals()` first thing in `__init__`): all but
    `self` and `params`, with `betas` as a tuple of floats. So a constructor's signature is the one list of its
    options, with PyTorch's names, order and defaults (the implementation switches among them: those PyTorch's
    optimizer takes, optim/implementation.py)."""
    options = {k: v for k, v in arguments.items() if k not in ("self", "params", "__class__")}
    if "betas" in options:
        options["betas"] = tuple(float(b) for b in options["betas"])
    return options


def _argument(state: str) -> str:
    """The functional form's argument taking the list of a state, by PyTorch's names: `exp_avgs` for `exp_avg`,
    `state_steps` and `state_sums` for `step` and `sum`."""
    return f"state_{state}s" if state in ("step", "sum") else f"{state}s"


@functools.cache
def _keywords(functional) -> tuple[str, ...]:
    return tuple(name for name, p in inspect.signature(functional).parameters.items() if p.kind is p.KEYWORD_ONLY)


def _keyword_options(functional, options: dict[str, Any]) -> dict[str, Any]:
    """The functional form's keyword arguments from the group's options of the same names (`beta1` and `beta2`
    from `betas`); one a group lacks (a switch an old state dict did not have) keeps its default."""
    found = {}
    for name in _keywords(functional):
        if name in options:
            found[name] = options[name]
        elif name in ("beta1", "beta2") and "betas" in options:
            found[name] = options["betas"][0 if name == "beta1" else 1]
    return found


def _counted(step):
    """Wrap an optimizer's step so it counts its calls (schedulers read the count to warn when they
    are stepped before the optimizer). Under ember.jit the compiled program counts each run."""

    @functools.wraps(step)
    def counted_step(self, *args, **kwargs):
        tracer = dispatch.current_tracer()
        if tracer is None:
            self._step_count += 1
        else:
            tracer.on_run(functools.partial(_count_step, self))
        return step(self, *args, **kwargs)

    counted_step._counted = True
    return counted_step


def _count_step(optimizer) -> None:
    optimizer._step_count += 1


Optimizer.step = _counted(Optimizer.step)


# --- hyperparameters under ember.jit ----------------------------------------------------------
def _is_number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _structure(optimizer, index: int) -> tuple:
    """What decides the shape of a group's update besides the zero-ness of options (`_nonzero`):
    booleans and other non-numbers, which state each parameter has, and the optimizer's state
    version (bumped when groups or state are replaced)."""
    group = optimizer.param_groups[index]
    state = optimizer.state
    parts = [optimizer._state_version, len(optimizer.param_groups),
             tuple((id(p), tuple(state[p]) if p in state else ()) for p in group["params"])]
    for k, v in group.items():
        if k not in ("params", "param_names") and not _is_number(v) and not (
                isinstance(v, tuple) and all(_is_number(x) for x in v)):
            parts.append((k, v))
    return tuple(parts)


def _read_option(optimizer, index: int, key: str, position: int | None = None):
    value = optimizer.param_groups[index][key]
    return value if position is None else value[position]


def _by_device(params: list[Tensor]) -> list:
    """(device, params on it) pairs, in order of first appearance."""
    groups: dict = {}
    for p in params:
        groups.setdefault(p._device, []).append(p)
    return list(groups.items())


def hyperparameters(optimizer: Optimizer, index: int, device) -> dict[str, Any]:
    """Group `index`'s options as a traced update reads them (ember.jit).

    Every number (and every number in a tuple, such as Adam's betas) becomes a 0-d float64 graph
    input on `device`, read from the group at every call, so schedulers and hand-made changes take
    effect in the compiled step. The options that decide the update's structure are guarded
    instead (see `_structure`): changing one retraces.
    """
    tracer = dispatch.current_tracer()
    group = optimizer.param_groups[index]
    hp: dict[str, Any] = {}
    for k, v in group.items():
        if k in ("params", "param_names"):
            continue
        if _is_number(v):
            hp[k] = tracer.scalar_input(functools.partial(_read_option, optimizer, index, k), device=device)
        elif isinstance(v, tuple) and all(_is_number(x) for x in v):
            hp[k] = tuple(tracer.scalar_input(functools.partial(_read_option, optimizer, index, k, i), device=device)
                          for i in range(len(v)))
        else:
            hp[k] = v
    return hp


def _nonzero(value) -> bool:
    """Whether an option is non-zero (a term of the update is present). Under ember.jit the answer
    becomes a guard of the compiled step: it is reused only while the option stays (non-)zero."""
    read = getattr(value, "trace_read", None)
    if read is None:
        return value != 0
    return dispatch.current_tracer().guard(functools.partial(_read_nonzero, read), key=("nonzero", read))


def _read_nonzero(read) -> bool:
    return read() != 0


def _step_value(step: Tensor):
    """A step count for scalar arithmetic: a Python float eagerly (as PyTorch); a float64 tensor in a trace."""
    return step.item() if dispatch.current_tracer() is None else step.to(float64)


def _sqrt(x):
    """Square root of a Python float (Python's own, as PyTorch's `** 0.5`) or of a 0-d tensor."""
    return x**0.5 if isinstance(x, float) else x.sqrt()


def _effective_grad(param: Tensor, grad: Tensor, weight_decay, maximize: bool, decay: bool | None = None) -> Tensor:
    """The gradient an update uses: negated for `maximize`, plus `weight_decay * param` (L2 penalty) where `decay`
    (None: where weight_decay is non-zero, a guard under ember.jit).

    Returns `grad` itself when neither applies, else one fresh tensor the caller may overwrite.
    """
    if _nonzero(weight_decay) if decay is None else decay:
        # weight_decay * param, then +/- grad: the same roundings as PyTorch's grad.add(param, alpha=wd).
        out = param.mul(weight_decay)
        return out.sub_(grad) if maximize else out.add_(grad)
    return -grad if maximize else grad


def _decayed_grad(param: Tensor, grad: Tensor, lr, weight_decay, maximize: bool, decoupled: bool,
                  decay: bool | None = None) -> Tensor:
    """`_effective_grad`, or with `decoupled` weight decay the parameter decayed in place instead (p *= 1 - lr *
    weight_decay, as AdamW) and the gradient only negated for `maximize`; `decay` as there."""
    if decay is None:
        decay = _nonzero(weight_decay)
    if decay and decoupled:
        param.mul_(1 - lr * weight_decay)
        return -grad if maximize else grad
    return _effective_grad(param, grad, weight_decay, maximize, decay=decay)


def _step_counter(param: Tensor, value: float = 0.0) -> Tensor:
    """A fresh step count for `param` (or other 0-d state of its dtype holding `value`): float32 unless float64
    is the default (as PyTorch), on the parameter's device (where a compiled step reads it)."""
    return tensor(float(value), dtype=float64 if get_default_dtype() == float64 else float32, device=param.device)
