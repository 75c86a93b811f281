"""Op-table rows of the special functions (torch.special's names in ember.special; SciPy's kernels).

Imported by op_table.py, whose `row` adds them to the one table. Inputs stay inside each function's domain
and away from its poles.
"""

from __future__ import annotations

from .helpers import TRANSCENDENTAL, Tol
from .inputs import Rand
from .op_table import one, row

SPECIAL = Tol((1e-5, 1e-6), (1e-10, 1e-12))  # SciPy's and PyTorch's series differ in the last bits
TRIGAMMA = Tol((1e-5, 1e-6), (2e-9, 1e-11))  # PyTorch's float64 polygamma(n >= 1) is good to ~5e-10 (SciPy's to ulps)
NO_LOW = {d: "PyTorch's CPU kernel has no float16/bfloat16 version" for d in ("float16", "bfloat16")}


def srow(name: str, fn, make, **kw) -> None:
    """A special-function row."""
    kw.setdefault("tol", SPECIAL)
    row(name, fn, make, **kw)


def positive_pair(r: Rand):
    sa, sb = r.bshapes(2)
    return [r.uniform(sa, 0.5, 4.0), r.uniform(sb, 0.1, 5.0)]


srow("lgamma", lambda L, x: L.lgamma(x), one("uniform", lo=0.2, hi=6.0))
srow("lgamma_negative", lambda L, x: x.lgamma(), one("uniform", lo=-2.8, hi=-2.2))
srow("special_gammaln", lambda L, x: L.special.gammaln(x), one("positive"))
srow("digamma", lambda L, x: L.digamma(x), one("uniform", lo=0.3, hi=6.0), tol=TRIGAMMA)
srow("special_psi", lambda L, x: L.special.psi(x), one("uniform", lo=-1.7, hi=-1.3), tol=TRIGAMMA)
for _n in (1, 2, 3):
    srow(f"polygamma_{_n}", (lambda n: lambda L, x: L.polygamma(n, x))(_n), one("uniform", lo=0.4, hi=5.0),
         tol=TRIGAMMA)
srow("polygamma_method", lambda L, x: x.polygamma(1), one("uniform", lo=0.4, hi=5.0), tol=TRIGAMMA)
srow("erfc", lambda L, x: L.erfc(x), one("normal", scale=1.5), tol=TRANSCENDENTAL)
srow("erfinv", lambda L, x: L.erfinv(x), one("uniform", lo=-0.95, hi=0.95))
srow("special_ndtr", lambda L, x: L.special.ndtr(x), one("normal", scale=2.0))
srow("special_log_ndtr", lambda L, x: L.special.log_ndtr(x), one("uniform", lo=-30.0, hi=5.0), skip_low=NO_LOW)
srow("special_ndtri", lambda L, x: L.special.ndtri(x), one("uniform", lo=0.02, hi=0.98), skip_low=NO_LOW)
srow("special_entr", lambda L, x: L.special.entr(x), one("positive"))
srow("special_gammainc", lambda L, a, x: L.special.gammainc(a, x), positive_pair, nograd=(0,))
srow("special_gammaincc", lambda L, a, x: L.special.gammaincc(a, x), positive_pair, nograd=(0,))
srow("xlogy", lambda L, x, y: L.xlogy(x, y), lambda r: [r.normal((3, 4)), r.uniform((4,), 0.2, 3.0)])
srow("xlogy_zero_x", lambda L, x, y: L.xlogy(x * 0.0, y), lambda r: [r.normal((3, 4)), r.uniform((3, 4), 0.2, 3.0)],
     gradcheck=False)
srow("special_xlog1py", lambda L, x, y: L.special.xlog1py(x, y),
     lambda r: [r.normal((2, 3)), r.uniform((2, 3), -0.8, 3.0)])
srow("logit", lambda L, x: L.logit(x), one("uniform", lo=0.05, hi=0.95))
srow("logit_eps", lambda L, x: x.logit(0.1), one("uniform", lo=0.15, hi=0.85))
srow("special_multigammaln", lambda L, x: L.special.multigammaln(x, 3), one("uniform", lo=1.5, hi=5.0))
srow("special_expit_logsumexp", lambda L, x: (L.special.expit(x), L.special.logsumexp(x, -1)),
     lambda r: [r.normal((2, 3))])

# --- Bessel and Airy functions, erfcx, zeta (special_bessel.py) and the orthogonal polynomials -------------------
# PyTorch's float64 Bessel kernels are off by up to 9e-7 (bessel_y1 near x = 5) and its airy_ai by up to 2e-5
# relative (airy_ai(-2.2): 0.0961469 against the 0.0961454 SciPy and mpmath give); Ember's, SciPy's, are checked
# against mpmath in test_special_functions.py. PyTorch's float32 ones are float32 code, Ember's SciPy's rounded once.
BESSEL = Tol((2e-5, 2e-6), (1e-6, 1e-6))
AIRY = Tol((1e-4, 1e-6), (5e-5, 1e-9))
srow("i0", lambda L, x: L.i0(x), one("normal", scale=2.0))
srow("i0_method", lambda L, x: x.i0(), one("uniform", lo=-6.0, hi=6.0))
NO_HALF_BACKWARD = {"float16": "PyTorch 2.13's CPU backward of this function has no float16 version"}
srow("special_i0e", lambda L, x: L.special.i0e(x), one("normal", scale=3.0), skip_low=NO_HALF_BACKWARD)
srow("special_i1", lambda L, x: L.special.i1(x), one("normal", scale=2.0), skip_low=NO_HALF_BACKWARD)
srow("special_i1e", lambda L, x: L.special.i1e(x), one("normal", scale=3.0), skip_low=NO_HALF_BACKWARD)
srow("special_erfcx", lambda L, x: L.special.erfcx(x), one("normal", scale=2.0), skip_low=NO_LOW)


def _zeta_args(r: Rand):
    sa, sb = r.bshapes(2)
    return [r.uniform(sa, 1.5, 4.0), r.uniform(sb, 0.5, 3.0)]


srow("special_zeta", lambda L, x, q: L.special.zeta(x, q), _zeta_args, nograd=(0,), skip_low=NO_LOW)
srow("special_zeta_scalar_x", lambda L, q: L.special.zeta(2.5, q), one("uniform", lo=0.5, hi=3.0), skip_low=NO_LOW)
for _name, _gen in (("bessel_j0", one("normal", scale=4.0)), ("bessel_j1", one("normal", scale=4.0)),
                    ("bessel_y0", one("uniform", lo=0.1, hi=9.0)), ("bessel_y1", one("uniform", lo=0.1, hi=9.0)),
                    ("modified_bessel_i0", one("normal", scale=2.0)), ("modified_bessel_i1", one("normal", scale=2.0)),
                    ("modified_bessel_k0", one("uniform", lo=0.05, hi=6.0)),
                    ("modified_bessel_k1", one("uniform", lo=0.05, hi=6.0)),
                    ("scaled_modified_bessel_k0", one("uniform", lo=0.05, hi=6.0)),
                    ("scaled_modified_bessel_k1", one("uniform", lo=0.05, hi=6.0)),
                    ("airy_ai", one("uniform", lo=-4.0, hi=4.0)), ("spherical_bessel_j0", one("normal", scale=4.0))):
    srow(f"special_{_name}", (lambda n: lambda L, x: getattr(L.special, n)(x))(_name), _gen, grad=False,
         skip_low=NO_LOW, tol=AIRY if _name == "airy_ai" else BESSEL)


def _polynomial_args(lo: float, hi: float):
    """x in [lo, hi) and integer degrees 0..11 (some negative), of broadcastable shapes."""
    def make(r: Rand):
        sa, sb = r.bshapes(2)
        return [r.uniform(sa, lo, hi), r.ints(sb, -1, 12)]

    return make


# (name, x's range): degrees up to 11, so Chebyshev's trigonometric forms (above 6 inside (-1, 1)) are reached
_POLYNOMIALS = (("chebyshev_polynomial_t", (-1.2, 1.2)), ("chebyshev_polynomial_u", (-1.2, 1.2)),
                ("chebyshev_polynomial_v", (-1.2, 1.2)), ("chebyshev_polynomial_w", (-1.2, 1.2)),
                ("shifted_chebyshev_polynomial_t", (-0.1, 1.1)), ("shifted_chebyshev_polynomial_u", (-0.1, 1.1)),
                ("shifted_chebyshev_polynomial_v", (-0.1, 1.1)), ("shifted_chebyshev_polynomial_w", (-0.1, 1.1)),
                ("hermite_polynomial_h", (-2.0, 2.0)), ("hermite_polynomial_he", (-2.0, 2.0)),
                ("laguerre_polynomial_l", (0.0, 5.0)), ("legendre_polynomial_p", (-1.0, 1.0)))
for _name, (_lo, _hi) in _POLYNOMIALS:
    srow(f"special_{_name}", (lambda n: lambda L, x, k: getattr(L.special, n)(x, k))(_name), _polynomial_args(_lo, _hi),
         grad=False, skip_low=NO_LOW, tol=Tol((2e-5, 2e-5), (1e-10, 1e-10)))
srow("special_hermite_polynomial_h_scalar_n", lambda L, x: L.special.hermite_polynomial_h(x, 5),
     one("uniform", lo=-2.0, hi=2.0), grad=False, skip_low=NO_LOW)


# --- convolve (scipy.signal's modes; HIPS autograd's axes and dot_axes), checked against PyTorch's conv1d/conv2d ---
def _th_conv1d(a, b, mode: str):
    """Convolution of 1-D a and b with torch's conv1d (a correlation): flip b, pad a."""
    F = __import__("torch").nn.functional
    full = F.conv1d(a[None, None], b.flip(0)[None, None], padding=b.shape[0] - 1)[0, 0]
    if mode == "full":
        return full
    if mode == "valid":
        n = abs(a.shape[0] - b.shape[0]) + 1
        return full[min(a.shape[0], b.shape[0]) - 1:][:n]
    lo = (b.shape[0] - 1) // 2
    return full[lo:lo + a.shape[0]]


def _ember_convolve(mode: str):
    def fn(L, a, b):
        from ember.ops.convolve_nd import convolve

        return convolve(a, b, mode=mode)

    return fn


for _mode, _sizes in (("full", (5, 3)), ("valid", (6, 3)), ("valid", (3, 6)), ("same", (6, 4)), ("same", (3, 5))):
    srow(f"convolve_{_mode}_{_sizes[0]}_{_sizes[1]}", _ember_convolve(_mode),
         (lambda sa, sb: lambda r: [r.normal((sa,)), r.normal((sb,))])(*_sizes),
         th=(lambda m: lambda L, a, b: _th_conv1d(a, b, m))(_mode), tol=TRANSCENDENTAL)


def _ember_conv_layer(L, x, w):
    """A conv layer as HIPS autograd's convnet example writes it: channels summed as dot axes."""
    from ember.ops.convolve_nd import convolve

    return convolve(x, w, axes=([2, 3], [2, 3]), dot_axes=([1], [0]), mode="valid")


srow("convolve_dot_axes_valid", _ember_conv_layer, lambda r: [r.normal((2, 3, 5, 6)), r.normal((3, 4, 2, 3))],
     th=lambda L, x, w: L.nn.functional.conv2d(x, w.permute(1, 0, 2, 3).flip(2, 3)), tol=TRANSCENDENTAL)
