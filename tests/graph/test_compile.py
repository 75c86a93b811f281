"""ember.compile: PyTorch's torch.compile entry point over ember.jit, on functions and modules."""

import numpy as np
import pytest

import ember as em


def _model():
    em.manual_seed(0)
    return em.nn.Sequential(em.nn.Linear(4, 8), em.nn.Tanh(), em.nn.Linear(8, 2))


def _entries(compiled):
    jitted = compiled.__dict__["_compiled_call"] if isinstance(compiled, em.nn.Module) else compiled
    return jitted.entries()


def test_a_compiled_module_gives_the_modules_results_and_state_under_its_orig_mod():
    model = _model()
    compiled = em.compile(model)
    x = em.randn(5, 4)
    with em.no_grad():
        np.testing.assert_allclose(compiled(x).numpy(), model(x).numpy(), rtol=1e-6)
        compiled(em.randn(5, 4))
    assert [e.eager for e in _entries(compiled)] == [False]  # inference runs the compiled program
    assert compiled._orig_mod is model and list(compiled.parameters()) == list(model.parameters())
    # PyTorch's OptimizedModule names its state dict's entries the same way
    assert list(compiled.state_dict()) == ["_orig_mod." + k for k in model.state_dict()]
    linear = em.compile(em.nn.Linear(2, 3))
    assert linear.out_features == 3 and linear.training  # other attributes come from the module


def test_the_forward_of_a_training_loop_runs_eagerly_so_backward_works():
    model, ref = _model(), _model()
    compiled = em.compile(model)
    x, y = em.randn(5, 4), em.randn(5, 2)
    for m in (compiled, ref):
        ((m(x) - y) ** 2).mean().backward()
    for p, q in zip(model.parameters(), ref.parameters()):
        np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=1e-6)
    assert [e.eager for e in _entries(compiled)] == [True]
    compiled(x)  # the same signature does not trace again
    assert len(_entries(compiled)) == 1


def test_a_whole_training_step_is_compiled():
    model, ref = _model(), _model()
    opt, ref_opt = em.optim.SGD(model.parameters(), lr=0.1), em.optim.SGD(ref.parameters(), lr=0.1)

    def step(m, o, x, y):
        o.zero_grad()
        loss = ((m(x) - y) ** 2).mean()
        loss.backward()
        o.step()
        return loss

    compiled_step = em.compile(lambda x, y: step(model, opt, x, y))
    for _ in range(3):
        x, y = em.randn(5, 4), em.randn(5, 2)
        np.testing.assert_allclose(compiled_step(x, y).item(), step(ref, ref_opt, x, y).item(), rtol=1e-5)
    assert not any(e.eager for e in compiled_step.entries())
    for p, q in zip(model.parameters(), ref.parameters()):
        np.testing.assert_allclose(p.detach().numpy(), q.detach().numpy(), rtol=1e-5, atol=1e-6)


def test_decorator_forms_and_options():
    @em.compile
    def f(x):
        return (x * 2).sum()

    @em.compile(mode="max-autotune", dynamic=True, backend="eager", options={})
    def g(x):
        return x.exp()

    assert f(em.ones(3)).item() == 6.0 and g(em.zeros(2)).tolist() == [1.0, 1.0]
    assert g.passes is False and f.passes is None  # backend="eager": no optimizing passes
    model = _model()
    assert em.compile(model, disable=True) is model
    with pytest.raises(ValueError, match="compile: unknown mode 'fastest'"):
        em.compile(f, mode="fastest")
    with pytest.raises(ValueError, match="compile: unknown backend 'tvm'"):
        em.compile(f, backend="tvm")
    with pytest.raises(TypeError, match="compile: expected a function or an nn.Module, got int"):
        em.compile(3)


def test_data_dependent_control_flow_runs_eagerly_unless_fullgraph():
    def f(x):
        return x * 2 if x.sum() > 0 else -x

    eager_ok = em.compile(f)
    assert eager_ok(em.ones(2)).tolist() == [2.0, 2.0] and eager_ok(-em.ones(2)).tolist() == [1.0, 1.0]
    strict = em.compile(f, fullgraph=True)
    with pytest.raises(em.ConcretizationError):
        strict(em.ones(2))


def test_a_failed_trace_leaves_no_symbolic_gradient_behind():
    w = em.randn(3, requires_grad=True)

    @em.jit
    def f(x):
        (w * x).sum().backward()
        return x if x.sum() > 0 else -x  # needs a value: the trace fails after backward wrote w.grad

    with pytest.raises(em.ConcretizationError):
        f(em.ones(3))
    assert w.grad is None
