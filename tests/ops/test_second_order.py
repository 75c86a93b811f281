"""Second derivatives (create_graph=True) against PyTorch: for every op row, and for chosen ops on other shapes."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import ember as em

from .helpers import TH, as_tuple, make_args, to_ember, to_torch
from .inputs import Rand, seed_for
from .op_table import ROWS

TOL = 1e-8


def _dense(t, like) -> np.ndarray:
    """A gradient as a NumPy array (zeros for None; PyTorch may return a lazy zero tensor)."""
    if t is None:
        return np.zeros(tuple(like.shape))
    if isinstance(t, torch.Tensor):
        return t.detach().numpy(force=True)
    return t.numpy()


def check_second_order(fn, th_fn, args: list, diff: list, seed: int, what: str) -> None:
    """Compare d/dx <J(x)^T v, w> in Ember and PyTorch for random v (upstream) and w (probe)."""
    rng = np.random.default_rng(seed)
    xe, xt = to_ember(args, set(diff)), to_torch(args, set(diff))
    oe = [o for o in as_tuple(fn(em, *xe)) if o.requires_grad]
    ot = [o for o in as_tuple(th_fn(TH, *xt)) if o.requires_grad]
    vs = [rng.standard_normal(tuple(o.shape)) for o in ot]
    de, dt = [xe[i] for i in diff], [xt[i] for i in diff]
    ge = em.autograd.grad(oe, de, [em.tensor(v) for v in vs], create_graph=True, allow_unused=True)
    gt = torch.autograd.grad(ot, dt, [torch.tensor(v) for v in vs], create_graph=True, allow_unused=True)
    ws = [rng.standard_normal(tuple(x.shape)) for x in dt]
    te = [(g * em.tensor(w)).sum() for g, w in zip(ge, ws) if g is not None and g.requires_grad]
    tt = [(g * torch.tensor(w)).sum() for g, w in zip(gt, ws) if g is not None and g.requires_grad]
    ht = torch.autograd.grad(sum(tt), dt, allow_unused=True) if tt else [None] * len(dt)
    he = em.autograd.grad(sum(te[1:], te[0]), de, allow_unused=True) if te else [None] * len(de)
    for k, (a, b) in enumerate(zip(he, ht)):
        np.testing.assert_allclose(_dense(a, dt[k]), _dense(b, dt[k]), rtol=TOL, atol=TOL,
                                   err_msg=f"{what}: second derivative w.r.t. input {diff[k]}")


SECOND_ROWS = [pytest.param(row, id=row.name) for row in ROWS if row.grad and row.torch_grad and row.torch_second]


@pytest.mark.parametrize("row", SECOND_ROWS)
def test_second_order_row(row) -> None:
    """Every differentiable row's gradient differentiates again to PyTorch's second derivative."""
    args = make_args(row, Rand(seed_for(row.name, 9), "float64", small=True))
    diff = [i for i, a in enumerate(args) if isinstance(a, np.ndarray) and a.dtype == np.float64
            and i not in row.nograd]
    check_second_order(row.fn, row.torch_fn(), args, diff, seed_for(row.name, 10), row.name)


OWN_SECOND_ROWS = [pytest.param(row, id=row.name) for row in ROWS if row.grad and row.gradcheck and not row.torch_second]


@pytest.mark.parametrize("row", OWN_SECOND_ROWS)
def test_second_order_by_finite_differences(row) -> None:
    """Where PyTorch has no second derivative, finite differences of Ember's gradient check its own."""
    args = make_args(row, Rand(seed_for(row.name, 9), "float64", small=True))
    diff = [i for i, a in enumerate(args) if isinstance(a, np.ndarray) and a.dtype == np.float64
            and i not in row.nograd]
    xs = to_ember(args, set(diff))
    rng = np.random.default_rng(seed_for(row.name, 10))
    probes = [em.tensor(rng.standard_normal(tuple(o.shape))) for o in as_tuple(row.fn(em, *xs)) if o.requires_grad]

    def gradient(*inputs):
        with em.enable_grad():  # gradcheck evaluates fn under no_grad for its finite differences
            outs = [o for o in as_tuple(row.fn(em, *inputs)) if o.requires_grad]
            grads = em.autograd.grad(outs, [inputs[i] for i in diff], probes, create_graph=True, allow_unused=True)
        return tuple(g for g in grads if g is not None)

    assert em.autograd.gradcheck(gradient, xs, eps=1e-6, atol=1e-5, rtol=1e-4)


def _normal(*shapes):
    return lambda rng: [rng.standard_normal(s) for s in shapes]


# Ops the issue names, on shapes of their own (bigger than the table's small float64 draws).
SECOND_ORDER = {
    "tanh": (lambda L, x: L.tanh(x), _normal((3, 4))),
    "sigmoid": (lambda L, x: L.sigmoid(x), _normal((3, 4))),
    "mul": (lambda L, a, b: a * b, _normal((3, 4), (4,))),
    "matmul": (lambda L, a, b: a @ b, _normal((2, 3, 4), (4, 5))),
    "softmax": (lambda L, x: L.softmax(x, -1), _normal((3, 5))),
    "log_softmax": (lambda L, x: L.log_softmax(x, 0), _normal((4, 3))),
    "logsumexp": (lambda L, x: L.logsumexp(x, 1), _normal((3, 4))),
    "conv2d": (lambda L, x, w: L.conv2d(x, w, padding=1, stride=2), _normal((2, 2, 5, 5), (3, 2, 3, 3))),
    "conv2d_groups": (lambda L, x, w: L.conv2d(x, w, groups=2, dilation=2), _normal((1, 4, 6, 6), (2, 2, 2, 2))),
    "conv_transpose2d": (lambda L, x, w: L.conv_transpose2d(x, w, stride=2), _normal((1, 2, 3, 3), (2, 3, 2, 2))),
    "prod_with_zero": (lambda L, x: L.prod(x, 1), lambda rng: [np.array([[1.5, 0.0, 2.0, -1.0], [0.0, 0.0, 3.0, 1.0],
                                                                        [0.5, 2.0, -1.0, 3.0]])]),
    "var": (lambda L, x: L.var(x, 0), _normal((4, 3))),
    "einsum_diag": (lambda L, a: L.einsum("ii->i", a) ** 2, _normal((3, 3))),
}


@pytest.mark.parametrize("name", sorted(SECOND_ORDER))
def test_second_order_named_ops(name: str) -> None:
    """Gradients built with create_graph=True differentiate to PyTorch's second derivatives."""
    fn, make = SECOND_ORDER[name]
    args = make(np.random.default_rng(seed_for(name)))
    check_second_order(fn, fn, args, list(range(len(args))), seed_for(name, 1), name)


def test_gradcheck_of_a_gradient() -> None:
    """Finite differences of a gradient function agree with its own (second-order) gradient."""
    x = em.tensor(np.random.default_rng(0).standard_normal((2, 3)), requires_grad=True)

    def grad_of_tanh(x):
        with em.enable_grad():  # gradcheck evaluates fn under no_grad for its finite differences
            (g,) = em.autograd.grad(em.tanh(x).sum(), [x], create_graph=True)
        return g

    assert em.autograd.gradcheck(grad_of_tanh, [x])
