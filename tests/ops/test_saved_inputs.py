"""Autograd saves only what each gradient rule reads.

For every differentiable op row, each floating input alone requiring grad, and each other floating
input j: j is written in place after the forward pass (its version moves, its values stay), then
the backward pass runs. Ember may refuse ("modified by an in-place operation") only if the
gradient depends on j's values (PyTorch's gradient changes when j changes) or PyTorch saved j too.
So `e = d * 2; d += 1; e.backward()` must work, as it does in PyTorch.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import ember as em

from .helpers import TH, as_tuple, make_args, to_ember, to_torch
from .inputs import Rand, seed_for
from .op_table import ROWS

CASES = [pytest.param(row, id=row.name) for row in ROWS if row.grad and row.torch_grad]


def _grad(lib, fn, xs, target, write=None):
    """d(sum of the outputs)/d(xs[target]); `write` (an index) is written in place before the backward."""
    outs = [o for o in as_tuple(fn(lib, *xs)) if o.requires_grad]
    if not outs:
        return None
    if write is not None:
        with (torch.no_grad() if lib is TH else em.no_grad()):
            xs[write].copy_(xs[write].clone())
    rng = np.random.default_rng(7)  # a random upstream gradient: ones make sum(normalised x) degenerate
    ups = [rng.standard_normal(tuple(o.shape)) for o in outs]
    ups = [torch.tensor(u, dtype=o.dtype) if lib is TH else em.tensor(u, dtype=o.dtype) for u, o in zip(ups, outs)]
    g = (torch if lib is TH else em).autograd.grad(outs, [xs[target]], ups, allow_unused=True)[0]
    return None if g is None else (g.detach().numpy() if lib is TH else g.numpy())


@pytest.mark.parametrize("row", CASES)
def test_inputs_a_gradient_does_not_read_can_be_written_after_the_forward_pass(row):
    args = make_args(row, Rand(seed_for(row.name, 21), "float64", small=True))
    floats = [i for i, a in enumerate(args) if isinstance(a, np.ndarray) and a.dtype == np.float64
              and i not in row.nograd]
    for target in floats:
        ref = _grad(TH, row.torch_fn(), to_torch(args, {target}), target)
        if ref is None or ref.size == 0:
            continue
        for j in floats:
            if j == target:
                continue
            moved = list(args)
            rng = np.random.default_rng(j)  # a random change: a constant shift can cancel (normalisations)
            moved[j] = np.asarray(args[j] + 2.0 * rng.standard_normal(np.shape(args[j])), dtype=np.float64)
            depends = not np.allclose(_grad(TH, row.torch_fn(), to_torch(moved, {target}), target), ref,
                                      rtol=1e-9, atol=1e-12)
            try:
                _grad(TH, row.torch_fn(), to_torch(args, {target}), target, write=j)
                torch_saved = False
            except RuntimeError as e:
                if "modified by an inplace operation" not in str(e):
                    raise
                torch_saved = True
            try:
                got = _grad(em, row.fn, to_ember(args, {target}), target, write=j)
            except RuntimeError as e:
                if "modified by an in-place operation" not in str(e):
                    raise
                assert depends or torch_saved, (
                    f"{row.name}: the gradient of input {target} does not read input {j}, yet Ember saved it")
                continue
            np.testing.assert_allclose(got, ref, rtol=1e-8, atol=1e-10,
                                       err_msg=f"{row.name}: gradient of input {target} after input {j} was written")
