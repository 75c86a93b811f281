"""One compiled pass per parameter for an optimizer update, generated from the update's own rule (eager CPU, Numba).

An update rule (`adam_update` in adam.py, `sgd_update` in sgd.py) is written once, in Ember ops on one
parameter and its state, updated in place. Run as tensor ops it is the unfused update, and under ember.jit
the traced one. Written that way an Adam step is about a dozen passes over every parameter-sized array, each
op with its own dispatch and temporary; `FusedUpdate` instead traces the rule once per structure (its boolean
and None options), dtype and set of state tensors into the graph IR, lowers lerp/addcmul/addcdiv to
elementary ops, makes the whole program one fused region and renders it with the Numba renderer of fused
regions: one loop that reads each array once and writes each updated one once. Every value is computed as the
ops compute it (each number rounded to the array's dtype, as NumPy's weak scalars are, and arithmetic between
numbers in float64, as Python's), so the results are the tensor ops' bit for bit. The pass runs where that
holds: eager NumPy float32/float64 data of one dtype and shape, contiguous and writable, options that are
Python numbers; elsewhere (jit traces, other devices and dtypes) the rule runs as tensor ops.
"""

from __future__ import annotations

import functools
import operator

import numpy as np

from ember import dispatch
from ember.autograd.grad_mode import no_grad
from ember.device import as_device
from ember.kernels.background import NotCompiledYet, defer, serves
from ember.kernels.elementwise import FUSED, run_pass
from ember.kernels.numba_loader import compile_source, compiled_allowed
from ember.kernels.selection import compiled_or_numpy, listening, note
from ember.optim import implementation
from ember.tensor import Tensor

_NUMBERS = (int, float)
_TRACE_SHAPE = (2,)  # the rule is traced on tensors of this shape; the kernel loops over any size


def eager() -> bool:
    """Whether an update runs eagerly here (the compiled pass's first condition; not under ember.jit's trace)."""
    return dispatch.eager_now() or dispatch.profiled_eager() is not None


def compiled_available() -> bool:
    """Whether the compiled passes can run at all: Numba installed and EMBER_FUSION_BACKEND not `numpy`."""
    return compiled_allowed()


def _flat_data(tensors):
    """The tensors' data as flat arrays of one dtype and shape (None in the place of a None tensor) and a bitmask
    of the None places; None where the compiled pass cannot run them (`unfused_reason` says why). Lean: it runs
    for every parameter at every step."""
    first = tensors[0]._data
    device, dtype, shape = tensors[0]._device, first.dtype, first.shape
    arrays = []
    absent = 0
    for t in tensors:
        if t is None:
            absent |= 1 << len(arrays)
            arrays.append(None)
            continue
        a = t._data
        # carray: C-contiguous, aligned and writable
        if type(a) is not np.ndarray or t._device is not device or a.shape != shape or a.dtype != dtype \
                or not a.flags.carray:
            return None
        arrays.append(a.reshape(-1))
    return arrays, absent


def unfused_reason(tensors, values) -> str:
    """Why the compiled pass did not run for these tensors and options (for fused=True's error)."""
    if not eager():
        return "the update is being traced, not run eagerly"
    if any(type(v) not in _NUMBERS for v in values):
        return "its options must be Python numbers, not tensors"
    first = tensors[0]
    for t in tensors:
        if t is None:
            continue
        a = t._data
        if type(a) is not np.ndarray or t._device is not first._device:
            return f"it needs NumPy-backed tensors on one CPU device, got {t.device}"
        if a.dtype != first._data.dtype or a.shape != first._data.shape:
            return (f"the parameter ({first._data.dtype}, shape {tuple(first._data.shape)}) and its gradient and "
                    f"state ({a.dtype}, shape {tuple(a.shape)}) differ")
        if not a.flags.carray:
            return f"a tensor of shape {tuple(a.shape)} is not contiguous and writable"
    if first._data.dtype not in (np.float32, np.float64):
        return f"it needs float32 or float64 tensors, got {first._data.dtype}"
    return "the compiled kernels (the `jit` extra's Numba) are not available"


def _run(profile, name: str, fn, args) -> None:
    """fn(*args), recorded in `profile` as one `name` event (as PyTorch's _fused_adam_ is)."""
    profile.timed(lambda: fn(*args), name, tuple(a.shape for a in args if isinstance(a, np.ndarray)), "eager")


for _event in ("fused_sgd_momentum", "fused_adam"):
    compiled_or_numpy(_event, "compiled pass", "eager NumPy float32/float64 data of one dtype, contiguous and "
                      "writable, Python-number options, existing state, Numba: one pass per parameter generated from "
                      "the optimizer's rule", "otherwise: the rule's tensor ops")


class FusedUpdate:
    """A group's update rule with its structure fixed, applied one parameter at a time.

    `update(*tensors, **values)` runs `rule(*tensors, **values, **structure)` for one parameter: as one compiled
    pass generated from the rule where it can run, else as the rule's tensor ops. `tensors` come first in the
    rule's order (the parameter first; None for state it does not have), `values` are its numeric options
    (Python numbers, or 0-d tensors under ember.jit) and `structure` its boolean ones. `fused`: None tries the
    compiled pass, True requires it for every eager update (an error names what stops it; `name` is the
    optimizer's), False never tries. `event` names the pass in the profiler.
    """

    def __init__(self, name: str, event: str, rule, fused: bool | None, **structure) -> None:
        self.name, self.event, self.rule, self.fused, self.structure = name, event, rule, fused, structure
        # Found once per group and step: the kernels of this structure (None: none to run), the profiler.
        try_compiled = fused is not False and eager() and compiled_available()
        self.kernels = _kernels(rule, tuple(structure.items())) if try_compiled else None
        self.profile = dispatch.profiled_eager()

    def __call__(self, *tensors, **values) -> None:
        kernels = self.kernels
        if kernels is not None:
            found = _flat_data(tensors)
            if found is not None:
                arrays, absent = found
                key = (arrays[0].dtype, absent)
                kernel = kernels.get(key)
                if kernel is None:
                    kernel = kernels[key] = _Kernel.generate(self.rule, self.structure, arrays, tuple(values))
                if kernel.fn is not None and (kernel.run(self, tensors, arrays, values) if self.fused
                                              else self._run_unless_compiling(kernel, tensors, arrays, values)):
                    if listening[0]:
                        note(self.event, "compiled pass")
                    return
        if self.fused and eager():
            raise implementation.fused_failed(self.name, unfused_reason(tensors, values.values()))
        self.rule(*tensors, **values, **self.structure)


    @serves
    def _run_unless_compiling(self, kernel, tensors, arrays, values) -> bool:
        """kernel.run, or False (the rule's tensor ops run instead, with the same values) while the pass is compiling
        in the background (ember.kernels.background)."""
        try:
            return kernel.run(self, tensors, arrays, values)
        except NotCompiledYet:
            return False


@functools.cache
def _kernels(rule, structure: tuple) -> dict:
    """The kernels generated from `rule` with `structure` so far: (dtype, bitmask of the None tensors) -> _Kernel."""
    return {}


class _Kernel:
    """One compiled pass (None where it cannot be made) and which tensors and values it takes, in its order:
    the updated tensors whose old value the rule does not read, the tensors it reads, the values, then the chunk's
    [start, stop)."""

    def __init__(self, fn, outputs=(), tensors=(), values=(), written=()) -> None:
        self.fn = fn
        self.arrays = _picker(list(outputs) + list(tensors))  # outputs: updated tensors the rule does not read
        self.values = _picker(values)
        self.written = written  # positions of every tensor the rule updates

    def run(self, update: FusedUpdate, tensors, arrays, values) -> bool:
        """One parameter's update by the compiled pass (False, having done nothing, where a value it reads is not a
        Python number)."""
        numbers = self.values(values)
        for v in numbers:
            if type(v) is not float:
                if type(v) is not int:
                    return False
                numbers = tuple(map(float, numbers))  # one Numba type for every number
                break
        args, n = (*self.arrays(arrays), *numbers), arrays[0].size
        if update.profile is None:
            run_pass(self.fn, n, args, FUSED["split_min"])
        else:
            _run(update.profile, update.event, lambda *a: run_pass(self.fn, n, a, FUSED["split_min"]), args)
        for i in self.written:
            tensors[i]._version[0] += 1
        return True

    @classmethod
    def generate(cls, rule, structure: dict, arrays: list, names: tuple) -> _Kernel:
        """The compiled pass of `rule` with `structure` for arrays like `arrays` (None: a tensor the call does not
        have) and the numeric options `names`; its `fn` is None for dtypes other than float32 and float64."""
        dtype = arrays[0].dtype
        if dtype not in (np.float32, np.float64):
            return cls(None)
        region, tensors, values, written = _trace(rule, structure, dtype, [a is None for a in arrays], names)
        alias = [(k, tensors.index(i)) for k, i in enumerate(written) if i in tensors]
        outputs = [i for i in written if i not in tensors]
        from ember.graph.codegen.numba_cpu import kernel_source

        scalars = tuple(range(len(tensors), len(tensors) + len(values)))
        source = kernel_source(region, 1, (False,), scalars, tuple(alias), chunked=True)
        fn = compile_source(source, "kernel")
        return cls(None if fn is None else defer(fn), outputs, tensors, values, written)


def _picker(keys: list):
    """A function from a sequence or dict to the tuple of its entries at `keys` (operator.itemgetter, always a
    tuple)."""
    if len(keys) == 1:
        key = keys[0]
        return lambda found: (found[key],)
    return operator.itemgetter(*keys) if keys else lambda found: ()


def _trace(rule, structure: dict, dtype, absent: list, names: tuple) -> tuple:
    """`rule` traced on placeholders (tensors of `dtype`, None where `absent`; 0-d float64 values `names`) as one
    fused region: (region, positions of the tensors it reads, names of the values it reads (its inputs: those
    tensors, then those values), positions of the tensors it updates (its outputs, in this order))."""
    from ember.graph.build import GraphBuilder
    from ember.graph.ir import Graph
    from ember.graph.passes import cse, dce, fusion, lower_pointwise

    graph = Graph("optimizer_update")
    cpu = as_device("cpu")
    placeholders = [None if gone else graph.placeholder(_TRACE_SHAPE, dtype, cpu) for gone in absent]
    holders = [graph.placeholder((), np.float64, cpu) for _ in names]
    tensors = [None if v is None else Tensor._make(v, cpu) for v in placeholders]
    with no_grad(), GraphBuilder(graph):
        rule(*tensors, **{name: Tensor._make(v, cpu) for name, v in zip(names, holders)}, **structure)
    written = [i for i, t in enumerate(tensors) if t is not None and t._data is not placeholders[i]]
    outputs = [tensors[i]._data for i in written]
    inputs = [("t", i, v) for i, v in enumerate(placeholders) if v is not None]
    inputs += [("v", name, v) for name, v in zip(names, holders)]
    for run in (lower_pointwise.run, cse.run, dce.run):  # lerp/addcmul/addcdiv as elementary ops, as ember.jit
        graph, outputs, vmap = run(graph, outputs)
        inputs = [(kind, ref, vmap[v]) for kind, ref, v in inputs if v in vmap]
    region, read = fusion.whole_region(graph, outputs, [v for _, _, v in inputs])
    read = [(kind, ref) for kind, ref, v in inputs if v in read]
    return (region, [ref for kind, ref in read if kind == "t"], [ref for kind, ref in read if kind == "v"], written)
