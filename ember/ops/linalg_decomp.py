"""Inverses, determinants, solves and decompositions for `ember.linalg`: inv, det, slogdet, solve, cholesky,
qr, eigh, svd, lstsq and pinv.

Kernels call the array module's LAPACK routines, batched over leading dims. float16/bfloat16 inputs are
computed in float32 and rounded once (PyTorch's CPU kernels refuse them). A matrix that cannot be
factored raises `LinAlgError` naming the op. Gradient rules are PyTorch's formulas written in Ember ops,
so they run eagerly, in graphs and under themselves (second derivatives).
"""

from __future__ import annotations

from collections import namedtuple

import numpy as np

from ember import dtypes as dt
from ember.dispatch import apply
from ember.errors import DtypeError, LinAlgError, ShapeError, fmt_shape
from ember.op import Op, register
from ember.ops._rules import FLOAT_NP, INT64_NP, broadcast_shapes, spec
from ember.ops.opmath import rounded, upcast


# --- shape and dtype checks shared by the rules and the kernels ------------------------------------------------
def check_float(op: str, dtype) -> None:
    """linalg works on floating-point matrices only (as PyTorch)."""
    if dtype not in FLOAT_NP:
        raise DtypeError(f"{op}: expected a floating point tensor as input, got {dt.from_numpy_dtype(dtype).name}")


def check_matrix(op: str, shape, square: bool = True, name: str = "A") -> None:
    """At least 2-D (a batch of matrices), and square when the op needs it."""
    if len(shape) < 2:
        raise ShapeError(f"{op}: {name} must have at least 2 dimensions, got shape {fmt_shape(shape)}")
    m, n = shape[-2], shape[-1]
    if square and m is not None and n is not None and m != n:
        raise ShapeError(f"{op}: {name} must be batches of square matrices, but they are {m} by {n} matrices")


class _LinalgOp(Op):
    """Kernels run `compute` in the opmath dtype on checked inputs; LAPACK failures become LinAlgError."""

    failure = "the input matrix is singular"

    def check(self, *specs, **attrs):
        """Raise for bad shapes or dtypes; return the output specs (the shape rule)."""
        raise NotImplementedError

    def infer(self, *specs, **attrs):
        return self.check(*specs, **attrs)

    def compute(self, xp, *arrays, **attrs):
        raise NotImplementedError

    def kernel(self, xp, *arrays, **attrs):
        outs = self.check(*arrays, **attrs)
        try:
            with np.errstate(all="ignore"):  # a singular matrix's det is 0, its logdet -inf: quietly, as PyTorch
                results = self.compute(xp, *[upcast(a) for a in arrays], **attrs)
        except np.linalg.LinAlgError:
            raise LinAlgError(f"{self.name}: {self.failure}") from None
        if self.n_outputs == 1:
            return rounded(xp.asarray(results), outs.dtype)
        return tuple(rounded(xp.asarray(r), o.dtype) for r, o in zip(results, outs))


def _mT(t):
    from ember.ops.shape import transpose

    return transpose(t, -2, -1)


def _mm(a, b):
    from ember.ops.linalg import matmul

    return matmul(a, b)


def _diag_embed(v):
    """A batch of diagonal matrices with v on the diagonals (differentiable)."""
    from ember.ops.creation_ops import eye_like
    from ember.ops.shape import unsqueeze

    return unsqueeze(v, -1) * eye_like(v, v.shape[-1])


def _batch(shape) -> tuple:
    return tuple(shape[:-2])


# --- inv, det, slogdet -------------------------------------------------------------------------------------------
class InvOp(_LinalgOp):
    name = "linalg.inv"
    save_outputs = (0,)

    def check(self, a):
        check_float(self.name, a.dtype)
        check_matrix(self.name, a.shape)
        return spec(a.shape, a.dtype)

    def compute(self, xp, a):
        return xp.linalg.inv(a)

    def vjp(self, ctx, g):
        inv_t = _mT(ctx.output)
        return (-_mm(inv_t, _mm(g, inv_t)),)


_inv_op = register(InvOp())


def inv(A):
    """The inverse of each square matrix in A (LinAlgError when one is singular)."""
    return apply(_inv_op, A)


class DetOp(_LinalgOp):
    name = "linalg.det"
    save_inputs = (0,)
    save_outputs = (0,)

    def check(self, a):
        check_float(self.name, a.dtype)
        check_matrix(self.name, a.shape)
        return spec(_batch(a.shape), a.dtype)

    def compute(self, xp, a):
        return xp.linalg.det(a)

    def vjp(self, ctx, g):
        from ember.ops.shape import unsqueeze

        # d det(A) = det(A) tr(A^{-1} dA); singular matrices have no such gradient (PyTorch goes through an SVD there)
        scale = unsqueeze(unsqueeze(g * ctx.output, -1), -1)
        return (scale * _mT(inv(ctx.input(0))),)


_det_op = register(DetOp())


def det(A):
    """The determinant of each square matrix in A."""
    return apply(_det_op, A)


SlogdetResult = namedtuple("SlogdetResult", ["sign", "logabsdet"])


class SlogdetOp(_LinalgOp):
    name = "linalg.slogdet"
    n_outputs = 2
    save_inputs = (0,)

    def check(self, a):
        check_float(self.name, a.dtype)
        check_matrix(self.name, a.shape)
        out = spec(_batch(a.shape), a.dtype)
        return out, out

    def compute(self, xp, a):
        return xp.linalg.slogdet(a)

    def vjp(self, ctx, g_sign, g_logabs):
        from ember.ops.shape import unsqueeze

        if g_logabs is None:
            return (None,)  # the sign is piecewise constant
        return (unsqueeze(unsqueeze(g_logabs, -1), -1) * _mT(inv(ctx.input(0))),)


_slogdet_op = register(SlogdetOp())


def slogdet(A) -> SlogdetResult:
    """(sign, log|det|) of each square matrix in A: the determinant without overflow."""
    sign, logabsdet = apply(_slogdet_op, A)
    return SlogdetResult(sign, logabsdet)


# --- solve ---------------------------------------------------------------------------------------------------------
def is_vector_rhs(a_shape, b_shape) -> bool:
    """PyTorch's rule: B is a vector (or a batch of them) when 1-D, or when its shape is A's without the last dim."""
    return len(b_shape) == 1 or (len(b_shape) == len(a_shape) - 1 and tuple(b_shape) == tuple(a_shape[:-1]))


class SolveOp(_LinalgOp):
    name = "linalg.solve"
    save_inputs = (0,)
    save_outputs = (0,)

    def check(self, a, b):
        check_float(self.name, a.dtype)
        check_float(self.name, b.dtype)
        check_matrix(self.name, a.shape)
        n = a.shape[-1]
        if is_vector_rhs(a.shape, b.shape):
            if b.shape[-1] != n and None not in (n, b.shape[-1]):
                raise ShapeError(f"{self.name}: A is {fmt_shape(a.shape)} but B has {b.shape[-1]} rows")
            shape = broadcast_shapes(self.name, _batch(a.shape), tuple(b.shape[:-1])) + (n,)
        else:
            check_matrix(self.name, b.shape, square=False, name="B")
            if b.shape[-2] != n and None not in (n, b.shape[-2]):
                raise ShapeError(f"{self.name}: A is {fmt_shape(a.shape)} but B ({fmt_shape(b.shape)}) has "
                                 f"{b.shape[-2]} rows")
            shape = broadcast_shapes(self.name, _batch(a.shape), _batch(b.shape)) + (n, b.shape[-1])
        if a.dtype != b.dtype:
            raise TypeError(f"{self.name}: A is {dt.from_numpy_dtype(a.dtype).name} but B is "
                            f"{dt.from_numpy_dtype(b.dtype).name}; both need the same dtype")
        return spec(shape, a.dtype)

    def compute(self, xp, a, b):
        vector = is_vector_rhs(a.shape, b.shape)
        rhs = b[..., None] if vector else b
        if xp is not np:  # CuPy's solve does not broadcast the batch dims: give both the one batch shape
            batch = np.broadcast_shapes(a.shape[:-2], rhs.shape[:-2])
            a, rhs = xp.broadcast_to(a, batch + a.shape[-2:]), xp.broadcast_to(rhs, batch + rhs.shape[-2:])
        x = xp.linalg.solve(a, rhs)
        return x[..., 0] if vector else x

    def vjp(self, ctx, g):
        from ember.ops.shape import unsqueeze

        a, x = ctx.input(0), ctx.output
        gb = solve(_mT(a), g)  # B's gradient is A^{-T} g
        if not ctx.needs_grad(0):
            return None, gb
        if is_vector_rhs(ctx.in_shape(0), ctx.in_shape(1)):
            ga = -(unsqueeze(gb, -1) * unsqueeze(x, -2))
        else:
            ga = -_mm(gb, _mT(x))
        return ga, gb


_solve_op = register(SolveOp())


def solve(A, B, *, left: bool = True):
    """X with A X = B (left=True) or X A = B, for square A; B may be a vector or a batch of either."""
    if left:
        return apply(_solve_op, A, B)
    return _mT(apply(_solve_op, _mT(A), _mT(B)))


# --- cholesky ------------------------------------------------------------------------------------------------------
class CholeskyOp(_LinalgOp):
    name = "linalg.cholesky"
    save_outputs = (0,)
    failure = "the input is not positive-definite"

    def check(self, a, upper=False):
        check_float(self.name, a.dtype)
        check_matrix(self.name, a.shape)
        return spec(a.shape, a.dtype)

    def compute(self, xp, a, upper=False):
        low = xp.linalg.cholesky(a)
        return xp.swapaxes(low, -1, -2).copy() if upper else low

    def vjp(self, ctx, g):
        from ember.ops.shape import tril

        low, gl = ctx.output, g
        if ctx.attrs.get("upper", False):
            low, gl = _mT(low), _mT(gl)
        # PyTorch's rule: phi = tril(L^T gL) with a halved diagonal, gA = sym(L^{-T} phi L^{-1})
        lgl = _mm(_mT(low), gl)
        phi = (tril(lgl) + tril(lgl, -1)) * 0.5
        left = solve(_mT(low), phi)  # L^{-T} phi
        ga = _mT(solve(_mT(low), _mT(left)))  # (L^{-T} phi) L^{-1}
        return ((ga + _mT(ga)) * 0.5,)


_cholesky_op = register(CholeskyOp())


def cholesky(A, *, upper: bool = False):
    """The lower (or upper) triangular L with A = L L^T, for symmetric positive-definite A."""
    return apply(_cholesky_op, A, upper=bool(upper))


# --- qr ------------------------------------------------------------------------------------------------------------
QRResult = namedtuple("QRResult", ["Q", "R"])
_QR_MODES = ("reduced", "complete", "r")


class QROp(_LinalgOp):
    name = "linalg.qr"
    n_outputs = 2
    save_outputs = (0, 1)

    def check(self, a, mode="reduced"):
        check_float(self.name, a.dtype)
        check_matrix(self.name, a.shape, square=False)
        if mode not in _QR_MODES:
            raise ValueError(f"{self.name}: mode must be 'reduced', 'complete' or 'r', got {mode!r}")
        *batch, m, n = a.shape
        k = m if mode == "complete" else (None if m is None or n is None else min(m, n))
        q = spec((0,), a.dtype) if mode == "r" else spec((*batch, m, k), a.dtype)
        return q, spec((*batch, k, n), a.dtype)

    def compute(self, xp, a, mode="reduced"):
        if mode == "r":
            return xp.zeros((0,), a.dtype), xp.linalg.qr(a, mode="r")
        q, r = xp.linalg.qr(a, mode=mode)
        return q, r

    def vjp(self, ctx, gq, gr):
        mode = ctx.attrs.get("mode", "reduced")
        m, n = ctx.in_shape(0)[-2:]
        if mode == "r":
            raise RuntimeError("linalg.qr: the derivative depends on Q, which is not computed when mode='r'; "
                               "use mode='reduced' to differentiate through linalg.qr")
        if mode == "complete" and m > n:
            raise RuntimeError("linalg.qr: the QR decomposition is not differentiable when mode='complete' and "
                               "the input has more rows than columns")
        q, r = ctx.output_at(0), ctx.output_at(1)
        if m >= n:
            return (_qr_backward(gq, gr, q, r),)
        # A = [X | Y] with X = Q U square and Y = Q V: Y's gradient is Q gV, and gV reaches X through Q.
        from ember.ops.creation_ops import zeros_like_shape
        from ember.ops.shape import cat, narrow

        u = narrow(r, -1, 0, m)
        if gr is None:
            gx = _qr_backward(gq, None, q, u)
            return (cat([gx, zeros_like_shape(gx, (*gx.shape[:-1], n - m))], -1),)
        gu, gv = narrow(gr, -1, 0, m), narrow(gr, -1, m, n - m)
        y_gvt = _mm(_mm(q, narrow(r, -1, m, n - m)), _mT(gv))
        gx = _qr_backward(y_gvt if gq is None else gq + y_gvt, gu, q, u)
        return (cat([gx, _mm(q, gv)], -1),)


_qr_op = register(QROp())


def _qr_backward(gq, gr, q, r):
    """The gradient of A = QR (m >= n, Q with orthonormal columns, R square upper triangular)."""
    from ember.ops.shape import tril

    # M = R gR^T - gQ^T Q; gA = (gQ + Q copyltu(M)) R^{-T}, copyltu mirroring M's lower triangle upwards
    m_ = None
    if gr is not None:
        m_ = _mm(r, _mT(gr))
    if gq is not None:
        t = _mm(_mT(gq), q)
        m_ = -t if m_ is None else m_ - t
    low = tril(m_)
    sym = low + _mT(tril(m_, -1))
    ga = _mm(q, sym)
    if gq is not None:
        ga = ga + gq
    return _mT(solve(r, _mT(ga)))  # ga R^{-T}


def qr(A, mode: str = "reduced") -> QRResult:
    """Q with orthonormal columns and upper triangular R with A = QR ('reduced', 'complete' or 'r': R only)."""
    q, r = apply(_qr_op, A, mode=mode)
    return QRResult(q, r)


# --- eigh ----------------------------------------------------------------------------------------------------------
EighResult = namedtuple("EighResult", ["eigenvalues", "eigenvectors"])


class EighOp(_LinalgOp):
    name = "linalg.eigh"
    n_outputs = 2
    save_outputs = (0, 1)
    failure = "the eigenvalue algorithm did not converge"

    def check(self, a, UPLO="L"):  # noqa: N803 - PyTorch's name
        check_float(self.name, a.dtype)
        check_matrix(self.name, a.shape)
        if UPLO not in ("L", "U"):
            raise ValueError(f"{self.name}: UPLO must be 'L' or 'U', got {UPLO!r}")
        return spec(a.shape[:-1], a.dtype), spec(a.shape, a.dtype)

    def compute(self, xp, a, UPLO="L"):  # noqa: N803
        return xp.linalg.eigh(a, UPLO=UPLO)

    def vjp(self, ctx, gl, gv):
        from ember.ops.shape import unsqueeze

        lam, vec = ctx.output_at(0), ctx.output_at(1)
        if gv is None:
            return (_mm(vec * unsqueeze(gl, -2), _mT(vec)),)  # V diag(gL) V^T
        # gA = V (diag(gL) + skew(V^T gV) / 2 / E) V^T with E_ij = L_j - L_i (off the diagonal)
        vtgv = _mm(_mT(vec), gv)
        inner = (vtgv - _mT(vtgv)) * 0.5 / _gaps(lam)
        if gl is not None:
            inner = inner + _diag_embed(gl)
        return (_mm(vec, _mm(inner, _mT(vec))),)


_eigh_op = register(EighOp())


def _gaps(values):
    """E_ij = values_j - values_i off the diagonal and 1 on it (the rules divide by it)."""
    from ember.ops.creation_ops import eye_like
    from ember.ops.shape import unsqueeze

    return unsqueeze(values, -2) - unsqueeze(values, -1) + eye_like(values, values.shape[-1])


def eigh(A, UPLO: str = "L") -> EighResult:  # noqa: N803
    """Eigenvalues (ascending) and orthonormal eigenvectors (columns) of symmetric A, read from its UPLO triangle."""
    w, v = apply(_eigh_op, A, UPLO=UPLO)
    return EighResult(w, v)


def eigvalsh(A, UPLO: str = "L"):  # noqa: N803
    """The eigenvalues (ascending) of symmetric A."""
    return eigh(A, UPLO)[0]


# --- svd -----------------------------------------------------------------------------------------------------------
SVDResult = namedtuple("SVDResult", ["U", "S", "Vh"])


class SVDOp(_LinalgOp):
    name = "linalg.svd"
    n_outputs = 3
    save_outputs = (0, 1, 2)
    failure = "the SVD algorithm did not converge"

    def check(self, a, full_matrices=True):
        check_float(self.name, a.dtype)
        check_matrix(self.name, a.shape, square=False)
        *batch, m, n = a.shape
        k = None if m is None or n is None else min(m, n)
        u = (*batch, m, m if full_matrices else k)
        vh = (*batch, n if full_matrices else k, n)
        return spec(u, a.dtype), spec((*batch, k), a.dtype), spec(vh, a.dtype)

    def compute(self, xp, a, full_matrices=True):
        return xp.linalg.svd(a, full_matrices=full_matrices)

    def vjp(self, ctx, gu, gs, gvh):
        from ember.ops.shape import narrow

        u, s, vh = ctx.output_at(0), ctx.output_at(1), ctx.output_at(2)
        if ctx.attrs.get("full_matrices", True):  # the extra columns are arbitrary: only the first k carry gradient
            k = s.shape[-1]
            u, vh = narrow(u, -1, 0, k), narrow(vh, -2, 0, k)
            gu = None if gu is None else narrow(gu, -1, 0, k)
            gvh = None if gvh is None else narrow(gvh, -2, 0, k)
        return (svd_backward(gu, gs, gvh, u, s, vh),)


_svd_op = register(SVDOp())


def svd_backward(gu, gs, gvh, u, s, vh):
    """PyTorch's gradient of A = U diag(S) Vh (reduced factors; real matrices)."""
    from ember.ops.shape import unsqueeze

    m, n = u.shape[-2], vh.shape[-1]
    if gu is None and gvh is None:
        return _mm(u, unsqueeze(gs, -1) * vh) if m >= n else _mm(u * unsqueeze(gs, -2), vh)
    s_row, s_col = unsqueeze(s, -2), unsqueeze(s, -1)
    s2 = s * s
    e = unsqueeze(s2, -2) - unsqueeze(s2, -1)
    from ember.ops.creation_ops import eye_like

    e = e + eye_like(e, e.shape[-1])
    uhgu = None if gu is None else _mm(_mT(u), gu)
    vhgv = None if gvh is None else _mm(vh, _mT(gvh))
    uhgu = None if uhgu is None else uhgu - _mT(uhgu)
    vhgv = None if vhgv is None else vhgv - _mT(vhgv)
    if uhgu is not None and vhgv is not None:
        ga = (uhgu * s_row + s_col * vhgv) / e
    elif uhgu is not None:
        ga = uhgu * (s_row / e)
    else:
        ga = s_col * (vhgv / e)
    if gs is not None:
        ga = ga + _diag_embed(gs)
    if m > n and gu is not None:
        ga = _mm(u, ga)
        gu_sinv = gu / s_row
        ga = ga + gu_sinv - _mm(u, _mm(_mT(u), gu_sinv))
        return _mm(ga, vh)
    if m < n and gvh is not None:
        ga = _mm(ga, vh)
        sinv_gvh = gvh / s_col
        ga = ga + sinv_gvh - _mm(_mm(sinv_gvh, _mT(vh)), vh)
        return _mm(u, ga)
    return _mm(u, _mm(ga, vh)) if m >= n else _mm(_mm(u, ga), vh)


def svd(A, full_matrices: bool = True) -> SVDResult:
    """U, S (descending) and Vh with A = U diag(S) Vh; full_matrices=False gives the reduced factors."""
    u, s, vh = apply(_svd_op, A, full_matrices=bool(full_matrices))
    return SVDResult(u, s, vh)


def svdvals(A):
    """The singular values of A, descending."""
    return svd(A, full_matrices=False)[1]


# --- pinv ----------------------------------------------------------------------------------------------------------
class PinvOp(_LinalgOp):
    name = "linalg.pinv"
    save_inputs = (0,)
    save_outputs = (0,)

    def check(self, a, atol=None, rtol=None, hermitian=False):
        check_float(self.name, a.dtype)
        check_matrix(self.name, a.shape, square=hermitian)
        return spec((*a.shape[:-2], a.shape[-1], a.shape[-2]), a.dtype)

    def compute(self, xp, a, atol=None, rtol=None, hermitian=False):
        if hermitian:
            w, v = xp.linalg.eigh(a)
            mag = xp.abs(w)
        else:
            u, mag, vh = xp.linalg.svd(a, full_matrices=False)
        big = mag.max(axis=-1, keepdims=True) if mag.shape[-1] else mag[..., :1]
        if rtol is None:  # PyTorch's default: eps * max(m, n), unless only atol is given
            rtol = 0.0 if atol is not None and atol > 0 else np.finfo(a.dtype).eps * max(a.shape[-2:])
        cutoff = np.maximum(0.0 if atol is None else atol, rtol * big)
        keep = mag > cutoff
        inv_s = xp.where(keep, 1.0 / xp.where(keep, mag, 1.0), 0.0).astype(a.dtype)
        if hermitian:
            return xp.matmul(v * (inv_s * xp.sign(w))[..., None, :], xp.swapaxes(v, -1, -2))
        return xp.matmul(xp.swapaxes(vh, -1, -2) * inv_s[..., None, :], xp.swapaxes(u, -1, -2))

    def vjp(self, ctx, g):
        return (pinv_backward(g, ctx.output, ctx.input(0)),)


_pinv_op = register(PinvOp())


def pinv_backward(g, pinv_a, a):
    """PyTorch's gradient of the pseudo-inverse (real matrices)."""
    m, n = a.shape[-2], a.shape[-1]
    pinv_ah, gh = _mT(pinv_a), _mT(g)
    if m <= n:
        k = _mm(gh, pinv_a)
        k_pinv_ah = _mm(k, pinv_ah)
        return (-_mT(_mm(pinv_a, k)) + k_pinv_ah - _mm(_mm(a, pinv_a), k_pinv_ah)
                + _mm(_mm(pinv_ah, pinv_a), gh - _mm(k, a)))
    k = _mm(pinv_a, gh)
    pinv_ah_k = _mm(pinv_ah, k)
    return (-_mT(_mm(k, pinv_a)) + _mm(_mm(gh - _mm(a, k), pinv_a), pinv_ah) + pinv_ah_k
            - _mm(_mm(pinv_ah_k, pinv_a), a))


def pinv(A, *, atol=None, rtol=None, hermitian: bool = False):
    """The Moore-Penrose pseudo-inverse; singular values at most max(atol, rtol * largest) count as zero."""
    return apply(_pinv_op, A, atol=atol, rtol=rtol, hermitian=bool(hermitian))


# --- lstsq ---------------------------------------------------------------------------------------------------------
LstsqResult = namedtuple("LstsqResult", ["solution", "residuals", "rank", "singular_values"])
_DRIVERS = ("gels", "gelsy", "gelsd", "gelss")


class LstsqOp(_LinalgOp):
    name = "linalg.lstsq"
    n_outputs = 4
    save_inputs = (0, 1)
    save_outputs = (0,)

    def check(self, a, b, rcond=None, driver="gelsy"):
        check_float(self.name, a.dtype)
        check_float(self.name, b.dtype)
        check_matrix(self.name, a.shape, square=False)
        if driver not in _DRIVERS:
            raise ValueError(f"{self.name}: driver must be one of {', '.join(_DRIVERS)}, got {driver!r}")
        vector = len(b.shape) == len(a.shape) - 1
        b_rows = b.shape[-1] if vector else b.shape[-2]
        *_, m, n = a.shape
        if len(b.shape) < 1 or (not vector and len(b.shape) < 2) or (b_rows != m and None not in (m, b_rows)):
            raise ShapeError(f"{self.name}: A is {fmt_shape(a.shape)} but B is {fmt_shape(b.shape)}; B needs {m} rows")
        batch = broadcast_shapes(self.name, _batch(a.shape), tuple(b.shape[:-1] if vector else b.shape[:-2]))
        cols = () if vector else (b.shape[-1],)
        x = spec((*batch, n, *cols), a.dtype)
        full = driver != "gelsy" and m is not None and n is not None and m > n
        res = spec((*batch, *cols) if full else (0,), a.dtype)
        rank = spec((0,) if driver == "gels" else batch, INT64_NP)
        k = None if m is None or n is None else min(m, n)
        sv = spec((*batch, k) if driver in ("gelsd", "gelss") else (0,), a.dtype)
        return x, res, rank, sv

    def compute(self, xp, a, b, rcond=None, driver="gelsy"):
        vector = b.ndim == a.ndim - 1
        if vector:
            b = b[..., None]
        batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
        a = xp.broadcast_to(a, batch + a.shape[-2:])
        b = xp.broadcast_to(b, batch + b.shape[-2:])
        m, n = a.shape[-2:]
        # PyTorch's default rcond: eps * max(m, n)
        cut = np.finfo(a.dtype).eps * max(m, n) if rcond is None else rcond
        x = xp.empty(batch + (n, b.shape[-1]), a.dtype)
        rank = xp.empty(batch, np.int64)
        sv = xp.empty(batch + (min(m, n),), a.dtype)
        for idx in np.ndindex(*batch):  # NumPy's lstsq takes one matrix at a time
            x[idx], _, rank[idx], sv[idx] = xp.linalg.lstsq(a[idx], b[idx], rcond=cut)
        full = driver != "gelsy" and m > n
        if full and bool((rank == n).all()):
            res = ((xp.matmul(a, x) - b) ** 2).sum(axis=-2)
            res = res[..., 0] if vector else res
        else:
            res = xp.zeros((0,), a.dtype)
        if vector:
            x = x[..., 0]
        return (x, res, rank if driver != "gels" else xp.zeros((0,), np.int64),
                sv if driver in ("gelsd", "gelss") else xp.zeros((0,), a.dtype))

    def vjp(self, ctx, gx, gres, _grank=None, _gsv=None):
        from ember.ops.shape import unsqueeze

        a, b, x = ctx.input(0), ctx.input(1), ctx.output_at(0)
        vector = len(ctx.in_shape(1)) == len(ctx.in_shape(0)) - 1
        if vector:
            b, x = unsqueeze(b, -1), unsqueeze(x, -1)
            gx = None if gx is None else unsqueeze(gx, -1)
        ga = gb = None
        if gx is not None:  # through X = pinv(A) B, as PyTorch
            pinv_a = pinv(a)
            if ctx.needs_grad(0):
                ga = pinv_backward(_mm(gx, _mT(b)), pinv_a, a)
            if ctx.needs_grad(1):
                gb = _mm(_mT(pinv_a), gx)
        if gres is not None and gres.numel() > 0:
            # residuals = |A X - B|^2 per column; at the least-squares X its derivative in X vanishes
            resid = _mm(a, x) - b
            w = unsqueeze(gres, -1) if vector else unsqueeze(gres, -2)
            ga_r = _mm(resid * w, _mT(x)) * 2.0
            gb_r = resid * w * -2.0
            ga = ga_r if ga is None else ga + ga_r
            gb = gb_r if gb is None else gb + gb_r
        if vector and gb is not None:
            from ember.ops.shape import squeeze

            gb = squeeze(gb, -1)
        return ga, gb


_lstsq_op = register(LstsqOp())


def lstsq(A, B, rcond=None, *, driver: str | None = None) -> LstsqResult:
    """The least-squares solution X of A X = B, with residuals, rank and singular values as `driver` reports them.

    As PyTorch on the CPU (default driver 'gelsy'): residuals (squared, per column) are filled only when
    m > n, every matrix has full rank and the driver is not 'gelsy'; 'gels' reports no rank, and only
    'gelsd' and 'gelss' report singular values. The solution is computed the same way for every driver.
    """
    x, res, rank, sv = apply(_lstsq_op, A, B, rcond=rcond, driver="gelsy" if driver is None else driver)
    return LstsqResult(x, res, rank, sv.detach())  # PyTorch's singular values carry no gradient either


# --- PyTorch's top-level names for some of these (torch.inverse, torch.det, ...) -----------------------------------
def inverse(input):
    """The inverse of each square matrix (`linalg.inv`)."""
    return inv(input)


def logdet(input):
    """log det of each square matrix: -inf where it is 0, NaN where it is negative (as torch.logdet)."""
    from ember.ops.elementwise import lt, where

    sign, logabsdet = slogdet(input)
    return where(lt(sign, 0), float("nan"), logabsdet)  # no gradient where the value is NaN, as in PyTorch


def pinverse(input, rcond: float = 1e-15):
    """The pseudo-inverse, treating singular values below rcond * largest as zero (torch.pinverse)."""
    return pinv(input, rtol=rcond)


__all__ = [
    "cholesky", "det", "eigh", "eigvalsh", "inv", "inverse", "logdet", "lstsq", "pinv", "pinverse", "qr", "slogdet",
    "solve", "svd", "svdvals", "is_vector_rhs", "EighResult", "LstsqResult", "QRResult", "SVDResult", "SlogdetResult",
]
