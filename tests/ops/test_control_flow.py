"""torch.cond and torch.while_loop, eagerly: the branch and loop they stand for, gradients through the branch
taken and the iterations, PyTorch's checks, and under ember.jit an error (ember.compile runs the call eagerly).

PyTorch's own cond/while_loop are not called here: they import torch._dynamo, which turns off
torch.distributions' argument validation for the rest of the process (other tests compare against it); the
values PyTorch gives for these calls are written out instead (checked against PyTorch 2.13)."""

from __future__ import annotations

import numpy as np
import pytest

import ember as em


def test_cond_takes_the_branch_and_its_gradient():
    x = em.tensor([1.0, 2.0], requires_grad=True)
    y = em.cond(x.sum() > 0, lambda a: a * 2, lambda a: a - 1, (x,))
    assert y.tolist() == [2.0, 4.0]  # PyTorch: tensor([2., 4.])
    y.sum().backward()
    assert x.grad.tolist() == [2.0, 2.0]
    assert em.cond(False, lambda a, b: a + b, lambda a, b: a - b, [em.tensor(3.0), em.tensor(1.0)]).item() == 2.0
    assert em.cond(em.tensor([0]), lambda: 1, lambda: 0) == 0


def test_while_loop_runs_until_cond_fails_and_checks_the_carried_values():
    i, a = em.while_loop(lambda i, a: i < 3, lambda i, a: (i + 1, a * 2), (em.tensor(0), em.tensor([1.0, 2.0])))
    assert i.item() == 3 and a.tolist() == [8.0, 16.0]  # PyTorch: (tensor(3), tensor([ 8., 16.]))
    x = em.tensor([0.5], requires_grad=True)
    (_, out) = em.while_loop(lambda k, v: k < 2, lambda k, v: (k + 1, v * v), (em.tensor(0), x))
    out.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [4 * 0.5 ** 3])  # d(x^4)/dx
    with pytest.raises(ValueError, match=r"while_loop: body_fn's output 1 is \(2, 2\) float32; the carried input is "
                                         r"\(2,\) float32"):
        em.while_loop(lambda k, v: k < 1, lambda k, v: (k + 1, v.expand(2, 2)), (em.tensor(0), em.ones(2)))
    with pytest.raises(ValueError, match="while_loop: body_fn returned 1 values for 2 carried inputs"):
        em.while_loop(lambda k, v: k < 1, lambda k, v: k + 1, (em.tensor(0), em.ones(2)))


def test_bad_predicates_and_operands_are_named():
    with pytest.raises(RuntimeError, match=r"cond: expected pred to be bool or single-element tensor, but got a "
                                           r"tensor of shape \(2,\)"):
        em.cond(em.tensor([True, True]), lambda: 1, lambda: 0)
    with pytest.raises(RuntimeError, match="cond: expected true_fn and false_fn to be callable"):
        em.cond(True, 1, lambda: 0)
    with pytest.raises(RuntimeError, match="while_loop: expected carried_inputs to be a tuple or list"):
        em.while_loop(lambda v: False, lambda v: v, em.ones(2))
    with pytest.raises(RuntimeError, match="cond: expected operands to be a tuple or list"):
        em.cond(True, lambda a: a, lambda a: a, em.ones(2))
    with pytest.raises(RuntimeError, match="while_loop: expected pred to be bool or single-element tensor"):
        em.while_loop(lambda v: v > 0, lambda v: (v - 1,), (em.ones(3),))


def test_under_jit_an_error_and_compile_runs_it_eagerly():
    def f(x):
        return em.cond(x.sum() > 0, lambda a: a * 2, lambda a: a - 1, (x,))

    with pytest.raises(em.errors.ConcretizationError, match="cond: the predicate is symbolic"):
        em.jit(f)(em.ones(2))
    assert em.compile(f)(em.ones(2)).tolist() == [2.0, 2.0]
    assert em.compile(f)(-em.ones(2)).tolist() == [-2.0, -2.0]
