"""torch.func's vmap, jacrev, jacfwd, hessian, vjp, jvp, stack_module_state and torch.autograd.functional against
PyTorch: the same programs in both libraries, values and structures compared, and one-line errors."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import ember as em

RNG = np.random.default_rng(0)
X = RNG.standard_normal((5, 3))
W = RNG.standard_normal((3, 2))


def _layer(x, w):
    return (x @ w).tanh().sum(-1)


def _sample_loss(w, xi):
    return (xi @ w).tanh().sum()


CASES = {
    "vmap_in_dims": lambda L, x, w: L.func.vmap(lambda xi, w: (xi @ w).tanh(), in_dims=(0, None))(x, w),
    "vmap_out_dims": lambda L, x, w: L.func.vmap(lambda xi: (xi * 2, xi.sum()), in_dims=1, out_dims=(1, 0))(x),
    "vmap_nested_input": lambda L, x, w: L.func.vmap(lambda d: d["a"] * d["b"], in_dims=({"a": 0, "b": None},))(
        {"a": x, "b": w[:, 0]}),
    "vmap_negative_dim_chunked": lambda L, x, w: L.func.vmap(lambda c: c.cumsum(0), in_dims=-1, chunk_size=2)(x),
    "vmap_of_vmap": lambda L, x, w: L.func.vmap(L.func.vmap(lambda a, b: a * b, in_dims=(0, None)),
                                                in_dims=(None, 1))(x[:, 0], w),
    "per_sample_grads": lambda L, x, w: L.func.vmap(L.func.grad(_sample_loss), in_dims=(None, 0))(w, x),
    "jacrev": lambda L, x, w: L.func.jacrev(_layer, argnums=1)(x, w),
    "jacrev_argnums_tuple": lambda L, x, w: L.func.jacrev(_layer, argnums=(0, 1))(x, w),
    "jacrev_two_outputs": lambda L, x, w: L.func.jacrev(lambda w: ((x @ w).sin(), w.exp().sum()))(w),
    "jacfwd": lambda L, x, w: L.func.jacfwd(_layer)(x, w),
    "hessian": lambda L, x, w: L.func.hessian(lambda w: (x @ w).tanh().sum())(w),
    "vjp": lambda L, x, w: L.func.vjp(_layer, x, w)[1](L.tensor(np.linspace(-1, 1, 5))),
    "jvp": lambda L, x, w: L.func.jvp(_layer, (x, w), (L.ones_like(x), L.full_like(w, 0.5))),
    "autograd_jacobian": lambda L, x, w: L.autograd.functional.jacobian(lambda a, b: (a.sin() * b, a.sum()),
                                                                         (x[0], x[1])),
    "autograd_hessian": lambda L, x, w: L.autograd.functional.hessian(lambda a, b: (a ** 3 * b).sum(), (x[0], x[1])),
    "autograd_vjp": lambda L, x, w: L.autograd.functional.vjp(lambda a: a.sin(), x[0], L.tensor(X[2])),
    "autograd_jvp": lambda L, x, w: L.autograd.functional.jvp(lambda a: a.sin(), x[0], L.tensor(X[2])),
    "autograd_hvp": lambda L, x, w: L.autograd.functional.hvp(lambda a: (a ** 3).sum(), x[0], L.tensor(X[2])),
    "autograd_vhp": lambda L, x, w: L.autograd.functional.vhp(lambda a, b: (a ** 3 * b).sum(), (x[0], x[1]),
                                                               (L.tensor(X[2]), L.tensor(X[3]))),
}


def _numpy_tree(x):
    if isinstance(x, (tuple, list)):
        return tuple(_numpy_tree(t) for t in x)
    if isinstance(x, dict):
        return {k: _numpy_tree(v) for k, v in x.items()}
    return x.detach().numpy()


def _assert_same(ours, theirs) -> None:
    assert type(ours) is type(theirs), (type(ours), type(theirs))
    if isinstance(theirs, tuple):
        assert len(ours) == len(theirs)
        for o, t in zip(ours, theirs):
            _assert_same(o, t)
    elif isinstance(theirs, dict):
        assert ours.keys() == theirs.keys()
        for k in theirs:
            _assert_same(ours[k], theirs[k])
    else:
        assert ours.shape == theirs.shape
        np.testing.assert_allclose(ours, theirs, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("case", list(CASES))
def test_values_and_structure_match_torch(case) -> None:
    theirs = _numpy_tree(CASES[case](torch, torch.tensor(X), torch.tensor(W)))
    ours = _numpy_tree(CASES[case](em, em.tensor(X), em.tensor(W)))
    _assert_same(ours, theirs)


def test_top_level_vmap_and_the_lazy_autograd_functional() -> None:
    assert em.vmap is em.func.vmap
    import ember.autograd.functional as functional

    assert em.autograd.functional is functional


def test_randomness_modes() -> None:
    x = em.ones(4, 1000)
    with pytest.raises(RuntimeError, match=r"vmap: called random operation \(a random draw\) while in randomness error mode"):
        em.vmap(lambda r: em.nn.functional.dropout(r, 0.5, training=True))(x)
    same = em.vmap(lambda r: em.nn.functional.dropout(r, 0.5, training=True), randomness="same")(x).numpy()
    assert all(np.array_equal(same[0], row) for row in same[1:])
    different = em.vmap(lambda r: em.nn.functional.dropout(r, 0.5, training=True), randomness="different")(x).numpy()
    assert not np.array_equal(different[0], different[1])


def test_an_ensemble_through_stack_module_state_matches_torch() -> None:
    outs = {}
    for lib in (torch, em):
        lib.manual_seed(0)
        models = [lib.nn.Linear(3, 2).double() for _ in range(4)]
        for k, m in enumerate(models):  # the same weights in both libraries
            with lib.no_grad():
                m.weight.copy_(lib.tensor(RNG.standard_normal((2, 3)) if lib is torch else outs["w"][k]))
                m.bias.fill_(0.1 * k)
        if lib is torch:
            outs["w"] = [m.weight.detach().numpy().copy() for m in models]
        params, buffers = lib.func.stack_module_state(models)
        assert params["weight"].shape == (4, 2, 3) and params["weight"].requires_grad

        def run(p, b, x, base=models[0], lib=lib):
            return lib.func.functional_call(base, (p, b), (x,))

        y = lib.func.vmap(run, in_dims=(0, 0, None))(params, buffers, lib.tensor(X))
        y.sum().backward()
        outs[lib] = (y.detach().numpy(), params["weight"].grad.numpy())
    np.testing.assert_allclose(outs[em][0], outs[torch][0], rtol=1e-12)
    np.testing.assert_allclose(outs[em][1], outs[torch][1], rtol=1e-12)


@pytest.mark.parametrize("call, message", [
    (lambda: em.vmap(lambda a, b: a + b)(em.ones(3), em.ones(4)),
     "vmap: Expected all tensors to have the same size in the mapped dimension, got sizes [3, 4]"),
    (lambda: em.vmap(lambda a: a, in_dims=2)(em.ones(3, 4)), "in_dim must be in [-2, 2)"),
    (lambda: em.vmap(lambda a: a, in_dims=None)(em.ones(3)), "at least one input must be mapped"),
    (lambda: em.vmap(lambda a, k: a * k, in_dims=(0, 0))(em.ones(3), 2.0), "input 1 is not a tensor"),
    (lambda: em.vmap(lambda a: a, in_dims=(0, 0))(em.ones(3)), "in_dims is not compatible"),
    (lambda: em.vmap(lambda a: 1.0)(em.ones(3)), "vmap: the function must return tensors"),
    (lambda: em.vmap(lambda a: a, randomness="sometimes"), "randomness must be"),
    (lambda: em.func.jacrev(lambda a: a, argnums=3)(em.ones(2)), "argnums 3 is out of range"),
    (lambda: em.func.jvp(lambda a: a, (em.ones(2),), (em.ones(3),)), "a tangent of shape (3,) for a primal of shape"),
    (lambda: em.autograd.functional.jacobian(lambda a: a, [em.ones(2), 3.0]), "the value at index 1 has type float"),
    (lambda: em.autograd.functional.hessian(lambda a: a * 2, em.ones(2)), "single Tensor with a single element"),
])
def test_one_line_errors(call, message) -> None:
    with pytest.raises((ValueError, TypeError, RuntimeError)) as info:
        call()
    assert message in str(info.value) and len(str(info.value).splitlines()) == 1


def test_vjp_refuses_cotangents_that_do_not_fit() -> None:
    _, vjp_fn = em.func.vjp(lambda a: a * 2, em.ones(3))
    with pytest.raises(ValueError, match=r"vjp: a cotangent of shape \(2,\) for an output of shape \(3,\)"):
        vjp_fn(em.ones(2))
    with pytest.raises(ValueError, match="vjp: expected 1 cotangents"):
        vjp_fn((em.ones(3), em.ones(3)))
