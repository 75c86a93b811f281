"""PyTorch's implementation switches (foreach, fused, capturable, differentiable): the same keyword arguments as
PyTorch's optimizers, the same values whichever implementation runs, and one-line errors for what Ember cannot do."""

import inspect

import numpy as np
import pytest

import ember as em
from ember.graph import codegen

from .compiled_passes import record_compiled_passes

SWITCHES = ("foreach", "fused", "capturable", "differentiable")
NAMES = ["SGD", "Adam", "AdamW", "Adagrad", "RMSprop", "Adadelta", "Adamax", "NAdam", "RAdam", "ASGD", "SparseAdam",
         "LBFGS"]


@pytest.mark.parametrize("name", NAMES)
def test_the_switches_are_the_ones_pytorch_takes(name):
    torch = pytest.importorskip("torch")
    theirs = {k for k in SWITCHES if k in inspect.signature(getattr(torch.optim, name).__init__).parameters}
    ours = {k for k in SWITCHES if k in inspect.signature(getattr(em.optim, name).__init__).parameters}
    assert ours == theirs


def _train(make, steps=6, dtype=np.float32):
    """Parameters after each step of a small least-squares problem; the learning rate changes between steps."""
    rng = np.random.default_rng(0)
    w = em.tensor((rng.standard_normal((64, 300)) * 0.1).astype(dtype), requires_grad=True)
    b = em.tensor(np.zeros(300, dtype), requires_grad=True)
    x, y = em.tensor(rng.standard_normal((32, 64)).astype(dtype)), em.tensor(rng.standard_normal((32, 300)).astype(dtype))
    opt = make([w, b])
    seen = []
    for _ in range(steps):
        opt.zero_grad()
        ((x @ w + b - y) ** 2).mean().backward()
        opt.step()
        for group in opt.param_groups:
            group["lr"] *= 0.7
        seen.append((w.detach().numpy().copy(), b.detach().numpy().copy()))
    return seen


MAKERS = {
    "SGD": lambda fused, foreach=None: lambda p: em.optim.SGD(p, lr=0.1, momentum=0.9, nesterov=True, weight_decay=1e-3,
                                                              fused=fused, foreach=foreach),
    "Adam": lambda fused, foreach=None: lambda p: em.optim.Adam(p, lr=0.01, weight_decay=1e-3, fused=fused,
                                                                foreach=foreach),
    "AdamW": lambda fused, foreach=None: lambda p: em.optim.AdamW(p, lr=0.01, fused=fused, foreach=foreach),
    "Adam-amsgrad": lambda fused, foreach=None: lambda p: em.optim.Adam(p, lr=0.01, amsgrad=True, fused=fused,
                                                                        foreach=foreach),
}


@pytest.mark.parametrize("name", list(MAKERS))
def test_every_implementation_gives_the_same_values(name, monkeypatch):
    """fused=None and True run the compiled pass, fused=False the tensor ops: equal bit for bit at every step, with
    the learning rate changed between steps; foreach=True changes nothing."""
    pytest.importorskip("numba")
    calls = record_compiled_passes(monkeypatch)
    results = {}
    for fused in (None, True, False):
        calls.clear()
        results[fused] = _train(MAKERS[name](fused))
        compiled = bool(calls)
        assert compiled == (fused is not False), fused
    results["foreach"] = _train(MAKERS[name](None, foreach=True))
    for other in (True, False, "foreach"):
        for k, (a, b) in enumerate(zip(results[None], results[other])):
            np.testing.assert_array_equal(a[0], b[0], err_msg=f"{other} step {k}")
            np.testing.assert_array_equal(a[1], b[1], err_msg=f"{other} step {k}")


@pytest.mark.parametrize("name", list(MAKERS))
def test_fused_under_jit_matches_eager(name):
    """Under ember.jit a fused=True update is traced as tensor ops (the jit fuses them itself): no error, and the
    same values as the eager compiled pass to float32 rounding, with the learning rate changed between calls."""
    pytest.importorskip("numba")
    rng = np.random.default_rng(1)
    data = [em.tensor(rng.standard_normal(s).astype(np.float32)) for s in ((16, 8), (16, 4))]
    runs = []
    for jit in (False, True):
        model = em.nn.Linear(8, 4)
        model.load_state_dict({"weight": em.ones(4, 8) * 0.1, "bias": em.zeros(4)})
        opt = MAKERS[name](True)(list(model.parameters()))

        def step(x, y):
            opt.zero_grad()
            loss = ((model(x) - y) ** 2).mean()
            loss.backward()
            opt.step()
            return loss

        run = em.jit(step) if jit else step
        for _ in range(5):
            run(*data)
            opt.param_groups[0]["lr"] *= 0.5
        runs.append([p.detach().numpy().copy() for p in model.parameters()])
    for a, b in zip(*runs):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_switches_are_kept_in_the_state_dict_and_old_state_dicts_still_load():
    w = em.zeros(3, requires_grad=True)
    opt = em.optim.Adam([w], fused=False, foreach=True)
    groups = opt.state_dict()["param_groups"]
    assert (groups[0]["fused"], groups[0]["foreach"], groups[0]["capturable"], groups[0]["differentiable"]) == \
        (False, True, False, False)
    state = opt.state_dict()
    for key in SWITCHES:  # a state dict saved before the switches existed
        del state["param_groups"][0][key]
    fresh = em.optim.Adam([w])
    fresh.load_state_dict(state)
    w.grad = em.ones(3)
    fresh.step()
    np.testing.assert_allclose(w.detach().numpy(), -1e-3 * np.ones(3), rtol=1e-5)


@pytest.mark.parametrize(("make", "error", "message"), [
    (lambda p: em.optim.Adam(p, fused=True, foreach=True), RuntimeError, "Adam: fused=True and foreach=True cannot"),
    (lambda p: em.optim.SGD(p, lr=0.1, fused="yes"), TypeError, "SGD: fused must be None or a bool, got 'yes'"),
    (lambda p: em.optim.RMSprop(p, foreach=1), TypeError, "RMSprop: foreach must be None or a bool, got 1"),
    (lambda p: em.optim.Adagrad(p, fused=True), NotImplementedError, "Adagrad: fused=True: Ember has no compiled"),
    (lambda p: em.optim.AdamW(p, capturable=True), NotImplementedError, r"AdamW: capturable=True \(CUDA graph"),
    (lambda p: em.optim.NAdam(p, differentiable=True), NotImplementedError, "NAdam: differentiable=True"),
    (lambda p: em.optim.SGD([{"params": p, "fused": True}], lr=0.1, foreach=True), RuntimeError,
     "SGD: fused=True and foreach=True"),  # a group's own switch is checked too
])
def test_what_ember_cannot_do_is_refused_in_one_line(make, error, message):
    with pytest.raises(error, match=message):
        make([em.zeros(3, requires_grad=True)])


def test_fused_true_names_what_stops_the_compiled_pass():
    pytest.importorskip("numba")
    w = em.zeros(4, dtype=em.float16, requires_grad=True)
    opt = em.optim.Adam([w], fused=True)
    w.grad = em.ones(4, dtype=em.float16)
    with pytest.raises(RuntimeError, match="Adam: fused=True could not update .* float32 or float64 .* float16"):
        opt.step()
    sgd = em.optim.SGD([w], lr=0.1, momentum=0.9, fused=True)
    sgd.step()  # the first step makes the momentum buffer with tensor ops, as PyTorch's does
    with pytest.raises(RuntimeError, match="SGD: fused=True could not update .* float32 or float64 .* float16"):
        sgd.step()
    v = em.zeros(4, requires_grad=True)
    v.grad = em.ones(4)
    tensor_lr = em.optim.AdamW([v], lr=em.tensor(0.01), fused=True)
    with pytest.raises(RuntimeError, match="AdamW: fused=True could not update .* options must be Python numbers"):
        tensor_lr.step()


def test_fused_true_without_the_compiled_kernels_is_refused():
    try:
        codegen.set_backend("numpy")
        with pytest.raises(RuntimeError, match=r"SGD: fused=True needs the compiled kernels of the `jit` extra"):
            em.optim.SGD([em.zeros(3, requires_grad=True)], lr=0.1, fused=True)
    finally:
        codegen.set_backend(None)
