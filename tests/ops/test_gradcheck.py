"""Float64 finite-difference checks (ember.autograd.gradcheck) of every differentiable op row."""

from __future__ import annotations

import numpy as np
import pytest

import ember as em

from .helpers import make_args, to_ember
from .inputs import Rand, seed_for
from .op_table import ROWS

GRADCHECK_ROWS = [pytest.param(row, id=row.name) for row in ROWS if row.gradcheck]


@pytest.mark.parametrize("row", GRADCHECK_ROWS)
def test_gradcheck(row) -> None:
    """Autograd's Jacobian equals central finite differences on small float64 inputs."""
    args = make_args(row, Rand(seed_for(row.name, 7), "float64", small=True))
    diff = {i for i, a in enumerate(args) if isinstance(a, np.ndarray) and a.dtype == np.float64
            and i not in row.nograd}
    xs = to_ember(args, diff)
    assert em.autograd.gradcheck(lambda *a: row.fn(em, *a), xs, eps=1e-6, atol=1e-6, rtol=1e-4)
