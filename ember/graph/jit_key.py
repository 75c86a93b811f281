"""What an `ember.jit` cache entry is keyed on: the arguments' structure, the tensors' and arrays'
shapes and dtypes, Python values among the arguments, and the Python state the function reaches.

Arrays are inputs, never identities: a NumPy array argument is keyed by shape and dtype and fed at
every call, like a tensor. Every other argument is keyed by value, so it must be hashable.
"""

from __future__ import annotations

import dis
import functools
import weakref
from types import BuiltinFunctionType, CodeType, FunctionType, MethodType

import numpy as np

from ember import interpreter
from ember.autograd.grad_mode import is_grad_enabled
from ember.graph import module_structure
from ember.tensor import Tensor

# Python values a function may read from a module or a global and that are keyed by value.
_SCALARS = (bool, int, float, complex, str, bytes, type(None))
# ... and those keyed by identity: tensors a trace captures, functions it inlines.
_BY_IDENTITY = (Tensor, FunctionType, BuiltinFunctionType, MethodType, functools.partial)


class Static:
    """Marks an argument named in `static_argnums`: passed as it is and keyed by value."""

    __slots__ = ("value",)

    def __init__(self, value) -> None:
        self.value = value


class _Identity:
    """Keys a tensor passed as a static argument by identity (Tensor's == is elementwise)."""

    __slots__ = ("obj",)

    def __init__(self, obj) -> None:
        self.obj = obj

    def __hash__(self) -> int:
        return id(self.obj)

    def __eq__(self, other) -> bool:
        return type(other) is _Identity and other.obj is self.obj


def flatten(obj, leaves: list):
    """Structure of nested lists/tuples/dicts with tensors and arrays replaced by leaf positions."""
    if type(obj) is Static:
        return ("S", obj.value)
    if isinstance(obj, Tensor):
        leaves.append(obj)
        return ("T", len(leaves) - 1)
    if isinstance(obj, np.ndarray):
        leaves.append(obj)
        return ("A", len(leaves) - 1)
    if isinstance(obj, (list, tuple)):
        kind = "L" if isinstance(obj, list) else "U"
        return (kind, tuple(flatten(x, leaves) for x in obj))
    if isinstance(obj, dict):
        return ("D", tuple((k, flatten(v, leaves)) for k, v in obj.items()))
    return ("V", obj)


def unflatten(struct, leaves):
    """Rebuild the structure `flatten` described, with `leaves` in the leaf positions."""
    kind, payload = struct
    if kind in ("T", "A"):
        return leaves[payload]
    if kind == "L":
        return [unflatten(x, leaves) for x in payload]
    if kind == "U":
        return tuple(unflatten(x, leaves) for x in payload)
    if kind == "D":
        return {k: unflatten(v, leaves) for k, v in payload}
    return payload  # "V" and "S": the value itself


def _value_key(value, where: str):
    try:
        hash(value)
    except TypeError:
        raise TypeError(
            f"jit: {where} is a {type(value).__name__}, which is neither a tensor, a NumPy array nor "
            "hashable, so compiled programs cannot be keyed on it; pass tensors or arrays, or a hashable value"
        ) from None
    return value


def struct_key(struct, where: str = "an argument"):
    """A hashable key for a flattened structure (Python values by value)."""
    kind, payload = struct
    if kind in ("T", "A"):
        return struct
    if kind in ("L", "U"):
        return (kind, tuple(struct_key(x, where) for x in payload))
    if kind == "D":
        return (kind, tuple((k, struct_key(v, where)) for k, v in payload))
    if kind == "S" and isinstance(payload, Tensor):
        return ("S", _Identity(payload))
    return (kind, type(payload), _value_key(payload, where))


def leaf_key(x) -> tuple:
    """Shape, dtype, device and requires_grad of a tensor leaf; shape and dtype of an array leaf."""
    if isinstance(x, Tensor):
        return (tuple(x._data.shape), x._data.dtype.str, str(x._device), x._requires_grad)
    return (x.shape, x.dtype.str)


def _outside_key(value):
    """How a value read from a closure cell or a global is keyed: a Python scalar by value, a tensor (captured)
    or a function (inlined) by identity, held so that no new object takes its id while it is cached; None:
    not keyed."""
    if type(value) in _SCALARS:
        return value
    if isinstance(value, _BY_IDENTITY):
        return _Identity(value)
    return None


# Opcodes that read a name from the globals: LOAD_NAME in class bodies and module code, and its 3.12 form.
_GLOBAL_LOADS = frozenset({"LOAD_GLOBAL", "LOAD_NAME", "LOAD_FROM_DICT_OR_GLOBALS"})
_GLOBAL_READS: dict = {}  # id(code) -> (weakref to the code, its global_reads)


def _scan_global_reads(code: CodeType, names: dict) -> None:
    for ins in dis.get_instructions(code):
        if ins.opname in _GLOBAL_LOADS:
            names[ins.argval] = None
    for const in code.co_consts:
        if isinstance(const, CodeType):
            _scan_global_reads(const, names)


def global_reads(code: CodeType) -> tuple:
    """The global names a code object reads, its nested code included (comprehensions, generator expressions,
    lambdas, inner functions), in first-read order. Not `co_names`, which also lists attribute names: `opt.step()`
    does not read a global `step`."""
    held = _GLOBAL_READS.get(id(code))
    if held is not None and held[0]() is code:
        return held[1]
    names: dict = {}
    _scan_global_reads(code, names)
    reads = tuple(names)
    key = id(code)
    _GLOBAL_READS[key] = (weakref.ref(code, lambda _, key=key: _GLOBAL_READS.pop(key, None)), reads)
    return reads


def reachable(fn, args) -> tuple[list, list]:
    """The nn.Modules a function reaches directly (bound self, closure cells, globals it or its nested code
    reads, arguments), and the (name, key) pairs of the scalars, tensors and functions it reads from its closure
    and globals (`_outside_key`)."""
    Module = module_structure.module_class()
    roots = list(args)
    scalars = []
    self_obj = getattr(fn, "__self__", None)
    if self_obj is not None:
        roots.append(self_obj)
    code = getattr(fn, "__code__", None)
    closure = getattr(fn, "__closure__", None) or ()
    for name, cell in zip(code.co_freevars if code is not None else (), closure):
        try:
            value = cell.cell_contents
        except ValueError:  # an empty cell
            continue
        roots.append(value)
        key = _outside_key(value)
        if key is not None:
            scalars.append((name, key))
    if code is not None:
        glob = getattr(fn, "__globals__", {})
        for name in global_reads(code):
            if name in glob:
                value = glob[name]
                roots.append(value)
                key = _outside_key(value)
                if key is not None:
                    scalars.append((name, key))
    return [r for r in roots if Module and isinstance(r, Module)], scalars


def _descendants(roots: list) -> list:
    """The roots and every module under them, each once, in traversal order."""
    modules: list = []
    seen: set = set()
    for r in roots:
        for m in r.modules():
            if id(m) not in seen:
                seen.add(id(m))
                modules.append(m)
    return modules


def module_keys(roots: list, cache: list | None = None) -> tuple:
    """module_key of every module under `roots`. `cache` (a one-item list a jitted function keeps) holds the keys
    last read; they still hold while no module's structure changed since and the same roots are reached
    (graph/module_structure.py), which skips reading 2-3 us per module on every call."""
    version = module_structure.version()  # read first: a change made while the keys are read makes them stale
    ids = tuple(map(id, roots))
    last = cache[0] if cache else None
    if last is not None and last[0] == version and last[1] == ids:
        return last[3]
    keys = tuple(module_key(m) for m in _descendants(roots))
    if cache is not None:
        cache[0] = (version, ids, roots, keys)  # the roots kept alive: no new object takes one's id meanwhile
    return keys


def module_key(m) -> tuple:
    """What of a module a traced program depends on besides its tensors' values: its class, its
    Python-scalar attributes (training, p, eps, momentum, ...), and which tensors, functions and children it
    holds.

    Tensors are captured by identity, so replacing a parameter, buffer, plain tensor attribute or child rebuilds
    the program; so does replacing a function attribute (`self.act = F.gelu`), which the trace inlined, or
    adding or removing a hook, which the trace ran (or did not).
    """
    attrs = []
    for k, v in m.__dict__.items():
        if type(v) in _SCALARS:
            attrs.append((k, v))
        elif isinstance(v, tuple) and all(type(x) in _SCALARS for x in v):  # tuples and Sizes (a shape)
            attrs.append((k, tuple(v)))
        elif isinstance(v, _BY_IDENTITY):
            attrs.append((k, _Identity(v)))  # held by the key: no new object takes its id while it is cached
    d = m.__dict__
    held = tuple(
        (k, id(v)) for store in ("_parameters", "_buffers", "_modules") for k, v in d.get(store, {}).items()
    )
    hooks = tuple((k, id(v)) for store in ("_forward_pre_hooks", "_forward_hooks") for k, v in d.get(store, {}).items())
    return (type(m), tuple(attrs), held, hooks)


_TENSOR_CALLS: dict = {}  # number of tensor arguments -> flatten's structure of a call passing only them


def signature(fn, args, kwargs, static_argnums, cache: list | None = None) -> tuple:
    """(key, structure, leaves) of one call: equal keys may share one compiled program (`cache`: see
    module_keys)."""
    if not kwargs and not static_argnums and all(type(a) is Tensor for a in args):
        leaves = list(args)  # the common call, f(x, y): its structure made once per number of tensors
        struct = _TENSOR_CALLS.get(len(args))
        if struct is None:
            struct = _TENSOR_CALLS[len(args)] = flatten((list(args), {}), [])
        skey = struct  # struct_key of tensor leaves, lists and dicts is the structure itself
    else:
        leaves = []
        if static_argnums:
            args = [Static(a) if i in static_argnums else a for i, a in enumerate(args)]
        struct = flatten((list(args), dict(kwargs)), leaves)
        skey = struct_key(struct)
    modules, scalars = reachable(fn, [a.value if type(a) is Static else a for a in args])
    key = (
        skey,
        tuple(leaf_key(x) for x in leaves),
        module_keys(modules, cache),
        tuple(scalars),
        is_grad_enabled(),
        interpreter.jit_keys(),  # e.g. autocast's dtype
    )
    return key, struct, leaves
