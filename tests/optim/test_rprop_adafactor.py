"""Rprop and Adafactor equal PyTorch's (foreach=False) step by step: every parameter and every state tensor, with
new data at each step, the learning rate changed between steps, per-group options, and a state-dict round trip."""

from __future__ import annotations

import inspect
import pickle

import numpy as np
import pytest
import torch

import ember as em
from ember import optim

from .problems import feed, gradient_sequence

# An MLP's weights and biases, a batch of matrices (Adafactor's factored moments over a leading dim) and a scalar.
SHAPES = [(5, 3), (5,), (2, 5), (2,), (2, 3, 4), ()]
STEPS = 12


def _initial(seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [np.asarray(rng.standard_normal(s) * 0.7) for s in SHAPES]


def _batch(k: int) -> list[np.ndarray]:
    """Step k's data: inputs (16, 3), targets (16, 2) and weights (2, 3, 4) for the batch of matrices."""
    rng = np.random.default_rng(100 + k)
    x = rng.standard_normal((16, 3))
    return [x, np.sin(2 * x[:, :2]) + 0.1 * rng.standard_normal((16, 2)), rng.standard_normal((2, 3, 4))]


def _loss(lib, params, x, y, c):
    w1, b1, w2, b2, t, s = params
    out = lib.tanh(x @ w1.T + b1) @ w2.T + b2
    return ((out - y) ** 2).mean() + (lib.tanh(t) * c).sum() ** 2 / 24 + (s * 1.3 - 0.4) ** 2 * lib.cos(s)


def _groups(params, groups):
    return params if groups is None else [{**g, "params": [params[i] for i in g["params"]]} for g in groups]


def _setup(lib, name: str, kwargs: dict, groups=None, values=None):
    """Float64 parameters (from `values`, else the initial ones) and the optimizer; PyTorch's runs foreach=False."""
    params = [lib.tensor(a, requires_grad=True) for a in (_initial() if values is None else values)]
    if lib is torch:
        return params, getattr(torch.optim, name)(_groups(params, groups), foreach=False, **kwargs)
    return params, getattr(optim, name)(_groups(params, groups), **kwargs)


def _snapshot(params, opt) -> dict:
    """Every parameter and every state tensor, as arrays keyed by (parameter index, name)."""
    out = {(i, "param"): p.detach().numpy().copy() for i, p in enumerate(params)}
    for i, p in enumerate(params):
        for key, value in opt.state[p].items():
            out[(i, key)] = np.asarray(value.numpy()).copy()
    return out


def _train(lib, params, opt, steps: int, first: int = 0, jitted: bool = False) -> list[dict]:
    """Steps first..first+steps-1 on their own data; every group's lr is scaled by 0.9 after each step."""

    def step(x, y, c):
        opt.zero_grad()
        _loss(lib, params, x, y, c).backward()
        opt.step()

    run = em.jit(step, passes=False) if jitted else step
    records = []
    for k in range(first, first + steps):
        run(*(lib.tensor(a) for a in _batch(k)))
        for group in opt.param_groups:
            group["lr"] *= 0.9
        records.append(_snapshot(params, opt))
    return records


def _assert_close(ours: list[dict], theirs: list[dict], rtol: float = 1e-10, atol: float = 1e-12) -> None:
    assert len(ours) == len(theirs)
    for k, (a, b) in enumerate(zip(ours, theirs)):
        assert list(a) == list(b), f"step {k + 1}: the state differs in its entries or their order"
        for key in a:
            np.testing.assert_allclose(a[key], b[key], rtol=rtol, atol=atol, err_msg=f"step {k + 1}, {key}")


CONFIGS = [
    ("Rprop", dict(), None),
    ("Rprop", dict(lr=0.05, etas=(0.3, 1.5), step_sizes=(1e-3, 0.2)), None),  # both bounds of the step size are hit
    ("Rprop", dict(lr=0.02, maximize=True), None),
    ("Rprop", dict(lr=0.02), [{"params": [0, 1, 4], "etas": (0.6, 1.1), "maximize": True},
                              {"params": [2, 3, 5], "lr": 0.1, "step_sizes": (1e-4, 0.05)}]),
    ("Adafactor", dict(), None),
    ("Adafactor", dict(lr=0.05, weight_decay=0.1), None),
    ("Adafactor", dict(lr=0.03, beta2_decay=-0.5, eps=(1e-20, 1e-2), d=1.5), None),
    ("Adafactor", dict(lr=0.02, maximize=True, weight_decay=0.05), None),
    ("Adafactor", dict(lr=0.02), [{"params": [0, 1, 4], "lr": 0.05, "weight_decay": 0.2, "d": 2.0},
                                  {"params": [2, 3, 5], "beta2_decay": -0.6, "eps": (1e-12, 1e-3),
                                   "maximize": True}]),
]
IDS = [f"{name}-{i}" for i, (name, _, _) in enumerate(CONFIGS)]


@pytest.mark.parametrize(("name", "kwargs", "groups"), CONFIGS, ids=IDS)
def test_every_parameter_and_state_tensor_matches_torch_at_every_step(name, kwargs, groups):
    ours = _train(em, *_setup(em, name, kwargs, groups), STEPS)
    theirs = _train(torch, *_setup(torch, name, kwargs, groups), STEPS)
    _assert_close(ours, theirs)


@pytest.mark.parametrize(("name", "kwargs", "groups"), [CONFIGS[3], CONFIGS[8]], ids=["Rprop", "Adafactor"])
def test_state_dict_round_trip_resumes_identically_and_follows_torch(name, kwargs, groups):
    """Six steps, a pickled state dict loaded into a fresh optimizer built with other options, six more: bit for
    bit the uninterrupted run, and PyTorch's uninterrupted run to rounding; the dict has PyTorch's layout."""
    uninterrupted = _train(em, *_setup(em, name, kwargs, groups), STEPS)
    theirs_params, theirs_opt = _setup(torch, name, kwargs, groups)
    theirs = _train(torch, theirs_params, theirs_opt, STEPS // 2)

    params, opt = _setup(em, name, kwargs, groups)
    first = _train(em, params, opt, STEPS // 2)
    state, values = pickle.loads(pickle.dumps((opt.state_dict(), [p.detach().numpy() for p in params])))
    layout = theirs_opt.state_dict()
    assert list(state["state"]) == list(layout["state"])
    assert [list(s) for s in state["state"].values()] == [list(s) for s in layout["state"].values()]
    for ours_group, their_group in zip(state["param_groups"], layout["param_groups"]):
        assert set(ours_group) == set(their_group)
        assert all(ours_group[k] == their_group[k] for k in ours_group if k != "foreach")

    params2, opt2 = _setup(em, name, {**kwargs, "lr": 0.5}, groups, values=values)
    opt2.load_state_dict(state)
    assert [g["lr"] for g in opt2.param_groups] == [g["lr"] for g in opt.param_groups]
    second = _train(em, params2, opt2, STEPS // 2, first=STEPS // 2)
    theirs += _train(torch, theirs_params, theirs_opt, STEPS // 2, first=STEPS // 2)
    for k, (a, b) in enumerate(zip(first + second, uninterrupted)):
        assert list(a) == list(b)
        for key in a:
            np.testing.assert_array_equal(a[key], b[key], err_msg=f"step {k + 1}, {key}")
    _assert_close(first + second, theirs)


@pytest.mark.parametrize(("name", "kwargs"), [("Rprop", dict(lr=0.05, etas=(0.4, 1.3))),
                                              ("Adafactor", dict(lr=0.05, weight_decay=0.1)),
                                              ("Adafactor", dict(eps=(1e-30, 1e-3), maximize=True))])
def test_float32_with_given_gradients_stays_float32_and_matches_torch(name, kwargs):
    grads = gradient_sequence(15)
    params = [em.tensor(a.astype(np.float32), requires_grad=True) for a in _initial()[:4]]
    opt = getattr(optim, name)(params, **kwargs)
    ours = feed(params, opt, grads, em.tensor)
    assert all(p.dtype == em.float32 for p in params)
    assert all(v.dtype == em.float32 for s in opt.state.values() for v in s.values())
    tparams = [torch.tensor(a.astype(np.float32), requires_grad=True) for a in _initial()[:4]]
    theirs = feed(tparams, getattr(torch.optim, name)(tparams, foreach=False, **kwargs), grads, torch.tensor)
    for k, (a_step, b_step) in enumerate(zip(ours, theirs)):
        for i, (a, b) in enumerate(zip(a_step, b_step)):
            np.testing.assert_allclose(a, b, rtol=2e-5, atol=2e-6, err_msg=f"step {k + 1}, parameter {i}")


@pytest.mark.parametrize(("name", "kwargs", "groups"), [CONFIGS[3], CONFIGS[8]], ids=["Rprop", "Adafactor"])
def test_jitted_steps_equal_eager_bit_for_bit(name, kwargs, groups):
    """Under ember.jit (without the optimizing passes) the options are graph inputs read at every call: the
    learning rate changed between steps takes effect, and every number is the eager one."""
    eager = _train(em, *_setup(em, name, kwargs, groups), 8)
    jitted = _train(em, *_setup(em, name, kwargs, groups), 8, jitted=True)
    for k, (a, b) in enumerate(zip(jitted, eager)):
        assert list(a) == list(b)
        for key in a:
            np.testing.assert_array_equal(a[key], b[key], err_msg=f"step {k + 1}, {key}")


BAD = [
    (optim.Rprop, dict(lr=-1.0), "Rprop: invalid learning rate: -1.0"),
    (optim.Rprop, dict(etas=(1.5, 1.2)), "Rprop: invalid eta values: 1.5, 1.2"),
    (optim.Rprop, dict(etas=(0.5, 0.9)), "Rprop: invalid eta values: 0.5, 0.9"),
    (optim.Adafactor, dict(lr=-0.1), "Adafactor: invalid learning rate: -0.1"),
    (optim.Adafactor, dict(beta2_decay=0.5), "Adafactor: invalid beta2_decay value: 0.5"),
    (optim.Adafactor, dict(eps=(-1e-3, 1e-3)), "Adafactor: invalid epsilon1 value: -0.001"),
    (optim.Adafactor, dict(eps=(None, -1.0)), "Adafactor: invalid epsilon2 value: -1.0"),
    (optim.Adafactor, dict(d=0.5), "Adafactor: invalid clipping threshold d: 0.5"),
    (optim.Adafactor, dict(weight_decay=-0.1), "Adafactor: invalid weight_decay value: -0.1"),
]


@pytest.mark.parametrize(("cls", "kwargs", "message"), BAD, ids=[m for _, _, m in BAD])
def test_bad_hyperparameters_raise_what_torch_raises(cls, kwargs, message):
    """A one-line ValueError naming the optimizer and the value, where PyTorch raises ValueError too."""
    with pytest.raises(ValueError, match="^" + message.replace("(", r"\(").replace(")", r"\)")):
        cls([em.zeros(2, requires_grad=True)], **kwargs)
    with pytest.raises(ValueError):
        getattr(torch.optim, cls.__name__)([torch.zeros(2, requires_grad=True)], **kwargs)


def test_a_groups_own_options_are_checked_and_switches_refused_as_the_neighbours_refuse_them():
    a, b = em.zeros(2, requires_grad=True), em.zeros(2, requires_grad=True)
    with pytest.raises(ValueError, match="Rprop: invalid eta values: 0.5, 1.0"):
        optim.Rprop([{"params": [a]}, {"params": [b], "etas": (0.5, 1.0)}])
    with pytest.raises(ValueError, match="Adafactor: invalid clipping threshold d: 0.9"):
        optim.Adafactor([{"params": [a]}, {"params": [b], "d": 0.9}])
    with pytest.raises(NotImplementedError, match="Rprop: differentiable=True"):
        optim.Rprop([a], differentiable=True)
    with pytest.raises(NotImplementedError, match="Rprop: capturable=True"):
        optim.Rprop([a], capturable=True)
    optim.Adafactor([a], foreach=True)  # accepted, and changes nothing (optim/implementation.py)


@pytest.mark.parametrize("name", ["Rprop", "Adafactor"])
def test_constructors_take_pytorchs_arguments(name):
    """The same arguments as PyTorch's, in its order, positional or keyword-only as there, with its defaults."""

    def arguments(cls):
        return [(k, p.kind, p.default) for k, p in inspect.signature(cls.__init__).parameters.items()]

    assert arguments(getattr(optim, name)) == arguments(getattr(torch.optim, name))


# --- Muon: 2-D parameters only; its Newton-Schulz iteration runs in bfloat16 ------------------------------------
MUON_SHAPES = [(6, 4), (4, 9), (16, 16)]


def _muon_run(lib, kwargs: dict, groups=None, steps: int = 8, resume_at: int | None = None,
              shapes=MUON_SHAPES) -> list[dict]:
    """Muon fed new gradients at each step, its lr scaled by 0.9 after each; at `resume_at` (Ember) the pickled
    state goes into a fresh optimizer built with lr=0.5. The parameters and momentum buffers after each step."""
    rng = np.random.default_rng(0)
    params = [lib.tensor(rng.standard_normal(s) * 0.5, requires_grad=True) for s in shapes]
    gradients = [[rng.standard_normal(s) for s in shapes] for _ in range(steps)]

    def make(**other):
        cls = torch.optim.Muon if lib is torch else optim.Muon
        return cls(_groups(params, groups), **{**kwargs, **other})

    opt = make()
    records = []
    for k, step_grads in enumerate(gradients):
        if k == resume_at:
            saved = pickle.loads(pickle.dumps(opt.state_dict()))
            opt = make(lr=0.5)
            opt.load_state_dict(saved)
        for p, g in zip(params, step_grads):
            p.grad = lib.tensor(g)
        opt.step()
        for group in opt.param_groups:
            group["lr"] *= 0.9
        records.append(_snapshot(params, opt))
    return records


MUON_CONFIGS = [
    (dict(), None),
    (dict(lr=0.02, nesterov=False, weight_decay=0.0), None),
    (dict(lr=0.01), [{"params": [0], "adjust_lr_fn": "match_rms_adamw", "momentum": 0.9, "ns_steps": 3},
                     {"params": [1, 2], "weight_decay": 0.3, "nesterov": False, "eps": 1e-5,
                      "ns_coefficients": (3.0, -3.2, 1.2)}]),
]


@pytest.mark.parametrize(("kwargs", "groups"), MUON_CONFIGS, ids=["defaults", "no-nesterov", "groups"])
def test_muon_matches_torch_at_every_step_and_resumes_from_its_state_dict(kwargs, groups):
    """On small matrices the bfloat16 iteration rounds as PyTorch's does (float32 sums, one rounding per op)."""
    theirs = _muon_run(torch, kwargs, groups)
    ours = _muon_run(em, kwargs, groups)
    _assert_close(ours, theirs, rtol=1e-12, atol=1e-15)
    _assert_close(_muon_run(em, kwargs, groups, resume_at=4), ours, rtol=0, atol=0)


def test_muon_on_large_matrices_differs_from_torch_by_bfloat16_roundings_only():
    """Larger products sum their float32 terms in another order than PyTorch's bfloat16 GEMM: the orthogonalised
    update can differ by one bfloat16 unit (2**-8 relative), the step by that much times the learning rate."""
    shapes = [(64, 200), (128, 96)]
    ours = _muon_run(em, dict(lr=0.02), steps=3, shapes=shapes)
    theirs = _muon_run(torch, dict(lr=0.02), steps=3, shapes=shapes)
    _assert_close(ours, theirs, rtol=1e-3, atol=0.02 * 2 * 2**-7)


def test_muon_refuses_what_torch_refuses():
    matrix, vector = em.zeros(2, 3, requires_grad=True), em.zeros(3, requires_grad=True)
    with pytest.raises(ValueError, match=r"Muon only supports 2D parameters .* size: \(3,\)"):
        optim.Muon([matrix, vector])
    for kwargs, message in [(dict(lr=-1.0), "Muon: invalid learning rate: -1.0"),
                            (dict(momentum=-0.1), "Muon: invalid momentum value: -0.1"),
                            (dict(weight_decay=-0.1), "Muon: invalid weight_decay value: -0.1"),
                            (dict(adjust_lr_fn="sqrt"), "Muon: adjust learning rate function 'sqrt' is not supported")]:
        with pytest.raises(ValueError, match=message):
            optim.Muon([matrix], **kwargs)
        with pytest.raises(ValueError):
            torch.optim.Muon([torch.zeros(2, 3, requires_grad=True)], **kwargs)
    opt = optim.Muon([matrix])
    matrix.grad = em.ones(2, 3)
    with pytest.raises(RuntimeError, match="Muon.step cannot run under ember.jit"):
        em.jit(lambda: opt.step())()
    assert inspect.signature(optim.Muon.__init__).parameters.keys() == \
        inspect.signature(torch.optim.Muon.__init__).parameters.keys()
