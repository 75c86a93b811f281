"""Optimizer state dicts: PyTorch's layout, and a save/load mid-training resumes identically."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

import ember as em
from ember import optim

from .problems import assert_trajectories_close, ember_setup, ember_train, torch_setup, torch_train

GROUPS = [{"params": [0, 1], "lr": 0.02}, {"params": [2, 3]}]

STATEFUL = [
    ("SGD", dict(lr=0.05, momentum=0.9, nesterov=True, weight_decay=0.01)),
    ("Adam", dict(lr=0.05, amsgrad=True)),
    ("AdamW", dict(lr=0.05, weight_decay=0.1)),
    ("RMSprop", dict(lr=0.01, centered=True, momentum=0.5)),
    ("Adagrad", dict(lr=0.1, lr_decay=0.01, initial_accumulator_value=0.1)),
]
IDS = [name for name, _ in STATEFUL]
EVERY_STATE = STATEFUL + [  # every kind of per-parameter state, for the layout
    ("Adam", dict(lr=0.05)),
    ("RMSprop", dict(lr=0.01)),
    ("Adadelta", dict(lr=0.5, weight_decay=0.01)),
    ("Adamax", dict(lr=0.05)),
    ("NAdam", dict(lr=0.05, decoupled_weight_decay=True, weight_decay=0.01)),
    ("RAdam", dict(lr=0.05)),
    ("ASGD", dict(lr=0.05, t0=2)),
]


@pytest.mark.parametrize(("name", "kwargs"), STATEFUL, ids=IDS)
def test_round_trip_resumes_identically(name: str, kwargs: dict) -> None:
    """Train 10 steps, pickle the state dict, load it into a fresh optimizer, train 10 more:
    bit-for-bit the same as 20 uninterrupted steps."""
    reference = ember_train(*ember_setup(name, kwargs, GROUPS), 20)

    params, opt = ember_setup(name, kwargs, GROUPS)
    first = ember_train(params, opt, 10)
    saved = pickle.dumps((opt.state_dict(), [p.detach().numpy() for p in params]))

    state, values = pickle.loads(saved)
    params2 = [em.tensor(v, requires_grad=True) for v in values]
    # Other hyperparameters at construction: the loaded groups must win.
    opt2 = type(opt)([{**g, "params": [params2[i] for i in g["params"]]} for g in GROUPS], **{**kwargs, "lr": 0.5})
    opt2.load_state_dict(state)
    assert [g["lr"] for g in opt2.param_groups] == [g["lr"] for g in opt.param_groups]
    second = ember_train(params2, opt2, 10)

    for k, (a_step, b_step) in enumerate(zip(first + second, reference)):
        for a, b in zip(a_step, b_step):
            np.testing.assert_array_equal(a, b, err_msg=f"step {k + 1}")


@pytest.mark.parametrize(("name", "kwargs"), EVERY_STATE, ids=[name for name, _ in EVERY_STATE])
def test_layout_matches_torch(name: str, kwargs: dict) -> None:
    """Same state keys (parameter indices), same per-parameter entries in the same order and with the same
    values, same group entries."""
    params, opt = ember_setup(name, kwargs, GROUPS)
    tparams, topt = torch_setup(name, kwargs, GROUPS)
    ember_train(params, opt, 3)
    torch_train(tparams, topt, 3)
    ours, theirs = opt.state_dict(), topt.state_dict()
    assert set(ours) == {"state", "param_groups"}
    assert sorted(ours["state"]) == sorted(theirs["state"])
    for index, entry in theirs["state"].items():
        assert list(ours["state"][index]) == list(entry)
        for key, value in entry.items():
            np.testing.assert_allclose(np.asarray(ours["state"][index][key].numpy()), value.numpy(), rtol=1e-10,
                                       err_msg=f"state[{index}][{key!r}]")
        if "step" in entry:
            assert ours["state"][index]["step"].dtype == em.float32
            assert ours["state"][index]["step"].shape == ()
    for g, tg in zip(ours["param_groups"], theirs["param_groups"]):
        assert set(g) == set(tg)  # PyTorch's implementation switches (foreach, fused, ...) included
        for key, value in g.items():
            if key != "foreach":  # the reference runs PyTorch's single-tensor path (foreach=False)
                assert tg[key] == value, key


def test_state_indices_with_skipped_parameters() -> None:
    """Only parameters that have state appear, keyed by their position across all groups."""
    params, opt = ember_setup("Adam", dict(lr=0.1), GROUPS)
    tparams, topt = torch_setup("Adam", dict(lr=0.1), GROUPS)
    ember_train(params, opt, 2, skip=lambda k: [0, 2])
    torch_train(tparams, topt, 2, skip=lambda k: [0, 2])
    assert sorted(opt.state_dict()["state"]) == sorted(topt.state_dict()["state"]) == [1, 3]
    assert [g["params"] for g in opt.state_dict()["param_groups"]] == [[0, 1], [2, 3]]


def test_loaded_state_is_a_copy() -> None:
    """Loading never shares buffers with the optimizer the dict came from."""
    params, opt = ember_setup("SGD", dict(lr=0.1, momentum=0.9))
    ember_train(params, opt, 2)
    params2, opt2 = ember_setup("SGD", dict(lr=0.1, momentum=0.9))
    opt2.load_state_dict(opt.state_dict())
    before = opt.state[params[0]]["momentum_buffer"].numpy().copy()
    ember_train(params2, opt2, 2)
    np.testing.assert_array_equal(opt.state[params[0]]["momentum_buffer"].numpy(), before)


def test_load_casts_state_to_parameter_dtype() -> None:
    """Floating state follows the parameter's dtype; the step count keeps its own."""
    params, opt = ember_setup("Adam", dict(lr=0.1))
    ember_train(params, opt, 2)
    params32, opt32 = ember_setup("Adam", dict(lr=0.1), dtype=np.float32)
    opt32.load_state_dict(opt.state_dict())
    state = opt32.state[params32[0]]
    assert state["exp_avg"].dtype == em.float32 and state["step"].dtype == em.float32
    assert state["step"].item() == 2.0


def test_load_rejects_mismatched_groups() -> None:
    """A dict with a different group structure is refused."""
    params, opt = ember_setup("SGD", dict(lr=0.1), GROUPS)
    _, single = ember_setup("SGD", dict(lr=0.1))
    with pytest.raises(ValueError, match="different number of parameter groups"):
        single.load_state_dict(opt.state_dict())
    other = optim.SGD([{"params": params[:1]}, {"params": params[1:]}], lr=0.1)
    with pytest.raises(ValueError, match="doesn't match the size"):
        other.load_state_dict(opt.state_dict())


def test_adam_state_loads_into_adamw() -> None:
    """AdamW keeps decoupled weight decay even when loading a state saved by Adam."""
    _, adam = ember_setup("Adam", dict(lr=0.1, weight_decay=0.1))
    _, adamw = ember_setup("AdamW", dict(lr=0.1, weight_decay=0.1))
    adamw.load_state_dict(adam.state_dict())
    assert adamw.param_groups[0]["decoupled_weight_decay"] is True


def test_torch_continuation_agrees_after_round_trip() -> None:
    """After a round trip, Ember still follows PyTorch's uninterrupted trajectory."""
    name, kwargs = "RMSprop", dict(lr=0.01, centered=True, momentum=0.5)
    theirs = torch_train(*torch_setup(name, kwargs), 16)
    params, opt = ember_setup(name, kwargs)
    ours = ember_train(params, opt, 8)
    opt2 = optim.RMSprop(params, **kwargs)
    opt2.load_state_dict(pickle.loads(pickle.dumps(opt.state_dict())))
    ours += ember_train(params, opt2, 8)
    assert_trajectories_close(ours, theirs, rtol=1e-10, atol=1e-12)
