"""`ember.optim.swa_utils` against PyTorch's: AveragedModel's averages of parameters and buffers over training steps,
SWALR's learning rates and update_bn's running statistics."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
import torch
from torch.optim import swa_utils as tsu

import ember as em
from ember.optim import swa_utils as esu

STEPS = 6


def _model(lib):
    """Linear, BatchNorm1d, Tanh, Linear in float64, with the same weights in both libraries."""
    nn = lib.nn
    model = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4), nn.Tanh(), nn.Linear(4, 2))
    model = model.double() if lib is torch else model.to(em.float64)
    rng = np.random.default_rng(0)
    with lib.no_grad():
        for p in model.parameters():
            p.copy_(lib.tensor(rng.standard_normal(tuple(p.shape))))
    return model


def _data(k: int):
    rng = np.random.default_rng(10 + k)
    return rng.standard_normal((8, 3)), rng.standard_normal((8, 2))


def _entries(module) -> dict:
    """The averaged copy's parameters and buffers (n_averaged included), as arrays by name."""
    return {name: np.asarray(t.detach().numpy()).copy() for name, t in module.state_dict().items()}


def _train_and_average(lib, fns: dict, use_buffers: bool, steps: int = STEPS) -> list[dict]:
    """SGD steps on new data each step, the model averaged after each; the averaged model's entries each time."""
    model = _model(lib)
    averaged = (tsu if lib is torch else esu).AveragedModel(model, use_buffers=use_buffers, **fns)
    opt = (torch.optim if lib is torch else em.optim).SGD(model.parameters(), lr=0.1, momentum=0.5)
    records = []
    for k in range(steps):
        x, y = (lib.tensor(a) for a in _data(k))
        opt.zero_grad()
        ((model(x) - y) ** 2).mean().backward()
        opt.step()
        averaged.update_parameters(model)
        records.append(_entries(averaged))
    return records


AVERAGING = {
    "swa-default": lambda m: {},
    "swa-avg_fn": lambda m: {"avg_fn": m.get_swa_avg_fn()},
    "swa-multi": lambda m: {"multi_avg_fn": m.get_swa_multi_avg_fn()},
    "ema-avg_fn": lambda m: {"avg_fn": m.get_ema_avg_fn(0.9)},
    "ema-multi": lambda m: {"multi_avg_fn": m.get_ema_multi_avg_fn(0.8)},
    "custom-avg_fn": lambda m: {"avg_fn": lambda avg, cur, n: avg * 0.7 + cur * 0.3 + 0.01 * n},
}
# PyTorch's get_swa_multi_avg_fn raises on the int64 batch count (see test_swa_multi_averages_integer_buffers...)
CASES = [(name, use) for name in AVERAGING for use in (False, True) if not (name == "swa-multi" and use)]


@pytest.mark.parametrize(("name", "use_buffers"), CASES, ids=[f"{n}-buffers={u}" for n, u in CASES])
def test_averaged_parameters_and_buffers_match_torch_at_every_step(name, use_buffers):
    ours = _train_and_average(em, AVERAGING[name](esu), use_buffers)
    theirs = _train_and_average(torch, AVERAGING[name](tsu), use_buffers)
    for k, (a, b) in enumerate(zip(ours, theirs)):
        assert list(a) == list(b)
        for key in a:
            assert a[key].dtype == b[key].dtype, key
            np.testing.assert_allclose(a[key], b[key], rtol=1e-12, atol=1e-14, err_msg=f"step {k + 1}, {key}")
    assert ours[-1]["n_averaged"] == STEPS


def _torch_swa_multi_or_default(averaged, current, num_averaged):
    """PyTorch's get_swa_multi_avg_fn on floating tensors, its default averaging (get_swa_avg_fn) on integer ones."""
    if averaged[0].is_floating_point():
        tsu.get_swa_multi_avg_fn()(averaged, current, num_averaged)
        return
    for a, c in zip(averaged, current):
        a.copy_(tsu.get_swa_avg_fn()(a, c, num_averaged))


def test_swa_multi_averages_integer_buffers_as_the_default_does():
    """With use_buffers, PyTorch's get_swa_multi_avg_fn raises on the int64 batch count (addcdiv refuses integer
    division); Ember's averages integer tensors as AveragedModel's default path does."""
    ours = _train_and_average(em, {"multi_avg_fn": esu.get_swa_multi_avg_fn()}, True)
    theirs = _train_and_average(torch, {"multi_avg_fn": _torch_swa_multi_or_default}, True)
    for a, b in zip(ours, theirs):
        for key in a:
            np.testing.assert_allclose(a[key], b[key], rtol=1e-12, atol=1e-14, err_msg=key)
    with pytest.raises(RuntimeError, match="addcdiv"):
        _train_and_average(torch, {"multi_avg_fn": tsu.get_swa_multi_avg_fn()}, True, steps=2)


def test_averaged_model_forwards_the_copy_and_refuses_two_averaging_functions():
    model = _model(em)
    averaged = esu.AveragedModel(model)
    assert averaged.module is not model and averaged.n_averaged.dtype == em.int64 and averaged.n_averaged.item() == 0
    x = em.tensor(_data(0)[0])
    model.eval(), averaged.eval()
    np.testing.assert_array_equal(averaged(x).detach().numpy(), model(x).detach().numpy())
    with pytest.raises(AssertionError, match="only one of avg_fn and multi_avg_fn"):
        esu.AveragedModel(model, avg_fn=esu.get_swa_avg_fn(), multi_avg_fn=esu.get_swa_multi_avg_fn())
    with pytest.raises(ValueError, match="only one of avg_fn and multi_avg_fn"):  # Ember's convention catches it too
        esu.AveragedModel(model, avg_fn=esu.get_swa_avg_fn(), multi_avg_fn=esu.get_swa_multi_avg_fn())
    for make in (esu.get_ema_avg_fn, esu.get_ema_multi_avg_fn):
        with pytest.raises(ValueError, match="Invalid decay value 1.5"):
            make(1.5)


def _schedule(lib, swa_kwargs: dict, steps: int = 25) -> list[tuple]:
    """Cosine annealing for 8 epochs, then SWALR: each epoch's get_last_lr() and the groups' lrs."""
    params = [lib.zeros(1, requires_grad=True) for _ in range(2)]
    optim = torch.optim if lib is torch else em.optim
    opt = optim.SGD([{"params": params[:1]}, {"params": params[1:], "lr": 0.3}], lr=0.1, momentum=0.9)
    cosine = optim.lr_scheduler.CosineAnnealingLR(opt, T_max=20)
    swa = (tsu if lib is torch else esu).SWALR(opt, **swa_kwargs)
    out = []
    for epoch in range(steps):
        opt.step()
        scheduler = swa if epoch >= 8 else cosine
        scheduler.step()
        out.append((*scheduler.get_last_lr(), *(g["lr"] for g in opt.param_groups)))
    return out


SWALR_CASES = {
    "cos": dict(swa_lr=0.05),
    "linear-per-group": dict(swa_lr=[0.05, 0.01], anneal_epochs=4, anneal_strategy="linear"),
    "one-epoch": dict(swa_lr=0.02, anneal_epochs=1),
    "no-annealing": dict(swa_lr=0.02, anneal_epochs=0),
}


@pytest.mark.parametrize("name", list(SWALR_CASES))
def test_swalr_sequence_matches_torch(name):
    assert _schedule(em, SWALR_CASES[name]) == _schedule(torch, SWALR_CASES[name])


def _swalr_lrs(resume_at: int | None = None) -> list[float]:
    """Ten linear SWALR epochs; at `resume_at` the pickled states go into a fresh optimizer and scheduler."""

    def make(swa_lr):
        opt = em.optim.SGD([em.zeros(1, requires_grad=True)], lr=0.1)
        return opt, esu.SWALR(opt, swa_lr=swa_lr, anneal_epochs=6, anneal_strategy="linear")

    opt, swa = make(0.01)
    lrs = []
    for epoch in range(10):
        if epoch == resume_at:
            saved = pickle.loads(pickle.dumps((opt.state_dict(), swa.state_dict())))
            opt, swa = make(0.5)
            opt.load_state_dict(saved[0])
            swa.load_state_dict(saved[1])
        opt.step()
        swa.step()
        lrs.append(swa.get_last_lr()[0])
    return lrs


def test_swalr_state_dict_round_trip_and_errors():
    assert _swalr_lrs(resume_at=4) == _swalr_lrs()
    opt = em.optim.SGD([em.zeros(1, requires_grad=True)], lr=0.1)
    topt = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=0.1)
    assert set(esu.SWALR(opt, swa_lr=0.01).state_dict()) == set(tsu.SWALR(topt, swa_lr=0.01).state_dict())
    with pytest.raises(ValueError, match="anneal_strategy must be one of 'cos' or 'linear'"):
        esu.SWALR(opt, swa_lr=0.01, anneal_strategy="step")
    with pytest.raises(ValueError, match="anneal_epochs must be equal or greater than 0"):
        esu.SWALR(opt, swa_lr=0.01, anneal_epochs=-1)
    with pytest.raises(ValueError, match="swa_lr must have the same length"):
        esu.SWALR(opt, swa_lr=[0.01, 0.02])


def _bn_model(lib):
    """Nested BatchNorm layers (1d inside a block, 2d at the top), eval mode, momentum 0.3 on one of them."""
    nn = lib.nn
    block = nn.Sequential(nn.Linear(4 * 3 * 3, 5), nn.BatchNorm1d(5, momentum=0.3), nn.ReLU())
    model = nn.Sequential(nn.Conv2d(2, 4, 3, padding=1), nn.BatchNorm2d(4), nn.Flatten(), block, nn.Linear(5, 1))
    model = model.double() if lib is torch else model.to(em.float64)
    rng = np.random.default_rng(3)
    with lib.no_grad():
        for p in model.parameters():
            p.copy_(lib.tensor(rng.standard_normal(tuple(p.shape)) * 0.5))
    model.eval()
    return model


def _loader(lib, tuples: bool):
    rng = np.random.default_rng(4)
    batches = [lib.tensor(rng.standard_normal((n, 2, 3, 3)) + 1.5) for n in (4, 6, 3)]
    return [(x, lib.zeros(len(x))) for x in batches] if tuples else batches


@pytest.mark.parametrize("tuples", [False, True], ids=["tensors", "tuples"])
def test_update_bn_recomputes_running_statistics_as_torch(tuples):
    """One pass with a cumulative average: the same running means, variances and batch counts; the momenta and
    the training mode are restored."""
    ours, theirs = _bn_model(em), _bn_model(torch)
    esu.update_bn(_loader(em, tuples), ours)
    tsu.update_bn(_loader(torch, tuples), theirs)
    a, b = ours.state_dict(), theirs.state_dict()
    assert list(a) == list(b)
    for key in a:
        np.testing.assert_allclose(np.asarray(a[key].numpy()), b[key].numpy(), rtol=1e-12, atol=1e-14, err_msg=key)
    assert a["1.num_batches_tracked"].item() == 3
    assert not ours.training and ours[3][1].momentum == 0.3 and ours[1].momentum == 0.1


def test_update_bn_with_a_device_and_without_batch_norm():
    model = _bn_model(em)
    esu.update_bn(_loader(em, False), model, device="cpu")
    assert model[1].num_batches_tracked.item() == 3
    plain = em.nn.Linear(2, 1)
    esu.update_bn([em.ones(3, 2)], plain)  # nothing to update: the loader is not read
    assert plain.training
