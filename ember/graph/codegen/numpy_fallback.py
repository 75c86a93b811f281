"""The NumPy renderer: a region as generated Python calling ufuncs with `out=` into reused buffers.

It needs nothing beyond NumPy, so it is the fallback when Numba is missing, and the better choice
for regions dominated by transcendental functions (NumPy's are vectorised). When every input is
contiguous and full-sized the loop runs over chunks small enough to stay in cache, so the chain
reads its inputs and writes its outputs once. Ops without a plain ufunc form call the op's own
kernel, so results match the unfused ops exactly.
"""

from __future__ import annotations

import numpy as np

from ember.graph.codegen.region import Region
from ember.graph.codegen.renderer import Kernel, Renderer, operand_dtype
from ember.op import OPS

CHUNK = 1 << 16  # elements per chunk: a few buffers of this size stay in L2

# ns per element of one op (one-op regions over 2**20 float32, measured where the Numba table has the op
# too, so the two compare); erf has no ufunc: it runs the op's own kernel (float32: a minimax evaluation).
_COST = {"tanh": 0.5, "exp": 0.5, "log": 0.5, "sin": 0.6, "cos": 0.8, "tan": 0.5, "sigmoid": 1.0, "gelu": 6.0,
         "erf": 10.1, "softplus": 5.0, "silu": 1.3, "elu": 3.0, "pow": 4.0, "atan2": 1.3}


def _ufunc_statements(ins, ops, target):
    """Statements computing `ins` into `target` with ufuncs, or None when the op has no ufunc form."""
    name, c = ins.op, ins.compute
    op = OPS[name]
    if op.ufunc is not None and c.kind in op.ufunc_kinds:  # what the op declares computes it exactly
        return [f"np.{op.ufunc}({', '.join(ops)}, out={target})"]
    # Ops whose best NumPy form is not one ufunc call.
    if name == "relu":
        return [f"np.maximum({ops[0]}, _Z[{c.name!r}], out={target})"]
    if name == "square":
        return [f"np.multiply({ops[0]}, {ops[0]}, out={target})"]
    if name == "reciprocal":
        return [f"np.true_divide(1, {ops[0]}, out={target})"]
    if name == "rsqrt":
        return [f"np.sqrt({ops[0]}, out={target})", f"np.true_divide(1, {target}, out={target})"]
    if name == "cast":
        return [f"np.copyto({target}, {ops[0]}, casting='unsafe')"]
    if name == "clone":
        return [f"np.copyto({target}, {ops[0]})"]
    return None


_SCALAR_OPERATORS = {"add": "({} + {})", "subtract": "({} - {})", "multiply": "({} * {})",
                     "true_divide": "({} / {})", "negative": "(-{})"}


def _scalar_expression(ins, ops):
    """An expression computing `ins` on NumPy scalars (0-d regions), or None when the op has no ufunc form.
    The ufuncs are the ones _ufunc_statements calls, so the values are the same."""
    name, c = ins.op, ins.compute
    op = OPS[name]
    if op.ufunc is not None and c.kind in op.ufunc_kinds:
        if c.kind == "f" and op.ufunc in _SCALAR_OPERATORS:  # IEEE arithmetic: the operator is the ufunc's
            return _SCALAR_OPERATORS[op.ufunc].format(*ops)  # value, at a tenth of a ufunc call's cost
        return f"np.{op.ufunc}({', '.join(ops)})"
    if name == "relu":
        return f"np.maximum({ops[0]}, _Z[{c.name!r}])"
    if name == "square":
        return f"np.multiply({ops[0]}, {ops[0]})"
    if name == "reciprocal":
        return f"np.true_divide(1, {ops[0]})"
    if name == "rsqrt":
        return f"np.true_divide(1, np.sqrt({ops[0]}))"
    if name == "cast":
        if ins.dtype.kind == "f" and ins.args[0].kind != "c":  # a float scalar's constructor rounds as astype
            return f"np.{ins.dtype.name}({ops[0]})"
        return f"np.asarray({ops[0]}).astype(np.{ins.dtype.name}, casting='unsafe')[()]"
    if name == "clone":
        return ops[0]
    return None


def _op_cost(ins) -> float:
    """One pass of a ufunc; an op without a ufunc form runs its own kernel, which allocates its result and
    may pass over the data several times (clamp 1.2, where 4.2, leaky_relu 4.7 ns per element, measured)."""
    return 0.35 if _ufunc_statements(ins, ["x"] * len(ins.args), "y") is not None else 2.0


class _Source:
    """Generates the kernel source of one region."""

    def __init__(self, region: Region) -> None:
        self.region = region
        self.consts: list = []  # values referenced as _C[i]
        self.kernels: list = []  # (kernel, attrs) referenced as _K[i]
        self.scratch: list = []  # dtypes of scratch buffers b0, b1, ...

    def const(self, value) -> str:
        self.consts.append(value)
        return f"_C[{len(self.consts) - 1}]"

    def operands(self, ins, texts: list) -> list:
        """The ufunc operands of `ins`: its inputs' names (`texts`) cast to the dtype it computes in, and its
        constants as typed scalars."""
        ops = []
        for a, text in zip(ins.args, texts):
            want = operand_dtype(self.region, a) if ins.op in ("cast", "clone") else ins.compute
            if a.kind == "c":
                ops.append(self.const(np.dtype(want).type(a.ref)))
            elif operand_dtype(self.region, a) != want:
                ops.append(f"{text}.astype(np.{np.dtype(want).name})")
            else:
                ops.append(text)
        return ops

    def body(self) -> list:
        r = self.region
        last = {}
        for j, ins in enumerate(r.instrs):
            for a in ins.args:
                if a.kind == "t":
                    last[a.ref] = j
        keep = set(r.outputs) | ({r.reduce.arg} if r.reduce is not None else set())
        names: dict = {}
        free: dict = {}  # dtype -> free scratch names
        holder: dict = {}  # instr -> scratch name it occupies
        lines = []
        for j, ins in enumerate(r.instrs):
            raw = [f"a{a.ref}" if a.kind == "in" else names[a.ref] if a.kind == "t" else None for a in ins.args]
            for a in ins.args:  # operands this instruction is the last to read free their buffers
                if a.kind == "t" and last.get(a.ref) == j and a.ref not in keep and a.ref in holder:
                    free.setdefault(r.instrs[a.ref].dtype, []).append(holder.pop(a.ref))
            ufunc = _ufunc_statements(ins, ["x"] * len(ins.args), "y") is not None
            if j in r.outputs:
                target = f"r{r.outputs.index(j)}"
            elif not ufunc:
                target = f"t{j}"
            elif free.get(ins.dtype):
                target = free[ins.dtype].pop()
                holder[j] = target
            else:
                target = f"b{len(self.scratch)}"
                self.scratch.append(ins.dtype)
                holder[j] = target
            names[j] = target
            if ufunc:
                lines.extend(_ufunc_statements(ins, self.operands(ins, raw), target))
                continue
            # no ufunc form: the op's own kernel on the operands as the graph gave them
            self.kernels.append((OPS[ins.op].kernel, dict(ins.attrs)))
            k = len(self.kernels) - 1
            args = ", ".join(t if t is not None else self.const(a.ref) for t, a in zip(raw, ins.args))
            call = f"_K[{k}][0](np, {args}, **_K[{k}][1])"
            if target.startswith("r"):
                lines.append(f"np.copyto({target}, {call}, casting='unsafe')")
            else:
                lines.append(f"{target} = np.asarray({call})")
        self.names = names
        return lines

    def scalar_body(self) -> list | None:
        """Statements computing a region of 0-d operands on NumPy scalars (t0, t1, ...), or None when an op
        has no ufunc form. A ufunc on scalars runs the loop it runs with out= on 0-d arrays, without the
        output arrays' allocation and broadcasting: an Adam step's bias-correction region (ten ops) took
        17.5 us as arrays."""
        r = self.region
        lines = []
        for j, ins in enumerate(r.instrs):
            raw = [f"a{a.ref}" if a.kind == "in" else f"t{a.ref}" if a.kind == "t" else None for a in ins.args]
            expr = _scalar_expression(ins, self.operands(ins, raw))
            if expr is None:
                return None
            if ins.op != "cast" and ins.dtype != ins.compute:
                expr = f"np.{ins.dtype.name}({expr})"  # as the out= form casts into the result's dtype
            lines.append(f"t{j} = {expr}")
        return lines

    def source(self) -> str:
        r = self.region
        n_in = len(r.inputs)
        scalar = self.scalar_body() if r.reduce is None and n_in else None
        body = self.body()
        outs = [f"out{k}" for k in range(len(r.outputs))]
        params = ", ".join([f"in{k}" for k in range(n_in)] + [f"out{k}=None" for k in range(len(r.outputs))])
        src = [f"def kernel({params}):"]
        if scalar is not None:
            src.append(f"    if not ({' or '.join(f'in{k}.ndim' for k in range(n_in))}):")
            src += [f"        a{k} = in{k}[()]" for k in range(n_in)]
            src += [f"        {line}" for line in scalar]
            for k, j in enumerate(r.outputs):
                src.append(f"        if out{k} is None:")
                src.append(f"            out{k} = np.asarray(t{j})")
                src.append("        else:")
                src.append(f"            out{k}[()] = t{j}")
            src.append(f"        return [{', '.join(outs)}]")
        src.append(f"    shape = _broadcast({', '.join(f'in{k}.shape' for k in range(n_in))})")
        for k, j in enumerate(r.outputs):
            src.append(f"    if out{k} is None:")
            src.append(f"        out{k} = np.empty(shape, np.{r.instrs[j].dtype.name})")
        if r.reduce is None:
            cond = " and ".join(f"in{k}.shape == shape and in{k}.flags.c_contiguous" for k in range(n_in))
            src.append(f"    n = {outs[0]}.size")
            src.append(f"    if n > {CHUNK} and {cond}:")
            src += [f"        f{k} = in{k}.reshape(-1)" for k in range(n_in)]
            src += [f"        g{k} = out{k}.reshape(-1)" for k in range(len(outs))]
            src += [f"        s{i} = np.empty({CHUNK}, np.{d.name})" for i, d in enumerate(self.scratch)]
            src.append(f"        for lo in range(0, n, {CHUNK}):")
            src.append(f"            hi = min(n, lo + {CHUNK})")
            src += [f"            a{k} = f{k}[lo:hi]" for k in range(n_in)]
            src += [f"            r{k} = g{k}[lo:hi]" for k in range(len(outs))]
            src += [f"            b{i} = s{i}[:hi - lo]" for i in range(len(self.scratch))]
            src += [f"            {line}" for line in body]
            src.append(f"        return [{', '.join(outs)}]")
        src += [f"    a{k} = in{k}" for k in range(n_in)]
        src += [f"    r{k} = out{k}" for k in range(len(outs))]
        src += [f"    b{i} = np.empty(shape, np.{d.name})" for i, d in enumerate(self.scratch)]
        src += [f"    {line}" for line in body]
        if r.reduce is not None:
            red = r.reduce
            summed = self.names[red.arg]
            if red.op == "sum" and len(red.dims) == 1 and red.dtype == r.instrs[red.arg].dtype \
                    and red.dtype.kind == "f" and red.dtype.itemsize >= 4:
                # what SumOp.kernel runs for one dim of float32/float64, without the op's argument checks
                src.append(f"    red = np.asarray(np.add.reduce({summed}, {red.dims}, None, None, {red.keepdim}))")
            else:
                self.kernels.append((OPS[red.op].kernel, {"dim": red.dims, "keepdim": red.keepdim}))
                k = len(self.kernels) - 1
                src.append(f"    red = np.asarray(_K[{k}][0](np, {summed}, **_K[{k}][1]))")
            outs.insert(0, "red")
        src.append(f"    return [{', '.join(outs)}]")
        return "\n".join(src) + "\n"


def _broadcast(*shapes) -> tuple:
    """np.broadcast_shapes, answered without it (1.8 us a call) when the operands are one shape and 0-d ones."""
    out = ()
    for shape in shapes:
        if shape and shape != out:
            if out:
                return np.broadcast_shapes(*shapes)
            out = shape
    return out


class NumpyRenderer(Renderer):
    """Generated Python over NumPy ufuncs; always available."""

    name = "numpy"

    def supports(self, region: Region) -> bool:
        return all(ins.op in OPS for ins in region.instrs)

    def cost(self, region: Region) -> float:
        return sum(_COST.get(ins.op, _op_cost(ins)) for ins in region.instrs) + 0.3

    def render(self, region: Region) -> tuple:
        """The kernel's source and the objects it refers to."""
        gen = _Source(region)
        text = gen.source()
        zeros = {d.name: d.type(0) for d in {ins.compute for ins in region.instrs}}
        return text, {"np": np, "_C": gen.consts, "_K": gen.kernels, "_Z": zeros, "_broadcast": _broadcast,
                      "__name__": "ember_kernels_numpy"}

    def build(self, region: Region) -> Kernel:
        text, namespace = self.render(region)
        exec(compile(text, f"<ember fused {region.key}>", "exec"), namespace)  # noqa: S102 - our own source
        fn = namespace["kernel"]
        return lambda arrays, outs=None: fn(*arrays, *(outs or ()))
