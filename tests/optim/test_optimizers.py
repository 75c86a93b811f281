"""Each optimizer's parameter trajectory equals PyTorch's (foreach=False) on the same problem."""

from __future__ import annotations

import inspect

import numpy as np
import pytest
import torch

import ember as em
from ember import optim

from .problems import (
    assert_trajectories_close,
    data,
    ember_loss,
    ember_setup,
    ember_train,
    feed,
    gradient_sequence,
    initial_params,
    torch_loss,
    torch_setup,
    torch_train,
)

STEPS = 25

CONFIGS = [
    ("SGD", dict(lr=0.1)),
    ("SGD", dict(lr=0.1, momentum=0.9)),
    ("SGD", dict(lr=0.1, momentum=0.9, dampening=0.3)),
    ("SGD", dict(lr=0.05, momentum=0.9, nesterov=True)),
    ("SGD", dict(lr=0.1, weight_decay=0.05)),
    ("SGD", dict(lr=0.05, momentum=0.8, nesterov=True, weight_decay=0.05)),
    ("SGD", dict(lr=0.01, maximize=True)),
    ("SGD", dict(lr=0.01, momentum=0.7, dampening=0.2, weight_decay=0.1, maximize=True)),
    ("SGD", dict(lr=0.01, momentum=0.7, nesterov=True, weight_decay=0.1, maximize=True)),
    ("Adam", dict(lr=0.05)),
    ("Adam", dict(lr=0.05, amsgrad=True)),
    ("Adam", dict(lr=0.05, weight_decay=0.1)),
    ("Adam", dict(lr=0.05, betas=(0.3, 0.8), eps=1e-6)),  # beta1 < 0.5: lerp's large-weight branch
    ("Adam", dict(lr=0.01, maximize=True)),
    ("Adam", dict(lr=0.05, weight_decay=0.1, amsgrad=True, maximize=True)),
    ("Adam", dict(lr=0.05, weight_decay=0.1, decoupled_weight_decay=True)),
    ("AdamW", dict(lr=0.05)),
    ("AdamW", dict(lr=0.05, weight_decay=0.3, amsgrad=True)),
    ("AdamW", dict(lr=0.01, weight_decay=0.3, maximize=True, betas=(0.8, 0.9))),
    ("RMSprop", dict(lr=0.01)),
    ("RMSprop", dict(lr=0.01, alpha=0.9, eps=1e-6)),
    ("RMSprop", dict(lr=0.01, centered=True)),
    ("RMSprop", dict(lr=0.01, momentum=0.9)),
    ("RMSprop", dict(lr=0.005, centered=True, momentum=0.9)),
    ("RMSprop", dict(lr=0.01, centered=True, alpha=0.4)),  # 1 - alpha > 0.5: lerp's large-weight branch
    ("RMSprop", dict(lr=0.01, weight_decay=0.1, momentum=0.5)),
    ("RMSprop", dict(lr=0.001, maximize=True, centered=True, momentum=0.5, weight_decay=0.1)),
    ("Adagrad", dict(lr=0.1)),
    ("Adagrad", dict(lr=0.1, lr_decay=0.05)),
    ("Adagrad", dict(lr=0.1, weight_decay=0.1)),
    ("Adagrad", dict(lr=0.1, initial_accumulator_value=0.5, eps=1e-6)),
    ("Adagrad", dict(lr=0.01, maximize=True, lr_decay=0.01, weight_decay=0.1)),
    ("Adadelta", dict()),
    ("Adadelta", dict(lr=0.5, rho=0.7, eps=1e-4)),
    ("Adadelta", dict(lr=0.5, weight_decay=0.1, maximize=True)),
    ("Adamax", dict(lr=0.05)),
    ("Adamax", dict(lr=0.05, betas=(0.3, 0.8), eps=1e-4)),
    ("Adamax", dict(lr=0.01, weight_decay=0.1, maximize=True)),
    ("NAdam", dict(lr=0.05)),
    ("NAdam", dict(lr=0.05, momentum_decay=0.1, betas=(0.7, 0.9))),
    ("NAdam", dict(lr=0.05, weight_decay=0.1)),
    ("NAdam", dict(lr=0.05, weight_decay=0.1, decoupled_weight_decay=True)),
    ("NAdam", dict(lr=0.01, maximize=True, eps=1e-6)),
    ("RAdam", dict(lr=0.05)),  # the first steps (rho_t <= 5) are plain momentum, the later ones rectified
    ("RAdam", dict(lr=0.05, betas=(0.8, 0.9))),
    ("RAdam", dict(lr=0.05, weight_decay=0.1)),
    ("RAdam", dict(lr=0.05, weight_decay=0.1, decoupled_weight_decay=True, maximize=True)),
    ("ASGD", dict(lr=0.1)),
    ("ASGD", dict(lr=0.1, t0=5, lambd=0.01, alpha=0.5)),  # after 5 steps the average moves (mu < 1)
    ("ASGD", dict(lr=0.05, t0=3, weight_decay=0.1, maximize=True)),
]


def _id(config) -> str:
    name, kwargs = config
    return name + "-" + "-".join(f"{k}={v}" for k, v in kwargs.items())


@pytest.mark.parametrize(("name", "kwargs"), CONFIGS, ids=[_id(c) for c in CONFIGS])
def test_trajectory_matches_torch(name: str, kwargs: dict) -> None:
    """Float64 MLP training: every parameter at every step agrees to rounding."""
    ours = ember_train(*ember_setup(name, kwargs), STEPS)
    theirs = torch_train(*torch_setup(name, kwargs), STEPS)
    assert_trajectories_close(ours, theirs, rtol=1e-10, atol=1e-12)


FLOAT32_CONFIGS = [
    ("SGD", dict(lr=0.05, momentum=0.9, nesterov=True, weight_decay=0.01)),
    ("Adam", dict(lr=0.01, amsgrad=True, weight_decay=0.01)),
    ("AdamW", dict(lr=0.01)),
    ("RMSprop", dict(lr=0.01, centered=True, momentum=0.5)),
    ("Adagrad", dict(lr=0.1, lr_decay=0.01)),
    ("Adadelta", dict(lr=0.5, weight_decay=0.01)),
    ("Adamax", dict(lr=0.01, weight_decay=0.01)),
    ("NAdam", dict(lr=0.01, momentum_decay=0.01)),
    ("RAdam", dict(lr=0.01)),
    ("ASGD", dict(lr=0.05, t0=4)),
]


@pytest.mark.parametrize(("name", "kwargs"), FLOAT32_CONFIGS, ids=[_id(c) for c in FLOAT32_CONFIGS])
def test_float32_with_given_gradients(name: str, kwargs: dict) -> None:
    """Float32 parameters fed identical gradients stay float32 and agree with PyTorch's."""
    grads = gradient_sequence(STEPS)
    params, opt = ember_setup(name, kwargs, dtype=np.float32)
    ours = feed(params, opt, grads, em.tensor)
    assert all(p.dtype == em.float32 for p in params)
    assert all(v.dtype == em.float32 for s in opt.state.values() for k, v in s.items() if k != "step")
    theirs = feed(*torch_setup(name, kwargs, dtype=np.float32), grads, torch.tensor)
    assert_trajectories_close(ours, theirs, rtol=2e-5, atol=2e-6)


GROUPS = [{"params": [0, 1], "lr": 0.02}, {"params": [2, 3]}]


@pytest.mark.parametrize(
    ("name", "kwargs", "groups"),
    [
        ("SGD", dict(lr=0.1, momentum=0.9), GROUPS),
        ("SGD", dict(lr=0.1), [{"params": [0, 1], "momentum": 0.5, "nesterov": True}, {"params": [2, 3], "lr": 0.3}]),
        ("Adam", dict(lr=0.05), [{"params": [0, 1], "lr": 0.005, "amsgrad": True}, {"params": [2, 3]}]),
        ("AdamW", dict(lr=0.05), [{"params": [0], "weight_decay": 0.0}, {"params": [1, 2, 3], "betas": (0.5, 0.9)}]),
        ("RMSprop", dict(lr=0.01), [{"params": [0, 1], "centered": True, "momentum": 0.3}, {"params": [2, 3]}]),
        ("Adagrad", dict(lr=0.1), [{"params": [0, 1], "lr": 0.3, "lr_decay": 0.1}, {"params": [2, 3]}]),
        ("Adadelta", dict(lr=0.5), [{"params": [0, 1], "rho": 0.5}, {"params": [2, 3], "lr": 0.1}]),
        ("Adamax", dict(lr=0.05), [{"params": [0, 1], "betas": (0.5, 0.9)}, {"params": [2, 3]}]),
        ("NAdam", dict(lr=0.05), [{"params": [0], "momentum_decay": 0.1}, {"params": [1, 2, 3], "lr": 0.01}]),
        ("RAdam", dict(lr=0.05), [{"params": [0, 1], "weight_decay": 0.1}, {"params": [2, 3]}]),
        ("ASGD", dict(lr=0.05), [{"params": [0, 1], "t0": 2}, {"params": [2, 3], "lambd": 0.1}]),
    ],
    ids=["SGD-lr", "SGD-options", "Adam", "AdamW", "RMSprop", "Adagrad", "Adadelta", "Adamax", "NAdam", "RAdam",
         "ASGD"],
)
def test_param_groups_match_torch(name: str, kwargs: dict, groups: list[dict]) -> None:
    """Per-group options override the defaults, exactly as in PyTorch."""
    params, opt = ember_setup(name, kwargs, groups)
    tparams, topt = torch_setup(name, kwargs, groups)
    for g, tg in zip(opt.param_groups, topt.param_groups):
        for key, value in g.items():
            if key not in ("params", "foreach"):  # the reference runs with foreach=False
                assert tg[key] == value, key
    ours = ember_train(params, opt, STEPS)
    theirs = torch_train(tparams, topt, STEPS)
    assert_trajectories_close(ours, theirs, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("name", ["SGD", "Adam", "RMSprop", "Adagrad", "Adadelta", "Adamax", "NAdam", "RAdam", "ASGD"])
def test_parameters_without_grad_are_skipped(name: str) -> None:
    """A parameter whose .grad is None is neither moved nor given state (until it has a gradient)."""
    kwargs = dict(lr=0.05, momentum=0.5) if name in ("SGD", "RMSprop") else dict(lr=0.05)

    def skip(k: int) -> list[int]:
        return [1] if k % 3 else [1, 3]  # b1 never has a gradient, b2 only every third step

    params, opt = ember_setup(name, kwargs)
    ours = ember_train(params, opt, STEPS, skip=skip)
    theirs = torch_train(*torch_setup(name, kwargs), STEPS, skip=skip)
    assert_trajectories_close(ours, theirs, rtol=1e-10, atol=1e-12)
    np.testing.assert_array_equal(ours[-1][1], ours[0][1])
    if name != "Adagrad":  # Adagrad creates its accumulators up front, as PyTorch does
        assert params[1] not in opt.state


def test_add_param_group_matches_torch() -> None:
    """A group added mid-training is optimized from then on with its own options."""
    params, opt = ember_setup("Adam", dict(lr=0.05))
    tparams, topt = torch_setup("Adam", dict(lr=0.05))
    opt.param_groups[0]["params"] = params[:2]
    topt.param_groups[0]["params"] = tparams[:2]
    ours = ember_train(params, opt, 5)
    theirs = torch_train(tparams, topt, 5)
    opt.add_param_group({"params": params[2:], "lr": 0.01, "amsgrad": True})
    topt.add_param_group({"params": tparams[2:], "lr": 0.01, "amsgrad": True})
    ours += ember_train(params, opt, 10)
    theirs += torch_train(tparams, topt, 10)
    assert_trajectories_close(ours, theirs, rtol=1e-10, atol=1e-12)
    assert opt.param_groups[1]["betas"] == (0.9, 0.999)


def test_closure_returns_loss_and_is_evaluated_with_grad() -> None:
    """step(closure) re-evaluates the loss with gradients enabled and returns it."""
    w = em.tensor([1.0, -2.0], requires_grad=True)
    opt = optim.SGD([w], lr=0.1)

    def closure():
        opt.zero_grad()
        loss = (w * w).sum()
        loss.backward()
        return loss

    with em.no_grad():
        loss = opt.step(closure)
    assert loss.item() == pytest.approx(5.0)
    np.testing.assert_allclose(w.detach().numpy(), [0.8, -1.6])
    assert w.is_leaf and w.grad_fn is None


def test_step_does_not_record_graph() -> None:
    """Updates happen under no_grad: parameters stay leaves and state needs no grad."""
    params, opt = ember_setup("Adam", dict(lr=0.05, amsgrad=True))
    ember_train(params, opt, 2)
    assert all(p.is_leaf and p.requires_grad for p in params)
    assert not any(v.requires_grad for s in opt.state.values() for v in s.values())


def test_zero_grad() -> None:
    """set_to_none=True drops the gradients; False zeroes them in place."""
    w = em.tensor([1.0, 2.0], requires_grad=True)
    opt = optim.SGD([w], lr=0.1)
    (w * w).sum().backward()
    g = w.grad
    opt.zero_grad(set_to_none=False)
    assert w.grad is g
    np.testing.assert_array_equal(w.grad.numpy(), [0.0, 0.0])
    opt.zero_grad()
    assert w.grad is None


def test_in_place_updates_keep_parameter_identity() -> None:
    """The step writes into the parameters' storage (views of them see the update)."""
    params, opt = ember_setup("SGD", dict(lr=0.1, momentum=0.9))
    view = params[0].detach()
    before = view.numpy().copy()
    ember_train(params, opt, 1)
    assert not np.array_equal(view.numpy(), before)
    np.testing.assert_array_equal(view.numpy(), params[0].detach().numpy())


BAD = [
    (optim.SGD, dict(lr=-0.1), "SGD: invalid learning rate: -0.1"),
    (optim.SGD, dict(lr=0.1, momentum=-0.5), "SGD: invalid momentum value: -0.5"),
    (optim.SGD, dict(lr=0.1, weight_decay=-1.0), "SGD: invalid weight_decay value: -1.0"),
    (optim.SGD, dict(lr=0.1, nesterov=True), "SGD: Nesterov momentum requires a momentum and zero dampening"),
    (optim.SGD, dict(lr=0.1, momentum=0.9, dampening=0.1, nesterov=True), "SGD: Nesterov momentum requires"),
    (optim.Adam, dict(lr=-1e-3), "Adam: invalid learning rate: -0.001"),
    (optim.Adam, dict(betas=(1.0, 0.999)), "Adam: invalid beta parameter at index 0: 1.0"),
    (optim.Adam, dict(betas=(0.9, -0.1)), "Adam: invalid beta parameter at index 1: -0.1"),
    (optim.Adam, dict(eps=-1e-8), "Adam: invalid epsilon value: -1e-08"),
    (optim.Adam, dict(weight_decay=-0.1), "Adam: invalid weight_decay value: -0.1"),
    (optim.AdamW, dict(betas=(0.9, 1.5)), "AdamW: invalid beta parameter at index 1: 1.5"),
    (optim.RMSprop, dict(alpha=-0.9), "RMSprop: invalid alpha value: -0.9"),
    (optim.RMSprop, dict(momentum=-0.9), "RMSprop: invalid momentum value: -0.9"),
    (optim.RMSprop, dict(eps=-1.0), "RMSprop: invalid epsilon value: -1.0"),
    (optim.Adagrad, dict(lr_decay=-0.1), "Adagrad: invalid lr_decay value: -0.1"),
    (optim.Adagrad, dict(initial_accumulator_value=-1.0), "Adagrad: invalid initial_accumulator_value value: -1.0"),
    (optim.Adadelta, dict(rho=1.5), "Adadelta: invalid rho value: 1.5"),
    (optim.Adadelta, dict(eps=-1.0), "Adadelta: invalid epsilon value: -1.0"),
    (optim.Adamax, dict(betas=(1.0, 0.9)), "Adamax: invalid beta parameter at index 0: 1.0"),
    (optim.NAdam, dict(momentum_decay=-0.1), "NAdam: invalid momentum_decay value: -0.1"),
    (optim.NAdam, dict(betas=(0.9, 1.0)), "NAdam: invalid beta parameter at index 1: 1.0"),
    (optim.RAdam, dict(lr=-1.0), "RAdam: invalid learning rate: -1.0"),
    (optim.ASGD, dict(weight_decay=-1.0), "ASGD: invalid weight_decay value: -1.0"),
    (optim.LBFGS, dict(lr=-1.0), "LBFGS: invalid learning rate: -1.0"),
    (optim.LBFGS, dict(line_search_fn="backtracking"), "LBFGS: line_search_fn must be None or 'strong_wolfe'"),
]


@pytest.mark.parametrize(("cls", "kwargs", "message"), BAD, ids=[m for _, _, m in BAD])
def test_bad_hyperparameters(cls, kwargs: dict, message: str) -> None:
    """Invalid hyperparameters raise ValueError naming the optimizer and the value."""
    with pytest.raises(ValueError, match="^" + message.replace("(", r"\(").replace(")", r"\)")):
        cls([em.zeros(2, requires_grad=True)], **kwargs)


def test_bad_hyperparameter_in_group() -> None:
    """A group's own option is validated too."""
    a, b = em.zeros(2, requires_grad=True), em.zeros(2, requires_grad=True)
    with pytest.raises(ValueError, match="Adam: invalid beta parameter at index 0: 2"):
        optim.Adam([{"params": [a]}, {"params": [b], "betas": (2, 0.9)}])


def test_bad_params() -> None:
    """The params argument is checked like PyTorch's."""
    w = em.zeros(2, requires_grad=True)
    with pytest.raises(TypeError, match="iterable of Tensors"):
        optim.SGD(w, lr=0.1)
    with pytest.raises(ValueError, match="empty parameter list"):
        optim.SGD([], lr=0.1)
    with pytest.raises(ValueError, match="non-leaf"):
        optim.SGD([w * 2], lr=0.1)
    with pytest.raises(TypeError, match="ordered collections"):
        optim.SGD({w}, lr=0.1)
    with pytest.raises(ValueError, match="more than one parameter group"):
        optim.SGD([{"params": [w]}, {"params": [w]}], lr=0.1)
    with pytest.raises(TypeError, match="can only optimize Tensors"):
        optim.SGD([np.zeros(2)], lr=0.1)


def test_named_parameters() -> None:
    """(name, tensor) pairs are accepted and the names kept in the group."""
    w, b = em.zeros(2, requires_grad=True), em.zeros(1, requires_grad=True)
    opt = optim.SGD([("w", w), ("b", b)], lr=0.1)
    assert [id(p) for p in opt.param_groups[0]["params"]] == [id(w), id(b)]
    assert opt.param_groups[0]["param_names"] == ["w", "b"]
    assert opt.state_dict()["param_groups"][0]["param_names"] == ["w", "b"]


def test_repr_lists_group_options() -> None:
    """repr shows each group's options."""
    opt = optim.Adam([em.zeros(2, requires_grad=True)], lr=0.01)
    text = repr(opt)
    assert text.startswith("Adam (") and "Parameter Group 0" in text and "lr: 0.01" in text


# --- LBFGS: a closure re-evaluates the loss, maybe several times per step ---------------------------------------
LBFGS_CONFIGS = [
    dict(),
    dict(lr=0.5, max_iter=5, history_size=3),
    dict(line_search_fn="strong_wolfe"),
    dict(line_search_fn="strong_wolfe", max_iter=7, history_size=2, tolerance_change=1e-12),
    dict(max_iter=4, max_eval=6, lr=0.8),
]


def _lbfgs_run(lib, loss_fn, params, opt, steps: int):
    x, y = (lib.tensor(a) for a in data())
    trajectory, losses, evals = [], [], []

    def closure():
        opt.zero_grad()
        loss = loss_fn(params, x, y)
        loss.backward()
        evals.append(float(loss.detach()))
        return loss

    for _ in range(steps):
        losses.append(float(opt.step(closure).detach()))
        trajectory.append([p.detach().numpy().copy() for p in params])
    return trajectory, losses, evals


@pytest.mark.parametrize("kwargs", LBFGS_CONFIGS, ids=[_id(("LBFGS", c)) for c in LBFGS_CONFIGS])
def test_lbfgs_trajectory_matches_torch(kwargs: dict) -> None:
    """Every loss the closure returns and the parameters after every step agree with PyTorch's."""
    params = [em.tensor(a, requires_grad=True) for a in initial_params()]
    tparams = [torch.tensor(a, requires_grad=True) for a in initial_params()]
    ours = _lbfgs_run(em, ember_loss, params, optim.LBFGS(params, **kwargs), 4)
    theirs = _lbfgs_run(torch, torch_loss, tparams, torch.optim.LBFGS(tparams, **kwargs), 4)
    assert len(ours[2]) == len(theirs[2])  # the same number of closure evaluations
    np.testing.assert_allclose(ours[2], theirs[2], rtol=1e-9)
    np.testing.assert_allclose(ours[1], theirs[1], rtol=1e-9)
    assert_trajectories_close(ours[0], theirs[0], rtol=1e-8, atol=1e-10)
    assert ours[1][-1] < ours[1][0]


def test_lbfgs_fits_a_least_squares_problem_to_its_solution() -> None:
    rng = np.random.default_rng(3)
    a, b = em.tensor(rng.standard_normal((20, 4))), em.tensor(rng.standard_normal(20))
    w = em.zeros(4, dtype=em.float64, requires_grad=True)
    opt = optim.LBFGS([w], line_search_fn="strong_wolfe", tolerance_grad=1e-12, tolerance_change=0.0,
                       max_iter=100)

    def closure():
        opt.zero_grad()
        loss = ((a @ w - b) ** 2).sum()
        loss.backward()
        return loss

    opt.step(closure)
    np.testing.assert_allclose(w.detach().numpy(), np.linalg.lstsq(a.numpy(), b.numpy(), rcond=None)[0], rtol=1e-6)


def test_lbfgs_refuses_groups_missing_closures_and_jit() -> None:
    a, b = em.zeros(2, requires_grad=True), em.zeros(2, requires_grad=True)
    with pytest.raises(ValueError, match="LBFGS doesn't support per-parameter options"):
        optim.LBFGS([{"params": [a]}, {"params": [b]}])
    opt = optim.LBFGS([a])
    with pytest.raises(ValueError, match="LBFGS doesn't support per-parameter options"):
        opt.add_param_group({"params": [b]})
    with pytest.raises(TypeError, match="LBFGS.step needs a closure"):
        opt.step(None)

    def closure():
        opt.zero_grad()
        loss = (a * a).sum()
        loss.backward()
        return loss

    with pytest.raises(RuntimeError, match="LBFGS.step cannot run under ember.jit"):
        em.jit(lambda: opt.step(closure))()


def test_sparse_adam_says_that_sparse_gradients_do_not_exist() -> None:
    with pytest.raises(NotImplementedError, match="SparseAdam needs sparse gradients.*use ember.optim.Adam"):
        optim.SparseAdam([em.zeros(2, requires_grad=True)])


@pytest.mark.parametrize("name", ["SGD", "Adam", "AdamW", "Adagrad", "RMSprop", "Adadelta", "Adamax", "NAdam", "RAdam",
                                  "ASGD", "LBFGS"])
def test_constructors_take_pytorchs_arguments(name: str) -> None:
    """The same arguments as PyTorch's optimizer, in its order, positional or keyword-only as there, with its
    defaults: a call written for PyTorch's constructor means the same here."""

    def arguments(cls):
        return [(k, p.kind, p.default) for k, p in inspect.signature(cls.__init__).parameters.items()]

    assert arguments(getattr(optim, name)) == arguments(getattr(torch.optim, name))
