"""The Numba CPU renderer: a region as a scalar loop nest compiled with `numba.njit`.

At run time the inputs are broadcast to the iteration shape and adjacent dimensions that are laid
out contiguously for every operand are merged, so the common cases become one flat loop (all
inputs full-sized and contiguous) or two nested loops (a broadcast row or column). A loop nest is
generated per merged rank (up to `MAX_RANK`; beyond that the NumPy renderer runs the region).
Each instruction converts its operands to the dtype the unfused op computes in and rounds its
result to that op's output dtype, so promotion, integer wrap-around and NaN handling follow the
unfused chain. A trailing sum/mean accumulates in float64 (int64 for integers). Numba's disk cache
is used only in the folder `cache` has checked (see there why).
"""

from __future__ import annotations

import math
import re
import threading

import numpy as np
from numpy.lib.stride_tricks import as_strided

from ember.graph.codegen.region import Region
from ember.graph.codegen.renderer import Kernel, Renderer, common_shape, fits, literal, operand_dtype
from ember.kernels.elementwise import FUSED, run_pass
from ember.kernels.numba_loader import compiled_function, jitted, numba_available
from ember.kernels.numba_loader import count_compiles as _count
from ember.op import OPS

MAX_RANK = 4
_DTYPES = frozenset(np.dtype(d) for d in (
    np.bool_, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64,
    np.float32, np.float64))
# Scalar code for the ops' declared NumPy ufuncs: `math` functions (float only) and infix operators.
_MATH = frozenset({"exp", "log", "log2", "log10", "log1p", "expm1", "sqrt", "sin", "cos", "tan", "tanh"})
_INFIX = {"add": "+", "subtract": "-", "multiply": "*", "true_divide": "/", "equal": "==", "not_equal": "!=",
          "less": "<", "less_equal": "<=", "greater": ">", "greater_equal": ">=", "bitwise_and": "&",
          "bitwise_or": "|", "bitwise_xor": "^"}
# Ops written out below by name (no single ufunc, or NumPy's NaN and rounding rules spelled out).
_FLOAT_ONLY = frozenset({"pow", "atan2", "fmod", "erf", "sigmoid", "silu", "rsqrt", "reciprocal"})
_OTHER = frozenset({"neg", "abs", "sign", "square", "relu", "relu_backward", "leaky_relu", "maximum", "minimum",
                    "floor", "ceil", "trunc", "round", "frac", "logical_not", "bitwise_not", "isnan", "isinf", "isfinite",
                    "logical_and", "logical_or", "logical_xor", "where", "clamp", "cast", "clone"})


def _math(name: str):
    """The `math` function computing the op, from its declared ufunc (None: not one of them)."""
    uf = OPS[name].ufunc
    return f"math.{uf}" if uf in _MATH else None


def _infix(name: str):
    """The infix operator computing the op, from its declared ufunc (None: not one of them)."""
    return _INFIX.get(OPS[name].ufunc)


def _supported(name: str, compute) -> bool:
    if _math(name) is not None or name in _FLOAT_ONLY:
        return compute.kind == "f"
    return _infix(name) is not None or name in _OTHER
# A cheap op (add, mul, relu, ...) in a loop over strided (non-contiguous) views: about 2x NumPy's ufunc,
# so NumPy's 0.35 per op. Broadcast operands that are contiguous are passed without their broadcast dims and
# vectorise (x * scale + shift, ReLU at (32, 16, 32, 32) per channel: 77 us against NumPy's 396).
_STRIDED_OP = 0.8
# Rough ns per element on one core: Numba's scalar libm calls are far slower than NumPy's SIMD ones
# (one-op regions over 2**20 float32, measured; erf is the exception, NumPy has no ufunc for it).
_COST = {"exp": 2.5, "log": 2.6, "log2": 2.1, "log10": 5.1, "log1p": 11.0, "expm1": 10.6, "sin": 8.2, "cos": 7.2,
         "tan": 13.5, "tanh": 16.0, "erf": 10.2, "sigmoid": 2.8, "silu": 3.0, "pow": 8.0, "atan2": 18.4, "fmod": 5.0}


def _cast(expr: str, src, dst) -> str:
    src, dst = np.dtype(src), np.dtype(dst)
    if src == dst:
        return expr
    if dst.kind == "b":
        return f"({expr} != 0)"
    return f"np.{dst.name}({expr})"


def _nan_max(a, b):
    return f"({a} if ({a} >= {b} or {a} != {a}) else {b})"


def _nan_min(a, b):
    return f"({a} if ({a} <= {b} or {a} != {a}) else {b})"


def _instr_code(region: Region, j: int, ops: list) -> tuple:
    """(statements, expression) computing instruction j from operand expressions in its compute dtype."""
    ins = region.instrs[j]
    name, c = ins.op, ins.compute
    attrs = dict(ins.attrs)

    def k(v):
        return literal(v, c)

    a = ops[0]
    b = ops[1] if len(ops) > 1 else None
    pre: list = []
    if _infix(name) is not None:
        expr = f"({a} {_infix(name)} {b})"
    elif _math(name) is not None:
        expr = f"{_math(name)}({a})"
    elif name == "erf":
        expr = f"math.erf({a})"
    elif name == "pow":
        arg = ins.args[1]
        expr = f"({a} * {a})" if arg.kind == "c" and arg.ref == 2 else f"({a} ** {b})"
    elif name == "atan2":
        expr = f"math.atan2({a}, {b})"
    elif name == "fmod":
        expr = f"np.fmod({a}, {b})"  # Numba has no math.fmod
    elif name == "maximum":
        expr = _nan_max(a, b)
    elif name == "minimum":
        expr = _nan_min(a, b)
    elif name == "neg":
        expr = f"(-{a})"
    elif name == "abs":
        expr = f"abs({a})"
    elif name == "sign":
        neg = f"({k(-1)} if {a} < {k(0)} else {a})" if c.kind != "u" else a
        expr = f"({k(1)} if {a} > {k(0)} else {neg})"
    elif name == "square":
        expr = f"({a} * {a})"
    elif name == "relu":
        expr = f"({a} if not ({a} < {k(0)}) else {k(0)})"
    elif name == "relu_backward":  # (g, out): 0 where out <= 0, else g (also where out is NaN, as PyTorch)
        expr = f"({k(0)} if {b} <= {k(0)} else {a})"
    elif name == "leaky_relu":
        expr = f"({a} if {a} > {k(0)} else {a} * {k(attrs.get('negative_slope', 0.01))})"
    elif name == "reciprocal":
        expr = f"({k(1)} / {a})"
    elif name == "rsqrt":
        expr = f"({k(1)} / math.sqrt({a}))"
    elif name in ("sigmoid", "silu"):
        e = f"e{j}"
        pre.append(f"{e} = math.exp(-abs({a}))")
        sig = f"(({k(1)} / ({k(1)} + {e})) if {a} >= {k(0)} else ({e} / ({k(1)} + {e})))"
        expr = sig if name == "sigmoid" else f"({a} * {_cast(sig, c, c)})"
    elif name in ("floor", "ceil", "trunc", "round"):
        fn = {"floor": "np.floor", "ceil": "np.ceil", "trunc": "np.trunc", "round": "np.rint"}[name]
        expr = f"{fn}({a})" if c.kind == "f" else a
    elif name == "frac":
        expr = f"({a} - np.trunc({a}))"
    elif name in ("logical_not", "bitwise_not") and c.kind == "b":
        expr = f"(not {a})"
    elif name == "logical_not":
        expr = f"({a} == 0)"
    elif name == "bitwise_not":
        expr = f"(~{a})"
    elif name == "isnan":
        expr = f"({a} != {a})" if c.kind == "f" else "False"
    elif name == "isinf":
        expr = f"math.isinf({a})" if c.kind == "f" else "False"
    elif name == "isfinite":
        expr = f"math.isfinite({a})" if c.kind == "f" else "True"
    elif name in ("logical_and", "logical_or", "logical_xor"):
        op = {"logical_and": "&", "logical_or": "|", "logical_xor": "!="}[name]
        expr = f"(({a} != 0) {op} ({b} != 0))"
    elif name == "where":
        expr = f"({b} if {a} else {ops[2]})"
    elif name == "clamp":
        expr = a
        if attrs.get("min") is not None:
            expr = _nan_max(expr, k(attrs["min"]))
        if attrs.get("max") is not None:
            pre.append(f"m{j} = {expr}")
            expr = _nan_min(f"m{j}", k(attrs["max"]))
    elif name in ("cast", "clone"):
        expr = a
    else:
        raise NotImplementedError(f"numba renderer: no code for {name}")
    return pre, expr


def _operand_want(ins, pos: int):
    if ins.op == "where" and pos == 0:
        return np.dtype(bool)
    return ins.compute


def _body(region: Region, index: str, scalars: tuple = (), hoisted: frozenset = frozenset()) -> tuple:
    """Loop-body statements (reading inputs at `index`, but for the one-element `scalars` and the
    `hoisted` ones, read before the loop) and the names holding each instruction."""
    lines = [f"x{k} = in{k}[{index}]" for k in range(len(region.inputs)) if k not in scalars and k not in hoisted]
    names = {}
    for j, ins in enumerate(region.instrs):
        ops = []
        for pos, a in enumerate(ins.args):
            want = _operand_want(ins, pos)
            if a.kind == "c":
                ops.append(literal(a.ref, want))
            else:
                text = f"x{a.ref}" if a.kind == "in" else names[a.ref]
                ops.append(_cast(text, operand_dtype(region, a), want))
        pre, expr = _instr_code(region, j, ops)
        lines += pre
        src = ins.dtype if ins.op == "cast" else ins.compute
        if ins.op in ("eq", "ne", "lt", "le", "gt", "ge", "logical_and", "logical_or", "logical_xor", "isnan",
                      "isinf", "isfinite", "logical_not") and ins.dtype.kind == "b":
            lines.append(f"t{j} = {expr}")
        else:
            # the result of the compute dtype (NumPy semantics), then the op's output dtype
            lines.append(f"t{j} = {_cast(_cast(expr, 'O', src), src, ins.dtype)}")
        names[j] = f"t{j}"
    return lines, names


def _acc_dtype(region: Region):
    r = region.reduce
    return np.dtype(np.float64) if region.instrs[r.arg].dtype.kind == "f" else np.dtype(np.int64)


def _indices(dims: tuple) -> str:
    return ", ".join(f"i{d}" for d in dims) or "0"


def kernel_source(region: Region, rank: int, reduced: tuple = (), scalars: tuple = (), alias: tuple = (),
                  present: tuple | None = None, chunked: bool = False) -> str:
    """Python source of the loop nest for `rank` merged dims (`reduced`: which of them are summed;
    `scalars`: one-element inputs passed as NumPy scalars, such as 0-d optimizer hyperparameters; `alias`:
    (output, input) pairs where the output is that input's array, written through the input's name;
    `present`: per input, the dims it varies along, the only ones it is passed and indexed with; `chunked`:
    one elementwise loop over [lo, hi), the last two parameters, instead of its size first: a chunk for the
    thread pool, `parallel.run_kernel`).

    An output that is an input's memory (a weight updated in place) is stored through the input's
    parameter: as a separate parameter LLVM must assume the two overlap at other indices, and its
    run-time overlap check then sends the whole loop to the scalar version. A broadcast input is passed
    without its broadcast dims, so that it and the accumulator are C-contiguous arrays to Numba (a
    strided view is a scalar loop), and it is read in the outermost loop that fixes its value."""
    n_out = len(region.outputs)
    red = region.reduce
    if chunked and (rank != 1 or red is not None):
        raise ValueError(f"kernel_source: a chunked loop is one elementwise loop, not {rank} dims"
                         f"{' with a reduction' if red is not None else ''}")
    via = dict(alias)
    if present is None:
        present = (tuple(range(rank)),) * len(region.inputs)
    sizes = [f"n{d}" for d in range(rank)] if not chunked else []
    params = sizes + (["acc"] if red is not None else []) + [f"out{k}" for k in range(n_out) if k not in via]
    params += [f"in{k}" for k in range(len(region.inputs))] + (["lo", "hi"] if chunked else [])
    index = ", ".join(f"i{d}" for d in range(rank))
    acc_index = _indices(tuple(d for d in range(rank) if not reduced[d])) if red is not None else ""
    inner_reduced = red is not None and rank > 0 and reduced[-1]
    # an input fixed within the innermost loop is read before it, at the depth of its last dim
    depth = {k: max(p, default=-1) for k, p in enumerate(present) if k not in scalars}
    hoisted = {k: d for k, d in depth.items() if d < rank - 1}
    body, names = _body(region, _indices(tuple(range(rank))), scalars, frozenset(hoisted))
    body = [_reindexed(line, present) for line in body]
    body += [f"{f'in{via[k]}' if k in via else f'out{k}'}[{index}] = {names[j]}" for k, j in enumerate(region.outputs)]
    acc = _acc_dtype(region) if red is not None else None
    if red is not None:
        value = _cast(names[red.arg], region.instrs[red.arg].dtype, acc)
        body.append(f"s = _sum_add(s, {value})" if inner_reduced else f"acc[{acc_index}] += {value}")
    lines = [f"def kernel({', '.join(params)}):"] + [f"    x{k} = in{k}" for k in scalars]
    lines += [f"    x{k} = in{k}[0]" for k, d in hoisted.items() if d < 0]
    indent = "    "
    for d in range(rank):
        if d == rank - 1 and inner_reduced:
            lines.append(f"{indent}s = {literal(0, acc)}")
        # a chunk's bounds as unsigned: with signed ones LLVM cannot rule out negative indices, and their
        # wrap-around kept the loop scalar (an SGD update of 400K values: 330 against 57 us)
        bounds = "np.uint64(lo), np.uint64(hi)" if chunked else f"n{d}"
        lines.append(f"{indent}for i{d} in range({bounds}):")
        indent += "    "
        lines += [f"{indent}x{k} = in{k}[{_indices(present[k])}]" for k, at in hoisted.items() if at == d]
    lines += [indent + line for line in body]
    if inner_reduced:
        lines.append(f"{indent[:-4]}acc[{acc_index}] += s")
    header = "import math\n\nimport numpy as np\n\n# " + region.text.replace("\n", "\n# ")
    return header + (_SUM_ADD if inner_reduced else "") + "\n\n\n" + "\n".join(lines) + "\n"


def group_source(region: Region, scalars: tuple, alias: tuple) -> str:
    """Source of `group`, which runs the flat kernel (kernel_source's one-loop variant) once per member of a
    fused_group: every parameter is a tuple with one entry per member (sizes, outputs, arrays, single values)."""
    via = dict(alias)
    params = ["n0"] + [f"out{k}" for k in range(len(region.outputs)) if k not in via]
    params += [f"in{k}" for k in range(len(region.inputs))]
    one = kernel_source(region, 1, (False,), scalars, alias)
    lines = [
        "",
        "",
        "from numba import njit as _njit",
        "",
        '_one = _njit(inline="always", error_model="numpy", nogil=True)(kernel)',
        "",
        "",
        f"def group({', '.join(params)}):",
        "    for m in range(len(n0)):",
        f"        _one({', '.join(f'{p}[m]' for p in params)})",
    ]
    return one + "\n".join(lines) + "\n"


def _reindexed(line: str, present: tuple) -> str:
    """A body line's input read `x{k} = in{k}[...]` indexed by input k's own dims."""
    m = re.match(r"x(\d+) = in(\d+)\[", line)
    if m is None:
        return line
    k = int(m.group(2))
    return f"x{k} = in{k}[{_indices(present[k])}]"


# A summed inner loop adds into one float64 (or int64) variable through `_sum_add`, whose add alone may be
# reassociated: LLVM inlines it and then vectorises the loop with several partial sums (a chain of dependent
# adds bounded it at about 4 cycles per element; relu_backward with its bias gradient's sum over (64, 6, 28, 28):
# 107 -> 40 us). The region's elementwise arithmetic is compiled without the flag and keeps its exact order;
# only the order of the sum's float64 additions changes. NaN and inf still propagate.
_SUM_ADD = """

from numba import njit as _njit


@_njit(fastmath={"reassoc"}, nogil=True)
def _sum_add(s, v):
    return s + v"""


def coalesce(shape: tuple, tags: list, strides_list: list) -> tuple:
    """Drop size-1 dims and merge neighbours (same tag) that are contiguous for every operand."""
    dims = [(n, t, [s[i] for s in strides_list]) for i, (n, t) in enumerate(zip(shape, tags)) if n != 1]
    merged: list = []
    for n, t, st in dims:
        if merged:
            pn, pt, pst = merged[-1]
            if pt == t and all(ps == s * n for ps, s in zip(pst, st)):
                merged[-1] = (pn * n, t, st)
                continue
        merged.append((n, t, st))
    if not merged:
        merged = [(1, False, [0] * len(strides_list))]
    return [m[0] for m in merged], [m[1] for m in merged], [[m[2][k] for m in merged] for k in range(len(strides_list))]


_UNSEEN = object()


def _flat_plan(shapes: tuple):
    """For inputs of these shapes, (full shape, its size, single-value inputs, full-size inputs) when the flat loop
    can run them (given C-contiguous full-size inputs), else None."""
    shape = common_shape(list(shapes))
    scalars, full = [], []
    for k, s in enumerate(shapes):
        if s == shape:
            full.append(k)
        elif math.prod(s) == 1:
            scalars.append(k)
        else:
            return None
    return shape, math.prod(shape), tuple(scalars), tuple(full)


def _aliases(outs, arrays, scalars) -> tuple:
    """(output, input) pairs where a given output is an input's very array (how ember.jit passes a tensor
    updated in place; other overlaps keep the general variant, which is correct, only not vectorised)."""
    found = []
    ids = [id(a) for a in arrays]
    for k, o in enumerate(outs):
        if id(o) in ids:
            for i, a in enumerate(arrays):
                if a is o and i not in scalars:
                    found.append((k, i))
                    break
    return tuple(found)


_LAYOUTS = 64  # layouts remembered per region


def _layout(shape, red, operands, n_in: int):
    """How a broadcast or reduction call runs, from its operands' shapes and strides (accumulator last,
    not yet made): (merged dims, their summed tags, the full shape's tags, the accumulator's shape, each
    operand's view (sizes, strides), the inputs' present dims), or None for too many dims."""
    tags = [False] * len(shape)
    acc_shape = None
    strides_in = [_broadcast_strides(o, shape) for o in operands]
    if red is not None:
        tags = [d in red.dims for d in range(len(shape))]
        acc_shape = tuple(1 if t else n for n, t in zip(shape, tags))
        acc_strides = []  # the accumulator's C layout (8-byte float64 or int64 values)
        step = 8
        for n in reversed(acc_shape):
            acc_strides.insert(0, step)
            step *= n
        strides_in.append(tuple(0 if t else s for t, s in zip(tags, acc_strides)))
    dims, dim_tags, strides = coalesce(shape, tags, strides_in)
    if len(dims) > MAX_RANK:
        return None
    # each operand without the dims it is broadcast along (the accumulator: the summed ones)
    present = [tuple(d for d, step in enumerate(st) if step != 0) for st in strides]
    views_at = [([dims[d] for d in p] or [1], [st[d] for d in p] or [0]) for st, p in zip(strides, present)]
    return dims, tuple(dim_tags), tags, acc_shape, views_at, tuple(present[:n_in])


def _broadcast_strides(a, shape) -> tuple:
    """a's strides when broadcast to `shape` (0 along the dims it is broadcast over), as np.broadcast_to's."""
    lead = len(shape) - a.ndim
    return (0,) * lead + tuple(0 if n == 1 else s for n, s in zip(a.shape, a.strides))


def _view(a, sizes, strides, readonly: bool):
    """a as the array of `sizes` with `strides`: a reshape when a is C-contiguous (the views are then its
    dims in order), which costs a tenth of as_strided; inputs are passed read-only."""
    v = a.reshape(sizes) if a.flags.c_contiguous else as_strided(a, sizes, strides, writeable=not readonly)
    return _readonly(v) if readonly else v


def _readonly(a):
    v = a.view()
    v.flags.writeable = False
    return v


_GROUP_VARIANTS: dict = {}  # (region key, single-value inputs, aliases) -> the jitted `group`
# Members per compiled call. `group` takes a tuple per operand, and Numba indexes a tuple by a run-time index
# through a branch per entry: compile time grew with the square of the tuple's length (64 members: 7.8 s),
# so groups run in chunks of one length (a short last chunk padded with empty members), compiled once. 4: a cold
# compile added 1.3 s to the transformer LM's first step (8: 3.1 s), and a 43-member call took 119 us (8: 91).
GROUP_CHUNK = 4
_GROUP_PLANS: dict = {}  # (region key, input shapes) -> _group_plan's answer


def _group_plan(region: Region, members: int, shapes: tuple):
    """For a fused_group's input shapes: (member sizes, full shapes, single-value inputs, positions of the full-size
    inputs among all inputs), or None when some member is not flat or members differ in their single values."""
    n_in = len(region.inputs)
    sizes, full_shapes, full_at, scalars = [], [], [], None
    for m in range(members):
        plan = _flat_plan(shapes[m * n_in:(m + 1) * n_in])
        if plan is None or (scalars is not None and plan[2] != scalars):
            return None
        shape, n, scalars, full = plan
        sizes.append(n)
        full_shapes.append(shape)
        full_at.extend(m * n_in + k for k in full)
    return tuple(sizes), full_shapes, scalars, full_at


def run_group(region: Region, members: int, arrays: list, outs: list) -> list | None:
    """A fused_group's results in one compiled call: every member flat (contiguous full-size inputs and single
    values), all with the same inputs single-valued and the same outputs written into inputs; None otherwise,
    and the caller runs the members one by one. `outs`: per result, an array to write it into or None.
    Written for few Python operations per member: the point is to cost less than a call per member."""
    n_in, n_out = len(region.inputs), len(region.outputs)
    call = region.compiled.get(_LAST_GROUP_CALL)
    if call is not None:
        done = call.run(arrays, outs)
        if done is not None:
            return done
    key = (region.key, tuple([a.shape for a in arrays]))
    plan = _GROUP_PLANS.get(key, _UNSEEN)
    if plan is _UNSEEN:
        if len(_GROUP_PLANS) >= 64 * _LAYOUTS:
            _GROUP_PLANS.clear()
        plan = _GROUP_PLANS[key] = _group_plan(region, members, key[1])
    if plan is None:
        return None
    sizes, full_shapes, scalars, full_at = plan
    for i in full_at:
        if not arrays[i].flags.carray:  # C-contiguous, aligned and writable: one array type for every member
            return None
    # Outputs written into one of their member's inputs (found in the first member) must be so in every member:
    # the compiled call takes them through the inputs. Another output that happens to be an input is still
    # computed right: each index is read before it is written.
    alias = _aliases(outs[:n_out], arrays[:n_in], scalars)
    for m in range(1, members):
        for q, k in alias:
            if arrays[m * n_in + k] is not outs[m * n_out + q]:
                return None
    all_given = all(o is not None for o in outs)
    for p, o in enumerate(outs):
        if o is None:
            q = p % n_out
            outs[p] = np.empty(full_shapes[p // n_out], region.instrs[region.outputs[q]].dtype)
    via = [q for q, _ in alias]
    columns = [list(sizes)]
    pads = [0]  # what fills a short last chunk: members of no values
    for q in range(n_out):
        if q not in via:
            columns.append([o if o.ndim == 1 else o.reshape(-1) for o in outs[q::n_out]])
            pads.append(_empty(outs[q].dtype))
    for k in range(n_in):
        column = arrays[k::n_in]
        if k in scalars:
            columns.append([_single(a) for a in column])
            pads.append(column[0].dtype.type(0))
        else:
            columns.append([a if a.ndim == 1 else a.reshape(-1) for a in column])
            pads.append(_empty(column[0].dtype))
    variant = (region.key, scalars, alias)
    fn = _GROUP_VARIANTS.get(variant)
    if fn is None:
        fn = _GROUP_VARIANTS[variant] = compiled_function(group_source(region, scalars, alias), "group")
    n_sigs = len(fn.overloads)
    chunks = []
    for start in range(0, members, GROUP_CHUNK):
        short = max(0, start + GROUP_CHUNK - members)
        chunks.append([tuple(col[start:start + GROUP_CHUNK] + [pad] * short) for col, pad in zip(columns, pads)])
        fn(*chunks[-1])
    if len(fn.overloads) != n_sigs:
        _count(fn)
    if all_given:  # every result into a given array (ember.jit's updates in place): the call is likely to repeat
        region.compiled[_LAST_GROUP_CALL] = _GroupCall(fn, arrays, outs, full_at, n_in, scalars, alias, chunks)
    return outs


_LAST_GROUP_CALL = "last group call"  # key of a region's _GroupCall in region.compiled


class _GroupCall:
    """One run_group call's compiled function and argument tuples, kept on its region for the next call.

    ember.jit runs a plan with the same arrays in most places every step (parameters, optimizer state, the
    outputs written into them); gradients and single values (learning rates, step counts) are new arrays.
    A call with the same outputs rebuilds only the argument tuples of the inputs that changed, which saves
    most of run_group's Python work. Inputs that some output is written through must be the same arrays.
    """

    def __init__(self, fn, arrays, outs, full_at, n_in, scalars, alias, chunks) -> None:
        self.fn = fn
        self.outs = list(outs)
        self.seen = list(arrays)  # held: no other array can take the place of one of them
        self.shapes = [a.shape for a in arrays]
        self.args = [list(chunk) for chunk in chunks]
        self.cells = [[list(arg) for arg in chunk] for chunk in chunks]
        first = len(chunks[0]) - n_in  # the inputs' columns come last
        through = {k for _, k in alias}  # inputs written through: passed as outputs, not as inputs
        self.where = {}  # input index -> (chunk, argument, position in its tuple)
        for i in range(len(arrays)):
            m, k = divmod(i, n_in)
            self.where[i] = (m // GROUP_CHUNK, first + k, m % GROUP_CHUNK)
        self.fixed = [i for i in full_at if i % n_in in through]
        self.full = [i for i in full_at if i % n_in not in through]
        self.singles = [i for i in range(len(arrays)) if i % n_in in scalars]
        self.busy = threading.Lock()  # the arguments are rebuilt in place: one thread at a time

    def run(self, arrays, outs):
        """The results of a call like the last one (None where it is not, or where another thread is running it:
        run_group's full path then runs)."""
        if not self.busy.acquire(blocking=False):
            return None
        try:
            return self._run(arrays, outs)
        finally:
            self.busy.release()

    def _run(self, arrays, outs):
        if len(arrays) != len(self.seen) or len(outs) != len(self.outs):
            return None
        for o, mine in zip(outs, self.outs):
            if o is not mine:
                return None
        seen, shapes, where, cells = self.seen, self.shapes, self.where, self.cells
        for i in self.fixed:
            if arrays[i] is not seen[i]:
                return None
        dirty = []
        for i in self.full:
            a = arrays[i]
            if a is not seen[i]:
                if a.shape != shapes[i] or not a.flags.carray:
                    return None
                seen[i] = a
                c, arg, j = where[i]
                cells[c][arg][j] = a if a.ndim == 1 else a.reshape(-1)
                dirty.append((c, arg))
        for i in self.singles:
            a = arrays[i]
            if a.shape != shapes[i]:
                return None
            c, arg, j = where[i]
            cells[c][arg][j] = _single(a)
            dirty.append((c, arg))
        args = self.args
        for c, arg in dirty:
            args[c][arg] = tuple(cells[c][arg])
        for chunk in args:
            self.fn(*chunk)
        return self.outs


def _single(a):
    """The value of a single-value array, as run_group passes it."""
    return a[()] if a.ndim == 0 else a.reshape(-1)[0]


def _empty(dtype) -> np.ndarray:
    """A writable, contiguous array of no values: a padding member's operand."""
    return np.empty(0, dtype)


class NumbaRenderer(Renderer):
    """Scalar loop nests compiled by Numba, cached on disk."""

    name = "numba"

    def __init__(self) -> None:
        self._lock = threading.Lock()

    def available(self) -> bool:
        return numba_available()

    def supports(self, region: Region) -> bool:
        """Whether every op and dtype of the region has a Numba form (decided once per region)."""
        known = region.compiled.get("numba supports")
        if known is None:
            known = region.compiled["numba supports"] = self._supports(region)
        return known

    def _supports(self, region: Region) -> bool:
        dtypes = [d for d, _ in region.inputs] + [i.dtype for i in region.instrs] + [i.compute for i in region.instrs]
        if region.reduce is not None:
            if region.reduce.op not in ("sum", "mean") or region.reduce.dtype not in _DTYPES:
                return False
        for ins in region.instrs:
            if not _supported(ins.op, ins.compute):
                return False
            if ins.op in ("neg", "sign") and ins.compute.kind == "b":
                return False
            if ins.op == "clamp" and not all(fits(v, ins.compute) for v in dict(ins.attrs).values() if v is not None):
                return False
            if any(a.kind == "c" and not fits(a.ref, ins.compute) for a in ins.args):
                return False
        return all(d in _DTYPES for d in dtypes)

    def cost(self, region: Region, strided: bool = False) -> float:
        """Rough ns per element; `strided`: over broadcast views, where the loop is scalar (not vectorised)."""
        cheap = _STRIDED_OP if strided else 0.05
        return sum(_COST.get(ins.op, cheap) for ins in region.instrs) + 0.1

    def build(self, region: Region) -> Kernel:
        variants: dict = {}
        lock = self._lock
        out_dtypes = [region.instrs[j].dtype for j in region.outputs]
        red = region.reduce
        n_in = len(region.inputs)

        def variant(rank, reduced, scalars=(), alias=(), present=None, chunked=False):
            key = (rank, reduced, scalars, alias, present, chunked)
            fn = variants.get(key)
            if fn is None:
                with lock:
                    fn = variants.get(key)
                    if fn is None:
                        fn = jitted(kernel_source(region, rank, reduced, scalars, alias, present, chunked))
                        variants[key] = fn
            return fn

        def call(fn, *args):
            fn(*args)
            counted(fn)

        def counted(fn):
            n_sigs = len(fn.overloads)
            if signatures.get(fn) != n_sigs:  # a new signature: compiled now, or loaded from the disk cache
                signatures[fn] = n_sigs
                _count(fn)

        layouts: dict = {}  # operand shapes and strides -> _layout's answer
        signatures: dict = {}  # variant -> its compiled signatures counted so far
        flat_plans: dict = {}  # input shapes -> _flat_plan's answer

        def run_flat(arrays, outs, plan):
            """The one-loop call over contiguous full-size inputs and single values (None: not this layout).
            Lean, since most regions of a training step (every parameter's update) take it on every call: the
            general path below spent 6 us in Python on a 16-value SGD update whose loop takes 0.3."""
            shape, n, scalars, full = plan
            for k in full:
                if not arrays[k].flags.c_contiguous:
                    return None
            if outs is None:
                outs = [np.empty(shape, d) for d in out_dtypes]
                alias = via = ()
            else:
                outs = list(outs)
                alias = _aliases(outs, arrays, scalars)
                via = [o for o, _ in alias]
            if n >= FUSED["split_min"]:
                return run_split(arrays, outs, n, scalars, alias, via)
            args = [n]
            for k, o in enumerate(outs):
                if k not in via:
                    args.append(o if o.ndim == 1 else o.reshape(-1))
            for k, a in enumerate(arrays):
                if k in scalars:  # its value, a NumPy scalar of its dtype: no view to make and check
                    args.append(a[()] if a.ndim == 0 else a.reshape(-1)[0])
                else:  # as it is (a read-only input, rare here, gets a compiled signature of its own)
                    args.append(a if a.ndim == 1 else a.reshape(-1))
            call(variant(1, (False,), scalars, alias), *args)
            return outs

        def run_split(arrays, outs, n, scalars, alias, via):
            """run_flat's loop as chunks over the threads (as PyTorch splits an elementwise loop): single values
            passed as one-value arrays, which the pool carries whatever their dtype."""
            head = [o if o.ndim == 1 else o.reshape(-1) for k, o in enumerate(outs) if k not in via]
            head += [a.reshape(1) if k in scalars else a if a.ndim == 1 else a.reshape(-1) for k, a in enumerate(arrays)]
            present = tuple([() if k in scalars else (0,) for k in range(n_in)])
            fn = variant(1, (False,), (), alias, present, chunked=True)
            run_pass(fn, n, tuple(head), FUSED["split_min"])
            counted(fn)
            return outs

        reduce_plans: dict = {}  # input shapes -> reduce_plan's answer

        def run_reduce(arrays, plan):
            """A reduction over C-contiguous inputs into new arrays, from a plan made once per input shapes (None:
            not this layout). The general path below makes the same call with 3-4 us more Python per call."""
            for a in arrays:
                if not a.flags.c_contiguous:
                    return None
            fn, dims, shape, acc_shape, acc_dtype, acc_sizes, out_sizes, in_sizes, result_shape = plan
            outs = [np.empty(shape, d) for d in out_dtypes]
            acc = np.zeros(acc_shape, acc_dtype)
            views = [acc.reshape(acc_sizes)]
            views += [o.reshape(sizes) for o, sizes in zip(outs, out_sizes)]
            for a, sizes in zip(arrays, in_sizes):
                v = a.reshape(sizes)  # a new view whatever the sizes, so its flag is this call's own
                v.flags.writeable = False
                views.append(v)
            call(fn, *dims, *views)
            result = acc
            if red.op == "mean":
                with np.errstate(invalid="ignore", divide="ignore"):
                    result = acc / np.float64(math.prod(shape[d] for d in red.dims))
            return [result.astype(red.dtype).reshape(result_shape)] + outs

        def reduce_plan(arrays):
            """What run_reduce needs for inputs of these shapes (assumed C-contiguous), or None."""
            shape = common_shape([a.shape for a in arrays])
            outs = [np.empty(shape, d) for d in out_dtypes]
            acc_dtype = _acc_dtype(region)
            layout = _layout(shape, red, [np.ascontiguousarray(a) for a in arrays] + outs, n_in)
            if layout is None:
                return None
            dims, dim_tags, tags, acc_shape, views_at, present = layout
            sizes = [tuple(v[0]) for v in views_at]
            result_shape = acc_shape if red.keepdim else tuple(n for n, t in zip(shape, tags) if not t)
            return (variant(len(dims), dim_tags, present=present), tuple(dims), shape, acc_shape, acc_dtype,
                    sizes[-1], sizes[n_in:n_in + len(outs)], sizes[:n_in], result_shape)

        def run(arrays, outs=None):
            arrays = [a if type(a) is np.ndarray else np.asarray(a) for a in arrays]
            if red is None or outs is None:  # the planned calls: flat elementwise, or a reduction into new arrays
                shapes = tuple([a.shape for a in arrays])
                plans = flat_plans if red is None else reduce_plans
                plan = plans.get(shapes, _UNSEEN)
                if plan is _UNSEEN:
                    if len(plans) >= _LAYOUTS:  # a dynamic program's many shapes: start again
                        plans.clear()
                    plan = plans[shapes] = _flat_plan(shapes) if red is None else reduce_plan(arrays)
                if plan is not None:
                    done = run_flat(arrays, outs, plan) if red is None else run_reduce(arrays, plan)
                    if done is not None:
                        return done
            shape = common_shape([a.shape for a in arrays])
            given = outs is not None
            outs = list(outs) if given else [np.empty(shape, d) for d in out_dtypes]
            operands = arrays + outs
            key = tuple((o.shape, o.strides) for o in operands)
            layout = layouts.get(key)
            if layout is None:
                layout = _layout(shape, red, operands, n_in)
                if len(layouts) >= _LAYOUTS:  # a dynamic program's many shapes: start again
                    layouts.clear()
                layouts[key] = layout
            if layout is None:
                return None
            dims, dim_tags, tags, acc_shape, views_at, present = layout
            acc = None
            if red is not None:
                acc = np.zeros(acc_shape, _acc_dtype(region))
                operands.append(acc)
            views = [_view(o, sizes, st, k < n_in) for k, (o, (sizes, st)) in enumerate(zip(operands, views_at))]
            ins_v, outs_v = views[:n_in], views[n_in:n_in + len(outs)]
            head = [views[-1]] if red is not None else []
            call(variant(len(dims), dim_tags, present=present), *dims, *head, *outs_v, *ins_v)
            if red is None:
                return outs
            result = acc
            if red.op == "mean":
                count = math.prod(shape[d] for d in red.dims)
                with np.errstate(invalid="ignore", divide="ignore"):
                    result = acc / np.float64(count)
            result = result.astype(red.dtype)
            if not red.keepdim:
                result = result.reshape(tuple(n for n, t in zip(shape, tags) if not t))
            return [result] + outs

        return run
