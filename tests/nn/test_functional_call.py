"""functional_call and ember.func against torch.func: a module run with other parameters (gradients with respect to
them, the module's own tensors untouched and back in place after an error), tied weights, strict mode, and
grad / grad_and_value of functions of several arguments."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.func as torch_func

import ember as em
from tests.nn.helpers import copy_weights

functional_call = em.nn.utils.stateless.functional_call


def _pair():
    theirs = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.BatchNorm1d(4), torch.nn.Linear(4, 2))
    ours = em.nn.Sequential(em.nn.Linear(3, 4), em.nn.BatchNorm1d(4), em.nn.Linear(4, 2))
    copy_weights(ours, theirs)
    return ours, theirs


def test_functional_call_matches_torch_func() -> None:
    ours, theirs = _pair()
    rng = np.random.default_rng(0)
    new = {k: rng.standard_normal(tuple(v.shape)).astype(np.float32) for k, v in theirs.named_parameters()}
    x = rng.standard_normal((5, 3)).astype(np.float32)
    before = {k: v.detach().numpy().copy() for k, v in ours.named_parameters()}
    for step in range(2):  # the running statistics (the module's own buffers) change in between
        mine = {k: em.tensor(v * (step + 1), requires_grad=True) for k, v in new.items()}
        torch_params = {k: torch.tensor(v * (step + 1), requires_grad=True) for k, v in new.items()}
        out = functional_call(ours, mine, (em.tensor(x),))
        tout = torch_func.functional_call(theirs, torch_params, (torch.tensor(x),))
        np.testing.assert_allclose(out.detach().numpy(), tout.detach().numpy(), rtol=1e-5, atol=1e-6)
        out.sum().backward()
        tout.sum().backward()
        for k in new:
            np.testing.assert_allclose(mine[k].grad.numpy(), torch_params[k].grad.numpy(), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(ours[1].running_var.numpy(), theirs[1].running_var.numpy(), rtol=1e-6)
    for k, v in ours.named_parameters():
        np.testing.assert_array_equal(v.detach().numpy(), before[k])
        assert v.grad is None


def test_grad_with_respect_to_a_parameter_dict() -> None:
    ours, theirs = _pair()
    ours.eval()
    theirs.eval()
    x = np.random.default_rng(1).standard_normal((4, 3)).astype(np.float32)
    params = {k: v.detach() for k, v in ours.named_parameters()}
    grads = em.func.grad(lambda p: functional_call(ours, p, (em.tensor(x),)).square().sum())(params)
    torch_params = {k: v.detach() for k, v in theirs.named_parameters()}
    want = torch_func.grad(lambda p: torch_func.functional_call(theirs, p, (torch.tensor(x),)).square().sum())(
        torch_params)
    assert sorted(grads) == sorted(want)
    for k in want:
        np.testing.assert_allclose(grads[k].numpy(), want[k].numpy(), rtol=1e-5, atol=1e-6)


def test_tied_weights_strict_mode_and_restoring_after_an_error() -> None:
    shared = em.nn.Linear(2, 2, bias=False)
    model = em.nn.Sequential(shared, shared)
    weight = em.eye(2) * 2
    out = functional_call(model, {"0.weight": weight}, (em.ones(1, 2),))
    np.testing.assert_allclose(out.numpy(), [[4.0, 4.0]])  # both uses took the given weight
    with pytest.raises(ValueError, match="functional_call: strict, and no tensor was given for 1.bias"):
        functional_call(em.nn.Sequential(em.nn.Linear(2, 2), em.nn.Linear(2, 2)), {"0.weight": weight,
                                                                                      "0.bias": em.zeros(2),
                                                                                      "1.weight": weight},
                        (em.ones(1, 2),), strict=True)
    with pytest.raises(ValueError, match="functional_call: Linear has no parameter or buffer 'scale'"):
        functional_call(shared, {"scale": weight}, (em.ones(1, 2),))
    original = shared.weight
    with pytest.raises(em.ShapeError, match="linear: input"):
        functional_call(shared, {"weight": em.ones(3, 3)}, (em.ones(1, 2),))
    assert shared.weight is original


def test_grad_and_value_matches_torch_func() -> None:
    x, y = np.array([1.0, 2.0]), np.array([3.0, -1.0])
    g, v = em.func.grad_and_value(lambda a, b: (a * b).sum() ** 2, argnums=(0, 1))(em.tensor(x), em.tensor(y))
    tg, tv = torch_func.grad_and_value(lambda a, b: (a * b).sum() ** 2, argnums=(0, 1))(torch.tensor(x),
                                                                                       torch.tensor(y))
    assert float(v) == float(tv)
    for ours, theirs in zip(g, tg):
        np.testing.assert_allclose(ours.numpy(), theirs.numpy())


@pytest.mark.parametrize("outer_requires_grad", [False, True])
def test_grad_has_aux_returns_aux_as_torch_func(outer_requires_grad) -> None:
    # the auxiliary outputs are cut from the function's graph, as the value is, unless an outer differentiation
    # holds the input (then both libraries keep them on its graph)
    def f(lib):
        return lambda x: ((x ** 2).sum(), {"double": x * 2, "rest": [x.sin()]})

    x = np.array([1.0, 2.0])
    ex = em.tensor(x, requires_grad=outer_requires_grad)
    tx = torch.tensor(x, requires_grad=outer_requires_grad)
    g, aux = em.func.grad(f(em), has_aux=True)(ex)
    tg, taux = torch_func.grad(f(torch), has_aux=True)(tx)
    np.testing.assert_allclose(g.detach().numpy(), tg.detach().numpy())
    for ours, theirs in ((aux["double"], taux["double"]), (aux["rest"][0], taux["rest"][0])):
        np.testing.assert_allclose(ours.detach().numpy(), theirs.detach().numpy())
        assert ours.requires_grad == theirs.requires_grad == outer_requires_grad
    (gv, (value, aux2)) = em.func.grad_and_value(f(em), has_aux=True)(ex)
    assert aux2["double"].requires_grad == outer_requires_grad and value.requires_grad == outer_requires_grad
