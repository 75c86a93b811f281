"""Each scheduler's learning-rate (and momentum) sequence equals PyTorch's, step for step."""

from __future__ import annotations

import math
import pickle
import warnings

import pytest
import torch

import ember as em
from ember import optim


def _sgd(m, params):
    return m.SGD([{"params": params[:1]}, {"params": params[1:], "lr": 0.03}], lr=0.1, momentum=0.9)


def _adam(m, params):
    return m.Adam([{"params": params[:1]}, {"params": params[1:], "lr": 0.003}], lr=0.01)


def _make(framework: str, make_opt, make_sched):
    """An optimizer over two one-element parameters (two groups) and a scheduler on it."""
    if framework == "torch":
        params = [torch.zeros(1, requires_grad=True) for _ in range(2)]
        opt = make_opt(torch.optim, params)
        return opt, make_sched(torch.optim.lr_scheduler, opt)
    params = [em.zeros(1, requires_grad=True) for _ in range(2)]
    opt = make_opt(optim, params)
    return opt, make_sched(optim.lr_scheduler, opt)


def _record(opt, sched) -> tuple:
    """get_last_lr(), then each group's lr, momentum and betas, as one flat tuple."""
    values = list(sched.get_last_lr())
    for g in opt.param_groups:
        values += [g["lr"], g.get("momentum")] + list(g.get("betas", ()))
    return tuple(values)


def _run(framework: str, make_opt, make_sched, steps: int, metrics=None) -> list:
    opt, sched = _make(framework, make_opt, make_sched)
    out = [_record(opt, sched)]
    for k in range(steps):
        opt.step()  # no gradients: nothing moves, but the scheduler sees the usual call order
        if metrics is None:
            sched.step()
        else:
            sched.step(metrics[k])
        out.append(_record(opt, sched))
    return out


def _assert_same(ours: list, theirs: list) -> None:
    assert len(ours) == len(theirs)
    for k, (a, b) in enumerate(zip(ours, theirs)):
        # The same float arithmetic in the same order: the values are equal, not just close.
        assert a == b, f"epoch {k}: {a} != {b}"


class Scale:
    """A picklable lr_lambda with state (LambdaLR saves callable objects' __dict__)."""

    def __init__(self, rate: float) -> None:
        self.rate = rate

    def __call__(self, epoch: int) -> float:
        return self.rate**epoch


SCHEDULERS = {
    "StepLR": (_sgd, lambda m, o: m.StepLR(o, step_size=7, gamma=0.5)),
    "MultiStepLR": (_sgd, lambda m, o: m.MultiStepLR(o, milestones=[5, 12, 12, 30], gamma=0.3)),
    "ExponentialLR": (_sgd, lambda m, o: m.ExponentialLR(o, gamma=0.93)),
    "CosineAnnealingLR": (_sgd, lambda m, o: m.CosineAnnealingLR(o, T_max=15)),
    "CosineAnnealingLR-eta_min": (_adam, lambda m, o: m.CosineAnnealingLR(o, T_max=11, eta_min=1e-3)),
    "LambdaLR": (_sgd, lambda m, o: m.LambdaLR(o, lr_lambda=lambda e: 0.95**e)),
    "LambdaLR-list": (_sgd, lambda m, o: m.LambdaLR(o, lr_lambda=[lambda e: 1 / (1 + e), Scale(0.9)])),
    "MultiplicativeLR": (_sgd, lambda m, o: m.MultiplicativeLR(o, lr_lambda=lambda e: 0.97)),
    "LinearLR": (_sgd, lambda m, o: m.LinearLR(o, start_factor=0.1, total_iters=10)),
    "LinearLR-decay": (_adam, lambda m, o: m.LinearLR(o, start_factor=1.0, end_factor=0.2, total_iters=17)),
    "ConstantLR": (_sgd, lambda m, o: m.ConstantLR(o, factor=0.5, total_iters=8)),
    "PolynomialLR": (_sgd, lambda m, o: m.PolynomialLR(o, total_iters=20, power=2.0)),
    "CosineAnnealingWarmRestarts": (_sgd, lambda m, o: m.CosineAnnealingWarmRestarts(o, T_0=5, T_mult=2,
                                                                                        eta_min=0.01)),
    "OneCycleLR-cos-SGD": (_sgd, lambda m, o: m.OneCycleLR(o, max_lr=[0.5, 0.2], total_steps=80)),
    "OneCycleLR-linear-SGD": (_sgd, lambda m, o: m.OneCycleLR(o, max_lr=0.5, total_steps=80,
                                                              anneal_strategy="linear", pct_start=0.25)),
    "OneCycleLR-cos-Adam": (_adam, lambda m, o: m.OneCycleLR(o, max_lr=0.01, epochs=4, steps_per_epoch=20,
                                                             base_momentum=0.8, max_momentum=[0.95, 0.9])),
    "OneCycleLR-linear-Adam-3phase": (_adam, lambda m, o: m.OneCycleLR(o, max_lr=0.01, total_steps=80,
                                                                       anneal_strategy="linear", three_phase=True)),
    "OneCycleLR-no-momentum": (_adam, lambda m, o: m.OneCycleLR(o, max_lr=0.01, total_steps=80, div_factor=10.0,
                                                                final_div_factor=100.0, cycle_momentum=False)),
    "SequentialLR-warmup-cosine": (_sgd, lambda m, o: m.SequentialLR(
        o, [m.LinearLR(o, start_factor=0.1, total_iters=10), m.CosineAnnealingLR(o, T_max=30)], milestones=[10])),
    "SequentialLR-three": (_adam, lambda m, o: m.SequentialLR(
        o, [m.ConstantLR(o, factor=0.2, total_iters=4), m.ExponentialLR(o, gamma=0.9), m.StepLR(o, 5)],
        milestones=[6, 25])),
    "ChainedScheduler": (_sgd, lambda m, o: m.ChainedScheduler(
        [m.ConstantLR(o, factor=0.5, total_iters=6), m.ExponentialLR(o, gamma=0.95)])),
}


@pytest.mark.parametrize("name", list(SCHEDULERS))
def test_lr_sequence_matches_torch(name: str) -> None:
    """80 steps: get_last_lr(), each group's lr, and cycled momentum/betas equal PyTorch's."""
    make_opt, make_sched = SCHEDULERS[name]
    ours = _run("ember", make_opt, make_sched, 80)
    theirs = _run("torch", make_opt, make_sched, 80)
    _assert_same(ours, theirs)


def _metrics() -> list[float]:
    # Improving, then a noisy plateau, a small dip, another plateau, and a late improvement.
    values = [1.0 / (k + 1) for k in range(8)] + [0.125 + 0.01 * math.sin(k) for k in range(20)]
    values += [0.1249, 0.12] + [0.12 + 1e-6 * k for k in range(20)] + [0.05] * 3 + [0.06] * 15
    return values


PLATEAU = {
    "min-rel": lambda m, o: m.ReduceLROnPlateau(o, patience=3),
    "min-abs-cooldown": lambda m, o: m.ReduceLROnPlateau(o, factor=0.5, patience=2, threshold=0.001,
                                                         threshold_mode="abs", cooldown=3),
    "max-rel": lambda m, o: m.ReduceLROnPlateau(o, mode="max", factor=0.3, patience=1, threshold=0.01),
    "max-abs-min_lr": lambda m, o: m.ReduceLROnPlateau(o, mode="max", patience=0, threshold_mode="abs",
                                                       min_lr=[0.01, 1e-3]),
    "min-patience0-min_lr": lambda m, o: m.ReduceLROnPlateau(o, patience=0, min_lr=0.004, eps=1e-4),
}


@pytest.mark.parametrize("name", list(PLATEAU))
def test_reduce_lr_on_plateau_matches_torch(name: str) -> None:
    """ReduceLROnPlateau reduces at the same epochs to the same lrs."""
    metrics = _metrics()
    ours = _run("ember", _sgd, PLATEAU[name], len(metrics), metrics)
    theirs = _run("torch", _sgd, PLATEAU[name], len(metrics), metrics)
    _assert_same(ours, theirs)
    assert ours[-1] != ours[0]  # the sequence really reduces


ROUND_TRIP = ["StepLR", "CosineAnnealingLR-eta_min", "LambdaLR-list", "CosineAnnealingWarmRestarts",
              "OneCycleLR-cos-Adam", "SequentialLR-warmup-cosine", "ChainedScheduler"]


@pytest.mark.parametrize("name", ROUND_TRIP)
def test_scheduler_state_dict_round_trip(name: str) -> None:
    """Saving optimizer and scheduler at epoch 30 and restoring into fresh ones continues identically."""
    make_opt, make_sched = SCHEDULERS[name]
    reference = _run("ember", make_opt, make_sched, 70)

    opt, sched = _make("ember", make_opt, make_sched)
    for _ in range(30):
        opt.step()
        sched.step()
    saved = pickle.loads(pickle.dumps((opt.state_dict(), sched.state_dict())))
    opt2, sched2 = _make("ember", make_opt, make_sched)
    opt2.load_state_dict(saved[0])  # after the scheduler is built, so its initial step is overwritten
    sched2.load_state_dict(saved[1])
    resumed = [_record(opt2, sched2)]
    for _ in range(40):
        opt2.step()
        sched2.step()
        resumed.append(_record(opt2, sched2))
    _assert_same(resumed, reference[30:])


def test_reduce_lr_on_plateau_round_trip() -> None:
    """ReduceLROnPlateau's best value, counters and cooldown survive a state-dict round trip."""
    metrics = _metrics()
    make = PLATEAU["min-abs-cooldown"]
    reference = _run("ember", _sgd, make, len(metrics), metrics)
    opt, sched = _make("ember", _sgd, make)
    for k in range(12):
        opt.step()
        sched.step(metrics[k])
    opt2, sched2 = _make("ember", _sgd, make)
    opt2.load_state_dict(opt.state_dict())
    sched2.load_state_dict(pickle.loads(pickle.dumps(sched.state_dict())))
    resumed = [_record(opt2, sched2)]
    for k in range(12, len(metrics)):
        opt2.step()
        sched2.step(metrics[k])
        resumed.append(_record(opt2, sched2))
    _assert_same(resumed, reference[12:])


def test_state_dict_has_torch_keys() -> None:
    """A scheduler's state dict holds the same entries as PyTorch's."""
    make_opt, make_sched = SCHEDULERS["OneCycleLR-cos-SGD"]
    _, ours = _make("ember", make_opt, make_sched)
    _, theirs = _make("torch", make_opt, make_sched)
    private_torch = {"_get_lr_called_within_step", "_is_initial"}
    assert set(ours.state_dict()) - private_torch == set(theirs.state_dict()) - private_torch


@pytest.mark.parametrize("name", ["StepLR", "MultiStepLR", "ExponentialLR", "CosineAnnealingLR", "LinearLR",
                                  "ConstantLR", "PolynomialLR", "CosineAnnealingWarmRestarts"])
def test_step_with_epoch_uses_closed_form(name: str) -> None:
    """The deprecated step(epoch) jumps to PyTorch's closed-form lr."""
    make_opt, make_sched = SCHEDULERS[name]
    epochs = [3, 9, 14, 15, 27, 4, 40]
    seqs = []
    for framework in ("ember", "torch"):
        opt, sched = _make(framework, make_opt, make_sched)
        seq = []
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for e in epochs:
                opt.step()
                sched.step(e)
                seq.append(_record(opt, sched))
        seqs.append(seq)
    _assert_same(*seqs)


def test_warns_when_stepped_before_optimizer() -> None:
    """Stepping the scheduler before the optimizer warns, as in PyTorch."""
    opt = optim.SGD([em.zeros(1, requires_grad=True)], lr=0.1)
    sched = optim.lr_scheduler.StepLR(opt, 3)
    with pytest.warns(UserWarning, match="before `optimizer.step\\(\\)`"):
        sched.step()
    opt2 = optim.SGD([em.zeros(1, requires_grad=True)], lr=0.1)
    sched2 = optim.lr_scheduler.StepLR(opt2, 3)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        opt2.step()
        sched2.step()


def test_scheduler_errors() -> None:
    """Bad arguments raise like PyTorch's."""
    opt = optim.SGD([em.zeros(1, requires_grad=True)], lr=0.1)
    sched = optim.lr_scheduler
    with pytest.raises(TypeError, match="is not an Optimizer"):
        sched.StepLR(object(), 3)
    with pytest.raises(KeyError, match="initial_lr"):
        sched.StepLR(opt, 3, last_epoch=5)
    with pytest.raises(ValueError, match="start_factor"):
        sched.LinearLR(opt, start_factor=0.0)
    with pytest.raises(ValueError, match="total_steps OR"):
        sched.OneCycleLR(opt, max_lr=0.1)
    with pytest.raises(ValueError, match="Tried to step 4 times"):
        s = sched.OneCycleLR(opt, max_lr=0.1, total_steps=3)
        for _ in range(4):
            opt.step()
            s.step()
    with pytest.raises(ValueError, match="momentum or beta1"):
        sched.OneCycleLR(optim.Adagrad([em.zeros(1, requires_grad=True)]), max_lr=0.1, total_steps=3)
    with pytest.raises(ValueError, match="Factor should be < 1.0|factor should be < 1.0"):
        sched.ReduceLROnPlateau(opt, factor=1.0)
    with pytest.raises(ValueError, match="mode 'best' is unknown"):
        sched.ReduceLROnPlateau(opt, mode="best")
    with pytest.raises(ValueError, match="one more than the number of milestone"):
        sched.SequentialLR(opt, [sched.StepLR(opt, 3), sched.StepLR(opt, 4)], milestones=[])
