"""CyclicLR's learning-rate and momentum sequences equal PyTorch's over several cycles, for every mode."""

from __future__ import annotations

import pickle

import pytest
import torch

import ember as em
from ember import optim


def _sgd(m, params):
    return m.SGD([{"params": params[:1]}, {"params": params[1:], "lr": 0.03}], lr=0.1, momentum=0.9)


def _adam(m, params):
    return m.Adam([{"params": params[:1]}, {"params": params[1:], "lr": 0.003}], lr=0.01)


class Halving:
    """A callable scale_fn with state (its __dict__ is what the state dict keeps)."""

    def __init__(self, rate: float) -> None:
        self.rate = rate

    def __call__(self, x: float) -> float:
        return self.rate ** (x - 1)


CONFIGS = {
    "triangular": (_sgd, dict(base_lr=0.01, max_lr=0.1, step_size_up=7)),
    "triangular-uneven": (_sgd, dict(base_lr=[0.01, 0.002], max_lr=[0.1, 0.05], step_size_up=3, step_size_down=8)),
    "triangular2": (_sgd, dict(base_lr=0.01, max_lr=0.1, step_size_up=4, step_size_down=6, mode="triangular2")),
    "exp_range": (_sgd, dict(base_lr=0.01, max_lr=0.1, step_size_up=5, mode="exp_range", gamma=0.97)),
    "exp_range-adam-betas": (_adam, dict(base_lr=1e-3, max_lr=[1e-2, 5e-3], step_size_up=6, mode="exp_range",
                                         gamma=0.99, base_momentum=[0.8, 0.85], max_momentum=0.95)),
    "triangular-adam": (_adam, dict(base_lr=1e-3, max_lr=1e-2, step_size_up=5, step_size_down=2)),
    "scale_fn-cycle": (_sgd, dict(base_lr=0.01, max_lr=0.1, step_size_up=4, scale_fn=lambda x: 0.8 ** (x - 1))),
    "scale_fn-iterations": (_sgd, dict(base_lr=0.01, max_lr=0.1, step_size_up=4, scale_fn=lambda x: 1 / (1 + x / 20),
                                       scale_mode="iterations")),
    "scale_fn-overrides-mode": (_sgd, dict(base_lr=0.01, max_lr=0.1, step_size_up=3, mode="exp_range", gamma=0.5,
                                           scale_fn=Halving(0.7))),
    "no-momentum-cycling": (_adam, dict(base_lr=1e-3, max_lr=1e-2, step_size_up=4, cycle_momentum=False)),
}


def _make(lib, make_opt, kwargs):
    params = [lib.zeros(1, requires_grad=True) for _ in range(2)]
    opt = make_opt(torch.optim if lib is torch else optim, params)
    scheduler = (torch.optim.lr_scheduler if lib is torch else optim.lr_scheduler).CyclicLR(opt, **kwargs)
    return opt, scheduler


def _record(opt, scheduler) -> tuple:
    """get_last_lr(), then each group's lr, momentum and betas, as one flat tuple."""
    values = list(scheduler.get_last_lr())
    for g in opt.param_groups:
        values += [g["lr"], g.get("momentum")] + list(g.get("betas", ()))
    return tuple(values)


def _steps(opt, scheduler, steps: int) -> list[tuple]:
    out = []
    for _ in range(steps):
        opt.step()  # no gradients: nothing moves, but the scheduler sees the usual call order
        scheduler.step()
        out.append(_record(opt, scheduler))
    return out


def _run(lib, name: str, steps: int) -> list[tuple]:
    opt, scheduler = _make(lib, *CONFIGS[name])
    return [_record(opt, scheduler)] + _steps(opt, scheduler, steps)


@pytest.mark.parametrize("name", list(CONFIGS))
def test_lr_and_momentum_sequences_match_torch_over_several_cycles(name):
    """60 steps (five to fifteen cycles): the same float arithmetic in the same order, so equal values."""
    ours, theirs = _run(em, name, 60), _run(torch, name, 60)
    assert len(ours) == len(theirs)
    for k, (a, b) in enumerate(zip(ours, theirs)):
        assert a == b, f"step {k}: {a} != {b}"


@pytest.mark.parametrize("name", ["triangular2", "exp_range-adam-betas", "scale_fn-overrides-mode"])
def test_state_dict_round_trip_resumes_the_cycle(name):
    """Halfway, the optimizer's and scheduler's pickled states are loaded into fresh ones: the rest of the sequence
    is the uninterrupted one. A callable object's scale_fn keeps its attributes; PyTorch's keys are saved."""
    expected = _run(em, name, 40)
    opt, scheduler = _make(em, *CONFIGS[name])
    first = [_record(opt, scheduler)] + _steps(opt, scheduler, 20)
    saved = pickle.loads(pickle.dumps((opt.state_dict(), scheduler.state_dict())))
    _, their_scheduler = _make(torch, *CONFIGS[name])
    assert set(saved[1]) == set(their_scheduler.state_dict())

    make_opt, kwargs = CONFIGS[name]
    opt2, scheduler2 = _make(em, make_opt, {**kwargs, "scale_fn": Halving(0.1)} if "scale_fn" in kwargs else kwargs)
    opt2.load_state_dict(saved[0])
    scheduler2.load_state_dict(saved[1])
    assert first + _steps(opt2, scheduler2, 20) == expected


def test_errors_match_torchs():
    opt = optim.SGD([em.zeros(1, requires_grad=True)], lr=0.1)
    topt = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=0.1)
    cases = [
        (dict(base_lr=0.01, max_lr=0.1, mode="sawtooth"), "mode 'sawtooth' is invalid and scale_fn is None"),
        (dict(base_lr=[0.01, 0.02], max_lr=0.1), "base_lr must have the same length as optimizer.param_groups"),
        (dict(base_lr=0.01, max_lr=0.1, max_momentum=[0.9, 0.95]), "max_momentum must have the same length"),
    ]
    for kwargs, message in cases:
        with pytest.raises(ValueError, match=message):
            optim.lr_scheduler.CyclicLR(opt, **kwargs)
        with pytest.raises(ValueError):
            torch.optim.lr_scheduler.CyclicLR(topt, **kwargs)
    adagrad = optim.Adagrad([em.zeros(1, requires_grad=True)])
    with pytest.raises(ValueError, match="optimizer must support momentum or beta1"):
        optim.lr_scheduler.CyclicLR(adagrad, 0.01, 0.1)
    optim.lr_scheduler.CyclicLR(adagrad, 0.01, 0.1, cycle_momentum=False)
    with pytest.raises(TypeError, match="is not an Optimizer"):
        optim.lr_scheduler.CyclicLR(object(), 0.01, 0.1)
