"""Code generation for fused regions: renderers (Numba CPU, NumPy fallback) and how one is chosen.

`EMBER_FUSION_BACKEND` (or `set_backend`) picks the renderer: "auto" (default: the cheaper of
Numba and NumPy for each region, NumPy when Numba is not installed), "numba" (Numba wherever it
supports the region) or "numpy" (always the fallback). The variable is read when the setting is first
needed (reading the environment cost 0.85 us, on every fused region's and compiled kernel's call);
`set_backend(None)` reads it again.
"""

from __future__ import annotations

import threading

import numpy as np

from ember import config
from ember.graph.codegen import numba_cpu
from ember.graph.codegen.fused_op import FUSED, FUSED_GROUP, FusedElementwise, FusedGroup
from ember.graph.codegen.numba_cpu import NumbaRenderer
from ember.graph.codegen.numpy_fallback import NumpyRenderer
from ember.graph.codegen.region import Arg, Instr, Reduce, Region
from ember.graph.codegen.renderer import Renderer, common_shape
from ember.kernels.cache import cache_dir, stats
from ember.kernels.selection import Algorithm, algorithms, always, listening, record

__all__ = [
    "Arg", "Instr", "Reduce", "Region", "Renderer", "FusedElementwise", "FUSED", "FusedGroup", "FUSED_GROUP",
    "NumbaRenderer", "NumpyRenderer", "run_group",
    "run_region", "set_backend", "get_backend", "choose_renderer", "cache_dir", "stats",
]

BACKENDS = ("auto", "numba", "numpy")
# Under "auto", regions whose largest operand has fewer elements run NumPy's code when their program is short:
# a Numba call's fixed cost (argument checks, dispatch; about 5 us on the flat path, 10 for broadcasts and sums)
# is a few NumPy ufunc calls' (1-2 us each; a 16x64 MLP step's fused regions took 0.44 ms compiled and 0.32 ms
# in NumPy). A program of SMALL_REGION_COMPILED_OPS ops or more (an Adam update of a bias: 30 ops) pays a NumPy
# call per op, so it runs compiled: the jitted LSTM's small regions went 213 -> 175 us a step, the MLP's 28 -> 23.
# Regions of single values (0-d optimizer arithmetic) stay NumPy scalar code, which beats a compiled call with
# dozens of scalar arguments.
SMALL_REGION = 16384
SMALL_REGION_COMPILED_OPS = 4
STRIDED = "auto-strided"  # the "auto" choice for a call whose operands broadcast (see run_region)
_numba = NumbaRenderer()
_numpy = NumpyRenderer()
_lock = threading.Lock()


def set_backend(name: str | None) -> None:
    """Choose the renderer for fused kernels built from now on ("auto", "numba", "numpy"; None: back to
    EMBER_FUSION_BACKEND); the same setting governs the hand-written compiled kernels (config.KERNELS)."""
    if name is None:
        config.KERNELS.reset()
        return
    if name not in BACKENDS:
        raise ValueError(f"unknown fusion backend {name!r}; expected one of {', '.join(BACKENDS)}")
    config.KERNELS.set(name)


def get_backend() -> str:
    """The renderer setting in force: set_backend, else $EMBER_FUSION_BACKEND, else "auto"."""
    return config.KERNELS.get()


algorithms("fused region", [
    Algorithm("numba", f"setting numba, or auto where the region's program runs cheaper compiled: largest operand of "
              f"{SMALL_REGION:,} values or more, or {SMALL_REGION_COMPILED_OPS}+ ops, contiguous operands (Numba's "
              "loop over strided views is scalar)", None),
    Algorithm("numpy", "otherwise: the region's ops as NumPy calls (no Numba, setting numpy, small or strided)", always),
])


def choose_renderer(region: Region, strided: bool = False) -> Renderer:
    """The renderer that will run `region` under the current setting (`strided`: over broadcast or
    non-contiguous operands, where Numba's loop is not vectorised)."""
    backend = get_backend()
    if backend != "numpy" and _numba.available() and _numba.supports(region):
        if backend == "numba" or _numba.cost(region, strided) <= _numpy.cost(region):
            return _numba
    return _numpy


def run_region(region: Region, arrays, outs=None) -> list:
    """Compute a region's outputs on NumPy arrays with its generated kernel (into `outs` when given:
    one array or None per elementwise output; a reduction's result is always a new array, first)."""
    arrays = [a if type(a) is np.ndarray else np.asarray(a) for a in arrays]
    if outs is not None and any(o is None for o in outs):
        shape = common_shape([a.shape for a in arrays])
        dtypes = [region.instrs[j].dtype for j in region.outputs]
        outs = [np.empty(shape, d) if o is None else o for o, d in zip(outs, dtypes)]
    if region.dynamic and not region.shapes_agree(arrays):
        results = region.evaluate(np, arrays)  # an unknown dim turned out to broadcast inside the region
        if outs is not None:
            head = results[:len(results) - len(outs)]  # the reduction's result
            for o, r in zip(outs, results[len(head):]):
                np.copyto(o, r)
            return head + list(outs)
        return results
    setting = config.KERNELS.get()
    if setting == "auto":
        largest, contiguous = 0, True
        for a in arrays:
            if a.size > largest:
                largest = a.size
            if contiguous and not a.flags.c_contiguous:
                contiguous = False
        if largest < SMALL_REGION and (largest <= 1 or len(region.instrs) < SMALL_REGION_COMPILED_OPS):
            setting = "numpy"  # a compiled kernel's call costs more than NumPy's few passes over small arrays
        elif region.reduce is None and not contiguous:
            setting = STRIDED  # Numba's loop over strided views is scalar; NumPy's ufuncs stay vectorised
    fn = region.compiled.get(("setting", setting))
    if fn is None:
        fn = _build(region, setting)
    results = fn(arrays, outs)
    if results is None:  # the renderer cannot handle this layout (too many dims after merging)
        setting = "numpy"
        results = _build(region, setting)(arrays, outs)
    if listening[0]:
        renderer = region.compiled.get(("renderer", setting), "numpy")
        record("fused region", renderer, f"a region of {len(region.instrs)} ops; kernels setting {config.KERNELS.get()}, "
               f"chosen for these operands: {setting}")
    return results


def run_group(region: Region, members: int, arrays, targets: dict | None = None) -> list:
    """A fused_group's results: the members' outputs in turn (`targets`: result position -> array to write it
    into). One compiled call for all members where Numba runs them flat, else each member's run_region."""
    arrays = [a if type(a) is np.ndarray else np.asarray(a) for a in arrays]
    n_in, n_out = len(region.inputs), len(region.outputs)
    outs = [None] * (members * n_out)
    for p, a in (targets or {}).items():
        outs[p] = a
    if config.KERNELS.get() != "numpy" and _numba.available() and _numba.supports(region):
        done = numba_cpu.run_group(region, members, arrays, list(outs))
        if done is not None:
            return done
    results = []
    for m in range(members):
        mine = outs[m * n_out:(m + 1) * n_out]
        results.extend(run_region(region, arrays[m * n_in:(m + 1) * n_in], mine if targets else None))
    return results


def _build(region: Region, setting: str):
    """The region's kernel under a backend setting, built once (renderers are shared between settings)."""
    with _lock:
        fn = region.compiled.get(("setting", setting))
        if fn is None:
            renderer = choose_renderer(region, setting == STRIDED) if setting != "numpy" else _numpy
            fn = region.compiled.get(renderer.name) or renderer.build(region)
            region.compiled[renderer.name] = region.compiled[("setting", setting)] = fn
            region.compiled[("renderer", setting)] = renderer.name
        return fn
