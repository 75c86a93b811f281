"""Custom autograd functions (`ember.autograd.Function`) against PyTorch's `torch.autograd.Function`: the same class
body run in both libraries, values and gradients compared (first and second order, finite differences too), the
ctx interface, training with a straight-through estimator while the data and learning rate change, ember.jit, and
one-line errors for what PyTorch refuses."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import ember as em


def functions(lib):
    """The same custom functions written against `lib` (torch or ember)."""
    base = lib.autograd.Function

    class Exp(base):
        @staticmethod
        def forward(ctx, x):
            y = x.exp()
            ctx.save_for_backward(y)
            return y

        @staticmethod
        def backward(ctx, grad):
            (y,) = ctx.saved_tensors
            return grad * y

    class ScaledProduct(base):  # tensors, a number between them, two outputs (one not differentiable)
        @staticmethod
        def forward(ctx, x, scale, w):
            ctx.scale = scale
            ctx.save_for_backward(x, w)
            positive = x > 0
            ctx.mark_non_differentiable(positive)
            return x * scale * w, positive

        @staticmethod
        def backward(ctx, grad, grad_positive):
            x, w = ctx.saved_tensors
            return grad * ctx.scale * w, None, (grad * ctx.scale * x).sum(0)

    class Cube(base):  # PyTorch 2's form: forward without ctx, setup_context beside it
        @staticmethod
        def forward(x, power=3.0):
            return x ** power

        @staticmethod
        def setup_context(ctx, inputs, output):
            x, power = inputs
            ctx.save_for_backward(x)
            ctx.power = power

        @staticmethod
        def backward(ctx, grad):
            (x,) = ctx.saved_tensors
            return grad * ctx.power * x ** (ctx.power - 1), None

    class STERound(base):  # a straight-through estimator: round forward, identity backward
        @staticmethod
        def forward(ctx, x):
            return x.round()

        @staticmethod
        def backward(ctx, grad):
            return grad

    class ScaleInPlace(base):
        @staticmethod
        def forward(ctx, x):
            x.mul_(2.0)
            ctx.mark_dirty(x)
            return x

        @staticmethod
        def backward(ctx, grad):
            return grad * 2.0

    class Split(base):  # two outputs; backward sees None or zeros for the unused one
        @staticmethod
        def forward(ctx, x, materialize):
            ctx.set_materialize_grads(materialize)
            return x * 2.0, x * 3.0

        @staticmethod
        def backward(ctx, g1, g2):
            ctx.seen = (g1 is None, g2 is None)
            total = g1 * 2.0 if g1 is not None else 0.0
            return (total + g2 * 3.0 if g2 is not None else total), None

    return Exp, ScaledProduct, Cube, STERound, ScaleInPlace, Split


TORCH_FNS, EMBER_FNS = functions(torch), functions(em)
RNG = np.random.default_rng(0)
X = RNG.standard_normal((3, 4))
W = RNG.standard_normal(4)


def _both(build):
    """build(lib, fns, x, w) -> tensors, run in both libraries on float64 leaves; the numpy results of each."""
    out = {}
    for lib, fns in ((torch, TORCH_FNS), (em, EMBER_FNS)):
        x, w = lib.tensor(X, requires_grad=True), lib.tensor(W, requires_grad=True)
        out[lib] = [t.detach().numpy() if t is not None else None for t in build(lib, fns, x, w)]
    return out[torch], out[em]


def _close(theirs, ours) -> None:
    assert len(theirs) == len(ours)
    for t, o in zip(theirs, ours):
        assert (t is None) == (o is None)
        if t is not None:
            np.testing.assert_allclose(o, t, rtol=1e-12, atol=1e-12)


def test_values_and_first_and_second_derivatives_match_torch() -> None:
    def build(lib, fns, x, w):
        exp, scaled, cube = fns[0], fns[1], fns[2]
        y, positive = scaled.apply(exp.apply(x), 2.5, w)
        loss = (cube.apply(y) + y).sum()
        gx, gw = lib.autograd.grad(loss, (x, w), create_graph=True)
        (hx,) = lib.autograd.grad((gx * gx).sum() + gw.sum(), x)
        return y, positive.to(lib.float64), gx, gw, hx

    theirs, ours = _both(build)
    _close(theirs, ours)


def test_gradients_against_finite_differences() -> None:
    exp, scaled, cube = EMBER_FNS[0], EMBER_FNS[1], EMBER_FNS[2]

    def f(x, w):
        return cube.apply(scaled.apply(exp.apply(x), 0.5, w)[0], 2.0)

    assert em.autograd.gradcheck(f, (em.tensor(X, requires_grad=True), em.tensor(W, requires_grad=True)))


def test_apply_takes_keywords_as_torch() -> None:
    # with setup_context, every argument is bound to its position, defaults included; without, keywords go to forward
    class Scale(em.autograd.Function):
        @staticmethod
        def forward(ctx, x, k=2.0):
            ctx.k = k
            return x * k

        @staticmethod
        def backward(ctx, grad):
            return grad * ctx.k, None  # one more than the positional inputs: None, allowed as in PyTorch

    cube = EMBER_FNS[2]
    x = em.tensor(X, requires_grad=True)
    cube.apply(x, power=2.0).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), 2 * X)
    x.grad = None
    cube.apply(x).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), 3 * X ** 2)
    x.grad = None
    Scale.apply(x, k=3.0).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), np.full(X.shape, 3.0))
    with pytest.raises(TypeError, match="Cube.apply"):
        cube.apply(x, exponent=2.0)


def test_ctx_needs_input_grad_and_grad_fn_name() -> None:
    seen = {}

    class Probe(em.autograd.Function):
        @staticmethod
        def forward(ctx, a, b, c):
            seen["needs"] = ctx.needs_input_grad
            return a * b

        @staticmethod
        def backward(ctx, grad):
            return grad, grad, None

    y = Probe.apply(em.tensor(X, requires_grad=True), em.tensor(X), "label")
    assert seen["needs"] == (True, False, False)
    assert y.grad_fn.name == "Probe" and repr(y.grad_fn) == "<ProbeBackward>"
    assert y.requires_grad and not y.is_leaf


def test_no_node_without_gradients() -> None:
    exp = EMBER_FNS[0]
    y = exp.apply(em.tensor(X))
    assert not y.requires_grad and y.grad_fn is None
    with em.no_grad():
        y = exp.apply(em.tensor(X, requires_grad=True))
    assert not y.requires_grad


@pytest.mark.parametrize("materialize", [True, False])
def test_materialize_grads_as_torch(materialize) -> None:
    def build(lib, fns, x, w):
        a, _b = fns[5].apply(x, materialize)
        (g,) = lib.autograd.grad(a.sum(), x)
        return (g,)

    theirs, ours = _both(build)
    _close(theirs, ours)
    x = em.tensor(X, requires_grad=True)
    a, _b = EMBER_FNS[5].apply(x, materialize)
    a.sum().backward()
    assert a.grad_fn.attrs["ctx"].seen == (False, not materialize)


def test_mark_dirty_modifies_the_input_and_records_it() -> None:
    def build(lib, fns, x, w):
        h = x * 1.0  # not a leaf: an in-place write into it is allowed
        out = fns[4].apply(h)
        (g,) = lib.autograd.grad((out * out).sum(), x)
        return out, h, g

    theirs, ours = _both(build)
    _close(theirs, ours)
    with pytest.raises(RuntimeError, match="leaf tensor that requires grad"):
        EMBER_FNS[4].apply(em.tensor(X, requires_grad=True))


def test_an_input_returned_as_it_is_gets_the_custom_gradient() -> None:
    class Clip(em.autograd.Function):  # identity forward, clipped gradient backward
        @staticmethod
        def forward(ctx, x):
            return x

        @staticmethod
        def backward(ctx, grad):
            return grad.clamp(-0.5, 0.5)

    x = em.tensor(X, requires_grad=True)
    y = Clip.apply(x)
    assert y is not x and y.grad_fn is not None and x.grad_fn is None
    (y * 3.0).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), np.full(X.shape, 0.5))


def test_once_differentiable_runs_once_and_refuses_a_second_derivative() -> None:
    class Square(em.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        @em.autograd.function.once_differentiable
        def backward(ctx, grad):
            (x,) = ctx.saved_tensors
            return em.tensor(2.0 * x.detach().numpy() * grad.detach().numpy())  # NumPy: not differentiable

    x = em.tensor(X, requires_grad=True)
    (g,) = em.autograd.grad(Square.apply(x).sum(), x)
    np.testing.assert_allclose(g.numpy(), 2 * X)
    # the gradient reaching Square's output depends on x (it is x), so the graph create_graph builds holds Square's
    (g,) = em.autograd.grad((Square.apply(x) * x).sum(), x, create_graph=True)
    assert g.requires_grad
    with pytest.raises(RuntimeError, match="differentiate twice a function that was marked with @once_differentiable"):
        em.autograd.grad(g.sum(), x)


def test_straight_through_training_matches_torch_as_data_and_lr_change() -> None:
    results = {}
    for lib, fns in ((torch, TORCH_FNS), (em, EMBER_FNS)):
        rng = np.random.default_rng(1)
        w = lib.tensor(rng.standard_normal((4, 3)), requires_grad=True)
        opt = lib.optim.SGD([w], lr=0.1, momentum=0.9)
        losses = []
        for step in range(6):
            x = lib.tensor(rng.standard_normal((8, 4)) * (1 + step))
            y = lib.tensor(rng.standard_normal((8, 3)))
            for group in opt.param_groups:
                group["lr"] = 0.1 / (1 + step)
            opt.zero_grad()
            loss = ((fns[3].apply((x @ w) * 4.0) - y) ** 2).mean()
            loss.backward()
            opt.step()
            losses.append(loss.item())
        results[lib] = (losses, w.detach().numpy())
    np.testing.assert_allclose(results[em][0], results[torch][0], rtol=1e-12)
    np.testing.assert_allclose(results[em][1], results[torch][1], rtol=1e-12)


def test_a_jitted_step_with_a_custom_function_equals_eager() -> None:
    ste = EMBER_FNS[3]

    def run(jit: bool):
        rng = np.random.default_rng(2)
        w = em.tensor(rng.standard_normal((4, 3)).astype(np.float32), requires_grad=True)
        opt = em.optim.SGD([w], lr=0.05)

        def step(x, y):
            opt.zero_grad()
            loss = ((ste.apply((x @ w) * 4.0) - y) ** 2).mean()
            loss.backward()
            opt.step()
            return loss

        step = em.jit(step) if jit else step
        losses = []
        for _ in range(4):
            x = em.tensor(rng.standard_normal((5, 4)).astype(np.float32))
            losses.append(float(step(x, em.tensor(rng.standard_normal((5, 3)).astype(np.float32)))))
        return losses, w.detach().numpy()

    (eager_losses, eager_w), (jit_losses, jit_w) = run(False), run(True)
    assert eager_losses == jit_losses
    np.testing.assert_array_equal(eager_w, jit_w)


def test_meta_tensors_run_the_forward_rule() -> None:
    y = EMBER_FNS[0].apply(em.empty((2, 3), device="meta", requires_grad=True))
    assert y.device.type == "meta" and tuple(y.shape) == (2, 3) and y.requires_grad


def _raises_like_torch(build, match: str, error=RuntimeError) -> None:
    for lib in (torch, em):
        with pytest.raises(error) as info:
            build(lib)
        if lib is em:
            assert len(str(info.value).splitlines()) == 1
            assert match in str(info.value), str(info.value)


def _one_off(lib, forward, backward):
    return type("Bad", (lib.autograd.Function,), {"forward": staticmethod(forward), "backward": staticmethod(backward)})


def test_backward_returning_the_wrong_number_of_gradients() -> None:
    def build(lib):
        bad = _one_off(lib, lambda ctx, a, b: a * b, lambda ctx, g: g)
        bad.apply(lib.tensor(X, requires_grad=True), lib.tensor(X, requires_grad=True)).sum().backward()

    _raises_like_torch(build, "function BadBackward returned an incorrect number of gradients (expected 2, got 1)")


def test_backward_returning_a_gradient_for_a_number() -> None:
    def build(lib):
        bad = _one_off(lib, lambda ctx, a, k: a * k, lambda ctx, g: (g, g))
        bad.apply(lib.tensor(X, requires_grad=True), 2.0).sum().backward()

    _raises_like_torch(build, "the corresponding forward input was not a tensor")


def test_backward_returning_a_gradient_of_the_wrong_shape() -> None:
    def build(lib):
        bad = _one_off(lib, lambda ctx, a: a * 2, lambda ctx, g: g[:, :2])
        bad.apply(lib.tensor(X, requires_grad=True)).sum().backward()

    _raises_like_torch(build, "function BadBackward returned an invalid gradient at index 0 - got [3, 2] but expected "
                              "shape compatible with [3, 4]")


def test_a_saved_tensor_modified_in_place() -> None:
    def build(lib):
        x = lib.tensor(X, requires_grad=True)
        h = x * 1.0
        y = TORCH_FNS[1].apply(h, 2.0, lib.tensor(W))[0] if lib is torch else EMBER_FNS[1].apply(h, 2.0, em.tensor(W))[0]
        h.add_(1.0)
        y.sum().backward()

    _raises_like_torch(build, "modified by an in-place operation: saved tensor 0 of ScaledProductBackward")


def test_backward_twice_without_retain_graph() -> None:
    def build(lib):
        y = (TORCH_FNS if lib is torch else EMBER_FNS)[0].apply(lib.tensor(X, requires_grad=True)).sum()
        y.backward()
        y.backward()

    _raises_like_torch(build, "backward through the graph a second time")


def test_missing_backward_and_legacy_call() -> None:
    class NoBackward(em.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

    with pytest.raises(NotImplementedError, match="implement either the backward or vjp"):
        NoBackward.apply(em.tensor(X, requires_grad=True)).sum().backward()
    with pytest.raises(RuntimeError, match="Legacy autograd function with non-static forward"):
        NoBackward()(em.tensor(X))
    with pytest.raises(TypeError, match="save_for_backward can only save tensors or None, but argument 0 is of type int"):
        em.autograd.function.FunctionCtx(()).save_for_backward(3)


def test_a_rule_written_as_vjp() -> None:
    class Double(em.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2.0

        @staticmethod
        def vjp(ctx, grad):
            return grad * 2.0

    x = em.tensor(X, requires_grad=True)
    Double.apply(x).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.full(X.shape, 2.0))


def test_backward_returning_a_number_as_a_gradient() -> None:
    bad = _one_off(em, lambda ctx, a: a * 2, lambda ctx, g: 1.0)
    with pytest.raises(RuntimeError, match="returned a float as the gradient at position 0, but a gradient must be a "
                                           "tensor or None"):
        bad.apply(em.tensor(X, requires_grad=True)).sum().backward()
