"""Matrix products: matmul (1-D, 2-D, batched with broadcasting), mm, bmm, einsum, outer, dot.

float16/bfloat16 products accumulate in float32 and are rounded once to the operands' dtype.
"""

from __future__ import annotations

import string

import numpy as np

from ember.dispatch import apply, binary_path
from ember.errors import ShapeError, fmt_shape
from ember.kernels import gemm
from ember.op import Op, register
from ember.ops._rules import broadcast_shapes, refuse_bool, refuse_mixed, spec
from ember.ops.opmath import LOW_FLOAT_NP, rounded, upcast


def matmul_shape(op: str, a, b) -> tuple:
    """numpy/PyTorch matmul shape rule, with the op and both shapes in every error."""
    sa, sb = tuple(a), tuple(b)
    if not sa or not sb:
        raise ShapeError(f"{op}: both arguments must have at least 1 dimension, got {fmt_shape(sa)} and {fmt_shape(sb)}")
    ka = sa[-1]
    kb = sb[0] if len(sb) == 1 else sb[-2]
    if ka is not None and kb is not None and ka != kb:
        raise ShapeError(
            f"{op}: shapes {fmt_shape(sa)} and {fmt_shape(sb)} cannot be multiplied ({ka} != {kb})"
        )
    if len(sa) == 1 and len(sb) == 1:
        return ()
    if len(sb) == 1:
        return sa[:-1]
    if len(sa) == 1:
        return sb[:-2] + sb[-1:]
    try:
        batch = broadcast_shapes(op, sa[:-2], sb[:-2])
    except ShapeError:
        raise ShapeError(
            f"{op}: batch dimensions of {fmt_shape(sa)} and {fmt_shape(sb)} cannot be broadcast"
        ) from None
    return batch + (sa[-2], sb[-1])


_FLOAT32 = np.dtype(np.float32)
_BOOL = np.dtype(np.bool_)



class MatMulOp(Op):
    name = "matmul"
    fresh_output = True
    grad_reads = {0: (1,), 1: (0,)}

    def infer(self, a, b):
        refuse_bool(self.name, a, b)
        refuse_mixed(self.name, ("input", "other"), a, b)  # PyTorch: "expected m1 and m2 to have the same dtype"
        return spec(matmul_shape(self.name, a.shape, b.shape), a.dtype)

    def kernel(self, xp, a, b):
        dtype = a.dtype
        if dtype is b.dtype and (dtype is _FLOAT32 or (dtype not in LOW_FLOAT_NP and dtype != _BOOL)) \
                and a.ndim and b.ndim:
            if xp is np and 2.0 * a.size * b.shape[-1] < gemm.MIN_FLOPS:  # small: NumPy's, one call fewer
                return np.matmul(a, b)
            return gemm.matmul(a, b, xp=xp)
        refuse_bool(self.name, a, b)  # PyTorch has no bool matrix product (every path: `a @ b` included)
        refuse_mixed(self.name, ("input", "other"), a, b)
        if a.ndim == 0 or b.ndim == 0:
            matmul_shape(self.name, a.shape, b.shape)
        if dtype in LOW_FLOAT_NP:
            return rounded(xp.matmul(upcast(a), upcast(b)), dtype)
        return gemm.matmul(a, b, xp=xp)

    def kernel_out(self, xp, a, b, *, out):
        """a @ b into out (same dtypes, at least 1-D; float16/bfloat16 take the kernel, which sums in float32)."""
        if (type(a) is np.ndarray and type(b) is np.ndarray and a.dtype == b.dtype == out.dtype
                and a.ndim and b.ndim and a.dtype not in LOW_FLOAT_NP):
            return gemm.matmul(a, b, out=out)
        return self.kernel(xp, a, b)

    def vjp(self, ctx, g):
        from ember.ops.shape import squeeze, transpose, unsqueeze

        # Each gradient reads only the other operand (the one saved for it).
        a = ctx.input(0) if ctx.needs_grad(1) else None
        b = ctx.input(1) if ctx.needs_grad(0) else None
        a_vec, b_vec = len(ctx.in_shape(0)) == 1, len(ctx.in_shape(1)) == 1
        if a_vec and b_vec:
            return (g * b if b is not None else None), (g * a if a is not None else None)
        if a_vec:
            g2 = unsqueeze(g, -2)
            ga = squeeze(matmul(g2, transpose(b, -1, -2)), -2) if b is not None else None
            gb = matmul(unsqueeze(a, -1), g2) if a is not None else None
            return ga, gb
        if b_vec:
            g2 = unsqueeze(g, -1)
            ga = matmul(g2, unsqueeze(b, -2)) if b is not None else None
            gb = squeeze(matmul(transpose(a, -1, -2), g2), -1) if a is not None else None
            return ga, gb
        ga = matmul(g, transpose(b, -1, -2)) if b is not None else None
        gb = matmul(transpose(a, -1, -2), g) if a is not None else None
        return ga, gb


_matmul_op = register(MatMulOp())
_matmul_path = binary_path(_matmul_op)


def matmul(input, other):
    """Matrix product with NumPy's rules: 1-D vectors, 2-D matrices, broadcast batches."""
    refuse_bool("matmul", input, other)
    return _matmul_path(input, other)


def mm(input, mat2):
    """Product of two 2-D matrices."""
    if input.ndim != 2 or mat2.ndim != 2:
        raise ShapeError(f"mm: both arguments must be 2-D, got {fmt_shape(input.shape)} and {fmt_shape(mat2.shape)}")
    refuse_mixed("mm", ("input", "mat2"), input, mat2)
    matmul_shape("mm", input.shape, mat2.shape)  # so a mismatch is reported as mm's
    return matmul(input, mat2)


def bmm(input, mat2):
    """Batched product of two 3-D tensors with equal batch sizes."""
    if input.ndim != 3 or mat2.ndim != 3:
        raise ShapeError(f"bmm: both arguments must be 3-D, got {fmt_shape(input.shape)} and {fmt_shape(mat2.shape)}")
    if input.shape[0] != mat2.shape[0]:
        raise ShapeError(f"bmm: batch sizes differ: {fmt_shape(input.shape)} and {fmt_shape(mat2.shape)}")
    refuse_mixed("bmm", ("input", "mat2"), input, mat2)
    matmul_shape("bmm", input.shape, mat2.shape)
    return matmul(input, mat2)


def mv(input, vec):
    """Matrix-vector product."""
    if input.ndim != 2 or vec.ndim != 1:
        raise ShapeError(f"mv: expected a 2-D matrix and a 1-D vector, got {fmt_shape(input.shape)} and {fmt_shape(vec.shape)}")
    refuse_mixed("mv", ("input", "vec"), input, vec)
    return matmul(input, vec)


def dot(input, other):
    """Inner product of two 1-D tensors."""
    if input.ndim != 1 or other.ndim != 1:
        raise ShapeError(f"dot: expected 1-D tensors, got {fmt_shape(input.shape)} and {fmt_shape(other.shape)}")
    refuse_mixed("dot", ("input", "other"), input, other)
    return matmul(input, other)


def inner(input, other):
    """Sum of products over the last dimension of each (a plain product where either is 0-D)."""
    refuse_mixed("inner", ("input", "other"), input, other)
    if input.ndim == 0 or other.ndim == 0:
        return input * other
    if input.shape[-1] != other.shape[-1]:
        raise ShapeError(f"inner: last dimensions differ: {fmt_shape(input.shape)} and {fmt_shape(other.shape)}")
    return tensordot(input, other, dims=([input.ndim - 1], [other.ndim - 1]))


def outer(input, vec2):
    """Outer product of two 1-D tensors."""
    from ember.ops.shape import unsqueeze

    if input.ndim != 1 or vec2.ndim != 1:
        raise ShapeError(f"outer: expected 1-D tensors, got {fmt_shape(input.shape)} and {fmt_shape(vec2.shape)}")
    return unsqueeze(input, 1) * unsqueeze(vec2, 0)


ger = outer


def _fused(op: str, product, input, a, b, beta, alpha):
    """beta * input + alpha * product(a, b); float16/bfloat16 computed in float32 and rounded once, as PyTorch's CPU
    kernels add the product to input before rounding (rounding the product first differed in 1-20 of 48 values)."""
    if input.dtype.np not in LOW_FLOAT_NP:
        return _scaled_sum(op, input, product(a, b), beta, alpha)
    f32 = np.dtype(np.float32)
    return _scaled_sum(op, input.to(f32), product(a.to(f32), b.to(f32)), beta, alpha).to(input.dtype)


def _scaled_sum(op: str, input, prod, beta, alpha):
    """beta * input + alpha * prod, where beta == 0 ignores input's values (NaN and inf too), as PyTorch's do."""
    if alpha != 1:
        prod = prod * alpha
    if beta == 0:
        if broadcast_shapes(op, tuple(input.shape), tuple(prod.shape)) != tuple(prod.shape):
            raise ShapeError(f"{op}: input {fmt_shape(input.shape)} does not broadcast to the product's shape "
                             f"{fmt_shape(prod.shape)}")
        from ember.ops.elementwise_composed import with_zero_gradient_to

        return with_zero_gradient_to(prod, input)
    return prod + (input if beta == 1 else input * beta)


def addmm(input, mat1, mat2, *, beta=1, alpha=1):
    """beta * input + alpha * (mat1 @ mat2)."""
    refuse_mixed("addmm", ("input", "mat1", "mat2"), input, mat1, mat2)
    return _fused("addmm", mm, input, mat1, mat2, beta, alpha)


def addmv(input, mat, vec, *, beta=1, alpha=1):
    """beta * input + alpha * (mat @ vec)."""
    refuse_mixed("addmv", ("input", "mat", "vec"), input, mat, vec)
    return _fused("addmv", mv, input, mat, vec, beta, alpha)


def addr(input, vec1, vec2, *, beta=1, alpha=1):
    """beta * input + alpha * outer(vec1, vec2)."""
    refuse_mixed("addr", ("input", "vec1", "vec2"), input, vec1, vec2)
    return _scaled_sum("addr", input, outer(vec1, vec2), beta, alpha)


def baddbmm(input, batch1, batch2, *, beta=1, alpha=1):
    """beta * input + alpha * (batch1 @ batch2), batch by batch."""
    refuse_mixed("baddbmm", ("input", "batch1", "batch2"), input, batch1, batch2)
    return _fused("baddbmm", bmm, input, batch1, batch2, beta, alpha)


def addbmm(input, batch1, batch2, *, beta=1, alpha=1):
    """beta * input + alpha * the sum over the batch of batch1[i] @ batch2[i]."""
    from ember.ops.reduction import sum as _sum

    refuse_mixed("addbmm", ("input", "batch1", "batch2"), input, batch1, batch2)
    if input.dtype.np in LOW_FLOAT_NP and batch1.ndim == 3 and batch1.shape[0]:
        # PyTorch's CPU kernel adds one batch's product at a time (each an addmm, rounded once): the same roundings
        out = addmm(input, batch1[0], batch2[0], beta=beta, alpha=alpha)
        for i in range(1, batch1.shape[0]):
            out = addmm(out, batch1[i], batch2[i], alpha=alpha)
        return out
    return _scaled_sum("addbmm", input, _sum(bmm(batch1, batch2), 0), beta, alpha)


def trace(input):
    """The sum of a 2-D tensor's main diagonal (integers sum to int64)."""
    from ember.ops.reduction import sum as _sum
    from ember.ops.shape import diagonal

    if input.ndim != 2:
        raise ShapeError(f"trace: expected a 2-D tensor, got shape {fmt_shape(input.shape)}")
    return _sum(diagonal(input))


def vdot(input, other):
    """Inner product of two 1-D tensors (no conjugate to take: Ember's tensors are real)."""
    if input.ndim != 1 or other.ndim != 1:
        raise ShapeError(f"vdot: expected 1-D tensors, got {fmt_shape(input.shape)} and {fmt_shape(other.shape)}")
    refuse_mixed("vdot", ("input", "other"), input, other)
    return matmul(input, other)


def cdist(x1, x2, p: float = 2.0, compute_mode=None):
    """The p-norm distance between each row of x1 (..., P, M) and each row of x2 (..., R, M): (..., P, R); its
    gradient is 0 where two rows coincide (not NaN), as PyTorch's is."""
    from ember.ops.elementwise import abs as _abs
    from ember.ops.elementwise import pow as _pow
    from ember.ops.elementwise import sqrt, where
    from ember.ops.reduction import amax
    from ember.ops.reduction import sum as _sum

    if x1.ndim < 2 or x2.ndim < 2 or x1.shape[-1] != x2.shape[-1]:
        raise ShapeError(f"cdist: expected (..., P, M) and (..., R, M) with one M, got {fmt_shape(x1.shape)} and "
                         f"{fmt_shape(x2.shape)}")
    if p < 0:
        raise ValueError(f"cdist: p must be non-negative, got {p}")
    refuse_mixed("cdist", ("x1", "x2"), x1, x2)
    diff = x1.unsqueeze(-2) - x2.unsqueeze(-3)  # (..., P, R, M)
    if p == 0:  # the count of differing coordinates, still a function of x1 and x2 (a zero gradient, as PyTorch's)
        from ember.ops.elementwise_composed import with_zero_gradient_to

        return with_zero_gradient_to(_sum(diff != 0, -1).to(x1.dtype), _sum(diff, -1))
    if p == float("inf"):
        return amax(_abs(diff), -1)
    if p == 1:
        return _sum(_abs(diff), -1)
    if p == 2:
        total = _sum(diff * diff, -1)
    else:  # |d|**p of a zero difference is 0 with gradient 0 (for p < 1 its derivative is infinite at 0)
        size = _abs(diff)
        nonzero = size > 0
        total = _sum(where(nonzero, _pow(where(nonzero, size, 1.0), p), 0.0), -1)
    # the root of a positive total only: at 0 its gradient is infinite, and 0 * inf is NaN
    apart = total > 0
    root = sqrt(where(apart, total, 1.0)) if p == 2 else _pow(where(apart, total, 1.0), 1.0 / p)
    return where(apart, root, 0.0)


def dist(input, other, p=2):
    """The p-norm of input - other (broadcast)."""
    from ember.ops.reduction import norm

    return norm(input - other, p)


# --- einsum -------------------------------------------------------------------------------
def parse_einsum(equation: str, shapes) -> tuple:
    """Expand '...' and the implicit output: returns (input subscripts, output subscripts)."""
    eq = equation.replace(" ", "")
    if eq.count("->") > 1:
        raise ValueError(f"einsum: equation {equation!r} has more than one '->'")
    if "->" in eq:
        lhs, out = eq.split("->")
    else:
        lhs, out = eq, None
    ins = lhs.split(",")
    if len(ins) != len(shapes):
        raise ValueError(f"einsum: equation {equation!r} names {len(ins)} operands but {len(shapes)} were given")
    spare = [c for c in string.ascii_uppercase + string.ascii_lowercase if c not in eq]
    ell_letters = ""
    resolved = []
    for sub, shape in zip(ins, shapes):
        if "..." in sub:
            n = len(shape) - (len(sub) - 3)
            if n < 0:
                raise ShapeError(f"einsum: operand {sub!r} has more subscripts than dimensions {fmt_shape(shape)}")
            if n > len(ell_letters):
                ell_letters = "".join(spare[:n])
            sub = sub.replace("...", ell_letters[len(ell_letters) - n :] if n else "")
        if len(sub) != len(shape):
            raise ShapeError(
                f"einsum: subscripts {sub!r} have {len(sub)} letters but the operand has shape {fmt_shape(shape)}"
            )
        resolved.append(sub)
    if out is None:
        counts = {}
        for sub in resolved:
            for c in sub:
                counts[c] = counts.get(c, 0) + 1
        out = ell_letters + "".join(sorted(c for c, n in counts.items() if n == 1 and c not in ell_letters))
    else:
        out = out.replace("...", ell_letters)
    return resolved, out


def _einsum_shape(ins, out, shapes):
    sizes = {}
    for sub, shape in zip(ins, shapes):
        for c, d in zip(sub, shape):
            if c in sizes and sizes[c] not in (d, 1) and d != 1 and None not in (d, sizes[c]):
                raise ShapeError(
                    f"einsum: subscript {c!r} has size {sizes[c]} in one operand and {d} in another "
                    f"(shapes {', '.join(fmt_shape(s) for s in shapes)})"
                )
            if c not in sizes or sizes[c] == 1:
                sizes[c] = d
    for c in out:
        if c not in sizes:
            raise ValueError(f"einsum: output subscript {c!r} does not appear in the inputs")
    return tuple(sizes[c] for c in out)


class EinsumOp(Op):
    name = "einsum"
    save_inputs = slice(0, None)

    def infer(self, *xs, equation):
        ins, out = parse_einsum(equation, [x.shape for x in xs])
        refuse_mixed(self.name, [f"operand {i}" for i in range(len(xs))], *xs)  # PyTorch's products do not promote
        return spec(_einsum_shape(ins, out, [x.shape for x in xs]), xs[0].dtype)

    def kernel(self, xp, *xs, equation):
        ins, out = parse_einsum(equation, [x.shape for x in xs])
        _einsum_shape(ins, out, [x.shape for x in xs])
        refuse_mixed(self.name, [f"operand {i}" for i in range(len(xs))], *xs)
        dtype = xs[0].dtype
        xs = [upcast(x) for x in xs]
        return xp.asarray(rounded(xp.einsum(",".join(ins) + "->" + out, *xs, optimize=len(xs) > 2), dtype))

    def vjp(self, ctx, g):
        from ember.ops.shape import expand, reshape

        n = len(ctx.in_meta)
        xs = [ctx.input(i) for i in range(n)]
        ins, out = parse_einsum(ctx.attrs["equation"], [x.shape for x in xs])
        grads = []
        for i in range(n):
            if not ctx.needs_grad(i):
                grads.append(None)
                continue
            sub = ins[i]
            uniq = "".join(dict.fromkeys(sub))  # a repeated letter ('ii') is one index: the diagonal
            size = {c: xs[i].shape[sub.index(c)] for c in uniq}
            available = set(out) | {c for j, s in enumerate(ins) if j != i for c in s}
            target = "".join(c for c in uniq if c in available)
            others = [(ins[j], xs[j]) for j in range(n) if j != i]
            eq = ",".join([out] + [s for s, _ in others]) + "->" + target
            r = einsum(eq, g, *[x for _, x in others])
            if target != uniq:  # letters summed away inside operand i come back by broadcasting
                shape = tuple(size[c] if c in available else 1 for c in uniq)
                r = expand(reshape(r, shape), tuple(size[c] for c in uniq))
            if uniq != sub:
                r = _onto_diagonals(r, uniq, sub, size, ins + [out])
            grads.append(r)
        return tuple(grads)


_einsum_op = register(EinsumOp())


def _onto_diagonals(r, uniq: str, sub: str, size: dict, used: list):
    """Spread r (subscripts `uniq`) onto the diagonals of a `sub`-shaped tensor, zero elsewhere.

    Each repeat of a letter gets a fresh letter tied to the first by an identity matrix, so this
    stays one einsum (and differentiable again).
    """
    from ember.ops.creation_ops import eye_like

    taken = set("".join(used))
    fresh = (c for c in string.ascii_letters if c not in taken)
    seen, renamed, eye_subs, eyes = set(), "", [], []
    for c in sub:
        if c in seen:
            f = next(fresh)
            renamed += f
            eye_subs.append(c + f)
            eyes.append(eye_like(r, size[c]))
        else:
            seen.add(c)
            renamed += c
    return einsum(",".join([uniq] + eye_subs) + "->" + renamed, r, *eyes)


def einsum(equation: str, *operands):
    """Einstein summation over operands ('ij,jk->ik'; '...' broadcasting supported)."""
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])
    return apply(_einsum_op, *operands, equation=equation)


def tensordot(a, b, dims=2):
    """Sum products over the last `dims` dims of a and the first of b (or explicit dim lists)."""
    refuse_mixed("tensordot", ("a", "b"), a, b)
    letters = iter(string.ascii_lowercase)
    sa = [next(letters) for _ in range(a.ndim)]
    sb = [next(letters) for _ in range(b.ndim)]
    if isinstance(dims, int):
        pairs = list(zip(range(a.ndim - dims, a.ndim), range(dims)))
    else:
        pairs = list(zip(dims[0], dims[1]))
    for da, db in pairs:
        sb[db] = sa[da]
    contracted = {sa[da] for da, _ in pairs}
    out = [c for c in sa if c not in contracted] + [c for c in sb if c not in contracted]
    return einsum("".join(sa) + "," + "".join(sb) + "->" + "".join(out), a, b)


def cross(input, other, dim: int | None = None):
    """The cross product of 3-vectors along dim (broadcasting the rest); torch.cross's default is the first dim of
    size 3, linalg.cross's the last."""
    from ember.ops.shape import broadcast_tensors, cat, narrow

    refuse_mixed("cross", ("input", "other"), input, other)
    a, b = broadcast_tensors(input, other)
    if dim is None:
        sizes = [d for d, n in enumerate(a.shape) if n == 3]
        if not sizes:
            raise ShapeError(f"cross: no dim of size 3 in {fmt_shape(a.shape)}")
        dim = sizes[0]
    dim = dim % a.ndim if a.ndim else 0
    if a.ndim == 0 or a.shape[dim] != 3:
        raise ShapeError(f"cross: dim {dim} of {fmt_shape(a.shape)} must have size 3")
    ax, ay, az = (narrow(a, dim, k, 1) for k in range(3))
    bx, by, bz = (narrow(b, dim, k, 1) for k in range(3))
    return cat([ay * bz - az * by, az * bx - ax * bz, ax * by - ay * bx], dim)
