"""The op table: every op row, run against PyTorch by the helper, by finite differences and on meta.

A row's `fn(lib, *args)` is called with lib=ember and lib=torch (torch names fall back to
torch.nn.functional); `th` is given only where the two APIs differ. `make(r)` draws the arguments
(random shapes and values) from a seeded `Rand`.
"""

from __future__ import annotations

import warnings

import numpy as np

from .helpers import CONV, ELEMENTWISE, EXACT, LARGE, MATMUL, REDUCTION, TRANSCENDENTAL, OpRow
from .inputs import Rand

ROWS: list[OpRow] = []
INTS = ("int64", "int32")


def row(name: str, fn, make, **kw) -> None:
    """Add a row to the table."""
    ROWS.append(OpRow(name, fn, make, **kw))


def _relu_backward(g, out):
    from ember.ops.elementwise import relu_backward

    return relu_backward(g, out)


def _channel_affine(L, x, scale, shift):
    """ember's channel_affine op; for PyTorch, the broadcast product and sum it stands for."""
    if L.__name__ == "ember":
        from ember.ops.channel_affine import channel_affine

        return channel_affine(x, scale, shift)
    shape = (1, -1) + (1,) * (x.ndim - 2)
    out = x if scale is None else x * scale.reshape(shape)
    return out if shift is None else out + shift.reshape(shape)


def _bn_scale_shift(L, mean, var, w, b):
    """Eval batch norm's per-channel (scale, shift): ember's op; for PyTorch, the composite it stands for."""
    if L.__name__ == "ember":
        from ember.ops.channel_affine import batch_norm_scale_shift

        return batch_norm_scale_shift(mean, var, w, b, 1e-3)
    up = [None if t is None else t.float() if t.dtype in (L.float16, L.bfloat16) else t for t in (mean, var, w, b)]
    mean, var, w, b = up  # float16/bfloat16 statistics compute in float32, as F.batch_norm always did
    scale = L.rsqrt(var + 1e-3)
    scale = scale if w is None else scale * w
    shift = -mean * scale
    return scale, (shift if b is None else shift + b)


def _log_softmax_backward(g, y, d):
    from ember.dispatch import apply
    from ember.ops.activation import _log_softmax_backward_op

    return apply(_log_softmax_backward_op, g, y, dim=d)


def _log_softmax_backward_inputs(r):
    """(g, y, dim) with y a log_softmax output along dim (what the gradient op is given)."""
    shape = r.shape(1, 4)
    d = int(r.rng.integers(-len(shape), len(shape)))
    x = r.normal(shape, scale=3.0).astype(np.float64)
    m = x.max(d, keepdims=True)
    y = x - m - np.log(np.exp(x - m).sum(d, keepdims=True))
    return [r.normal(shape), y.astype(r.normal(()).dtype), d]


# --- input makers ------------------------------------------------------------------------------
def one(gen: str = "normal", **kw):
    """One random-shaped array drawn by Rand.<gen>."""
    return lambda r: [getattr(r, gen)(r.shape(), **kw)]


def two(gen_a: str = "normal", gen_b: str = "normal", kw_a=None, kw_b=None):
    """Two arrays of mutually broadcastable random shapes."""

    def make(r: Rand):
        sa, sb = r.bshapes(2)
        return [getattr(r, gen_a)(sa, **(kw_a or {})), getattr(r, gen_b)(sb, **(kw_b or {}))]

    return make


def int_pair(nonzero_b: bool = False):
    """Two broadcastable integer arrays of the case's dtype (b nonzero for division)."""

    def make(r: Rand):
        sa, sb = r.bshapes(2)
        b = r.nonzero_ints(sb, -9, 10, r.dtype) if nonzero_b else r.ints(sb, -9, 10, r.dtype)
        return [r.ints(sa, -20, 21, r.dtype), b]

    return make


def dim_of(r: Rand, ndim: int, *, none: bool = True, tuples: bool = True):
    """A reduction dim: None, an int (maybe negative) or a tuple of distinct dims."""
    kinds = ["int"] + (["none"] if none else []) + (["tuple"] if tuples and ndim >= 2 else [])
    kind = r.choice(kinds)
    if kind == "none" or ndim == 0:
        return None if none else (0 if ndim == 0 else -1)
    if kind == "int":
        return int(r.rng.integers(-ndim, ndim))
    k = int(r.rng.integers(2, ndim + 1))
    dims = r.rng.choice(ndim, size=k, replace=False)
    return tuple(int(d) - ndim if r.rng.random() < 0.5 else int(d) for d in dims)


def reduce_args(gen: str = "normal", *, none: bool = True, tuples: bool = True, min_size: int = 1, **kw):
    """[x, dim, keepdim] for a reduction over a random 1-4 dimensional shape."""

    def make(r: Rand):
        x = getattr(r, gen)(r.shape(1, 4, min_size, 4), **kw)
        return [x, dim_of(r, x.ndim, none=none, tuples=tuples), bool(r.rng.random() < 0.5)]

    return make


def unique_index(r: Rand, shape: tuple, dim: int, size: int) -> np.ndarray:
    """An index for scatter: along `dim`, distinct positions in [0, size) (no write conflicts)."""
    moved = list(shape)
    moved[dim], moved[-1] = moved[-1], moved[dim]
    lead = int(np.prod(moved[:-1], dtype=np.int64))
    rows = np.stack([r.rng.permutation(size)[: moved[-1]] for _ in range(lead)]).reshape(moved)
    return np.swapaxes(rows, dim, -1).astype(np.int64)


# --- elementwise: arithmetic ------------------------------------------------------------------------
row("add", lambda L, a, b: a + b, two())
row("sub", lambda L, a, b: a - b, two())
row("mul", lambda L, a, b: a * b, two())
row("div", lambda L, a, b: a / b, two("normal", "away", kw_b={"gap": 0.5}))
# PyTorch has no derivative for floor division (or for remainder's scalar-first form); Ember's (zero, and
# -floor(a/b) for the divisor) are checked by finite differences instead.
row("floor_divide", lambda L, a, b: a // b, two("normal", "away", kw_b={"gap": 0.5}), torch_grad=False)
row("remainder", lambda L, a, b: a % b, two("normal", "away", kw_b={"gap": 0.5}))
row("pow", lambda L, a, b: a**b, two("positive", "normal"))
row("add_fn", lambda L, a, b: L.add(a, b), two())
row("sub_fn", lambda L, a, b: L.sub(a, b), two())
row("mul_fn", lambda L, a, b: L.mul(a, b), two())
row("div_fn", lambda L, a, b: L.div(a, b), two("normal", "away"))
row("pow_fn", lambda L, a, b: L.pow(a, b), two("positive", "normal"))
row("add_alpha", lambda L, a, b: L.add(a, b, alpha=-2.5), two())
row("div_floor_mode", lambda L, a, b: L.div(a, b, rounding_mode="floor"), two("normal", "away"), torch_grad=False)
# Python scalars on either side.
row("add_scalar", lambda L, a: a + 2.5, one())
row("radd_scalar", lambda L, a: 2.5 + a, one())
row("add_int_scalar", lambda L, a: a + 3, one())
row("sub_scalar", lambda L, a: a - 1.5, one())
row("rsub_scalar", lambda L, a: 1.5 - a, one())
row("mul_scalar", lambda L, a: a * -2.5, one())
row("rmul_scalar", lambda L, a: 3 * a, one())
row("div_scalar", lambda L, a: a / 4.0, one())
row("rdiv_scalar", lambda L, a: 2.0 / a, one("away", gap=0.3))
row("floordiv_scalar", lambda L, a: a // 0.7, one(), torch_grad=False)
row("rfloordiv_scalar", lambda L, a: 5.0 // a, one("away", gap=0.3), torch_grad=False)
row("mod_scalar", lambda L, a: a % 1.5, one())
row("rmod_scalar", lambda L, a: 5.0 % a, one("away", gap=0.3), torch_grad=False)
row("pow_scalar_2", lambda L, a: a**2, one())
row("pow_scalar_3", lambda L, a: a**3, one())
row("pow_scalar_0", lambda L, a: a**0, one())
row("pow_scalar_half", lambda L, a: a**0.5, one("positive"))
row("pow_scalar_neg", lambda L, a: a**-1.5, one("positive"))
row("rpow_scalar", lambda L, a: 2.0**a, one())
row("rpow_scalar_small_base", lambda L, a: 0.5**a, one())
# Integer arithmetic: floor division and remainder follow Python's signs, true division gives floats.
row("add_int", lambda L, a, b: a + b, int_pair(), dtypes=INTS, tol=EXACT, grad=False)
row("sub_int", lambda L, a, b: a - b, int_pair(), dtypes=INTS, tol=EXACT, grad=False)
row("mul_int", lambda L, a, b: a * b, int_pair(), dtypes=INTS, tol=EXACT, grad=False)
row("floordiv_int", lambda L, a, b: a // b, int_pair(True), dtypes=INTS, tol=EXACT, grad=False)
row("mod_int", lambda L, a, b: a % b, int_pair(True), dtypes=INTS, tol=EXACT, grad=False)
row("truediv_int", lambda L, a, b: a / b, int_pair(True), dtypes=INTS, grad=False)
row("pow_int", lambda L, a: a**2, lambda r: [r.ints(r.shape(), -9, 10, r.dtype)], dtypes=INTS, tol=EXACT, grad=False)
row("int_plus_float_scalar", lambda L, a: a + 1.5, lambda r: [r.ints(r.shape(), -9, 10, r.dtype)], dtypes=INTS,
    grad=False)
row("int_times_int_scalar", lambda L, a: a * 3, lambda r: [r.ints(r.shape(), -9, 10, r.dtype)], dtypes=INTS,
    tol=EXACT, grad=False)
row("neg_int", lambda L, a: -a, lambda r: [r.ints(r.shape(), -9, 10, r.dtype)], dtypes=INTS, tol=EXACT, grad=False)
row("abs_int", lambda L, a: L.abs(a), lambda r: [r.ints(r.shape(), -9, 10, r.dtype)], dtypes=INTS, tol=EXACT,
    grad=False)

# --- elementwise: unary math ---------------------------------------------------------------------
row("neg", lambda L, x: -x, one())
row("neg_fn", lambda L, x: L.neg(x), one())
row("abs", lambda L, x: L.abs(x), one("away"))
row("abs_op", lambda L, x: abs(x), one("away"))
row("sign", lambda L, x: L.sign(x), one("away"), gradcheck=False)
row("exp", lambda L, x: L.exp(x), one())
row("log", lambda L, x: L.log(x), one("positive"))
row("log2", lambda L, x: L.log2(x), one("positive"))
row("log1p", lambda L, x: L.log1p(x), one("uniform", lo=-0.8, hi=3.0))
row("expm1", lambda L, x: L.expm1(x), one())
row("sqrt", lambda L, x: L.sqrt(x), one("positive"))
row("rsqrt", lambda L, x: L.rsqrt(x), one("positive"))
row("sin", lambda L, x: L.sin(x), one("normal", scale=2.0))
row("cos", lambda L, x: L.cos(x), one("normal", scale=2.0))
row("tan", lambda L, x: L.tan(x), one("uniform", lo=-1.2, hi=1.2), tol=TRANSCENDENTAL)
row("tanh", lambda L, x: L.tanh(x), one("normal", scale=2.0))
row("sigmoid", lambda L, x: L.sigmoid(x), one("normal", scale=3.0))
row("relu", lambda L, x: L.relu(x), one("away"))
row("gelu", lambda L, x: L.gelu(x), one("normal", scale=2.0), tol=TRANSCENDENTAL)
row("gelu_tanh", lambda L, x: L.gelu(x, approximate="tanh"), one("normal", scale=2.0), tol=TRANSCENDENTAL)
row("silu", lambda L, x: L.silu(x), one("normal", scale=2.0))
row("softplus", lambda L, x: L.softplus(x), one("normal", scale=3.0), tol=TRANSCENDENTAL)
# Points of the threshold switch are avoided: there softplus's two branches differ by ~exp(-threshold).
row("softplus_beta", lambda L, x: L.softplus(x, beta=2.0, threshold=3.0), one("away", at=1.5, gap=0.2, hi=3.0),
    tol=TRANSCENDENTAL)
row("erf", lambda L, x: L.erf(x), one("normal", scale=1.5), tol=TRANSCENDENTAL)
row("reciprocal", lambda L, x: L.reciprocal(x), one("away", gap=0.3))
row("exp_method", lambda L, x: x.exp().sin().sum(), one())
row("unary_int_input", lambda L, x: L.exp(x), lambda r: [r.ints(r.shape(), -3, 4)], dtypes=("int64",), grad=False)
row("sqrt_int_input", lambda L, x: L.sqrt(x), lambda r: [r.ints(r.shape(), 0, 9, r.dtype)], dtypes=INTS,
    grad=False)
row("sigmoid_int_input", lambda L, x: L.sigmoid(x), lambda r: [r.ints(r.shape(), -5, 6)], dtypes=("int64",),
    grad=False)

# --- elementwise: binary min/max, clamp, where -------------------------------------------------
row("maximum", lambda L, a, b: L.maximum(a, b), two())
row("minimum", lambda L, a, b: L.minimum(a, b), two())
# At ties PyTorch splits the gradient evenly; Ember does the same (finite differences do not apply there).
# A tie of 0.0 and -0.0 may give either zero.
row("maximum_ties", lambda L, a, b: L.maximum(a, b),
    lambda r: [np.round(r.normal((4, 3))), np.round(r.normal((4, 3)))], gradcheck=False, zero_sign=False)
row("minimum_ties", lambda L, a, b: L.minimum(a, b),
    lambda r: [np.round(r.normal((3, 4))), np.round(r.normal((3, 4)))], gradcheck=False, zero_sign=False)
row("clamp", lambda L, x: L.clamp(x, -0.5, 0.7), one("distinct", spacing=0.13))
row("clamp_min", lambda L, x: L.clamp(x, min=0.25), one("away", at=0.25))
row("clamp_max", lambda L, x: L.clamp(x, max=-0.25), one("away", at=-0.25))
row("clip", lambda L, x: L.clip(x, -1.05, 1.05), one("normal"))
row("clamp_method", lambda L, x: x.clamp(min=-1.05), one("normal"))
row("clamp_tensor_bounds", lambda L, x, lo, hi: L.clamp(x, lo, hi),
    lambda r: [r.normal((3, 4)), r.uniform((4,), -1.5, -0.1), r.uniform((3, 1), 0.1, 1.5)], gradcheck=False)
row("where", lambda L, c, a, b: L.where(c, a, b), lambda r: [r.bools(s) if i == 0 else r.normal(s)
                                                              for i, s in enumerate(r.bshapes(3))])
row("where_scalar", lambda L, c, a: L.where(c, a, 0.5), two("bools", "normal"))
row("where_scalar_first", lambda L, c, b: L.where(c, -1.0, b), two("bools", "normal"))
row("where_method", lambda L, c, a, b: a.where(c, b), lambda r: [r.bools((3, 4)), r.normal((3, 4)), r.normal((4,))])
# Comparisons and logical ops give bool tensors.
for _name, _fn in [("eq", lambda L, a, b: a == b), ("ne", lambda L, a, b: a != b), ("lt", lambda L, a, b: a < b),
                   ("le", lambda L, a, b: a <= b), ("gt", lambda L, a, b: a > b), ("ge", lambda L, a, b: a >= b)]:
    # Rounded values make equality likely.
    row(_name, _fn, lambda r: [np.round(x) for x in two()(r)], tol=EXACT, grad=False)
row("eq_fn", lambda L, a, b: L.eq(a, b), lambda r: [np.round(x) for x in two()(r)], tol=EXACT, grad=False)
row("gt_scalar", lambda L, a: a > 0.25, one(), tol=EXACT, grad=False)
row("le_scalar_int", lambda L, a: a <= 1, lambda r: [r.ints(r.shape(), -3, 4)], dtypes=("int64",), tol=EXACT,
    grad=False)
row("lt_int_float", lambda L, a, b: a < b, lambda r: [r.ints((3, 4), -3, 4), r.normal((4,))], tol=EXACT, grad=False)
row("logical_and", lambda L, a, b: L.logical_and(a, b), two("bools", "bools"), tol=EXACT, grad=False)
row("logical_or", lambda L, a, b: L.logical_or(a, b), two("bools", "bools"), tol=EXACT, grad=False)
row("logical_not", lambda L, a: L.logical_not(a), one("bools"), tol=EXACT, grad=False)
row("logical_and_float", lambda L, a, b: L.logical_and(a, b), lambda r: [np.round(x) for x in two()(r)], tol=EXACT,
    grad=False)
row("logical_not_float", lambda L, a: L.logical_not(a), lambda r: [np.round(r.normal(r.shape()))], tol=EXACT,
    grad=False)
row("and_or_invert", lambda L, a, b: (a & ~b) | (b & ~a), two("bools", "bools"), tol=EXACT, grad=False)

# --- reductions ----------------------------------------------------------------------------------------
row("sum", lambda L, x, d, k: L.sum(x, dim=d, keepdim=k), reduce_args(), tol=REDUCTION)
row("sum_all", lambda L, x: x.sum(), one(), tol=REDUCTION)
row("sum_axis", lambda L, x: L.sum(x, axis=1), lambda r: [r.normal(r.shape(2, 4))],
    th=lambda L, x: L.sum(x, dim=1), tol=REDUCTION)
row("sum_int", lambda L, x, d, k: L.sum(x, dim=d, keepdim=k), reduce_args("ints", lo=-9, hi=10, dtype="int32"),
    tol=EXACT, grad=False, dtypes=("int32",))
row("sum_bool", lambda L, x, d, k: L.sum(x, dim=d, keepdim=k), reduce_args("bools"), tol=EXACT, grad=False,
    dtypes=("bool",))
row("mean", lambda L, x, d, k: L.mean(x, dim=d, keepdim=k), reduce_args(), tol=REDUCTION)
row("mean_axis_tuple", lambda L, x: L.mean(x, axis=(0, -1)), lambda r: [r.normal(r.shape(2, 4))],
    th=lambda L, x: L.mean(x, dim=(0, -1)), tol=REDUCTION)
row("prod", lambda L, x, d, k: L.prod(x, dim=d, keepdim=k), reduce_args("away", gap=0.5, hi=1.5, tuples=False,
                                                                          none=False), tol=REDUCTION)
row("prod_all", lambda L, x: L.prod(x), one("away", gap=0.5, hi=1.5), tol=REDUCTION)
row("prod_one_zero", lambda L, x: L.prod(x, 1), lambda r: [np.concatenate([r.normal((3, 2)), np.zeros((3, 1), r.dtype),
                                                                             r.normal((3, 1))], 1)], tol=REDUCTION)
row("prod_two_zeros", lambda L, x: L.prod(x, 0), lambda r: [np.concatenate([np.zeros((2, 3), r.dtype),
                                                                              r.normal((2, 3))], 0)], tol=REDUCTION)
row("max_all", lambda L, x: L.max(x), one("distinct"), tol=EXACT)
row("min_all", lambda L, x: x.min(), one("distinct"), tol=EXACT)
row("max_dim", lambda L, x, d, k: L.max(x, dim=d, keepdim=k), reduce_args("distinct", none=False, tuples=False),
    tol=EXACT)
row("min_dim", lambda L, x, d, k: L.min(x, dim=d, keepdim=k), reduce_args("distinct", none=False, tuples=False),
    tol=EXACT)
row("max_dim_values", lambda L, x: x.max(dim=-1).values * 2, lambda r: [r.distinct(r.shape(1, 3))], tol=EXACT)
row("min_dim_indices", lambda L, x: x.min(1)[1], lambda r: [r.distinct(r.shape(2, 3))], tol=EXACT, grad=False)
row("max_all_ties", lambda L, x: L.max(x), lambda r: [np.array([[1.0, 3.0], [3.0, 2.0]], r.dtype)], tol=EXACT,
    gradcheck=False)
row("amax", lambda L, x, d, k: L.amax(x, dim=d, keepdim=k), reduce_args("distinct", none=False), tol=EXACT)
row("amin", lambda L, x, d, k: L.amin(x, dim=d, keepdim=k), reduce_args("distinct", none=False), tol=EXACT)
row("argmax", lambda L, x, d, k: L.argmax(x, dim=d, keepdim=k), reduce_args("distinct", tuples=False), tol=EXACT,
    grad=False)
row("argmin", lambda L, x, d, k: L.argmin(x, dim=d, keepdim=k), reduce_args("distinct", tuples=False), tol=EXACT,
    grad=False)
row("argmax_ties_first", lambda L, x: L.argmax(x, 1), lambda r: [np.array([[1, 3, 3], [2, 2, 0]], r.dtype)],
    tol=EXACT, grad=False)
row("var", lambda L, x, d, k: L.var(x, dim=d, keepdim=k), reduce_args(min_size=2), tol=REDUCTION)
row("var_correction0", lambda L, x, d, k: L.var(x, dim=d, keepdim=k, correction=0), reduce_args(), tol=REDUCTION)
row("var_unbiased_false", lambda L, x: L.var(x, 0, False), lambda r: [r.normal(r.shape(1, 3, 2))], tol=REDUCTION)
row("std", lambda L, x, d, k: L.std(x, dim=d, keepdim=k), reduce_args(min_size=2), tol=REDUCTION)
row("std_correction0", lambda L, x, d, k: L.std(x, dim=d, keepdim=k, correction=0), reduce_args(min_size=2), tol=REDUCTION)
row("logsumexp", lambda L, x, d, k: L.logsumexp(x, dim=d, keepdim=k), reduce_args(none=False, scale=3.0),
    tol=REDUCTION)
row("logsumexp_large", lambda L, x: L.logsumexp(x, 1), lambda r: [r.normal((3, 4), scale=300.0)], tol=REDUCTION)
row("all", lambda L, x, d, k: L.all(x, dim=d, keepdim=k), reduce_args("bools", p=0.8), tol=EXACT, grad=False)
row("any", lambda L, x, d, k: L.any(x, dim=d, keepdim=k), reduce_args("bools", p=0.2), tol=EXACT, grad=False)
row("all_float", lambda L, x: L.all(x), lambda r: [np.round(r.normal(r.shape()) * 2)], tol=EXACT, grad=False)
row("any_dim_float", lambda L, x: L.any(x, 0), lambda r: [np.round(r.normal(r.shape(1, 3)) / 2)], tol=EXACT,
    grad=False)

# --- linear algebra ----------------------------------------------------------------------------------
def mats(*shapes):
    """Arrays of fixed shapes ("?" entries of a shape become a random size shared by name)."""

    def make(r: Rand):
        sizes: dict = {}
        out = []
        for s in shapes:
            dims = tuple(sizes.setdefault(d, r.size(1, 5)) if isinstance(d, str) else d for d in s)
            out.append(r.normal(dims))
        return out

    return make


row("matmul_1d_1d", lambda L, a, b: a @ b, mats(("k",), ("k",)), tol=MATMUL)
row("matmul_2d_1d", lambda L, a, b: a @ b, mats(("m", "k"), ("k",)), tol=MATMUL)
row("matmul_1d_2d", lambda L, a, b: a @ b, mats(("k",), ("k", "n")), tol=MATMUL)
row("matmul_2d_2d", lambda L, a, b: a @ b, mats(("m", "k"), ("k", "n")), tol=MATMUL)
row("matmul_3d_3d", lambda L, a, b: L.matmul(a, b), mats(("b", "m", "k"), ("b", "k", "n")), tol=MATMUL)
row("matmul_bcast_batch", lambda L, a, b: a @ b, mats(("c", 1, "m", "k"), ("b", "k", "n")), tol=MATMUL)
row("matmul_bcast_2d", lambda L, a, b: a @ b, mats(("b", "m", "k"), ("k", "n")), tol=MATMUL)
row("matmul_1d_3d", lambda L, a, b: a @ b, mats(("k",), ("b", "k", "n")), tol=MATMUL)
row("matmul_3d_1d", lambda L, a, b: a @ b, mats(("b", "m", "k"), ("k",)), tol=MATMUL)
row("mm", lambda L, a, b: L.mm(a, b), mats(("m", "k"), ("k", "n")), tol=MATMUL)
row("bmm", lambda L, a, b: L.bmm(a, b), mats(("b", "m", "k"), ("b", "k", "n")), tol=MATMUL)
row("outer", lambda L, a, b: L.outer(a, b), mats(("m",), ("n",)), tol=MATMUL)
row("einsum_mm", lambda L, a, b: L.einsum("ij,jk->ik", a, b), mats(("m", "k"), ("k", "n")), tol=MATMUL)
row("einsum_bmm", lambda L, a, b: L.einsum("bij,bjk->bik", a, b), mats(("b", "m", "k"), ("b", "k", "n")), tol=MATMUL)
row("einsum_ellipsis", lambda L, a, b: L.einsum("...ij,...jk", a, b), mats(("b", "m", "k"), ("b", "k", "n")),
    tol=MATMUL)
row("einsum_dot", lambda L, a, b: L.einsum("i,i->", a, b), mats(("k",), ("k",)), tol=MATMUL)
row("einsum_outer", lambda L, a, b: L.einsum("i,j->ij", a, b), mats(("m",), ("n",)), tol=MATMUL)
row("einsum_transpose", lambda L, a: L.einsum("ij->ji", a), mats(("m", "n")), tol=EXACT)
row("einsum_sum", lambda L, a: L.einsum("ijk->j", a), mats(("m", "n", "k")), tol=REDUCTION)
row("einsum_three", lambda L, a, b, c: L.einsum("ij,jk,kl->il", a, b, c), mats(("m", "k"), ("k", "n"), ("n", "p")),
    tol=MATMUL)
row("einsum_contract_summed", lambda L, a, b: L.einsum("ijk,jl->il", a, b), mats(("m", "n", "k"), ("n", "p")),
    tol=MATMUL)
row("einsum_diag", lambda L, a: L.einsum("ii->i", a), mats(("n", "n")), tol=EXACT)
row("einsum_trace", lambda L, a: L.einsum("ii", a), mats(("n", "n")), tol=REDUCTION)

# --- shape ops ----------------------------------------------------------------------------------------------
row("reshape", lambda L, x: x.reshape(-1, 2), lambda r: [r.normal((2, r.size(1, 3), 3))], tol=EXACT)
row("reshape_fn", lambda L, x: L.reshape(x, (3, -1, 2)), lambda r: [r.normal((r.size(1, 4), 6))], tol=EXACT)
row("reshape_transposed", lambda L, x: x.transpose(0, 1).reshape(-1), lambda r: [r.normal((3, 4))], tol=EXACT)
row("view", lambda L, x: x.view(2, -1), lambda r: [r.normal((r.size(1, 3), 4))], tol=EXACT)
row("flatten", lambda L, x: L.flatten(x), one(), tol=EXACT)
row("flatten_range", lambda L, x: L.flatten(x, 1, -2), lambda r: [r.normal(r.shape(3, 4))], tol=EXACT)
row("unflatten", lambda L, x: L.unflatten(x, 1, (2, -1)), lambda r: [r.normal((r.size(), 6, r.size()))], tol=EXACT)
row("transpose", lambda L, x: L.transpose(x, 0, -1), lambda r: [r.normal(r.shape(1, 4))], tol=EXACT)
row("transpose_method", lambda L, x: x.transpose(1, 2) * 1.5, lambda r: [r.normal(r.shape(3, 4))], tol=ELEMENTWISE)
row("permute", lambda L, x, p: x.permute(*p), lambda r: [x := r.normal(r.shape(3, 4)), tuple(r.perm(x.ndim).tolist())],
    tol=EXACT)
row("T_2d", lambda L, x: x.T, lambda r: [r.normal(r.shape(2, 2))], tol=EXACT)
row("mT", lambda L, x: x.mT, lambda r: [r.normal(r.shape(2, 4))], tol=EXACT)
row("squeeze_all", lambda L, x: x.squeeze(), lambda r: [r.normal(r.shape(1, 4, 1, 2))], tol=EXACT)
row("squeeze_dim", lambda L, x: L.squeeze(x, 1), lambda r: [r.normal((r.size(), 1, r.size()))], tol=EXACT)
row("squeeze_dim_not_one", lambda L, x: L.squeeze(x, 0), lambda r: [r.normal((r.size(2), 1))], tol=EXACT)
row("squeeze_dims", lambda L, x: L.squeeze(x, (0, -1)), lambda r: [r.normal((1, r.size(), 1))], tol=EXACT)
row("unsqueeze", lambda L, x, d: L.unsqueeze(x, d), lambda r: [x := r.normal(r.shape()),
                                                              int(r.rng.integers(-x.ndim - 1, x.ndim + 1))], tol=EXACT)
row("expand", lambda L, x: x.expand(2, -1, 3), lambda r: [r.normal((r.size(), 1))], tol=EXACT)
row("expand_fn", lambda L, x: L.broadcast_to(x, (2, 3, 4)), lambda r: [r.normal(r.choice([(3, 1), (4,), (1, 4)]))],
    tol=EXACT)
row("expand_then_mul", lambda L, x, y: x.expand(3, 4) * y, lambda r: [r.normal((1, 4)), r.normal((3, 4))])
row("cat", lambda L, a, b, c: L.cat([a, b, c], 1), lambda r: [r.normal((2, r.size(), 3)) for _ in range(3)], tol=EXACT)
row("cat_neg_dim", lambda L, a, b: L.cat((a, b), dim=-1), lambda r: [r.normal((2, r.size())), r.normal((2, r.size()))],
    tol=EXACT)
row("cat_promote", lambda L, a, b: L.cat([a, b]), lambda r: [r.normal((2, 3)), r.ints((1, 3), -4, 5)], tol=EXACT)
row("stack", lambda L, a, b: L.stack([a, b], 1), lambda r: [r.normal((2, 3)), r.normal((2, 3))], tol=EXACT)
row("stack_last", lambda L, a, b, c: L.stack([a, b, c], -1), lambda r: [r.normal((3,)) for _ in range(3)], tol=EXACT)
row("split_size", lambda L, x: L.split(x, 2, 1), lambda r: [r.normal((2, r.size(3, 7)))], tol=EXACT)
row("split_sections", lambda L, x: x.split([1, 3, 2], dim=0), lambda r: [r.normal((6, r.size()))], tol=EXACT)
row("chunk", lambda L, x: L.chunk(x, 3, -1), lambda r: [r.normal((2, r.size(3, 8)))], tol=EXACT)
row("repeat", lambda L, x: x.repeat(2, 1, 3), lambda r: [r.normal((r.size(), r.size()))], tol=REDUCTION)
row("tile", lambda L, x: L.tile(x, (2, 3)), lambda r: [r.normal(r.shape(1, 3))], tol=REDUCTION)
row("flip", lambda L, x: L.flip(x, (0, -1)), lambda r: [r.normal(r.shape(2, 4))], tol=EXACT)
row("pad_constant", lambda L, x: L.pad(x, (1, 2, 0, 3)), lambda r: [r.normal(r.shape(2, 4))], tol=EXACT)
row("pad_constant_value", lambda L, x: L.pad(x, (2, 1), value=-1.5), lambda r: [r.normal(r.shape(1, 3))], tol=EXACT)
row("pad_negative", lambda L, x: L.pad(x, (-1, 2)), lambda r: [r.normal((2, r.size(2, 5)))], tol=EXACT)
row("pad_reflect_1d", lambda L, x: L.pad(x, (2, 1), mode="reflect"), lambda r: [r.normal((2, 2, r.size(3, 6)))],
    tol=REDUCTION)
row("pad_reflect_2d", lambda L, x: L.pad(x, (1, 2, 2, 1), mode="reflect"),
    lambda r: [r.normal((1, 2, r.size(3, 5), r.size(3, 5)))], tol=REDUCTION)
row("pad_replicate", lambda L, x: L.pad(x, (1, 2, 3, 0), mode="replicate"),
    lambda r: [r.normal((1, 2, r.size(1, 4), r.size(1, 4)))], tol=REDUCTION)
row("pad_replicate_1d", lambda L, x: L.pad(x, (3, 1), mode="replicate"), lambda r: [r.normal((2, 3, r.size(1, 4)))],
    tol=REDUCTION)
row("pad_circular", lambda L, x: L.pad(x, (1, 2, 2, 1), mode="circular"),
    lambda r: [r.normal((1, 2, r.size(2, 5), r.size(2, 5)))], tol=REDUCTION)
row("roll", lambda L, x: L.roll(x, 2, 1), lambda r: [r.normal((2, r.size(1, 5)))], tol=EXACT)
row("roll_multi", lambda L, x: L.roll(x, (1, -2), (0, -1)), lambda r: [r.normal(r.shape(2, 3))], tol=EXACT)
row("roll_flat", lambda L, x: L.roll(x, 3), one(), tol=EXACT)
row("tril", lambda L, x: L.tril(x), lambda r: [r.normal(r.shape(2, 3))], tol=EXACT)
row("tril_diag", lambda L, x: L.tril(x, -1), lambda r: [r.normal(r.shape(2, 3))], tol=EXACT)
row("triu", lambda L, x: L.triu(x), lambda r: [r.normal(r.shape(2, 3))], tol=EXACT)
row("triu_diag", lambda L, x: x.triu(1), lambda r: [r.normal(r.shape(2, 3))], tol=EXACT)

# --- indexing -----------------------------------------------------------------------------------------------
def set_through(index_fn):
    """x[index] = v on a copy of x (so both x and v get gradients); index_fn(x_shape_args...) builds the index."""

    def fn(L, x, v, *idx):
        y = x * 1.0
        y[index_fn(*idx)] = v
        return y

    return fn


row("getitem_int", lambda L, x: x[1], lambda r: [r.normal(r.shape(1, 3, 2))], tol=EXACT)
row("getitem_neg_int", lambda L, x: x[-1, 0], lambda r: [r.normal(r.shape(2, 3))], tol=EXACT)
row("getitem_slice", lambda L, x: x[1:3], lambda r: [r.normal(r.shape(1, 3, 1))], tol=EXACT)
row("getitem_slices_step", lambda L, x: x[:, ::2, 1:], lambda r: [r.normal(r.shape(3, 4, 2))], tol=EXACT)
row("getitem_neg_slice", lambda L, x: x[-3:-1], lambda r: [r.normal(r.shape(1, 3, 3))], tol=EXACT)
row("getitem_ellipsis_none", lambda L, x: x[None, ..., 0, None], lambda r: [r.normal(r.shape(1, 4))], tol=EXACT)
row("getitem_mixed", lambda L, x: x[1:, None, ..., ::3], lambda r: [r.normal(r.shape(2, 4, 2))], tol=EXACT)
row("getitem_scalar_tensor", lambda L, x, i: x[i], lambda r: [r.normal((4, 3)), np.array(2)], tol=EXACT)
row("getitem_int_array", lambda L, x, i: x[i], lambda r: [x := r.normal(r.shape(1, 3, 2)),
                                                          r.index((r.size(1, 6),), x.shape[0])], tol=EXACT)
row("getitem_int_array_2d", lambda L, x, i: x[i], lambda r: [x := r.normal(r.shape(1, 3, 2)),
                                                             r.index((2, 3), x.shape[0])], tol=EXACT)
row("getitem_int_array_dim1", lambda L, x, i: x[:, i], lambda r: [x := r.normal(r.shape(2, 3, 2)),
                                                                  r.index((4,), x.shape[1])], tol=EXACT)
row("getitem_two_arrays", lambda L, x, i, j: x[i, j], lambda r: [x := r.normal(r.shape(2, 3)),
                                                                 r.index((3, 1), x.shape[0]),
                                                                 r.index((4,), x.shape[1])], tol=EXACT)
row("getitem_arrays_split", lambda L, x, i, j: x[i, :, j], lambda r: [x := r.normal(r.shape(3, 3)),
                                                                      r.index((4,), x.shape[0]),
                                                                      r.index((4,), x.shape[2])], tol=EXACT)
row("getitem_list", lambda L, x: x[[0, 2, 0]], lambda r: [r.normal((3,) + r.shape(0, 2))], tol=EXACT)
row("getitem_array_slice", lambda L, x, i: x[1:, i, None], lambda r: [x := r.normal(r.shape(3, 3, 2)),
                                                                      r.index((3,), x.shape[1])], tol=EXACT)
row("getitem_bool_mask", lambda L, x, m: x[m], lambda r: [x := r.normal(r.shape(1, 3)), r.bools(x.shape)],
    tol=EXACT, meta=False)
row("getitem_bool_rows", lambda L, x, m: x[m], lambda r: [x := r.normal(r.shape(1, 3)), r.bools(x.shape[:1])],
    tol=EXACT, meta=False)
row("getitem_bool_dim1", lambda L, x, m: x[:, m], lambda r: [x := r.normal(r.shape(2, 3)), r.bools(x.shape[1:2])],
    tol=EXACT, meta=False)
row("getitem_bool_compare", lambda L, x: x[x > 0], one("away"), tol=EXACT, meta=False)
row("setitem_slice", set_through(lambda: (slice(1, 3), slice(None, None, 2))), lambda r: [r.normal((4, 5)),
                                                                                        r.normal((2, 3))])
row("setitem_slice_bcast", set_through(lambda: (slice(None), 1)), lambda r: [r.normal((3, 4)), r.normal((1,))])
row("setitem_int", set_through(lambda: 2), lambda r: [r.normal((4, 3)), r.normal((3,))])
row("setitem_scalar", lambda L, x: _set_scalar(x, (slice(1, None), 0), 2.5), lambda r: [r.normal((3, 4))])
row("setitem_int_array", set_through(lambda i: i), lambda r: [r.normal((5, 3)), r.normal((3, 3)),
                                                              r.perm(5)[:3]])
row("setitem_int_array_dim1", set_through(lambda i: (slice(None), i)), lambda r: [r.normal((3, 5)), r.normal((3, 2)),
                                                                                  r.perm(5)[:2] - 5])
row("setitem_two_arrays", set_through(lambda i, j: (i, j)), lambda r: [r.normal((4, 5)), r.normal((3,)),
                                                                       r.perm(4)[:3], r.perm(5)[:3]])
row("setitem_bool_mask", set_through(lambda m: m), lambda r: [r.normal((3, 4)), r.normal(()), r.bools((3, 4))],
    meta=False)
row("setitem_bool_mask_scalar", lambda L, x, m: _set_scalar(x, m, -1.0), lambda r: [r.normal((3, 4)), r.bools((3, 4))],
    meta=False)
row("setitem_bool_rows", set_through(lambda m: m), lambda r: [r.normal((4, 3)), r.normal((3,)), r.bools((4,))],
    meta=False)
row("setitem_ellipsis", set_through(lambda: (Ellipsis, 0)), lambda r: [r.normal((2, 3, 4)), r.normal((3,))])
row("gather", lambda L, x, i: L.gather(x, 1, i), lambda r: [r.normal((3, 4)), r.ints((3, r.size(1, 6)), 0, 4)])
row("gather_dim0", lambda L, x, i: x.gather(0, i), lambda r: [r.normal((4, 3, 2)), r.ints((2, 3, 2), 0, 4)])
row("gather_smaller", lambda L, x, i: L.gather(x, -1, i), lambda r: [r.normal((3, 4)), r.ints((2, 2), 0, 4)])
row("scatter", lambda L, x, i, s: L.scatter(x, 1, i, s), lambda r: [r.normal((3, 5)), unique_index(r, (3, 2), 1, 5),
                                                                       r.normal((3, 2))])
row("scatter_dim0", lambda L, x, i, s: x.scatter(0, i, s), lambda r: [r.normal((4, 3)), unique_index(r, (2, 3), 0, 4),
                                                                         r.normal((2, 3))])
# PyTorch's own backward fails when src is larger than index, so finite differences check this gradient.
row("scatter_src_larger", lambda L, x, i, s: L.scatter(x, 0, i, s),
    lambda r: [r.normal((4, 3)), unique_index(r, (2, 2), 0, 4), r.normal((3, 3))], torch_grad=False)
row("scatter_value", lambda L, x, i: L.scatter(x, 1, i, value=2.5), lambda r: [r.normal((3, 5)),
                                                                              unique_index(r, (3, 2), 1, 5)],
    th=lambda L, x, i: x.scatter(1, i, 2.5))
row("scatter_add", lambda L, x, i, s: L.scatter_add(x, 1, i, s), lambda r: [r.normal((3, 4)), r.ints((3, 6), 0, 4),
                                                                               r.normal((3, 6))], tol=REDUCTION)
row("scatter_add_src_larger", lambda L, x, i, s: L.scatter_add(x, 1, i, s),
    lambda r: [r.normal((3, 4)), r.ints((2, 3), 0, 4), r.normal((3, 5))], tol=REDUCTION, torch_grad=False)
row("scatter_add_dim0", lambda L, x, i, s: x.scatter_add(0, i, s), lambda r: [r.normal((3, 2)), r.ints((5, 2), 0, 3),
                                                                                 r.normal((5, 2))], tol=REDUCTION)
row("index_select", lambda L, x, i: L.index_select(x, 1, i), lambda r: [r.normal((2, 4, 3)),
                                                                         r.ints((r.size(1, 6),), 0, 4)],
    tol=REDUCTION)
row("index_select_dim0", lambda L, x, i: x.index_select(0, i), lambda r: [r.normal((4, 3)), r.ints((5,), 0, 4)],
    tol=REDUCTION)
row("masked_fill", lambda L, x, m: L.masked_fill(x, m, -2.5), lambda r: [r.normal((3, 4)), r.bools(r.choice(
    [(3, 4), (4,), (3, 1)]))])
row("masked_fill_method", lambda L, x, m: x.masked_fill(m, 0), lambda r: [r.normal((2, 3)), r.bools((2, 3))])
row("masked_fill_int", lambda L, x, m: L.masked_fill(x, m, 7), lambda r: [r.ints((3, 4), -5, 5), r.bools((3, 4))],
    tol=EXACT, grad=False, dtypes=("int64",))
row("one_hot", lambda L, x: L.one_hot(x, 5), lambda r: [r.ints(r.shape(0, 2), 0, 5)], tol=EXACT, grad=False,
    dtypes=("int64",))
row("one_hot_infer", lambda L, x: L.one_hot(x), lambda r: [r.ints((6,), 0, 4)], tol=EXACT, grad=False,
    dtypes=("int64",), meta=False)
row("nonzero", lambda L, x: L.nonzero(x), lambda r: [np.round(r.normal(r.shape()))], tol=EXACT, grad=False,
    meta=False)
row("nonzero_tuple", lambda L, x: L.nonzero(x, as_tuple=True), lambda r: [np.round(r.normal(r.shape(1, 3)))],
    tol=EXACT, grad=False, meta=False)

# --- scans and ordering ---------------------------------------------------------------------------------------
row("cumsum", lambda L, x, d: L.cumsum(x, d), lambda r: [x := r.normal(r.shape(1, 3)),
                                                        int(r.rng.integers(-x.ndim, x.ndim))], tol=REDUCTION)
row("cumsum_int", lambda L, x: L.cumsum(x, 0), lambda r: [r.ints(r.shape(1, 3), -5, 5, "int32")], tol=EXACT,
    grad=False, dtypes=("int32",))
row("sort", lambda L, x, d: L.sort(x, d), lambda r: [x := r.distinct(r.shape(1, 3)),
                                                    int(r.rng.integers(-x.ndim, x.ndim))], tol=EXACT)
row("sort_descending", lambda L, x: L.sort(x, 0, descending=True), lambda r: [r.distinct(r.shape(1, 3))], tol=EXACT)
row("sort_values", lambda L, x: x.sort().values, lambda r: [r.distinct(r.shape(1, 3))], tol=EXACT)
row("argsort", lambda L, x: L.argsort(x, -1), lambda r: [r.distinct(r.shape(1, 3))], tol=EXACT, grad=False)
row("argsort_descending", lambda L, x: L.argsort(x, 0, descending=True), lambda r: [r.distinct(r.shape(1, 3))],
    tol=EXACT, grad=False)
row("topk", lambda L, x: L.topk(x, 2), lambda r: [r.distinct(r.shape(1, 3, 2))], tol=EXACT)
row("topk_smallest", lambda L, x: L.topk(x, 3, dim=0, largest=False), lambda r: [r.distinct(r.shape(1, 3, 3))],
    tol=EXACT)
row("softmax", lambda L, x, d: L.softmax(x, d), lambda r: [x := r.normal(r.shape(1, 4), scale=3.0),
                                                          int(r.rng.integers(-x.ndim, x.ndim))], tol=REDUCTION)
row("softmax_large", lambda L, x: L.softmax(x, -1), lambda r: [r.normal((3, 5), scale=200.0)], tol=REDUCTION,
    gradcheck=False)
row("log_softmax", lambda L, x, d: L.log_softmax(x, d), lambda r: [x := r.normal(r.shape(1, 4), scale=3.0),
                                                                  int(r.rng.integers(-x.ndim, x.ndim))],
    tol=REDUCTION)
# log_softmax's gradient op (PyTorch's _log_softmax_backward_data); its own gradient is log_softmax's second order
row("log_softmax_backward", lambda L, g, y, d: _log_softmax_backward(g, y, d), _log_softmax_backward_inputs,
    th=lambda L, g, y, d: L.ops.aten._log_softmax_backward_data(g, y, d, g.dtype), tol=REDUCTION)
row("log_softmax_large", lambda L, x: L.log_softmax(x, 0), lambda r: [r.normal((4, 3), scale=200.0)], tol=REDUCTION,
    gradcheck=False)
row("softmax_method", lambda L, x: x.softmax(-1), lambda r: [r.normal(r.shape(1, 3))], tol=REDUCTION)


# --- convolution and pooling ------------------------------------------------------------------------------------
def conv_args(*, groups: int = 1, k=(3, 3), bias: bool = False, transposed: bool = False, min_hw: int = 3):
    """[x, w(, b)] for conv2d (weight (O, C/g, kh, kw)) or conv_transpose2d (weight (C, O/g, kh, kw))."""

    def make(r: Rand):
        n = r.size(1, 2)
        c = groups * r.size(1, 2)
        o = groups * r.size(1, 2)
        x = r.normal((n, c, r.size(min_hw, 7), r.size(min_hw, 7)))
        w_shape = (c, o // groups) + k if transposed else (o, c // groups) + k
        out = [x, r.normal(w_shape, scale=0.5)]
        if bias:
            out.append(r.normal((o,)))
        return out

    return make


row("conv2d", lambda L, x, w: L.conv2d(x, w), conv_args(), tol=CONV)
row("conv2d_bias", lambda L, x, w, b: L.conv2d(x, w, b), conv_args(bias=True), tol=CONV)
row("conv2d_stride", lambda L, x, w: L.conv2d(x, w, stride=2), conv_args(), tol=CONV)
row("conv2d_stride_pair", lambda L, x, w: L.conv2d(x, w, stride=(1, 2), padding=(2, 0)), conv_args(k=(2, 3)), tol=CONV)
row("conv2d_padding", lambda L, x, w: L.conv2d(x, w, padding=1), conv_args(), tol=CONV)
row("conv2d_same", lambda L, x, w: L.conv2d(x, w, padding="same"), conv_args(), tol=CONV)
row("conv2d_same_even", lambda L, x, w: L.conv2d(x, w, padding="same"), conv_args(k=(2, 4)), tol=CONV,
    th=lambda L, x, w: L.conv2d(L.pad(x, (1, 2, 0, 1)), w))  # PyTorch's own 'same' split, without its warning
row("conv2d_same_dilated", lambda L, x, w: L.conv2d(x, w, padding="same", dilation=2), conv_args(k=(2, 3)), tol=CONV)
row("conv2d_valid", lambda L, x, w: L.conv2d(x, w, padding="valid"), conv_args(k=(1, 2)), tol=CONV)
row("conv2d_dilation", lambda L, x, w: L.conv2d(x, w, dilation=2), conv_args(k=(2, 2)), tol=CONV)
row("conv2d_groups", lambda L, x, w: L.conv2d(x, w, groups=2), conv_args(groups=2), tol=CONV)
row("conv2d_depthwise", lambda L, x, w: L.conv2d(x, w, padding=1, groups=x.shape[1]),
    lambda r: [r.normal((1, 3, 4, 5)), r.normal((6, 1, 3, 3))], tol=CONV)
row("conv2d_depthwise_strided", lambda L, x, w: L.conv2d(x, w, stride=2, padding=(2, 1), dilation=(2, 1),
                                                          groups=x.shape[1]),
    lambda r: [r.normal((2, 4, 7, 6)), r.normal((4, 1, 3, 2))], tol=CONV)
row("conv2d_all", lambda L, x, w, b: L.conv2d(x, w, b, stride=(2, 1), padding=(1, 2), dilation=(1, 2), groups=2),
    conv_args(groups=2, bias=True, min_hw=4), tol=CONV)
row("conv2d_pointwise", lambda L, x, w: L.conv2d(x, w), conv_args(k=(1, 1)), tol=CONV)  # a GEMM on x as it lies
row("conv2d_pointwise_groups", lambda L, x, w, b: L.conv2d(x, w, b, groups=2), conv_args(groups=2, k=(1, 1), bias=True),
    tol=CONV)
row("conv2d_pointwise_strided", lambda L, x, w: L.conv2d(x, w, stride=2), conv_args(k=(1, 1)), tol=CONV)
row("conv2d_unbatched", lambda L, x, w: L.conv2d(x, w), lambda r: [r.normal((2, 4, 5)), r.normal((3, 2, 2, 2))],
    tol=CONV)
row("conv_transpose2d", lambda L, x, w: L.conv_transpose2d(x, w), conv_args(transposed=True), tol=CONV)
row("conv_transpose2d_bias", lambda L, x, w, b: L.conv_transpose2d(x, w, b),
    lambda r: [r.normal((1, 2, 3, 4)), r.normal((2, 3, 2, 2)), r.normal((3,))], tol=CONV)
row("conv_transpose2d_stride", lambda L, x, w: L.conv_transpose2d(x, w, stride=2, padding=1, output_padding=1),
    conv_args(transposed=True), tol=CONV)
row("conv_transpose2d_groups", lambda L, x, w: L.conv_transpose2d(x, w, stride=(1, 2), groups=2, dilation=(2, 1)),
    conv_args(transposed=True, groups=2, k=(2, 3)), tol=CONV)
# Stride 1 runs as a conv2d with the flipped kernel: output_padding, dilation and groups together,
# and a padding wider than the dilated kernel (a negative conv2d padding: the col2im path instead).
row("conv_transpose2d_s1_outpad", lambda L, x, w: L.conv_transpose2d(x, w, padding=(1, 0), output_padding=1,
                                                                       groups=2, dilation=2),
    conv_args(transposed=True, groups=2, k=(3, 2)), tol=CONV)
row("conv_transpose2d_s1_wide_pad", lambda L, x, w: L.conv_transpose2d(x, w, padding=2),
    conv_args(transposed=True, k=(2, 2), min_hw=5), tol=CONV)


def pool_args(min_hw: int = 3, max_hw: int = 7):
    """[x] an (N, C, H, W) batch with distinct values (no ties inside a pooling window)."""
    return lambda r: [r.distinct((r.size(1, 2), r.size(1, 2), r.size(min_hw, max_hw), r.size(min_hw, max_hw)))]


row("max_pool2d", lambda L, x: L.max_pool2d(x, 2), pool_args(2), tol=EXACT)
row("max_pool2d_stride", lambda L, x: L.max_pool2d(x, 3, stride=1), pool_args(), tol=EXACT)
row("max_pool2d_padding", lambda L, x: L.max_pool2d(x, (3, 2), stride=(2, 1), padding=1), pool_args(), tol=EXACT)
row("max_pool2d_ceil", lambda L, x: L.max_pool2d(x, 2, ceil_mode=True), pool_args(), tol=EXACT)
row("max_pool2d_ceil_pad", lambda L, x: L.max_pool2d(x, 3, stride=2, padding=1, ceil_mode=True), pool_args(),
    tol=EXACT)
row("max_pool2d_dilation", lambda L, x: L.max_pool2d(x, 2, stride=1, dilation=2), pool_args(), tol=EXACT)
row("max_pool2d_indices", lambda L, x: L.max_pool2d(x, 2, stride=1, padding=1, return_indices=True), pool_args(),
    tol=EXACT)
row("max_pool2d_unbatched", lambda L, x: L.max_pool2d(x, 2), lambda r: [r.distinct((2, 5, 4))], tol=EXACT)
row("avg_pool2d", lambda L, x: L.avg_pool2d(x, 2), pool_args(2), tol=REDUCTION)
row("avg_pool2d_stride", lambda L, x: L.avg_pool2d(x, (3, 2), stride=1), pool_args(), tol=REDUCTION)
row("avg_pool2d_pad", lambda L, x: L.avg_pool2d(x, 3, stride=2, padding=1), pool_args(), tol=REDUCTION)
row("avg_pool2d_pad_exclude", lambda L, x: L.avg_pool2d(x, 3, stride=2, padding=1, count_include_pad=False),
    pool_args(), tol=REDUCTION)
row("avg_pool2d_ceil", lambda L, x: L.avg_pool2d(x, 2, ceil_mode=True), pool_args(), tol=REDUCTION)
row("avg_pool2d_ceil_pad", lambda L, x: L.avg_pool2d(x, 3, stride=2, padding=1, ceil_mode=True), pool_args(),
    tol=REDUCTION)
row("avg_pool2d_ceil_pad_exclude", lambda L, x: L.avg_pool2d(x, 3, stride=2, padding=1, ceil_mode=True,
                                                             count_include_pad=False), pool_args(), tol=REDUCTION)
row("avg_pool2d_divisor", lambda L, x: L.avg_pool2d(x, 2, divisor_override=3), pool_args(2), tol=REDUCTION)


# --- edge cases: mixed dtypes, non-contiguous inputs, empty tensors, infinities ------------------------
row("mul_mixed_float", lambda L, a, b: a * b, lambda r: [r.normal((3, 4)), r.normal((4,), dtype="float64")],
    dtypes=("float32",))
row("add_int_tensor", lambda L, a, b: a + b, lambda r: [r.normal((3, 4)), r.ints((4,), -5, 5)])
row("div_by_int_tensor", lambda L, a, b: a / b, lambda r: [r.normal((3, 4)), r.nonzero_ints((3, 1), -5, 5)])
row("where_int_float", lambda L, c, a, b: L.where(c, a, b),
    lambda r: [r.bools((3, 4)), r.ints((3, 4), -5, 5), r.normal((4,))])
row("matmul_int", lambda L, a, b: a @ b, lambda r: [r.ints((2, 3, 4), -5, 5, r.dtype), r.ints((4, 2), -5, 5, r.dtype)],
    dtypes=INTS, tol=EXACT, grad=False)
row("relu_int", lambda L, x: L.relu(x), lambda r: [r.ints(r.shape(), -5, 5, r.dtype)], dtypes=INTS, tol=EXACT,
    grad=False)
row("clamp_int", lambda L, x: L.clamp(x, -2, 3), lambda r: [r.ints(r.shape(), -5, 5, r.dtype)], dtypes=INTS,
    tol=EXACT, grad=False)
row("clamp_min_above_max", lambda L, x: L.clamp(x, 0.5, -0.5), one(), gradcheck=False)
row("amax_ties", lambda L, x: L.amax(x, 1), lambda r: [np.array([[1, 3, 3], [2, 2, 2]], r.dtype)], tol=EXACT,
    gradcheck=False)
row("T_3d", lambda L, x: x.T, lambda r: [r.normal(r.shape(3, 3))], th=lambda L, x: x.permute(2, 1, 0), tol=EXACT)
row("exp_noncontig", lambda L, x: L.exp(x.mT), lambda r: [r.normal(r.shape(2, 4))])
row("sum_noncontig", lambda L, x: x[:, ::2].sum(0), lambda r: [r.normal(r.shape(2, 3))], tol=REDUCTION)
row("matmul_noncontig", lambda L, a, b: a.mT @ b[::2], lambda r: [r.normal((2, 3, 4)), r.normal((6, 5))], tol=MATMUL)
row("conv2d_noncontig", lambda L, x, w: L.conv2d(x.transpose(2, 3), w[:, :, ::2]),
    lambda r: [r.normal((1, 2, 6, 5)), r.normal((3, 2, 5, 2))], tol=CONV)
row("max_pool2d_noncontig", lambda L, x: L.max_pool2d(x.transpose(2, 3), 2), pool_args(4), tol=EXACT)
row("cumsum_noncontig", lambda L, x: L.cumsum(x.mT, 0), lambda r: [r.normal(r.shape(2, 3))], tol=REDUCTION)
row("sort_noncontig", lambda L, x: L.sort(x.mT, 0), lambda r: [r.distinct(r.shape(2, 3))], tol=EXACT)
row("gather_noncontig", lambda L, x, i: L.gather(x.mT, 0, i), lambda r: [r.normal((3, 4)), r.ints((2, 3), 0, 4)])
row("softmax_masked", lambda L, x: L.softmax(x, -1),
    lambda r: [np.where(np.arange(12).reshape(3, 4) % 3 == 1, -np.inf, r.normal((3, 4)))], tol=REDUCTION)
row("log_softmax_masked", lambda L, x: L.log_softmax(x, 0),
    lambda r: [np.where(np.arange(12).reshape(4, 3) % 4 == 2, -np.inf, r.normal((4, 3)))], tol=REDUCTION,
    gradcheck=False)
# n <= correction: NaN in both (PyTorch also warns, which is silenced here).
row("var_single_element", lambda L, x: L.var(x, 1), lambda r: [r.normal((3, 1))], grad=False,
    th=lambda L, x: _quietly(L.var, x, 1))
row("sum_empty", lambda L, x: L.sum(x, 1), lambda r: [r.normal((3, 0))], tol=EXACT)
row("mean_empty", lambda L, x: L.mean(x, 0), lambda r: [r.normal((0, 2))], grad=False)
row("prod_empty", lambda L, x: L.prod(x, 0), lambda r: [r.normal((0, 2))], tol=EXACT)
row("matmul_empty_k", lambda L, a, b: a @ b, lambda r: [r.normal((2, 0)), r.normal((0, 3))], tol=EXACT)
row("cat_empty", lambda L, a, b: L.cat([a, b], 0), lambda r: [r.normal((0, 3)), r.normal((2, 3))], tol=EXACT)
row("reshape_empty", lambda L, x: x.reshape(3, -1), lambda r: [r.normal((2, 0, 3))], tol=EXACT)
row("exp_empty", lambda L, x: L.exp(x), lambda r: [r.normal((0, 4))], tol=EXACT)
row("softmax_empty", lambda L, x: L.softmax(x, 0), lambda r: [r.normal((0, 4))], tol=EXACT)
row("getitem_empty_slice", lambda L, x: x[2:2], lambda r: [r.normal((4, 3))], tol=EXACT)
row("getitem_true", lambda L, x: x[True], lambda r: [r.normal(r.shape(1, 2))], tol=EXACT)
row("getitem_false", lambda L, x: x[False], lambda r: [r.normal(r.shape(1, 2))], tol=EXACT)
row("getitem_empty_index", lambda L, x, i: x[i], lambda r: [r.normal((3, 2)), np.zeros((0,), np.int64)], tol=EXACT)
row("index_select_0d_index", lambda L, x, i: L.index_select(x, 1, i), lambda r: [r.normal((2, 3)), np.array(1)])
row("one_hot_0d", lambda L, x: L.one_hot(x, 4), lambda r: [np.array(2)], tol=EXACT, grad=False, dtypes=("int64",))
row("sort_int", lambda L, x: L.sort(x, 0, descending=True), lambda r: [r.perm(7)], tol=EXACT, grad=False,
    dtypes=("int64",))
row("topk_k0", lambda L, x: L.topk(x, 0), lambda r: [r.distinct((2, 3))], tol=EXACT)
row("squeeze_0d", lambda L, x: L.squeeze(x), lambda r: [r.normal(())], tol=EXACT)
row("repeat_0d", lambda L, x: x.repeat(2, 3), lambda r: [r.normal(())], tol=REDUCTION)
row("pad_int_value", lambda L, x: L.pad(x, (1, 1), value=7), lambda r: [r.ints((2, 3), -5, 5)], tol=EXACT,
    grad=False, dtypes=("int64",))
row("max_pool2d_int", lambda L, x: L.max_pool2d(x, 2, padding=1), lambda r: [r.ints((1, 2, 4, 5), -9, 9)],
    tol=EXACT, grad=False, dtypes=("int64",))


# --- the rest of the public ops (beyond the list) ---------------------------------------------------
row("exp2", lambda L, x: L.exp2(x), one())
row("log10", lambda L, x: L.log10(x), one("positive"))
row("square", lambda L, x: L.square(x), one())
row("square_int", lambda L, x: L.square(x), lambda r: [r.ints(r.shape(), -9, 9, r.dtype)], dtypes=INTS, tol=EXACT,
    grad=False)
for _name in ("floor", "ceil", "round", "trunc"):
    # Values a little off the rounding boundaries; the gradient is zero.
    row(_name, (lambda n: lambda L, x: getattr(L, n)(x))(_name), lambda r: [np.round(r.normal(r.shape()) * 4) / 2 + 0.1],
        tol=EXACT)
row("frac", lambda L, x: L.frac(x), lambda r: [np.round(r.normal(r.shape()) * 4) / 2 + 0.1])
row("leaky_relu", lambda L, x: L.leaky_relu(x, negative_slope=0.2), one("away"))
# relu's gradient op (PyTorch's threshold_backward), small and long.
row("relu_backward", lambda L, g, out: _relu_backward(g, out), lambda r: [r.normal(s := r.shape()), r.away(s)],
    th=lambda L, g, out: L.ops.aten.threshold_backward(g, out, 0.0), nograd=(1,))
row("relu_backward_long", lambda L, g, out: _relu_backward(g, out), lambda r: [r.normal((64, 128)), r.away((64, 128))],
    th=lambda L, g, out: L.ops.aten.threshold_backward(g, out, 0.0), nograd=(1,), gradcheck=False)
row("relu_long", lambda L, x: L.relu(x), lambda r: [r.away((64, 128))], gradcheck=False)

row("elu", lambda L, x: L.elu(x, alpha=0.7), one("away"))
row("positional_params", lambda L, x: L.softplus(x, 2.0, 3.0) + L.leaky_relu(x, 0.3) + L.elu(x, 0.5),
    one("away", at=1.5, gap=0.2, hi=3.0), tol=TRANSCENDENTAL)
row("hardtanh", lambda L, x: L.hardtanh(x, -0.5, 0.8), one("distinct", spacing=0.13))
row("relu6", lambda L, x: L.relu6(x * 4), one("distinct", spacing=0.13))
row("atan2", lambda L, a, b: L.atan2(a, b), two("normal", "away"))
row("fmod", lambda L, a, b: L.fmod(a, b), two("normal", "away", kw_b={"gap": 0.5}), torch_grad=False)
row("lerp", lambda L, a, b: L.lerp(a, b, 0.3), two())
row("lerp_tensor_weight", lambda L, a, b, w: L.lerp(a, b, w), lambda r: [r.normal((3, 4)), r.normal((4,)),
                                                                       r.normal((3, 1))])
row("lerp_large_weight", lambda L, a, b: L.lerp(a, b, 0.8), two())
row("addcmul", lambda L, x, a, b: L.addcmul(x, a, b, value=0.7), lambda r: [r.normal((3, 4)), r.normal((4,)),
                                                                          r.normal((3, 1))])
row("addcdiv", lambda L, x, a, b: L.addcdiv(x, a, b, value=-0.3), lambda r: [r.normal((3, 4)), r.normal((3, 4)),
                                                                           r.away((4,))])
row("isnan_isinf_isfinite", lambda L, x: (L.isnan(x), L.isinf(x), L.isfinite(x)),
    lambda r: [np.array([0.0, np.nan, np.inf, -np.inf, 1.5], r.dtype)], tol=EXACT, grad=False)
row("logical_xor", lambda L, a, b: L.logical_xor(a, b), two("bools", "bools"), tol=EXACT, grad=False)
row("bitwise", lambda L, a, b: (L.bitwise_and(a, b), L.bitwise_or(a, b), L.bitwise_xor(a, b), L.bitwise_not(a)),
    int_pair(), dtypes=INTS, tol=EXACT, grad=False)
row("bitwise_bool", lambda L, a, b: (a & b, a | b, a ^ b, ~a), two("bools", "bools"), tol=EXACT, grad=False)
row("norm", lambda L, x: L.norm(x), one("away"), tol=REDUCTION)
row("norm_p1_dim", lambda L, x: L.norm(x, 1, 0), lambda r: [r.away(r.shape(1, 3))], tol=REDUCTION)
row("norm_inf_dim", lambda L, x: L.norm(x, float("inf"), -1, True), lambda r: [r.distinct(r.shape(1, 3))], tol=REDUCTION)
row("count_nonzero", lambda L, x: L.count_nonzero(x, 0), lambda r: [np.round(r.normal(r.shape(1, 3)))], tol=EXACT,
    grad=False)
row("cumprod", lambda L, x: L.cumprod(x, -1), lambda r: [r.away(r.shape(1, 3), gap=0.5, hi=1.5)], tol=REDUCTION)
row("kthvalue", lambda L, x: L.kthvalue(x, 2, 0), lambda r: [r.distinct(r.shape(1, 3, 2))], tol=EXACT)
row("kthvalue_keepdim", lambda L, x: L.kthvalue(x, 1, -1, True), lambda r: [r.distinct(r.shape(1, 3))], tol=EXACT)
row("msort", lambda L, x: L.msort(x), lambda r: [r.distinct(r.shape(1, 3))], tol=EXACT)
row("narrow", lambda L, x: L.narrow(x, -1, 1, 2), lambda r: [r.normal(r.shape(1, 3, 3))], tol=EXACT)
row("select", lambda L, x: L.select(x, 1, -2), lambda r: [r.normal(r.shape(2, 3, 2))], tol=EXACT)
row("unbind", lambda L, x: L.unbind(x, 1), lambda r: [r.normal(r.shape(2, 3))], tol=EXACT)
row("movedim", lambda L, x: L.movedim(x, (0, -1), (-1, 1)), lambda r: [r.normal(r.shape(3, 4))], tol=EXACT)
row("swapaxes", lambda L, x: L.swapaxes(x, 0, -1), lambda r: [r.normal(r.shape(1, 3))], tol=EXACT)
row("hstack", lambda L, a, b: L.hstack([a, b]), lambda r: [r.normal((2, 3)), r.normal((2, 1))], tol=EXACT)
row("vstack", lambda L, a, b: L.vstack([a, b]), lambda r: [r.normal((3,)), r.normal((2, 3))], tol=EXACT)
row("diagonal", lambda L, x: L.diagonal(x), mats(("n", "m")), tol=EXACT)
row("diagonal_offset", lambda L, x: L.diagonal(x, 1), mats(("n", "m")), tol=EXACT)
row("diagonal_dims", lambda L, x: L.diagonal(x, -1, 2, 0), mats(("n", 2, "m")), tol=EXACT)
row("tensordot", lambda L, a, b: L.tensordot(a, b, 2), mats(("m", "k", "n"), ("k", "n", "p")), tol=MATMUL)
row("tensordot_dims", lambda L, a, b: L.tensordot(a, b, ([0], [1])), mats(("k", "m"), ("n", "k")), tol=MATMUL)
row("dot", lambda L, a, b: L.dot(a, b), mats(("k",), ("k",)), tol=MATMUL)
row("mv", lambda L, a, b: L.mv(a, b), mats(("m", "k"), ("k",)), tol=MATMUL)
row("addmm", lambda L, c, a, b: L.addmm(c, a, b, beta=0.5, alpha=2.0), mats(("m", "n"), ("m", "k"), ("k", "n")),
    tol=MATMUL)
row("masked_select", lambda L, x, m: L.masked_select(x, m), lambda r: [r.normal((3, 4)), r.bools((4,))], tol=EXACT,
    meta=False)
row("index_add", lambda L, x, i, s: L.index_add(x, 1, i, s, alpha=2.0),
    lambda r: [r.normal((2, 4)), r.ints((5,), 0, 4), r.normal((2, 5))], tol=REDUCTION)
row("take_along_dim", lambda L, x, i: L.take_along_dim(x, i, 1), lambda r: [r.normal((3, 4)), r.ints((3, 2), 0, 4)])
row("adaptive_avg_pool2d", lambda L, x: L.adaptive_avg_pool2d(x, (2, 3)), pool_args(3), tol=REDUCTION)
row("adaptive_avg_pool2d_1", lambda L, x: L.adaptive_avg_pool2d(x, 1), pool_args(2), tol=REDUCTION)
row("avg_pool2d_global_divisor", lambda L, x: L.avg_pool2d(x, tuple(x.shape[2:]), ceil_mode=True, divisor_override=5),
    pool_args(2), tol=REDUCTION)
row("adaptive_avg_pool2d_1_resnet_head", lambda L, x: L.adaptive_avg_pool2d(x, 1), mats((32, 64, 8, 8)), tol=REDUCTION,
    gradcheck=False)
row("clamp_min_fn", lambda L, x: L.clamp_min(x, 0.25), one("away", at=0.25))
row("clamp_max_fn", lambda L, x: L.clamp_max(x, -0.25), one("away", at=-0.25))
row("var_mean", lambda L, x: L.var_mean(x, 1), lambda r: [r.normal(r.shape(2, 3, 2))], tol=REDUCTION)
row("std_mean", lambda L, x: L.std_mean(x, 0, keepdim=True), lambda r: [r.normal(r.shape(1, 3, 2))], tol=REDUCTION)
row("sum_to_size", lambda L, x: x.sum_to_size(1, 3), lambda r: [r.normal((2, 4, 3))], tol=REDUCTION)
row("fliplr_flipud", lambda L, x: (L.fliplr(x), L.flipud(x)), lambda r: [r.normal(r.shape(2, 3))], tol=EXACT)
row("broadcast_tensors", lambda L, a, b: L.broadcast_tensors(a, b), two(), tol=EXACT)
row("expand_as", lambda L, a, b: a.expand_as(b) * b, lambda r: [r.normal((1, 3)), r.normal((2, 3))])
row("index_put", lambda L, x, v, i: L.index_put(x, (i,), v), lambda r: [r.normal((5, 2)), r.normal((3, 2)), r.perm(5)[:3]],
    th=lambda L, x, v, i: x.index_put((i,), v))
row("index_put_accumulate", lambda L, x, v, i: L.index_put(x, (i,), v, accumulate=True),
    lambda r: [r.normal((4, 2)), r.normal((6, 2)), r.ints((6,), 0, 4)], th=lambda L, x, v, i: x.index_put((i,), v, True),
    tol=REDUCTION)
row("sum_dtype", lambda L, x: L.sum(x, 0, dtype=L.float64), lambda r: [r.normal(r.shape(1, 3))], tol=REDUCTION)
row("cumsum_dtype", lambda L, x: L.cumsum(x, 0, dtype=L.float64), lambda r: [r.ints(r.shape(1, 3), -5, 5)],
    tol=EXACT, grad=False, dtypes=("int64",))
row("softmax_dtype", lambda L, x: L.softmax(x, -1, dtype=L.float64), lambda r: [r.normal(r.shape(1, 3))],
    tol=REDUCTION)
row("max_binary", lambda L, a, b: L.max(a, b), two())
row("max_dim_indices_attr", lambda L, x: x.max(dim=0).indices, lambda r: [r.distinct(r.shape(1, 3))], tol=EXACT,
    grad=False)


# --- more promotion-sensitive forms --------------------------------------------------
row("where_both_scalars", lambda L, c: L.where(c, 1.5, -2.0), lambda r: [r.bools(r.shape())], grad=False, tol=EXACT)
row("clamp_int_float_bounds", lambda L, x: L.clamp(x, -1.5, 2.5), lambda r: [r.ints(r.shape(), -5, 5)],
    dtypes=("int64",), grad=False, tol=EXACT)
row("pow_int_float_scalar", lambda L, x: x**1.5, lambda r: [r.ints(r.shape(), 0, 9, r.dtype)], dtypes=INTS,
    grad=False)
row("rpow_int_tensor", lambda L, x: 2**x, lambda r: [r.ints(r.shape(), 0, 9, r.dtype)], dtypes=INTS, tol=EXACT,
    grad=False)
row("rpow_float_int_tensor", lambda L, x: 2.5**x, lambda r: [r.ints(r.shape(), 0, 9, r.dtype)], dtypes=INTS,
    grad=False)
row("int_tensor_lt_float", lambda L, x: x < 2.5, lambda r: [r.ints(r.shape(), 0, 5, r.dtype)], dtypes=INTS,
    tol=EXACT, grad=False)
row("int_plus_low_float", lambda L, a, b: a + b, lambda r: [r.ints((3, 4), -5, 5), r.normal((4,))],
    dtypes=("float16", "bfloat16"))


# --- long reductions and large values: float16/bfloat16 accumulate in float32 -------------------------------
# Sums of thousands of values (a bfloat16 running sum stops growing at 256), and values near 300, whose
# sums and squares overflow float16. Finite differences are left to the small rows above.
def _long(*shapes, lo: float = 0.5, hi: float = 1.5):
    """Arrays of uniform values in [lo, hi): long sums of them lose everything if accumulated in bfloat16."""
    return lambda r: [r.uniform(s, lo, hi) for s in shapes]


def _near(*shapes, at: float = 300.0):
    """Arrays of values around `at` (first), then normal ones: statistics of large values."""
    return lambda r: [r.offset(s, at) if i == 0 else r.normal(s) for i, s in enumerate(shapes)]


def nnf(L):
    """ember.nn.functional or torch.nn.functional."""
    return L.nn.functional


LONG = {"gradcheck": False}
row("sum_long", lambda L, x: L.sum(x), _long((4096,)), tol=REDUCTION, **LONG)
row("mul_broadcast_long", lambda L, a, b: a * b, _long((1,), (4096,)), **LONG)  # a's gradient sums 4096 terms
row("sum_long_dim", lambda L, x: L.sum(x, 1, keepdim=True), _long((3, 2000)), tol=REDUCTION, **LONG)
row("mean_long", lambda L, x: L.mean(x), _long((10000,), lo=0.09, hi=0.11), tol=REDUCTION, **LONG)
row("mean_large_values", lambda L, x: L.mean(x, 0), _near((1000, 2)), tol=REDUCTION, **LONG)
row("var_large_values", lambda L, x: L.var(x), _near((1000,)), tol=REDUCTION, **LONG)
row("std_large_values", lambda L, x: L.std(x, 0), _near((1000, 2)), tol=REDUCTION, **LONG)
row("var_mean_large_values", lambda L, x: L.var_mean(x, 1), _near((2, 1000)), tol=REDUCTION, **LONG)
row("norm_large_values", lambda L, x: L.norm(x), _near((1000,)), tol=REDUCTION, **LONG)
row("norm_long_dim", lambda L, x: L.norm(x, 2, 1), _long((2, 3000)), tol=REDUCTION, **LONG)
row("prod_long", lambda L, x: L.prod(x, 1), _long((2, 500), lo=0.99, hi=1.01), tol=REDUCTION, **LONG)
row("cumsum_long", lambda L, x: L.cumsum(x, 0), _long((2000, 2)), tol=REDUCTION, **LONG)
row("cumprod_long", lambda L, x: L.cumprod(x, -1), _long((2, 500), lo=0.99, hi=1.01), tol=REDUCTION, **LONG)
row("logsumexp_long", lambda L, x: L.logsumexp(x, 1), lambda r: [r.normal((2, 4000))], tol=REDUCTION, **LONG)
row("softmax_long", lambda L, x: L.softmax(x, -1), lambda r: [r.normal((2, 2000))], tol=REDUCTION, **LONG)
row("log_softmax_long", lambda L, x: L.log_softmax(x, 0), lambda r: [r.normal((2000, 2))], tol=REDUCTION, **LONG)
row("matmul_long", lambda L, a, b: a @ b, mats((4, 3000), (3000, 5)), tol=MATMUL, **LONG)
row("bmm_long", lambda L, a, b: L.bmm(a, b), mats((2, 3, 2000), (2, 2000, 4)), tol=MATMUL, **LONG)
row("einsum_long", lambda L, a, b: L.einsum("ij,kj->ik", a, b), mats((3, 3000), (4, 3000)), tol=MATMUL, **LONG)
row("conv2d_long", lambda L, x, w: L.conv2d(x, w, padding=1), mats((2, 64, 5, 5), (4, 64, 3, 3)), tol=CONV, **LONG)
row("conv_transpose2d_long", lambda L, x, w: L.conv_transpose2d(x, w, stride=2), mats((1, 64, 4, 4), (64, 3, 3, 3)),
    tol=CONV, **LONG)
row("avg_pool2d_large_values", lambda L, x: L.avg_pool2d(x, 16), _near((1, 2, 16, 16)), tol=REDUCTION, **LONG)

# --- nn.functional's fused primitives and losses ---------------------------------------------------------------
row("linear", lambda L, x, w, b: nnf(L).linear(x, w, b), mats(("m", "k"), ("n", "k"), ("n",)), tol=MATMUL)
row("linear_3d", lambda L, x, w: nnf(L).linear(x, w), mats((2, "m", "k"), ("n", "k")), tol=MATMUL)
row("linear_long", lambda L, x, w, b: nnf(L).linear(x, w, b), mats((4, 3000), (5, 3000), (5,)), tol=MATMUL, **LONG)
# eval-mode batch norm's one pass: x * scale + shift per channel (dim 1); small (NumPy) and long (compiled)
row("channel_affine", lambda L, x, s, b: _channel_affine(L, x, s, b), mats(("n", "c", 3, 2), ("c",), ("c",)))
row("channel_affine_2d", lambda L, x, s, b: _channel_affine(L, x, s, b), mats((4, "c"), ("c",), ("c",)))
row("channel_affine_scale_only", lambda L, x, s: _channel_affine(L, x, s, None), mats((2, "c", 5), ("c",)))
row("channel_affine_long", lambda L, x, s, b: _channel_affine(L, x, s, b), mats((2, 24, 24, 24), (24,), (24,)),
    gradcheck=False)
# a shift alone is how conv2d adds its bias: the compiled pass from 16K values, and its gradient a per-channel sum
row("channel_affine_shift_only", lambda L, x, b: _channel_affine(L, x, None, b), mats((2, "c", 5, 3), ("c",)))
row("channel_affine_shift_only_long", lambda L, x, b: _channel_affine(L, x, None, b), mats((3, 24, 24, 24), (24,)),
    gradcheck=False, tol=REDUCTION)
# every dim but the channels' of 16K values or more: one compiled pass accumulating in float64
row("sum_per_channel_long", lambda L, x: L.sum(x, dim=(0, 2, 3)), mats((3, 24, 24, 24)), tol=REDUCTION,
    gradcheck=False)
row("sum_to_size_per_channel_long", lambda L, x: x.sum_to_size(1, 24, 1, 1), mats((3, 24, 24, 24)), tol=REDUCTION,
    gradcheck=False)
# the scale does not depend on the mean or the bias: their gradients are checked through the shift alone
# (PyTorch's composite leaves the scale without a gradient when only they need one; the op's outputs both have one)
row("batch_norm_scale_shift", lambda L, m, v, w, b: _bn_scale_shift(L, m, v, w, b),
    lambda r: [r.normal((c := r.size(1, 6),)), r.positive((c,)), r.normal((c,)), r.normal((c,))], nograd=(0, 3))
row("batch_norm_shift", lambda L, m, v, w, b: _bn_scale_shift(L, m, v, w, b)[1],
    lambda r: [r.normal((c := r.size(1, 6),)), r.positive((c,)), r.normal((c,)), r.normal((c,))])
row("batch_norm_scale_shift_no_affine", lambda L, m, v: _bn_scale_shift(L, m, v, None, None),
    lambda r: [r.normal((c := r.size(1, 6),)), r.positive((c,))])
row("layer_norm", lambda L, x, w, b: nnf(L).layer_norm(x, (x.shape[-1],), w, b), mats((3, 2, 6), (6,), (6,)),
    tol=REDUCTION)
row("layer_norm_large_values", lambda L, x, w, b: nnf(L).layer_norm(x, (512,), w, b), _near((4, 512), (512,), (512,)),
    tol=LARGE, **LONG)
# layer_norm_backward's kernels: two normalised dims, no affine parameters, the weight alone, and rows long
# enough for many iterations of the compiled loop
row("layer_norm_2d", lambda L, x, w, b: nnf(L).layer_norm(x, (4, 5), w, b), mats((2, 3, 4, 5), (4, 5), (4, 5)),
    tol=REDUCTION)
row("layer_norm_no_affine", lambda L, x: nnf(L).layer_norm(x, (6,)), mats((3, 4, 6)), tol=REDUCTION)
row("layer_norm_weight_only", lambda L, x, w: nnf(L).layer_norm(x, (6,), w), mats((5, 6), (6,)), tol=REDUCTION)
row("layer_norm_long_rows", lambda L, x, w, b: nnf(L).layer_norm(x, (1000,), w, b), mats((3, 1000), (1000,), (1000,)),
    tol=REDUCTION, **LONG)
# eval mode where nothing needs a gradient: the one op batch_norm_inference (NumPy below 16K values, compiled above)
row("batch_norm_inference", lambda L, x, m, v, w, b: nnf(L).batch_norm(x, m, v, w, b, training=False, eps=1e-3),
    lambda r: [r.normal((3, c := r.size(1, 6), 4, 2)), r.normal((c,)), r.positive((c,)), r.normal((c,)),
               r.normal((c,))], grad=False)
row("batch_norm_inference_no_affine", lambda L, x, m, v: nnf(L).batch_norm(x, m, v, training=False),
    lambda r: [r.normal((5, c := r.size(1, 6))), r.normal((c,)), r.positive((c,))], grad=False)
row("batch_norm_inference_long", lambda L, x, m, v, w, b: nnf(L).batch_norm(x, m, v, w, b, training=False),
    lambda r: [r.normal((2, 24, 24, 24)), r.normal((24,)), r.positive((24,)), r.normal((24,)), r.normal((24,))],
    grad=False, **LONG)
row("batch_norm_train", lambda L, x, w, b: nnf(L).batch_norm(x, None, None, w, b, training=True),
    mats((4, 3, 5), (3,), (3,)), tol=REDUCTION)
row("batch_norm_train_large_values", lambda L, x, w, b: nnf(L).batch_norm(x, None, None, w, b, training=True),
    _near((512, 3), (3,), (3,)), tol=LARGE, **LONG)
# BatchNorm1d on (N, C), 2d, 3d; without the affine parameters; and long channels (8192 values), whose
# sums run many iterations of the compiled kernels' loops (forward and batch_norm_backward).
row("batch_norm_train_nc", lambda L, x, w, b: nnf(L).batch_norm(x, None, None, w, b, training=True),
    mats((6, 4), (4,), (4,)), tol=REDUCTION)
row("batch_norm_train_2d", lambda L, x, w, b: nnf(L).batch_norm(x, None, None, w, b, training=True),
    mats((3, 4, 5, 2), (4,), (4,)), tol=REDUCTION)
row("batch_norm_train_3d", lambda L, x, w, b: nnf(L).batch_norm(x, None, None, w, b, training=True),
    mats((2, 3, 2, 3, 2), (3,), (3,)), tol=REDUCTION)
row("batch_norm_train_no_affine", lambda L, x: nnf(L).batch_norm(x, None, None, training=True),
    mats((4, 3, 5)), tol=REDUCTION)
row("batch_norm_train_weight_only", lambda L, x, w: nnf(L).batch_norm(x, None, None, w, training=True),
    mats((4, 3, 2, 2), (3,)), tol=REDUCTION)
row("batch_norm_train_compiled", lambda L, x, w, b: nnf(L).batch_norm(x, None, None, w, b, training=True),
    mats((8, 4, 16, 16), (4,), (4,)), tol=REDUCTION, **LONG)
row("batch_norm_train_compiled_nc", lambda L, x: nnf(L).batch_norm(x, None, None, training=True),
    mats((1024, 8)), tol=REDUCTION, **LONG)
row("batch_norm_train_compiled_large_values",
    lambda L, x, w, b: nnf(L).batch_norm(x, None, None, w, b, training=True),
    _near((4096, 2), (2,), (2,)), tol=LARGE, **LONG)
row("batch_norm_eval", lambda L, x, m, v, w, b: nnf(L).batch_norm(x, m, v, w, b),
    lambda r: [r.normal((4, 3, 5)), r.normal((3,)), r.uniform((3,), 0.5, 2.0), r.normal((3,)), r.normal((3,))],
    nograd=(1, 2))
row("batch_norm_eval_large_values", lambda L, x, m, v: nnf(L).batch_norm(x, m, v),
    lambda r: [r.offset((64, 3)), r.offset((3,)), r.uniform((3,), 0.5, 2.0)], nograd=(1, 2), tol=LARGE,
    **LONG)
row("group_norm", lambda L, x, w, b: nnf(L).group_norm(x, 2, w, b), mats((2, 4, 3, 3), (4,), (4,)), tol=REDUCTION)
row("group_norm_large_values", lambda L, x: nnf(L).group_norm(x, 2), _near((2, 4, 16, 16)), tol=LARGE, **LONG)
row("instance_norm", lambda L, x, w, b: nnf(L).instance_norm(x, None, None, w, b), mats((2, 3, 5, 4), (3,), (3,)),
    tol=REDUCTION)
row("instance_norm_large_values", lambda L, x: nnf(L).instance_norm(x), _near((2, 3, 16, 16)), tol=LARGE, **LONG)
row("rms_norm", lambda L, x, w: nnf(L).rms_norm(x, (x.shape[-1],), w), mats((3, 2, 6), (6,)), tol=REDUCTION)
row("rms_norm_large_values", lambda L, x: nnf(L).rms_norm(x, (512,)), _near((4, 512)), tol=REDUCTION, **LONG)
row("cross_entropy", lambda L, x, t: nnf(L).cross_entropy(x, t), lambda r: [r.normal((5, 4)), r.ints((5,), 0, 4)],
    tol=REDUCTION)
row("cross_entropy_long", lambda L, x, t: nnf(L).cross_entropy(x, t),
    lambda r: [r.normal((64, 1000)), r.ints((64,), 0, 1000)], tol=REDUCTION, **LONG)
row("cross_entropy_smoothing", lambda L, x, t, w: nnf(L).cross_entropy(x, t, w, label_smoothing=0.1),
    lambda r: [r.normal((5, 4, 2)), r.ints((5, 2), 0, 4), r.uniform((4,), 0.5, 2.0)], nograd=(2,), tol=REDUCTION)
row("cross_entropy_probs", lambda L, x, t: nnf(L).cross_entropy(x, t),
    lambda r: [r.normal((5, 4)), r.uniform((5, 4), 0.0, 0.5)], nograd=(1,), tol=REDUCTION)
row("nll_loss", lambda L, x, t: nnf(L).nll_loss(x, t, reduction="sum"),
    lambda r: [r.normal((5, 4)), r.ints((5,), 0, 4)], tol=REDUCTION)
row("nll_loss_long", lambda L, x, t: nnf(L).nll_loss(x, t), lambda r: [r.uniform((4000, 3), -2.0, -1.0),
                                                                      r.ints((4000,), 0, 3)], tol=REDUCTION, **LONG)
row("mse_loss", lambda L, a, b: nnf(L).mse_loss(a, b), two(), th=lambda L, a, b: nnf(L).mse_loss(*L.broadcast_tensors(a, b)),
    tol=REDUCTION)
row("mse_loss_long", lambda L, a, b: nnf(L).mse_loss(a, b), mats((4096,), (4096,)), tol=REDUCTION, **LONG)
row("l1_loss", lambda L, a, b: nnf(L).l1_loss(a, b, reduction="sum"), mats((3, 4), (3, 4)), tol=REDUCTION,
    gradcheck=False)
row("smooth_l1_loss", lambda L, a, b: nnf(L).smooth_l1_loss(a, b, beta=0.5), mats((3, 4), (3, 4)), tol=REDUCTION,
    gradcheck=False)
row("huber_loss", lambda L, a, b: nnf(L).huber_loss(a, b, delta=0.8), mats((3, 4), (3, 4)), tol=REDUCTION,
    gradcheck=False)
row("binary_cross_entropy", lambda L, p, t: nnf(L).binary_cross_entropy(p, t),
    lambda r: [r.uniform((3, 4), 0.05, 0.95), r.uniform((3, 4), 0.0, 1.0)], nograd=(1,), tol=REDUCTION)
row("binary_cross_entropy_with_logits", lambda L, x, t: nnf(L).binary_cross_entropy_with_logits(x, t),
    lambda r: [r.normal((3, 4), scale=3.0), r.uniform((3, 4), 0.0, 1.0)], nograd=(1,), tol=REDUCTION)
row("kl_div", lambda L, x, t: nnf(L).kl_div(x, t, reduction="batchmean"),
    lambda r: [r.uniform((3, 4), -3.0, -0.1), r.uniform((3, 4), 0.05, 1.0)], nograd=(1,), tol=REDUCTION)
# PyTorch's math kernel (its default CPU kernel has no second derivative)
row("scaled_dot_product_attention", lambda L, q, k, v: nnf(L).scaled_dot_product_attention(q, k, v, is_causal=True),
    mats((2, 2, 4, 8), (2, 2, 4, 8), (2, 2, 4, 8)), tol=MATMUL,
    th=lambda L, q, k, v: L.ops.aten._scaled_dot_product_attention_math(q, k, v, is_causal=True)[0])


def _attention_bool_mask(r: Rand):
    mask = r.bools((2, 1, 4, 5))
    mask[..., 0] = True  # every query attends somewhere (one that attends nowhere: the next row)
    return [r.normal((2, 3, 4, 8)), r.normal((2, 3, 5, 8)), r.normal((2, 3, 5, 6)), mask]


def _attention_mask_blocking_a_query(r: Rand):
    """A bool mask under which query 2 of the first sample attends nowhere: PyTorch's attention gives that query
    weights 0 (output 0, no gradient), where its plain softmax would give NaN."""
    mask = r.bools((2, 1, 4, 5))
    mask[..., 0] = True
    mask[0, 0, 2] = False
    return [r.normal((2, 3, 4, 8)), r.normal((2, 3, 5, 8)), r.normal((2, 3, 5, 6)), mask]


row("scaled_dot_product_attention_float_mask",
    lambda L, q, k, v, m: nnf(L).scaled_dot_product_attention(q, k, v, attn_mask=m),
    mats((2, 3, 4, 8), (2, 3, 5, 8), (2, 3, 5, 6), (4, 5)), tol=MATMUL,
    th=lambda L, q, k, v, m: L.ops.aten._scaled_dot_product_attention_math(q, k, v, attn_mask=m)[0])
row("scaled_dot_product_attention_bool_mask",
    lambda L, q, k, v, m: nnf(L).scaled_dot_product_attention(q, k, v, attn_mask=m, scale=0.3),
    _attention_bool_mask, tol=MATMUL, torch_second=False)  # aten's math kernel expects a bool mask made float
row("scaled_dot_product_attention_query_attending_nowhere",
    lambda L, q, k, v, m: nnf(L).scaled_dot_product_attention(q, k, v, attn_mask=m),
    _attention_mask_blocking_a_query, tol=MATMUL, torch_second=False)
row("scaled_dot_product_attention_2d", lambda L, q, k, v: nnf(L).scaled_dot_product_attention(q, k, v),
    mats((4, 8), (6, 8), (6, 3)), tol=MATMUL,
    th=lambda L, q, k, v: L.ops.aten._scaled_dot_product_attention_math(q, k, v)[0])


def _torch_lstm_cell(L, pre, c):
    """One LSTM step in PyTorch's ops, gates in PyTorch's order [i, f, g, o] (the oracle of ember's fused lstm_cell)."""
    i, f, g, o = pre.chunk(4, -1)
    c = L.sigmoid(f) * c + L.sigmoid(i) * L.tanh(g)
    return L.sigmoid(o) * L.tanh(c), c


def _ember_lstm_cell(L, pre, c):
    from ember.ops.recurrent import lstm_cell

    return lstm_cell(pre, c)


def _torch_gru_cell(L, x_rz, x_n, gh, h):
    """One GRU step in PyTorch's ops (the oracle of ember's fused gru_cell)."""
    hidden = h.shape[-1]
    r, z = L.sigmoid(x_rz + gh[..., :2 * hidden]).split(hidden, -1)
    n = L.tanh(x_n + r * gh[..., 2 * hidden:])
    return (1 - z) * n + z * h


def _ember_gru_cell(L, x_rz, x_n, gh, h):
    from ember.ops.recurrent import gru_cell

    return gru_cell(x_rz, x_n, gh, h)


row("gru_cell", _ember_gru_cell, mats((3, 10), (3, 5), (3, 15), (3, 5)), th=_torch_gru_cell, tol=TRANSCENDENTAL)
row("gru_cell_two_directions", _ember_gru_cell,
    lambda r: [r.normal((2, 3, 4), scale=3.0), r.normal((2, 3, 2)), r.normal((2, 3, 6)), r.normal((2, 3, 2))],
    th=_torch_gru_cell, tol=TRANSCENDENTAL)
row("lstm_cell", _ember_lstm_cell, mats((3, 20), (3, 5)), th=_torch_lstm_cell, tol=TRANSCENDENTAL)
row("lstm_cell_two_directions", _ember_lstm_cell, lambda r: [r.normal((2, 3, 8), scale=3.0), r.normal((2, 3, 2))],
    th=_torch_lstm_cell, tol=TRANSCENDENTAL)


def _torch_lstm_layer(L, xw, h0, c0, w_hh):
    """An LSTM layer step by step in PyTorch's ops (the oracle of ember's fused lstm_layer): (hs, c_T)."""
    h, c, hs = h0, c0, []
    for t in range(xw.shape[0]):
        h, c = _torch_lstm_cell(L, xw[t] + h @ w_hh.T, c)
        hs.append(h)
    return L.stack(hs, 0), c


def _ember_lstm_layer(L, xw, h0, c0, w_hh):
    from ember.ops.recurrent_layer import lstm_layer

    return lstm_layer(xw, h0, c0, w_hh)


row("lstm_layer", _ember_lstm_layer, lambda r: [r.normal((4, 3, 8), scale=2.0), r.normal((3, 2)), r.normal((3, 2)),
                                                r.normal((8, 2))], th=_torch_lstm_layer, tol=TRANSCENDENTAL)
row("lstm_layer_one_step", _ember_lstm_layer, mats((1, 2, 12), (2, 3), (2, 3), (12, 3)), th=_torch_lstm_layer,
    tol=TRANSCENDENTAL)


def _ember_lstm_layer_final(L, xw, h0, c0, w_hh):
    from ember.ops.recurrent_layer import lstm_layer_states

    _, h, c = lstm_layer_states(xw, h0, c0, w_hh)
    return h, c


# the final states alone, as a classifier reads them: h_T's gradient enters the backward as the last step's
row("lstm_layer_final_states", _ember_lstm_layer_final, lambda r: [r.normal((4, 3, 8), scale=2.0), r.normal((3, 2)),
                                                                   r.normal((3, 2)), r.normal((8, 2))],
    th=lambda L, *a: (lambda hs, c: (hs[-1], c))(*_torch_lstm_layer(L, *a)), tol=TRANSCENDENTAL)


def _torch_gru_layer(L, xw, h0, w_hh, b_hh=None):
    """A GRU layer step by step in PyTorch's ops (the oracle of ember's fused gru_layer): every step's state."""
    h, hs = h0, []
    for t in range(xw.shape[0]):
        gh = h @ w_hh.T if b_hh is None else h @ w_hh.T + b_hh
        hidden = h.shape[-1]
        h = _torch_gru_cell(L, xw[t][..., :2 * hidden], xw[t][..., 2 * hidden:], gh, h)
        hs.append(h)
    return L.stack(hs, 0)


def _ember_gru_layer(L, xw, h0, w_hh, b_hh=None):
    from ember.ops.gru_layer import gru_layer

    return gru_layer(xw, h0, w_hh, b_hh)


row("gru_layer", _ember_gru_layer, lambda r: [r.normal((4, 3, 6), scale=2.0), r.normal((3, 2)), r.normal((6, 2)),
                                              r.normal((6,))], th=_torch_gru_layer, tol=TRANSCENDENTAL)
row("gru_layer_without_bias", _ember_gru_layer, mats((3, 2, 9), (2, 3), (9, 3)), th=_torch_gru_layer,
    tol=TRANSCENDENTAL)


def _ember_gru_layer_both(L, xw, h0, w_hh, b_hh=None):
    from ember.ops.gru_layer import gru_layer_states

    return gru_layer_states(xw, h0, w_hh, b_hh)


row("gru_layer_final_state", _ember_gru_layer_both, lambda r: [r.normal((4, 3, 6), scale=2.0), r.normal((3, 2)),
                                                               r.normal((6, 2)), r.normal((6,))],
    th=lambda L, *a: (lambda hs: (hs, hs[-1]))(_torch_gru_layer(L, *a)), tol=TRANSCENDENTAL)
row("cosine_similarity", lambda L, a, b: nnf(L).cosine_similarity(a, b), mats((3, 5), (3, 5)), tol=REDUCTION)
row("normalize", lambda L, x: nnf(L).normalize(x, dim=-1), mats((3, 5)), tol=REDUCTION)

# --- NaN and unsigned orderings: PyTorch counts NaN as the largest value -----------------------------
def _with_nans(r: Rand, shape) -> np.ndarray:
    x = r.distinct(shape)
    x.reshape(-1)[r.perm(x.size)[: max(1, x.size // 4)]] = np.nan
    return x


# (Finite differences of NaN outputs are NaN, so only PyTorch's gradients are compared.)
row("sort_nan", lambda L, x: L.sort(x, -1), lambda r: [_with_nans(r, (3, 5))], tol=EXACT, gradcheck=False)
row("sort_nan_descending", lambda L, x: L.sort(x, -1, descending=True), lambda r: [_with_nans(r, (3, 5))], tol=EXACT,
    gradcheck=False)


def _topk_values_and_picked(L, x):
    """topk's values, and x at its indices: PyTorch leaves the order of tied values (several NaNs) unspecified,
    and the gradient goes to whichever tie it picked."""
    values, indices = L.topk(x, 3)
    return values, L.gather(x, 1, indices)


row("topk_nan", _topk_values_and_picked, lambda r: [_with_nans(r, (2, 6))], tol=EXACT, grad=False)
row("argmax_nan", lambda L, x: (L.argmax(x, 1), *L.max(x, 1)), lambda r: [_with_nans(r, (4, 5))], tol=EXACT,
    grad=False)
row("max_pool2d_nan", lambda L, x: L.max_pool2d(x, 2, return_indices=True), lambda r: [_with_nans(r, (1, 2, 4, 4))],
    tol=EXACT, grad=False)
row("sort_uint8_descending", lambda L, x: L.sort(x, 0, descending=True), lambda r: [r.ints((6, 2), 0, 256, "uint8")],
    tol=EXACT, grad=False, dtypes=("uint8",))
row("topk_uint8", lambda L, x: L.topk(x, 2), lambda r: [r.perm(200)[:7].astype("uint8") + 50], tol=EXACT, grad=False,
    dtypes=("uint8",))
row("sort_int_descending_stable", lambda L, x: L.sort(x, dim=0, descending=True, stable=True),
    lambda r: [r.ints((8,), -3, 3)], tol=EXACT, grad=False, dtypes=("int64",))


# --- reductions into indexed positions (message passing), segments, sparse COO tensors ---------------------------
def _scatter_reduce_args(gen: str = "normal", zeros: bool = False):
    """[self (3, 4), index (3, 6) into 4 positions, src (3, 6)]; `zeros` puts one 0 in self and one in src."""

    def make(r: Rand):
        x, src = getattr(r, gen)((3, 4)), getattr(r, gen)((3, 6))
        if zeros:
            x[1, 1], src[0, 0] = 0.0, 0.0
        return [x, r.ints((3, 6), 0, 4), src]

    return make


for _red in ("sum", "prod", "mean", "amax", "amin"):
    for _inc in (True, False):
        # amax/amin: distinct values (ties are checked below, without finite differences).
        row(f"scatter_reduce_{_red}{'' if _inc else '_exclude_self'}",
            lambda L, x, i, s, _red=_red, _inc=_inc: L.scatter_reduce(x, 1, i, s, _red, include_self=_inc),
            _scatter_reduce_args("distinct" if _red in ("amax", "amin") else "normal"), tol=REDUCTION)
row("scatter_reduce_prod_zeros", lambda L, x, i, s: L.scatter_reduce(x, 1, i, s, "prod"),
    _scatter_reduce_args(zeros=True), tol=REDUCTION)
row("scatter_reduce_amax_ties", lambda L, x, i, s: x.scatter_reduce(0, i, s, "amax"),
    lambda r: [np.round(r.normal((3, 2))), r.ints((5, 2), 0, 3), np.round(r.normal((5, 2)))], gradcheck=False,
    zero_sign=False)
row("scatter_reduce_mean_dim0", lambda L, x, i, s: x.scatter_reduce(0, i, s, "mean", include_self=False),
    lambda r: [r.normal((3, 2)), r.ints((5, 2), 0, 3), r.normal((5, 2))], tol=REDUCTION)
# PyTorch's backward fails when src is larger than index, so finite differences check this gradient.
row("scatter_reduce_src_larger", lambda L, x, i, s: L.scatter_reduce(x, 1, i, s, "mean"),
    lambda r: [r.normal((3, 4)), r.ints((2, 3), 0, 4), r.normal((3, 5))], tol=REDUCTION, torch_grad=False)
row("scatter_reduce_int", lambda L, x, i, s: (L.scatter_reduce(x, 1, i, s, "sum"), L.scatter_reduce(x, 1, i, s, "mean"),
                                              L.scatter_reduce(x, 1, i, s, "amax", include_self=False)),
    lambda r: [r.ints((3, 4), -9, 10), r.ints((3, 6), 0, 4), r.ints((3, 6), -9, 10)], tol=EXACT, grad=False,
    dtypes=("int64",))
for _red in ("prod", "mean", "amax", "amin"):
    row(f"index_reduce_{_red}", lambda L, x, i, s, _red=_red: L.index_reduce(x, 0, i, s, _red),
        lambda r, _red=_red: [r.distinct((4, 3)), r.ints((6,), 0, 4), r.distinct((6, 3))], tol=REDUCTION)
row("index_reduce_mean_exclude_self", lambda L, x, i, s: x.index_reduce(1, i, s, "mean", include_self=False),
    lambda r: [r.normal((2, 4)), r.ints((5,), 0, 4), r.normal((2, 5))], tol=REDUCTION)


def _segments(with_empty: bool = True):
    """[data (rows, 3), lengths] with a few segments, one of them empty."""

    def make(r: Rand):
        lengths = np.array([2, 0, 3, 1] if with_empty else [1, 3, 2], dtype=np.int64)
        return [r.distinct((int(lengths.sum()), 3)), lengths]

    return make


# PyTorch 2.13 has no second derivative of segment_reduce; finite differences check Ember's.
for _red in ("sum", "mean", "max", "min", "prod"):
    row(f"segment_reduce_{_red}", lambda L, d, n, _red=_red: L.segment_reduce(d, _red, lengths=n),
        _segments(with_empty=False), tol=REDUCTION, torch_second=False)
# An empty segment gives 0, nan, -inf, inf and 1 (non-finite outputs: no finite differences).
row("segment_reduce_empty", lambda L, d, n: tuple(L.segment_reduce(d, red, lengths=n)
                                                  for red in ("sum", "mean", "max", "min", "prod")),
    _segments(), tol=REDUCTION, gradcheck=False, torch_second=False)
row("segment_reduce_initial", lambda L, d, n: (L.segment_reduce(d, "sum", lengths=n, initial=0.5),
                                               L.segment_reduce(d, "mean", lengths=n, initial=0.5),
                                               L.segment_reduce(d, "max", lengths=n, initial=0.5)),
    _segments(), tol=REDUCTION, torch_second=False)
row("segment_reduce_offsets", lambda L, d, o: L.segment_reduce(d, "mean", offsets=o),
    lambda r: [r.normal((6, 2)), np.array([0, 1, 4, 6])], tol=REDUCTION, torch_second=False)


def _coo(n: int = 3, m: int = 4, nnz: int = 6, dense: tuple = ()):
    """[indices (2, nnz) with repeated coordinates (uncoalesced), values (nnz, *dense)]."""

    def make(r: Rand):
        idx = np.stack([r.ints((nnz,), 0, n), r.ints((nnz,), 0, m)])
        idx[:, 1] = idx[:, 0]  # at least one coordinate twice
        return [idx, r.normal((nnz, *dense))]

    return make


# PyTorch's gradient of sparse.mm is not itself differentiable (its second derivatives come out zero);
# finite differences of Ember's gradient check the second order instead.
row("sparse_mm", lambda L, i, v, d: L.sparse.mm(L.sparse_coo_tensor(i, v, (3, 4)), d),
    lambda r: _coo()(r) + [r.normal((4, 5))], tol=MATMUL, torch_second=False)
row("sparse_mm_t", lambda L, i, v, d: L.sparse.mm(L.sparse_coo_tensor(i, v, (3, 4)).t(), d),
    lambda r: _coo()(r) + [r.normal((3, 2))], tol=MATMUL, torch_second=False)
row("sparse_matmul_operator", lambda L, i, v, d: L.sparse_coo_tensor(i, v, (3, 4)) @ d,
    lambda r: _coo()(r) + [r.normal((4, 2))], tol=MATMUL, torch_second=False)
row("sparse_to_dense", lambda L, i, v: L.sparse_coo_tensor(i, v, (3, 4)).to_dense(), _coo(), tol=REDUCTION)
row("sparse_to_dense_hybrid", lambda L, i, v: L.sparse_coo_tensor(i, v, (3, 4, 2)).to_dense(), _coo(dense=(2,)),
    tol=REDUCTION)
row("sparse_coalesce", lambda L, i, v: (lambda c: (c.indices(), c.values()))(L.sparse_coo_tensor(i, v, (3, 4)).coalesce()),
    _coo(), tol=REDUCTION, meta=False)
row("sparse_from_dense", lambda L, x: (lambda s: (s.indices(), s.values()))(x.to_sparse()),
    lambda r: [np.where(r.bools((3, 4)), r.normal((3, 4)), 0.0).astype(r.dtype)], tol=EXACT, meta=False,
    gradcheck=False)  # (a nudged zero changes which entries are stored)


# --- infinities, NaN and signed zeros: PyTorch's values and gradients ---------------------------------------------
_INF, _NAN = float("inf"), float("nan")


def _with_infs(r: Rand) -> list:
    """Rows of logits: one with +inf (all NaN in PyTorch), one of -inf only, one masked, one with NaN, finite ones."""
    x = r.normal((6, 3))
    x[0, 0] = _INF
    x[1] = -_INF
    x[2, 1] = -_INF
    x[3, 2] = _NAN
    x[4, :2] = _INF
    return [x]


# (Finite differences of non-finite outputs mean nothing, so only PyTorch's gradients are compared.)
row("softmax_inf", lambda L, x: L.softmax(x, -1), _with_infs, gradcheck=False)
row("log_softmax_inf", lambda L, x: L.log_softmax(x, 1), _with_infs, gradcheck=False)
row("logsumexp_inf", lambda L, x: L.logsumexp(x, 1), _with_infs, gradcheck=False)
row("cross_entropy_inf", lambda L, x, t: nnf(L).cross_entropy(x, t, reduction="none"),
    lambda r: _with_infs(r) + [np.array([1, 0, 0, 1, 2, 0])], gradcheck=False)
row("cross_entropy_inf_mean", lambda L, x, t: nnf(L).cross_entropy(x, t),
    lambda r: _with_infs(r) + [np.array([1, 0, 0, 1, 2, 0])], gradcheck=False)
row("where_zero_scalars", lambda L, c, x: (L.where(c, x, 0.0), L.where(c, 0.0, x), L.where(c, x, 0), L.where(c, 0, x),
                                           L.where(c, x, -0.0), L.where(c, -0.0, x)),
    lambda r: [r.bools((4, 5)), np.concatenate([r.away((4, 4)), np.array([[-0.0], [0.0], [-0.0], [0.0]], r.dtype)], 1)],
    gradcheck=False)
row("where_zero_scalar_infs", lambda L, c, x: (L.where(c, x, 0.0), L.where(c, 0.0, x)),
    lambda r: [r.bools((3, 4)), np.where(r.bools((3, 4)), _INF, -_INF).astype(r.dtype)], gradcheck=False)
row("where_select_negative", lambda L, x: L.where(x > 0, x, 0.0), one("away"))
row("maximum_nan", lambda L, a, b: L.maximum(a, b), lambda r: [_with_nans(r, (3, 4)), _with_nans(r, (3, 4))],
    gradcheck=False)
row("minimum_nan", lambda L, a, b: L.minimum(a, b), lambda r: [_with_nans(r, (3, 4)), _with_nans(r, (4,))],
    gradcheck=False)
row("clamp_nan", lambda L, x: L.clamp(x, -0.5, 0.5), lambda r: [_with_nans(r, (3, 4))], gradcheck=False)
row("clamp_nan_bound", lambda L, x: L.clamp(x, min=_NAN), lambda r: [r.normal((3, 4))], gradcheck=False)
row("clamp_nan_tensor_bound", lambda L, x, lo: L.clamp(x, lo), lambda r: [r.normal((3, 4)), _with_nans(r, (4,))],
    gradcheck=False)

def _quietly(fn, *args):
    """Call fn with warnings silenced (for edge cases where PyTorch warns about the case being tested)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fn(*args)


def _set_scalar(x, index, value):
    """x[index] = value (a Python number) on a copy of x."""
    y = x * 1.0
    y[index] = value
    return y


from . import op_table_composed, op_table_extra, op_table_linalg, op_table_special  # noqa: E402, F401  (the rows of ember.linalg, the special functions, the extra elementwise ops and the composed functions)

ROW_BY_NAME = {r.name: r for r in ROWS}
assert len(ROW_BY_NAME) == len(ROWS), "row names must be unique"
