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
