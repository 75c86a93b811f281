"""Every loss at the edges of its domain against PyTorch: each pair of input and target from 0, 1, -1, 0.5, 2, -0.0,
1e-30, 3.4e38, +-inf and NaN. Pairs PyTorch refuses (a probability outside [0, 1], a negative variance) must be
refused with an error of its class; for the others, the losses and the gradients of input and target must be
PyTorch's, NaN where PyTorch gives NaN and finite where it is finite (binary_cross_entropy's at p = 0 and 1)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import ember as em

from .torch_oracle import Lib, assert_like_torch

EDGES = [0.0, 1.0, -1.0, 0.5, 2.0, -0.0, 1e-30, 3.4e38, np.inf, -np.inf, np.nan]
PAIRS = list(itertools.product(EDGES, EDGES))


def _ones(L, like):
    return L.m.ones_like(like)


def _zeros(L, like):
    return L.m.zeros_like(like)


# name -> (op named in errors, call(L, x, t) -> per-element loss); x and t are leaves whose gradients are compared
LOSSES = {
    "binary_cross_entropy": ("binary_cross_entropy", lambda L, x, t: L.F.binary_cross_entropy(x, t, reduction="none")),
    "binary_cross_entropy_weighted": ("binary_cross_entropy", lambda L, x, t: L.F.binary_cross_entropy(
        x, t, weight=L.t(np.full(x.shape, 0.5, np.float32)), reduction="none")),
    "binary_cross_entropy_with_logits": ("binary_cross_entropy_with_logits", lambda L, x, t:
                                         L.F.binary_cross_entropy_with_logits(x, t, reduction="none")),
    "bce_with_logits_pos_weight": ("binary_cross_entropy_with_logits", lambda L, x, t:
                                   L.F.binary_cross_entropy_with_logits(x, t, pos_weight=L.t([3.0]), reduction="none")),
    "mse_loss": ("mse_loss", lambda L, x, t: L.F.mse_loss(x, t, reduction="none")),
    "l1_loss": ("l1_loss", lambda L, x, t: L.F.l1_loss(x, t, reduction="none")),
    "smooth_l1_loss": ("smooth_l1_loss", lambda L, x, t: L.F.smooth_l1_loss(x, t, reduction="none")),
    "smooth_l1_loss_beta_0": ("smooth_l1_loss", lambda L, x, t: L.F.smooth_l1_loss(x, t, reduction="none", beta=0.0)),
    "smooth_l1_loss_beta_half": ("smooth_l1_loss", lambda L, x, t: L.F.smooth_l1_loss(x, t, reduction="none",
                                                                                      beta=0.5)),
    "huber_loss": ("huber_loss", lambda L, x, t: L.F.huber_loss(x, t, reduction="none")),
    "huber_loss_delta_2": ("huber_loss", lambda L, x, t: L.F.huber_loss(x, t, reduction="none", delta=2.0)),
    "kl_div": ("kl_div", lambda L, x, t: L.F.kl_div(x, t, reduction="none")),
    "kl_div_log_target": ("kl_div", lambda L, x, t: L.F.kl_div(x, t, reduction="none", log_target=True)),
    "poisson_nll_loss": ("poisson_nll_loss", lambda L, x, t: L.F.poisson_nll_loss(x, t, reduction="none")),
    "poisson_nll_loss_rates": ("poisson_nll_loss", lambda L, x, t: L.F.poisson_nll_loss(x, t, log_input=False,
                                                                                        reduction="none")),
    "poisson_nll_loss_full": ("poisson_nll_loss", lambda L, x, t: L.F.poisson_nll_loss(x, t, log_input=False,
                                                                                       full=True, reduction="none")),
    "gaussian_nll_loss": ("gaussian_nll_loss", lambda L, x, t: L.F.gaussian_nll_loss(x, t, _ones(L, x),
                                                                                     reduction="none")),
    "gaussian_nll_loss_variance": ("gaussian_nll_loss", lambda L, x, t: L.F.gaussian_nll_loss(
        t, _zeros(L, t), x, reduction="none")),  # x is the variance here
    "soft_margin_loss": ("soft_margin_loss", lambda L, x, t: L.F.soft_margin_loss(x, t, reduction="none")),
    "hinge_embedding_loss": ("hinge_embedding_loss", lambda L, x, t: L.F.hinge_embedding_loss(x, t, reduction="none")),
    "margin_ranking_loss": ("margin_ranking_loss", lambda L, x, t: L.F.margin_ranking_loss(x, _zeros(L, x), t,
                                                                                           reduction="none")),
}

def _huge(v: float) -> bool:
    return bool(np.isfinite(v) and abs(v) >= 3e38)


# Pairs where PyTorch's gradient is an artefact of how it computes it and ember's is the true one (the limit):
# there only the loss (`"loss"`) or the loss and the input's gradient (`"input"`) are compared.
# - gaussian_nll_loss: PyTorch doubles x - t before halving it, which overflows float32 at |x - t| ~ 3.4e38;
# - binary_cross_entropy_with_logits with pos_weight: sigmoid(x) (pw t + 1 - t) - pw t is inf - inf = NaN where
#   pw t overflows or t is infinite, targets far outside [0, 1];
# - poisson_nll_loss(full=True): PyTorch masks the Stirling term after taking log(t), so the target's gradient is
#   0 * NaN = NaN where t <= 0; ember masks before the log.
DIFFERENT = {
    "gaussian_nll_loss": (lambda x, t: _huge(x) or _huge(t), "loss"),
    "gaussian_nll_loss_variance": (lambda x, t: _huge(t), "loss"),
    "bce_with_logits_pos_weight": (lambda x, t: _huge(t) or bool(np.isinf(t)), "loss"),
    "poisson_nll_loss_full": (lambda x, t: not t > 0, "input"),
}
NO_TARGET_GRADIENT = {"soft_margin_loss"}  # PyTorch refuses a target that requires grad there


def _soft_margin_exact(x: np.ndarray, t: np.ndarray):
    """log(1 + e^(-tx)) and its gradient -t sigmoid(-tx), in float64, where -tx is huge or infinite."""
    z = -(t.astype(np.float64) * x)
    return np.logaddexp(0.0, z).astype(np.float32), (-t / (1.0 + np.exp(-z))).astype(np.float32)


# Where PyTorch's soft_margin_loss is inf (log(1 + e^(-tx)) overflows at -tx ~ 3.4e38) or its gradient
# -t e^(-tx) / (1 + e^(-tx)) is inf / inf = NaN (at -tx = inf), ember's loss and gradient are the exact ones.
EXACT = {"soft_margin_loss": (lambda x, t: bool(x * t <= -3e38), _soft_margin_exact)}


def _refused_by_torch(call, x: float, t: float) -> bool:
    lib = Lib("torch")
    try:
        call(lib, lib.t([x], grad=True), lib.t([t]))
    except Exception:  # noqa: BLE001 - PyTorch's verdict, whatever it is
        return True
    return False


@pytest.mark.parametrize("name", list(LOSSES))
def test_loss_at_its_edges_like_torch(name: str) -> None:
    """The whole grid at once where PyTorch computes; each pair it refuses, one at a time."""
    op, call = LOSSES[name]
    refused = [(x, t) for x, t in PAIRS if _refused_by_torch(call, x, t)]
    computed = [(x, t) for x, t in PAIRS if (x, t) not in refused]
    for x, t in refused:
        assert_like_torch(lambda L, x=x, t=t: call(L, L.t([x], grad=True), L.t([t])), op)
    if name in EXACT:
        off, exact = EXACT[name]
        pairs = [p for p in computed if off(*p)]
        computed = [p for p in computed if not off(*p)]
        xs, ts = np.array([p[0] for p in pairs], np.float32), np.array([p[1] for p in pairs], np.float32)
        x = em.tensor(xs, requires_grad=True)
        loss = call(Lib("ember"), x, em.tensor(ts))
        loss.sum().backward()
        want_loss, want_grad = exact(xs, ts)
        np.testing.assert_array_equal(loss.detach().numpy(), want_loss)
        np.testing.assert_array_equal(x.grad.numpy(), want_grad)
    differs, compared = DIFFERENT.get(name, (lambda x, t: False, None))
    target_grad = name not in NO_TARGET_GRADIENT
    for pairs, input_grad, t_grad in (
            ([p for p in computed if not differs(*p)], True, target_grad),
            ([p for p in computed if differs(*p)], compared == "input", False)):
        if pairs:
            xs, ts = np.array([p[0] for p in pairs]), np.array([p[1] for p in pairs])
            assert_like_torch(lambda L, xs=xs, ts=ts, g=input_grad, h=t_grad: call(L, L.t(xs, grad=g),
                                                                                   L.t(ts, grad=h)), op)


REDUCTIONS = {
    "smooth_l1_loss": lambda L, x, t, r: L.F.smooth_l1_loss(x, t, reduction=r),
    "huber_loss": lambda L, x, t, r: L.F.huber_loss(x, t, reduction=r, delta=0.5),
    "l1_loss": lambda L, x, t, r: L.F.l1_loss(x, t, reduction=r),
    "mse_loss": lambda L, x, t, r: L.F.mse_loss(x, t, reduction=r),
    "binary_cross_entropy": lambda L, x, t, r: L.F.binary_cross_entropy(L.m.sigmoid(x), L.m.sigmoid(t), reduction=r),
}


@pytest.mark.parametrize("reduction", ["mean", "sum"])
@pytest.mark.parametrize("name", list(REDUCTIONS))
def test_reduced_loss_gradient_at_infinite_and_saturated_inputs(name: str, reduction: str) -> None:
    """The mean's gradient is +-1/n (smooth_l1), +-delta/n (huber) at an infinite input, and finite where
    sigmoid(-120) is exactly 0 in float32 (binary_cross_entropy)."""
    x = np.array([np.inf, -np.inf, 0.25, -120.0, 120.0], np.float32)
    t = np.array([0.0, 1.0, -0.5, 3.0, -2.0], np.float32)
    call = REDUCTIONS[name]
    assert_like_torch(lambda L: call(L, L.t(x, grad=True), L.t(t, grad=True), reduction), name)


LOGITS = np.array([[0.0, 1.0, -1.0], [np.inf, 0.0, 1.0], [-np.inf, 0.0, 1.0], [np.nan, 0.0, 1.0],
                   [3.4e38, -3.4e38, 0.0], [-np.inf, -np.inf, 0.0]], np.float32)


@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("fn", ["cross_entropy", "nll_loss"])
def test_classification_losses_at_infinite_and_nan_logits(fn: str, weighted: bool) -> None:
    """cross_entropy and nll_loss where a logit (or log-probability) is +-inf, NaN or +-3.4e38."""
    target = [0, 0, 0, 1, 1, 2]

    def call(L):
        x = L.t(LOGITS, grad=True)
        weight = L.t([1.0, 2.0, 0.5]) if weighted else None
        return getattr(L.F, fn)(x, L.t(target, "int64"), weight=weight, reduction="none")

    assert_like_torch(call, fn)


def test_cosine_embedding_loss_at_zero_and_infinite_vectors() -> None:
    """cosine_embedding_loss with a zero vector, an infinite entry and a NaN entry, for targets 1 and -1."""
    a = np.array([[0.0, 0.0], [np.inf, 1.0], [np.nan, 1.0], [1.0, 2.0], [0.0, 0.0]], np.float32)
    b = np.array([[1.0, 1.0], [1.0, 1.0], [1.0, 1.0], [-1.0, 3.0], [0.0, 0.0]], np.float32)
    for target in (1.0, -1.0):
        t = np.full(5, target, np.float32)
        assert_like_torch(lambda L, t=t: L.F.cosine_embedding_loss(L.t(a, grad=True), L.t(b, grad=True), L.t(t),
                                                                   reduction="none"), "cosine_embedding_loss")
