"""torch.special's orthogonal polynomials P_n(x): Chebyshev's four kinds and their shifted forms, Hermite's two,
Laguerre's and Legendre's, evaluated elementwise for tensors (or numbers) x and n.

As PyTorch's: n is truncated to an integer, P_n is 0 for n < 0, the result is the promoted float dtype of x and n,
and it has no gradient. Values are computed in float64 (NumPy only) by the three-term recurrence, or for Chebyshev
polynomials of degree above 6 inside (-1, 1) by their trigonometric forms (cos(n acos x) and kin), as PyTorch's
kernels do, then rounded once.
"""

from __future__ import annotations

import numpy as np

from ember.dispatch import apply
from ember.op import Op, register
from ember.ops._rules import broadcast_shapes, float_of, result_dtype, shape_of, spec
from ember.ops.opmath import rounded

TRIG_FROM_DEGREE = 7  # above degree 6 PyTorch takes the trigonometric forms inside (-1, 1)


def _chebyshev(first):
    """The recurrence of Chebyshev's kinds: P_0 = 1, P_1 = first(y), P_k+1 = 2y P_k - P_k-1."""
    return lambda y: first(y), lambda k, y, p, q: (y + y) * q - p


# kind -> (P_1 of y, the step P_k+1 from (k, y, P_k-1, P_k), the form for |y| < 1 of (theta = acos y, n) or None,
# whether the polynomial is of y = 2x - 1 rather than x)
_KINDS = {
    "chebyshev_polynomial_t": (*_chebyshev(lambda y: y), lambda t, n: np.cos(n * t), False),
    "chebyshev_polynomial_u": (*_chebyshev(lambda y: y + y), lambda t, n: np.sin((n + 1) * t) / np.sin(t), False),
    "chebyshev_polynomial_v": (*_chebyshev(lambda y: y + y - 1.0),
                               lambda t, n: np.cos((n + 0.5) * t) / np.cos(0.5 * t), False),
    "chebyshev_polynomial_w": (*_chebyshev(lambda y: y + y + 1.0),
                               lambda t, n: np.sin((n + 0.5) * t) / np.sin(0.5 * t), False),
    "hermite_polynomial_h": (lambda y: y + y, lambda k, y, p, q: (y + y) * q - (k + k) * p, None, False),
    "hermite_polynomial_he": (lambda y: y, lambda k, y, p, q: y * q - k * p, None, False),
    "laguerre_polynomial_l": (lambda y: 1.0 - y, lambda k, y, p, q: ((k + k + 1.0 - y) * q - k * p) / (k + 1.0), None,
                              False),
    "legendre_polynomial_p": (lambda y: y, lambda k, y, p, q: ((k + k + 1.0) * y * q - k * p) / (k + 1.0), None,
                              False),
}
for _kind in "tuvw":
    _KINDS[f"shifted_chebyshev_polynomial_{_kind}"] = _KINDS[f"chebyshev_polynomial_{_kind}"][:3] + (True,)


def evaluate(kind: str, x: np.ndarray, n: np.ndarray) -> np.ndarray:
    """P_n(x) of `kind` in float64 for broadcastable float64 x and n."""
    first, step, trig, shifted = _KINDS[kind]
    x, n = np.broadcast_arrays(np.asarray(x, np.float64), np.asarray(n, np.float64))
    with np.errstate(invalid="ignore"):  # NaN degrees count as negative (PyTorch's cast of NaN to an integer)
        degree = np.where(np.isnan(n), -1.0, np.trunc(n))
    y = x + x - 1.0 if shifted else x
    out = np.zeros(x.shape)
    out[degree == 0] = 1.0
    with np.errstate(all="ignore"):  # overflow to inf and inf - inf = NaN, quietly as PyTorch
        ones = degree == 1
        out[ones] = first(y[ones])
        rest = degree >= 2
        if trig is not None:
            inside = rest & (degree >= TRIG_FROM_DEGREE) & (np.abs(y) < 1.0)
            out[inside] = trig(np.arccos(y[inside]), degree[inside])
            rest &= ~inside
        index = np.flatnonzero(rest)
        yk, dk = y.reshape(-1)[index], degree.reshape(-1)[index]
        p, q = np.ones_like(yk), first(yk)  # P_0, P_1
        flat = out.reshape(-1)  # a view: out is contiguous
        for k in range(1, int(dk.max()) if dk.size else 1):  # P_k+1 for the entries of degree k + 1 or more
            p, q = q, step(float(k), yk, p, q)
            done = dk == k + 1
            if done.any():
                flat[index[done]] = q[done]
                keep = ~done
                index, yk, dk, p, q = index[keep], yk[keep], dk[keep], p[keep], q[keep]
    return out


class OrthogonalPolynomial(Op):
    """P_n(x) of one of torch.special's polynomial families, elementwise, without a gradient."""

    elementwise = True
    differentiable = False

    def __init__(self, name: str) -> None:
        self.name = name

    def infer(self, x, n):
        return spec(broadcast_shapes(self.name, shape_of(x), shape_of(n)), float_of(result_dtype(x, n)))

    def kernel(self, xp, x, n):
        dtype = float_of(result_dtype(x, n))
        out = evaluate(self.name, _host(x), _host(n))  # computed on the host, returned on the inputs' device
        return xp.asarray(rounded(out, dtype))


def _host(a):
    """A NumPy array of a (a NumPy or CuPy array, or a number)."""
    return a.get() if hasattr(a, "get") else np.asarray(a)


_OPS = {kind: register(OrthogonalPolynomial(kind)) for kind in _KINDS}


def _polynomial(kind: str, what: str):
    """The public function torch.special names `kind`: P_n(x) elementwise, P being `what`."""

    def fn(input, n):
        if not hasattr(input, "shape") and not hasattr(n, "shape"):
            raise TypeError(f"{kind}(): expected a tensor for input or n, got {type(input).__name__} and "
                            f"{type(n).__name__}")
        return apply(_OPS[kind], input, n)

    fn.__name__ = fn.__qualname__ = kind
    fn.__doc__ = f"{what} of degree n at x, elementwise (torch.special.{kind})."
    return fn


chebyshev_polynomial_t = _polynomial("chebyshev_polynomial_t", "The Chebyshev polynomial of the first kind T_n")
chebyshev_polynomial_u = _polynomial("chebyshev_polynomial_u", "The Chebyshev polynomial of the second kind U_n")
chebyshev_polynomial_v = _polynomial("chebyshev_polynomial_v", "The Chebyshev polynomial of the third kind V_n")
chebyshev_polynomial_w = _polynomial("chebyshev_polynomial_w", "The Chebyshev polynomial of the fourth kind W_n")
shifted_chebyshev_polynomial_t = _polynomial("shifted_chebyshev_polynomial_t", "T_n(2x - 1)")
shifted_chebyshev_polynomial_u = _polynomial("shifted_chebyshev_polynomial_u", "U_n(2x - 1)")
shifted_chebyshev_polynomial_v = _polynomial("shifted_chebyshev_polynomial_v", "V_n(2x - 1)")
shifted_chebyshev_polynomial_w = _polynomial("shifted_chebyshev_polynomial_w", "W_n(2x - 1)")
hermite_polynomial_h = _polynomial("hermite_polynomial_h", "The physicists' Hermite polynomial H_n")
hermite_polynomial_he = _polynomial("hermite_polynomial_he", "The probabilists' Hermite polynomial He_n")
laguerre_polynomial_l = _polynomial("laguerre_polynomial_l", "The Laguerre polynomial L_n")
legendre_polynomial_p = _polynomial("legendre_polynomial_p", "The Legendre polynomial P_n")

__all__ = sorted(_KINDS)
