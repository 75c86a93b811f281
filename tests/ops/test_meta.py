"""The meta device runs only shape rules: every op row gives the same output shapes and dtypes as on the CPU."""

from __future__ import annotations

import pytest

import ember as em

from .helpers import as_tuple, diff_positions, make_args, to_ember
from .inputs import Rand, seed_for
from .op_table import ROWS

META_ROWS = [pytest.param(row, id=row.name) for row in ROWS if row.meta]
DTYPE_CASES = [pytest.param(row, row.dtypes[-1], id=f"{row.name}-{row.dtypes[-1]}") for row in ROWS if row.meta] + [
    pytest.param(row, "bfloat16", id=f"{row.name}-bfloat16") for row in ROWS
    if row.meta and row.low_dtypes() and "bfloat16" not in row.skip_low  # (skipped: an op refusing bfloat16)
]


@pytest.mark.parametrize(("row", "dtype"), DTYPE_CASES)
def test_meta_matches_cpu(row, dtype: str) -> None:
    """Same output shapes and dtypes on meta as on the CPU."""
    args = make_args(row, Rand(seed_for(row.name, 3), dtype))
    cpu = as_tuple(row.fn(em, *to_ember(args, set())))
    meta = as_tuple(row.fn(em, *to_ember(args, set(), device="meta")))
    assert len(meta) == len(cpu)
    for k, (m, c) in enumerate(zip(meta, cpu)):
        assert m.device.type == "meta", f"{row.name} output {k} is on {m.device}"
        assert m.shape == c.shape, f"{row.name} output {k}: meta shape {m.shape} != cpu {c.shape}"
        assert m.dtype == c.dtype, f"{row.name} output {k}: meta dtype {m.dtype} != cpu {c.dtype}"


GRAD_META_ROWS = [pytest.param(row, id=row.name) for row in ROWS if row.meta and row.grad]


@pytest.mark.parametrize("row", GRAD_META_ROWS)
def test_meta_backward_shapes(row) -> None:
    """Gradient rules run on meta too (they are Ember ops) and give each input's shape and dtype."""
    args = make_args(row, Rand(seed_for(row.name, 4), "float32"))
    diff = diff_positions(row, args)
    xs = to_ember(args, diff, device="meta")
    outs = [o for o in as_tuple(row.fn(em, *xs)) if o.requires_grad]
    grads = em.autograd.grad(outs, [xs[i] for i in sorted(diff)],
                             [em.zeros(*o.shape, dtype=o.dtype, device="meta") for o in outs], allow_unused=True)
    for i, g in zip(sorted(diff), grads):
        if g is None:
            continue
        assert g.device.type == "meta"
        assert g.shape == xs[i].shape, f"{row.name}: meta grad of input {i} has shape {g.shape}, not {xs[i].shape}"
        assert g.dtype == xs[i].dtype
