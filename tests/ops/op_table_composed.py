"""Op-table rows of the functions composed of other ops (ops/elementwise_composed.py, shape_composed.py,
statistics.py, the add*mm family of linalg.py): forward and gradients against PyTorch. Imported by op_table.py."""

from __future__ import annotations

import numpy as np

from .helpers import EXACT, MATMUL, REDUCTION, TRANSCENDENTAL
from .inputs import Rand
from .op_table import INTS, mats, one, row, two


def _specials(r: Rand):
    """Numbers with NaN and both infinities among them."""
    x = r.normal((3, 4))
    x[0, 0], x[1, 2], x[2, 3] = np.nan, np.inf, -np.inf
    return [x]


row("nan_to_num", lambda L, x: L.nan_to_num(x), _specials, gradcheck=False)
row("nan_to_num_values", lambda L, x: L.nan_to_num(x, nan=1.5, posinf=7.0, neginf=-2.0), _specials, gradcheck=False)
row("fmax", lambda L, a, b: L.fmax(a, b), two("distinct", "distinct"))
row("fmin", lambda L, a, b: L.fmin(a, b), two("distinct", "distinct"))
row("fmax_nan", lambda L, a, b: (L.fmax(a, b), L.fmin(a, b)),
    lambda r: [np.array([1.0, np.nan, 2.0, np.nan], r.dtype), np.array([np.nan, 1.0, 3.0, np.nan], r.dtype)],
    gradcheck=False)
row("logaddexp2", lambda L, a, b: L.logaddexp2(a, b), two("normal", "normal", {"scale": 4.0}, {"scale": 4.0}),
    tol=TRANSCENDENTAL)
row("deg2rad_rad2deg", lambda L, x: (L.deg2rad(x), L.rad2deg(x)), one("normal", scale=90.0))
row("float_power", lambda L, a, b: L.float_power(a, b), two("positive", "normal"), tol=TRANSCENDENTAL)
row("heaviside", lambda L, a, b: L.heaviside(a, b),
    lambda r: [np.array([-1.0, 0.0, 2.0, 0.0, np.nan], r.dtype), r.normal((5,))], grad=False, tol=EXACT)
row("isposinf_isneginf", lambda L, x: (L.isposinf(x), L.isneginf(x)), _specials, grad=False, tol=EXACT)
row("diag_vector", lambda L, x, k: L.diag(x, k), lambda r: [r.normal((r.size(),)), int(r.rng.integers(-2, 3))],
    tol=EXACT)
row("diag_matrix", lambda L, x, k: L.diag(x, k), lambda r: [r.normal((r.size(), r.size())), int(r.rng.integers(-1, 2))],
    tol=EXACT)
row("diag_embed", lambda L, x, k, d1, d2: L.diag_embed(x, k, d1, d2),
    lambda r: [r.normal((2, 3)), int(r.rng.integers(-2, 3)), *r.choice([(0, 1), (-1, 0), (2, 0), (-2, -1)])],
    tol=EXACT)
row("diagflat", lambda L, x: L.diagflat(x, 1), lambda r: [r.normal((2, 2))], tol=EXACT)
row("block_diag", lambda L, a, b, c: L.block_diag(a, b, c), lambda r: [r.normal(()), r.normal((3,)), r.normal((2, 2))],
    tol=EXACT)
row("kron", lambda L, a, b: L.kron(a, b), lambda r: [r.normal((2, 3)), r.normal((r.size(), 2))], tol=EXACT)
row("rot90", lambda L, x, k, dims: L.rot90(x, k, dims),
    lambda r: [r.normal((2, 3, 4)), int(r.rng.integers(-3, 5)), r.choice([(0, 1), (2, 0), (-1, -2)])], tol=EXACT)
row("repeat_interleave", lambda L, x: (L.repeat_interleave(x, 2), L.repeat_interleave(x, 3, 1)),
    lambda r: [r.normal((2, 3))], tol=EXACT)
row("repeat_interleave_counts", lambda L, x, c: L.repeat_interleave(x, c, 0),
    lambda r: [r.normal((3, 2)), r.ints((3,), 0, 3)], tol=EXACT, meta=False)  # the counts set the shape
row("diff", lambda L, x, n: L.diff(x, n, 0), lambda r: [r.normal((5, 3)), int(r.rng.integers(1, 4))], tol=REDUCTION)
row("diff_prepend_append", lambda L, x, p, a: L.diff(x, 1, -1, p, a),
    lambda r: [r.normal((2, 3)), r.normal((2, 1)), r.normal((2, 2))], tol=REDUCTION)
row("cartesian_prod", lambda L, a, b: L.cartesian_prod(a, b), lambda r: [r.normal((3,)), r.normal((2,))], tol=EXACT)
row("meshgrid_xy", lambda L, a, b: L.meshgrid(a, b, indexing="xy"), lambda r: [r.normal((3,)), r.normal((2,))],
    tol=EXACT)


_FLOAT_ONLY = {d: "PyTorch's quantile takes float32 and float64 only (so does Ember's)" for d in ("float16", "bfloat16")}


def _order_args(r: Rand):
    """[x, dim, keepdim]: distinct values (one median, differentiable by finite differences)."""
    x = r.distinct(r.shape(1, 3, 1, 5))
    return [x, int(r.rng.integers(-x.ndim, x.ndim)), bool(r.rng.random() < 0.5)]


row("median_all", lambda L, x: L.median(x), one("distinct"), tol=EXACT)
row("median_dim", lambda L, x, d, k: L.median(x, d, k), _order_args, tol=EXACT)
row("nanmedian_dim", lambda L, x, d, k: L.nanmedian(x, d, k), _order_args, tol=EXACT)
row("median_nan", lambda L, x: (L.median(x, 1)[0], L.nanmedian(x, 1)[0], L.nanmedian(x)),
    lambda r: [np.array([[1.0, np.nan, 3.0, 2.0], [np.nan] * 4, [4.0, 1.0, 2.0, 3.0]], r.dtype)], tol=EXACT,
    grad=False)  # (which NaN a row of NaN picks, and so gets the gradient, is PyTorch's implementation detail)
row("quantile", lambda L, x, q, d, k: L.quantile(x, q, d, k), lambda r: [*_order_args(r)[:1], 0.3, None, False],
    tol=REDUCTION, skip_low=_FLOAT_ONLY)
row("quantile_dim", lambda L, x, d, k: L.quantile(x, 0.7, d, k), _order_args, tol=REDUCTION, skip_low=_FLOAT_ONLY)
row("quantile_vector", lambda L, x, q: L.quantile(x, q, 0, True),
    lambda r: [r.distinct((5, 2)), np.array([0.0, 0.2, 0.5, 1.0], r.dtype)], nograd=(1,), tol=REDUCTION, skip_low=_FLOAT_ONLY)
row("quantile_interpolations", lambda L, x: tuple(L.quantile(x, 0.4, 1, interpolation=m)
                                                  for m in ("lower", "higher", "midpoint", "nearest")),
    lambda r: [r.distinct((3, 6))], tol=REDUCTION, skip_low=_FLOAT_ONLY)
row("nanquantile", lambda L, x: (L.nanquantile(x, 0.25, 1), L.quantile(x, 0.25, 1)),
    lambda r: [np.array([[1.0, np.nan, 3.0, 2.0], [np.nan] * 4, [4.0, 1.0, 2.0, 3.0]], r.dtype)], tol=REDUCTION,
    gradcheck=False, skip_low=_FLOAT_ONLY)
row("nansum_nanmean", lambda L, x: (L.nansum(x, 1), L.nanmean(x, 1), L.nansum(x), L.nanmean(x)),
    lambda r: [np.where(r.rng.random((3, 4)) < 0.3, np.nan, r.normal((3, 4)))], tol=REDUCTION, gradcheck=False)
row("aminmax", lambda L, x: tuple(L.aminmax(x, dim=0)), lambda r: [r.distinct((3, 4))], tol=EXACT)
row("addmv", lambda L, c, a, v: L.addmv(c, a, v, beta=0.5, alpha=2.0), mats(("m",), ("m", "k"), ("k",)), tol=MATMUL)
row("addr", lambda L, c, a, b: L.addr(c, a, b, alpha=-1.0), mats(("m", "n"), ("m",), ("n",)), tol=MATMUL)
row("baddbmm", lambda L, c, a, b: L.baddbmm(c, a, b, beta=0.0), mats(("b", "m", "n"), ("b", "m", "k"), ("b", "k", "n")),
    tol=MATMUL)
row("addbmm", lambda L, c, a, b: L.addbmm(c, a, b), mats(("m", "n"), ("b", "m", "k"), ("b", "k", "n")), tol=MATMUL)
row("vdot_dist", lambda L, a, b: (L.vdot(a, b), L.dist(a, b), L.dist(a, b, 3.0), L.dist(a, b, float("inf"))),
    mats(("k",), ("k",)), tol=MATMUL)
row("trace", lambda L, x: L.trace(x), lambda r: [r.normal((r.size(), r.size()))], tol=REDUCTION)
row("tensor_split", lambda L, x: (*L.tensor_split(x, 3, 1), *L.tensor_split(x, [1, -1], 0)),
    lambda r: [r.normal((4, 5))], tol=EXACT)
row("matrix_power", lambda L, a, n: L.linalg.matrix_power(a, n),
    lambda r: [r.normal((2, 3, 3)) + 3 * np.eye(3), int(r.choice([0, 1, 2, 3, -1, -2]))], tol=MATMUL)


# The scans of ops/sorting.py added with these functions, and cumprod's gradient at zeros
def _with_zeros(r: Rand):
    """Zeros, at most one in each row and each column."""
    x = r.normal((3, 5))
    x[0, 1] = x[1, 0] = x[2, 4] = 0.0
    return [x, int(r.rng.integers(-2, 2))]


def _with_many_zeros(r: Rand):
    """Two and three zeros in a row, two in a column, a row starting with two: the terms whose products hold one
    zero besides the value differentiated carry the second derivatives."""
    x = r.normal((4, 6))
    x[0, 1] = x[0, 3] = 0.0
    x[1, 0] = x[1, 2] = x[1, 5] = 0.0
    x[2, 0] = x[2, 1] = 0.0
    x[3, 3] = 0.0
    return [x, int(r.rng.integers(-2, 2))]


row("cumprod_zeros", lambda L, x, d: L.cumprod(x, d), _with_zeros, tol=REDUCTION)
row("cumprod_many_zeros", lambda L, x, d: L.cumprod(x, d), _with_many_zeros, tol=REDUCTION)
row("cummax_cummin", lambda L, x, d: (*L.cummax(x, d), *L.cummin(x, d)),
    lambda r: [r.distinct((3, 4)), int(r.rng.integers(-2, 2))], tol=EXACT)
row("cummax_ties_nan", lambda L, x: (*L.cummax(x, 1), *L.cummin(x, 1)),
    lambda r: [np.array([[1.0, 3.0, 3.0, 2.0, 5.0], [1.0, np.nan, 3.0, np.nan, 0.0]], r.dtype)], tol=EXACT,
    gradcheck=False)
row("logcumsumexp", lambda L, x, d: L.logcumsumexp(x, d),
    lambda r: [r.normal((3, 4), scale=5.0), int(r.rng.integers(-2, 2))], tol=TRANSCENDENTAL)
row("logcumsumexp_far_apart", lambda L, x: L.logcumsumexp(x, 0),
    lambda r: [np.array([-1000.0, 0.0, 3.0, -np.inf, 1000.0], r.dtype)], tol=TRANSCENDENTAL, gradcheck=False)
row("round_decimals", lambda L, x: (L.round(x, decimals=2), L.round(x, decimals=-1), x.round(decimals=1)),
    one("normal", scale=50.0), tol=EXACT)
_NO_HALF_CDIST = {d: "PyTorch 2.13's CPU cdist has no float16/bfloat16 kernel" for d in ("float16", "bfloat16")}
row("cdist", lambda L, a, b, p: L.cdist(a, b, p),
    lambda r: [r.normal((2, 3, 4)), r.normal((2, 5, 4)), r.choice([2.0, 1.0, 3.0, 0.5, float("inf")])], tol=MATMUL,
    torch_second=False, skip_low=_NO_HALF_CDIST)  # (PyTorch has no second derivative of cdist: finite differences)


def _coinciding_rows(r: Rand):
    a, b = r.normal((3, 2)), r.normal((4, 2))
    b[1] = a[2]
    return [a, b]


row("cdist_coinciding_rows", lambda L, a, b: (L.cdist(a, b), L.cdist(a, b, 1.0), L.cdist(a, b, 0.5), L.cdist(a, b, 0)),
    _coinciding_rows, tol=MATMUL, gradcheck=False, torch_second=False, skip_low=_NO_HALF_CDIST)
row("cov_corrcoef", lambda L, x: (L.cov(x), L.corrcoef(x), L.cov(x, correction=0)), lambda r: [r.normal((3, 6))],
    tol=MATMUL)
row("cov_weights", lambda L, x, f, a: L.cov(x, fweights=f, aweights=a),
    lambda r: [r.normal((2, 5)), r.ints((5,), 1, 4), r.uniform((5,), 0.1, 1.0)], nograd=(2,), tol=MATMUL)
row("mode_values", lambda L, x: tuple(L.mode(x, 1)), lambda r: [r.ints((3, 7), -2, 3).astype(r.dtype)], tol=EXACT,
    gradcheck=False, meta=False)  # (the positions depend on the values; the gradient is a scatter to them)


# --- PyTorch's remaining everyday functions (shape_composed.py, elementwise_composed.py, linalg.cross) --------------
def _mask_and_source(r: Rand):
    x = r.normal((3, 4))
    mask = r.rng.random((3, 4)) < 0.5
    return [x, mask, r.normal((12,))]


row("gcd_lcm", lambda L, a, b: (L.gcd(a, b), L.lcm(a, b)), lambda r: [r.ints((3, 4), -30, 30), r.ints((4,), -12, 13)],
    dtypes=INTS, grad=False, tol=EXACT)
row("sinc", lambda L, x: L.sinc(x), lambda r: [np.concatenate([r.normal((5,)), np.zeros(1, r.dtype)])],
    tol=TRANSCENDENTAL, torch_second=False)  # PyTorch's second derivative at 0 is NaN (-pi**2 / 3 here)
row("ldexp", lambda L, x, e: L.ldexp(x, e), lambda r: [r.normal((3, 4)), r.ints((4,), -3, 4).astype(r.dtype)],
    nograd=(1,))  # (float exponents: PyTorch's gradient with negative integer ones is an integer 2**e, 0)
row("renorm", lambda L, x: L.renorm(x, 2, 0, 1.5), lambda r: [r.normal((3, 4), scale=2.0)], tol=REDUCTION)
row("rsub_fix_absolute", lambda L, a, b: (L.rsub(a, b, alpha=2), L.fix(a * 3), L.absolute(a), L.arctan2(a, b)),
    two("normal", "normal"), tol=TRANSCENDENTAL, gradcheck=False)
row("cross", lambda L, a, b: L.cross(a, b, dim=1), lambda r: [r.normal((2, 3, 4)), r.normal((1, 3, 4))], tol=REDUCTION)
row("linalg_cross", lambda L, a, b: L.linalg.cross(a, b), lambda r: [r.normal((4, 3)), r.normal((1, 3))], tol=REDUCTION)
row("take", lambda L, x, i: L.take(x, i), lambda r: [r.normal((3, 4)), r.ints((2, 3), -12, 12)], tol=EXACT)
row("adjoint_ravel", lambda L, x: (L.adjoint(x), L.ravel(x)), lambda r: [r.normal((2, 3, 4))], tol=EXACT)
row("column_row_dstack", lambda L, a, b: (L.column_stack([a, b]), L.row_stack([a, b]), L.dstack([a, b])),
    lambda r: [r.normal((3,)), r.normal((3,))], tol=EXACT)
row("hsplit_vsplit_dsplit", lambda L, x: (*L.hsplit(x, 2), *L.vsplit(x, [1]), *L.dsplit(x, [1, 3])),
    lambda r: [r.normal((2, 4, 5))], tol=EXACT)
row("combinations", lambda L, x: (L.combinations(x), L.combinations(x, 3, with_replacement=True)),
    lambda r: [r.normal((4,))], tol=EXACT)
row("vander", lambda L, x: (L.vander(x), L.vander(x, 3, increasing=True)), lambda r: [r.normal((4,))], tol=REDUCTION,
    torch_grad=False)  # PyTorch's vander writes its cumulative product in place: no gradient
row("trapezoid", lambda L, y, x: (L.trapezoid(y), L.trapezoid(y, dx=0.5, dim=0), L.trapezoid(y, x)),
    lambda r: [r.normal((3, 5)), np.sort(r.normal((5,)))], tol=REDUCTION)
row("cumulative_trapezoid", lambda L, y, x: (L.cumulative_trapezoid(y, dim=0), L.cumulative_trapezoid(y, x)),
    lambda r: [r.normal((3, 5)), np.sort(r.normal((5,)))], tol=REDUCTION)
row("index_copy_fill", lambda L, x, s: (L.index_copy(x, 1, L.tensor([2, 0]), s), L.index_fill(x, 0, L.tensor([1]), -2.5)),
    lambda r: [r.normal((3, 4)), r.normal((3, 2))], tol=EXACT, meta=False)
row("masked_scatter", lambda L, x, m, s: L.masked_scatter(x, m, s), _mask_and_source, tol=EXACT,
    meta=False)
row("select_slice_scatter", lambda L, x, a, b: (L.select_scatter(x, a, 1, -1), L.slice_scatter(x, b, 1, 1, None, 2)),
    lambda r: [r.normal((3, 5)), r.normal((3,)), r.normal((3, 2))], tol=EXACT)
row("diagonal_scatter", lambda L, x, d: L.diagonal_scatter(x, d, 1), lambda r: [r.normal((3, 4)), r.normal((3,))],
    tol=EXACT)
row("diagonal_scatter_dims", lambda L, x, d: L.diagonal_scatter(x, d, -1, 2, 0), lambda r: [r.normal((3, 2, 4)),
                                                                                           r.normal((2, 3))], tol=EXACT)


# gradient (ops/finite_differences.py): uniform spacings, both edge orders, and coordinates
_COORDS = np.array([0.0, 0.7, 1.1, 2.0, 2.4])
row("gradient", lambda L, x: L.gradient(x), lambda r: [r.normal((3, 5))], tol=REDUCTION)
row("gradient_edge2_spacing", lambda L, x: L.gradient(x, spacing=[0.5, 2.0], edge_order=2),
    lambda r: [r.normal((3, 5))], tol=REDUCTION)
row("gradient_coordinates",
    lambda L, x: L.gradient(x, spacing=(L.tensor(_COORDS, dtype=x.dtype, device=x.device),), dim=1, edge_order=2),
    lambda r: [r.normal((3, 5))], tol=REDUCTION)
