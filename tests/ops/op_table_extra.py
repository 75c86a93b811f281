"""Op-table rows of the inverse and hyperbolic trig functions, logaddexp, hypot, copysign, nextafter,
signbit and the bit shifts (ops/elementwise_extra.py). Imported by op_table.py, whose `row` adds them."""

from __future__ import annotations

import numpy as np

from .helpers import EXACT, TRANSCENDENTAL
from .inputs import Rand
from .op_table import INTS, one, row, two

row("asin", lambda L, x: L.asin(x), one("uniform", lo=-0.9, hi=0.9))
row("acos", lambda L, x: L.acos(x), one("uniform", lo=-0.9, hi=0.9))
row("atan", lambda L, x: L.atan(x), one("normal", scale=2.0))
row("sinh", lambda L, x: L.sinh(x), one("normal", scale=2.0))
row("cosh", lambda L, x: L.cosh(x), one("normal", scale=2.0))
row("asinh", lambda L, x: L.asinh(x), one("normal", scale=2.0))
row("acosh", lambda L, x: L.acosh(x), one("uniform", lo=1.2, hi=4.0))
row("atanh", lambda L, x: L.atanh(x), one("uniform", lo=-0.9, hi=0.9))
row("arcsin_alias", lambda L, x: L.arcsin(x) + L.arctanh(x), one("uniform", lo=-0.9, hi=0.9))
row("logaddexp", lambda L, a, b: L.logaddexp(a, b), two("normal", "normal"), tol=TRANSCENDENTAL)
row("hypot", lambda L, a, b: L.hypot(a, b), two("away", "away"))
row("copysign", lambda L, a, b: L.copysign(a, b), two("away", "away"), nograd=(1,))
row("signbit", lambda L, x: L.signbit(x), lambda r: [np.array([-1.5, -0.0, 0.0, 2.0, -np.inf], r.dtype)],
    tol=EXACT, grad=False)
row("nextafter", lambda L, a, b: L.nextafter(a, b), two("normal", "normal"), tol=EXACT, grad=False,
    dtypes=("float32", "float64"))


def _shift_pair(r: Rand):
    sa, sb = r.bshapes(2)
    return [r.ints(sa, -50, 50, r.dtype), r.ints(sb, 0, 8, r.dtype)]


row("bitwise_left_shift", lambda L, a, b: L.bitwise_left_shift(a, b), _shift_pair, tol=EXACT, grad=False,
    dtypes=INTS)
row("bitwise_right_shift", lambda L, a, b: L.bitwise_right_shift(a, b), _shift_pair, tol=EXACT, grad=False,
    dtypes=INTS)
row("shift_operators", lambda L, a, b: (a << b, a >> b), _shift_pair, tol=EXACT, grad=False, dtypes=INTS)
