"""Every loss (functional and module form) against PyTorch: values and input gradients, every reduction."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import ember as em
from ember import nn
from ember.nn import functional as F

from .helpers import RNG, assert_close, randn

tF = torch.nn.functional
tnn = torch.nn
REDUCTIONS = ["mean", "sum", "none"]


def _run(em_fn, t_fn, inputs: list, grad_positions=(0,), atol: float = 1e-5, rtol: float = 1e-4) -> None:
    """Call both with the same (numpy) inputs; compare the loss and the gradients of grad_positions."""
    e_in, t_in = [], []
    for i, a in enumerate(inputs):
        if isinstance(a, np.ndarray):
            rg = i in grad_positions
            e_in.append(em.tensor(a, requires_grad=rg))
            t_in.append(torch.tensor(a, requires_grad=rg))
        else:
            e_in.append(a)
            t_in.append(a)
    out, tout = em_fn(*e_in), t_fn(*t_in)
    assert_close(out, tout, atol, rtol, "loss")
    g = RNG.standard_normal(tuple(tout.shape)).astype(np.float32)
    out.backward(em.tensor(g))
    tout.backward(torch.tensor(g))
    for i in grad_positions:
        assert_close(e_in[i].grad, t_in[i].grad, atol, rtol, f"grad of input {i}")


def _targets(*shape, classes: int, ignore: int | None = None) -> np.ndarray:
    t = RNG.integers(0, classes, shape)
    if ignore is not None:
        t.reshape(-1)[::3] = ignore
    return t


# --- cross entropy and nll ---------------------------------------------------------------------------
CE_CASES = [
    ("2d", (6, 5), {}),
    ("2d-weight", (6, 5), {"weight": True}),
    ("2d-ignore", (6, 5), {"ignore_index": 2}),
    ("2d-ignore-neg", (6, 5), {"ignore_index": -100, "put_ignore": True}),
    ("2d-weight-ignore", (6, 5), {"weight": True, "ignore_index": 1}),
    ("2d-smooth", (6, 5), {"label_smoothing": 0.2}),
    ("2d-smooth-weight-ignore", (6, 5), {"label_smoothing": 0.1, "weight": True, "ignore_index": -100,
                                         "put_ignore": True}),
    ("4d", (2, 4, 3, 3), {}),
    ("4d-weight-smooth", (2, 4, 3, 3), {"weight": True, "label_smoothing": 0.3}),
    ("3d-ignore", (3, 4, 5), {"ignore_index": 0}),
    ("1d", (5,), {}),
    ("1d-smooth", (5,), {"label_smoothing": 0.1}),
]


def _ce_args(shape, opts):
    classes = shape[0] if len(shape) == 1 else shape[1]
    tshape = () if len(shape) == 1 else (shape[0],) + shape[2:]
    target = np.array(RNG.integers(0, classes)) if not tshape else _targets(*tshape, classes=classes)
    if opts.get("put_ignore") and tshape:
        target.reshape(-1)[::3] = opts["ignore_index"]
    kw = {k: v for k, v in opts.items() if k in ("ignore_index", "label_smoothing")}
    weight = np.abs(randn(classes)) + 0.1 if opts.get("weight") else None
    return randn(*shape), target, weight, kw


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize(("name", "shape", "opts"), CE_CASES, ids=[c[0] for c in CE_CASES])
def test_cross_entropy_class_indices(name, shape, opts, reduction) -> None:
    x, target, weight, kw = _ce_args(shape, opts)
    ew = None if weight is None else em.tensor(weight)
    tw = None if weight is None else torch.tensor(weight)
    _run(lambda a, t: F.cross_entropy(a, t, weight=ew, reduction=reduction, **kw),
         lambda a, t: tF.cross_entropy(a, t, weight=tw, reduction=reduction, **kw), [x, target])
    _run(lambda a, t: nn.CrossEntropyLoss(weight=ew, reduction=reduction, **kw)(a, t),
         lambda a, t: tnn.CrossEntropyLoss(weight=tw, reduction=reduction, **kw)(a, t), [x, target])


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize(("shape", "weight", "smoothing"), [((6, 5), False, 0.0), ((6, 5), True, 0.2),
                                                            ((2, 3, 4), False, 0.1), ((4,), True, 0.0)])
def test_cross_entropy_probability_targets(shape, weight, smoothing, reduction) -> None:
    x = randn(*shape)
    dim = 0 if len(shape) == 1 else 1
    p = np.exp(randn(*shape))
    p = (p / p.sum(dim, keepdims=True)).astype(np.float32)
    w = np.abs(randn(shape[dim])) + 0.1 if weight else None
    ew = None if w is None else em.tensor(w)
    tw = None if w is None else torch.tensor(w)
    _run(lambda a, t: F.cross_entropy(a, t, weight=ew, reduction=reduction, label_smoothing=smoothing),
         lambda a, t: tF.cross_entropy(a, t, weight=tw, reduction=reduction, label_smoothing=smoothing),
         [x, p], grad_positions=(0, 1))


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize(("shape", "weight", "ignore"), [((6, 5), False, -100), ((6, 5), True, 3),
                                                         ((2, 4, 3, 2), True, -100), ((5,), False, -100)])
def test_nll_loss(shape, weight, ignore, reduction) -> None:
    x = randn(*shape)
    classes = shape[0] if len(shape) == 1 else shape[1]
    target = np.array(2) if len(shape) == 1 else _targets(*((shape[0],) + shape[2:]), classes=classes)
    if len(shape) > 1:
        target.reshape(-1)[::4] = ignore
    w = np.abs(randn(classes)) + 0.1 if weight else None
    ew = None if w is None else em.tensor(w)
    tw = None if w is None else torch.tensor(w)
    _run(lambda a, t: F.nll_loss(a, t, weight=ew, ignore_index=ignore, reduction=reduction),
         lambda a, t: tF.nll_loss(a, t, weight=tw, ignore_index=ignore, reduction=reduction), [x, target])
    _run(lambda a, t: nn.NLLLoss(weight=ew, ignore_index=ignore, reduction=reduction)(a, t),
         lambda a, t: tnn.NLLLoss(weight=tw, ignore_index=ignore, reduction=reduction)(a, t), [x, target])


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # 0/0 of the all-ignored mean, as in PyTorch
def test_cross_entropy_errors_and_all_ignored() -> None:
    with pytest.raises(ValueError, match="batch_size"):
        F.cross_entropy(em.randn(4, 3), em.tensor([0, 1]))
    with pytest.raises(ValueError, match="target size"):
        F.cross_entropy(em.randn(4, 3, 2), em.tensor([[0, 1, 1], [0, 0, 0], [0, 0, 0], [1, 1, 1]]))
    with pytest.raises(IndexError):
        F.cross_entropy(em.randn(2, 3), em.tensor([0, 3]))
    with pytest.raises(ValueError):
        F.cross_entropy(em.randn(2, 3), em.tensor([0, 1]), reduction="avg")
    x = em.randn(2, 3, requires_grad=True)
    tx = torch.tensor(x.detach().numpy(), requires_grad=True)
    out = F.cross_entropy(x, em.tensor([-100, -100]))
    tout = tF.cross_entropy(tx, torch.tensor([-100, -100]))
    assert np.isnan(out.item()) and np.isnan(tout.item())
    out.backward()
    tout.backward()
    assert_close(x.grad, tx.grad)


def test_legacy_reduction_flags() -> None:
    x, t = randn(4, 3), _targets(4, classes=3)
    assert_close(F.cross_entropy(em.tensor(x), em.tensor(t), size_average=False),
                 tF.cross_entropy(torch.tensor(x), torch.tensor(t), reduction="sum"))
    assert nn.MSELoss(reduce=False).reduction == "none"


# --- regression and binary losses ----------------------------------------------------------------------
PAIR_LOSSES = [
    ("mse", lambda r: (lambda a, b: F.mse_loss(a, b, reduction=r)), lambda r: (lambda a, b: tF.mse_loss(a, b, reduction=r))),
    ("l1", lambda r: (lambda a, b: F.l1_loss(a, b, reduction=r)), lambda r: (lambda a, b: tF.l1_loss(a, b, reduction=r))),
    ("smooth_l1", lambda r: (lambda a, b: F.smooth_l1_loss(a, b, reduction=r)),
     lambda r: (lambda a, b: tF.smooth_l1_loss(a, b, reduction=r))),
    ("smooth_l1-beta", lambda r: (lambda a, b: F.smooth_l1_loss(a, b, reduction=r, beta=0.5)),
     lambda r: (lambda a, b: tF.smooth_l1_loss(a, b, reduction=r, beta=0.5))),
    ("smooth_l1-beta0", lambda r: (lambda a, b: F.smooth_l1_loss(a, b, reduction=r, beta=0.0)),
     lambda r: (lambda a, b: tF.smooth_l1_loss(a, b, reduction=r, beta=0.0))),
    ("huber", lambda r: (lambda a, b: F.huber_loss(a, b, reduction=r, delta=0.7)),
     lambda r: (lambda a, b: tF.huber_loss(a, b, reduction=r, delta=0.7))),
    ("MSELoss", lambda r: nn.MSELoss(reduction=r), lambda r: tnn.MSELoss(reduction=r)),
    ("L1Loss", lambda r: nn.L1Loss(reduction=r), lambda r: tnn.L1Loss(reduction=r)),
    ("SmoothL1Loss", lambda r: nn.SmoothL1Loss(reduction=r, beta=2.0), lambda r: tnn.SmoothL1Loss(reduction=r, beta=2.0)),
    ("HuberLoss", lambda r: nn.HuberLoss(reduction=r, delta=2.0), lambda r: tnn.HuberLoss(reduction=r, delta=2.0)),
    ("soft_margin", lambda r: nn.SoftMarginLoss(reduction=r), lambda r: tnn.SoftMarginLoss(reduction=r)),
]


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize(("name", "em_loss", "t_loss"), PAIR_LOSSES, ids=[c[0] for c in PAIR_LOSSES])
def test_pair_losses(name, em_loss, t_loss, reduction) -> None:
    for shape in [(4, 3), (2, 3, 5)]:
        a, b = randn(*shape) * 2, randn(*shape)
        if name == "soft_margin":
            b = np.sign(b)
        _run(em_loss(reduction), t_loss(reduction), [a, b], grad_positions=(0, 1) if name != "soft_margin" else (0,))


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_weighted_regression_losses(reduction) -> None:
    a, b, w = randn(4, 3), randn(4, 3), np.abs(randn(4, 3))
    for ef, tf in [(F.mse_loss, tF.mse_loss), (F.l1_loss, tF.l1_loss)]:
        _run(lambda x, y, ww, ef=ef: ef(x, y, reduction=reduction, weight=ww),
             lambda x, y, ww, tf=tf: tf(x, y, reduction=reduction, weight=ww), [a, b, w])
    _run(lambda x, y, ww: F.huber_loss(x, y, reduction=reduction, weight=ww),
         lambda x, y, ww: tF.huber_loss(x, y, reduction=reduction, weight=ww), [a, b, w])


def test_size_mismatch_warns() -> None:
    with pytest.warns(UserWarning, match="target size"):
        F.mse_loss(em.randn(3, 1), em.randn(3))


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("weighted", [False, True])
def test_binary_cross_entropy(reduction, weighted) -> None:
    p = 1 / (1 + np.exp(-randn(5, 3)))
    t = RNG.random((5, 3)).astype(np.float32)
    w = np.abs(randn(5, 3)) if weighted else None
    ew = None if w is None else em.tensor(w)
    tw = None if w is None else torch.tensor(w)
    _run(lambda a, b: F.binary_cross_entropy(a, b, weight=ew, reduction=reduction),
         lambda a, b: tF.binary_cross_entropy(a, b, weight=tw, reduction=reduction), [p, t], grad_positions=(0, 1))
    _run(lambda a, b: nn.BCELoss(weight=ew, reduction=reduction)(a, b),
         lambda a, b: tnn.BCELoss(weight=tw, reduction=reduction)(a, b), [p, t])


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # log(0) before the clamp
def test_binary_cross_entropy_clamps_log() -> None:
    p = np.array([0.0, 1.0, 0.5], dtype=np.float32)
    t = np.array([1.0, 0.0, 1.0], dtype=np.float32)
    assert_close(F.binary_cross_entropy(em.tensor(p), em.tensor(t), reduction="none"),
                 tF.binary_cross_entropy(torch.tensor(p), torch.tensor(t), reduction="none"))


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("options", ["plain", "weight", "pos_weight", "both"])
def test_bce_with_logits(reduction, options) -> None:
    x = randn(6, 4) * 5
    x[0, 0], x[0, 1] = 60.0, -60.0  # extreme logits stay finite
    t = (RNG.random((6, 4)) > 0.5).astype(np.float32)
    w = np.abs(randn(4)) if options in ("weight", "both") else None
    pw = np.abs(randn(4)) + 0.5 if options in ("pos_weight", "both") else None
    ew, tw = (None, None) if w is None else (em.tensor(w), torch.tensor(w))
    epw, tpw = (None, None) if pw is None else (em.tensor(pw), torch.tensor(pw))
    _run(lambda a, b: F.binary_cross_entropy_with_logits(a, b, ew, reduction=reduction, pos_weight=epw),
         lambda a, b: tF.binary_cross_entropy_with_logits(a, b, tw, reduction=reduction, pos_weight=tpw),
         [x, t], grad_positions=(0, 1))
    m, tm = nn.BCEWithLogitsLoss(ew, reduction=reduction, pos_weight=epw), tnn.BCEWithLogitsLoss(
        tw, reduction=reduction, pos_weight=tpw)
    assert list(m.state_dict()) == list(tm.state_dict())
    _run(m, tm, [x, t])


@pytest.mark.parametrize("reduction", REDUCTIONS + ["batchmean"])
@pytest.mark.parametrize("log_target", [False, True])
def test_kl_div(reduction, log_target) -> None:
    x = np.log(np.abs(randn(4, 5)) + 0.1).astype(np.float32)
    t = np.abs(randn(4, 5)).astype(np.float32)
    t[0, 0] = 0.0  # 0 * log 0 counts as 0
    if log_target:
        t = np.log(t + 0.5).astype(np.float32)
    with np.errstate(all="ignore"), pytest.warns() if reduction == "mean" else _nothing():
        _run(lambda a, b: F.kl_div(a, b, reduction=reduction, log_target=log_target),
             lambda a, b: tF.kl_div(a, b, reduction=reduction, log_target=log_target), [x, t],
             grad_positions=(0, 1) if log_target else (0,))  # torch's target gradient is NaN at t = 0
    if reduction != "mean":
        _run(lambda a, b: nn.KLDivLoss(reduction=reduction, log_target=log_target)(a, b),
             lambda a, b: tnn.KLDivLoss(reduction=reduction, log_target=log_target)(a, b), [x, t])


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


# --- other losses -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_ranking_and_embedding_losses(reduction) -> None:
    a, b = randn(6), randn(6)
    y = np.sign(randn(6)).astype(np.float32)
    _run(lambda p, q, t: nn.MarginRankingLoss(0.3, reduction=reduction)(p, q, t),
         lambda p, q, t: tnn.MarginRankingLoss(0.3, reduction=reduction)(p, q, t), [a, b, y], grad_positions=(0, 1))
    _run(lambda p, t: nn.HingeEmbeddingLoss(0.5, reduction=reduction)(p, t),
         lambda p, t: tnn.HingeEmbeddingLoss(0.5, reduction=reduction)(p, t), [a, y])
    x1, x2 = randn(6, 4), randn(6, 4)
    _run(lambda p, q, t: nn.CosineEmbeddingLoss(0.1, reduction=reduction)(p, q, t),
         lambda p, q, t: tnn.CosineEmbeddingLoss(0.1, reduction=reduction)(p, q, t), [x1, x2, y],
         grad_positions=(0, 1))


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_likelihood_losses(reduction) -> None:
    mu, target = randn(5, 3), randn(5, 3)
    var = np.abs(randn(5, 3)) + 0.1
    var[0, 0] = 1e-9  # clamped to eps in value only
    _run(lambda a, b, v: nn.GaussianNLLLoss(full=True, reduction=reduction)(a, b, v),
         lambda a, b, v: tnn.GaussianNLLLoss(full=True, reduction=reduction)(a, b, v), [mu, target, var],
         grad_positions=(0, 2), rtol=1e-3)
    var1 = np.abs(randn(5, 1)) + 0.1
    _run(lambda a, b, v: F.gaussian_nll_loss(a, b, v, reduction=reduction),
         lambda a, b, v: tF.gaussian_nll_loss(a, b, v, reduction=reduction), [mu, target, var1], grad_positions=(0, 2))
    counts = RNG.poisson(2.0, (5, 3)).astype(np.float32)
    for log_input, full in [(True, False), (False, True)]:
        x = randn(5, 3) if log_input else np.abs(randn(5, 3)) + 0.1
        _run(lambda a, b, li=log_input, fu=full: nn.PoissonNLLLoss(li, fu, reduction=reduction)(a, b),
             lambda a, b, li=log_input, fu=full: tnn.PoissonNLLLoss(li, fu, reduction=reduction)(a, b), [x, counts])


def test_loss_module_weight_is_a_buffer() -> None:
    w = em.tensor([1.0, 2.0, 3.0])
    m, tm = nn.CrossEntropyLoss(weight=w), tnn.CrossEntropyLoss(weight=torch.tensor([1.0, 2.0, 3.0]))
    assert list(m.state_dict()) == list(tm.state_dict()) == ["weight"]
    m.to(em.float64)
    assert m.weight.dtype == em.float64
    assert repr(m) == repr(tm) == "CrossEntropyLoss()"
