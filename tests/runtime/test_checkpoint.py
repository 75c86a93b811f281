"""Rematerialisation: em.checkpoint gives the plain gradients (eager and jit) while saving less, and the
"sqrt" plan policy makes a deep MLP's activation memory grow sublinearly with identical results."""

import numpy as np
import pytest

import ember as em
from ember.autograd import Node
from ember.runtime import set_remat
from ember.runtime.memory_check import validate

from ._graphs import plan_of


def _block(width=8):
    nn = em.nn
    return nn.Sequential(nn.Linear(width, width), nn.Tanh(), nn.Linear(width, width))


def _grads(params):
    return [p.grad.numpy().copy() for p in params]


def _zero(params):
    for p in params:
        p.grad = None


def test_eager_gradients_equal_plain_gradients():
    em.manual_seed(0)
    blk = _block()
    x = em.randn(5, 8, requires_grad=True)
    params = list(blk.parameters()) + [x]

    def f(t, scale):  # a non-tensor argument passes through
        return blk(t).relu() * scale

    y = em.checkpoint(f, x, 3.0)
    assert y.grad_fn.op.name == "checkpoint"
    (y * y).sum().backward()
    got = _grads(params)
    _zero(params)
    y2 = f(x, 3.0)
    (y2 * y2).sum().backward()
    for a, b in zip(got, _grads(params)):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)


def test_multiple_outputs_and_autograd_grad():
    em.manual_seed(1)
    w = em.randn(4, 4, requires_grad=True)
    x = em.randn(3, 4, requires_grad=True)

    def f(t):
        h = (t @ w).sin()
        return h, h.exp().sum(1)

    a, b = em.checkpoint(f, x)
    gx, gw = em.autograd.grad(a.sum() + b.sum(), [x, w])
    a2, b2 = f(x)
    gx2, gw2 = em.autograd.grad(a2.sum() + b2.sum(), [x, w])
    np.testing.assert_allclose(gx.numpy(), gx2.numpy(), rtol=1e-6)
    np.testing.assert_allclose(gw.numpy(), gw2.numpy(), rtol=1e-6)


def test_random_ops_see_the_same_numbers_when_recomputed():
    em.manual_seed(2)
    x = em.randn(64, 32, requires_grad=True)
    drop = em.nn.Dropout(0.5)

    def f(t):
        return drop(t * 2.0)

    y = em.checkpoint(f, x)
    y.sum().backward()
    mask = (y.detach().numpy() != 0)
    np.testing.assert_array_equal(x.grad.numpy() != 0, mask)  # grad flows exactly where the mask kept values


def test_checkpointed_chain_saves_fewer_tensors():
    em.manual_seed(3)
    blocks = [_block(16) for _ in range(6)]
    x = em.randn(32, 16, requires_grad=True)

    def saved_bytes(out):
        seen, total, stack = set(), 0, [out.grad_fn]
        while stack:
            n = stack.pop()
            if not isinstance(n, Node) or id(n) in seen:
                continue
            seen.add(id(n))
            for t, _ in (n._saved or {}).values():
                total += t.nbytes if t.grad_fn is not None else 0  # activations, not parameters
            total += sum(d.nbytes for d, *_ in (n._out_saved or {}).values())
            stack.extend(e[0] for e in n.edges if e is not None)
        return total

    h = x
    for b in blocks:
        h = b(h)
    plain = saved_bytes(h)
    h = em.utils.checkpoint.checkpoint_sequential(blocks, 6, x)
    assert saved_bytes(h) < plain / 2


def test_no_grad_and_no_tensor_arguments_run_fn_directly():
    with em.no_grad():
        y = em.checkpoint(lambda t: t * 2, em.ones(3, requires_grad=True))
    assert y.grad_fn is None and y.tolist() == [2, 2, 2]
    assert em.checkpoint(lambda a: a + 1, 1) == 2


def test_jit_gradients_equal_plain_and_the_forward_is_one_node():
    em.manual_seed(4)
    blk = _block()
    params = list(blk.parameters())

    def step(t):
        loss = em.checkpoint(lambda u: blk(u).relu(), t).pow(2).sum()
        loss.backward()
        return loss

    jitted = em.jit(step)
    x = em.randn(6, 8)
    _zero(params)
    loss = jitted(x)
    got = _grads(params)
    _zero(params)
    ref = blk(x).relu().pow(2).sum()
    ref.backward()
    assert loss.item() == pytest.approx(ref.item(), rel=1e-6)
    for a, b in zip(got, _grads(params)):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    graph = jitted.entries()[-1].graph
    ops = [n.op_name for n in graph.nodes if n.kind == "op"]
    assert ops.count("checkpoint") == 1
    assert ops.index("checkpoint") < ops.index("linear")  # the linears exist only in the recomputation


def _deep_mlp_plan(depth, remat):
    nn = em.nn
    set_remat(remat)
    try:
        em.manual_seed(0)
        layers = []
        for _ in range(depth):
            layers += [nn.Linear(64, 64), nn.ReLU()]
        model = nn.Sequential(*layers, nn.Linear(64, 10))
        opt = em.optim.SGD(model.parameters(), lr=0.01)
        loss_fn = nn.CrossEntropyLoss()

        def step(x, y):
            opt.zero_grad()
            loss = loss_fn(model(x), y)
            loss.backward()
            opt.step()
            return loss

        jitted = em.jit(step, passes=())
        x, y = em.randn(32, 64), em.randint(0, 10, (32,))
        losses = [jitted(x, y).item() for _ in range(2)]
        return plan_of(jitted), losses
    finally:
        set_remat(None)


def test_sqrt_remat_gives_identical_training_and_sublinear_activation_memory():
    peaks = {}
    for depth in (5, 20):
        plain, l1 = _deep_mlp_plan(depth, None)
        remat, l2 = _deep_mlp_plan(depth, "sqrt")
        assert l1 == l2
        mem = validate(remat.memory_plan())
        validate(remat.memory_plan("parallel"))
        assert mem.remat is not None and mem.remat.recomputed_steps > 0
        assert "rematerialisation (sqrt)" in str(mem)
        peaks[depth] = (plain.memory_plan().peak_bytes, mem.peak_bytes)
    # 4x deeper: the plain plan's peak grows about 4x, the rematerialised one about 2x
    assert peaks[20][0] / peaks[5][0] > 3.0
    assert peaks[20][1] / peaks[5][1] < 2.5
    assert peaks[20][1] < peaks[20][0] / 2
