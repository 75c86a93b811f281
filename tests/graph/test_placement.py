"""Placement: device scopes in graphs, send/recv pairs, the partitioner and the multi-device runner."""

import threading
import time

import numpy as np
import pytest

import ember as em
import ember.nn.functional as F
from ember.errors import DeviceMismatchError
from ember.graph.executor import Plan
from ember.graph.ir import Graph
from ember.graph.placement import node_device, partition
from ember.graph.placement_exec import PlacedPlan
from ember.ops._rules import spec
from ember.ops.registry import OPS, Op, register
from ember.runtime.rendezvous import Cancelled, Rendezvous

CPU, CPU1 = em.device("cpu"), em.device("cpu:1")


def _plan(jitted):
    (entry,) = jitted.entries()
    return entry.plan


def _mlp():
    em.manual_seed(0)
    return em.nn.Sequential(em.nn.Linear(4, 16), em.nn.ReLU(), em.nn.Linear(16, 3))


def _copy_params(dst, src):
    with em.no_grad():
        for p, q in zip(dst.parameters(), src.parameters()):
            p.copy_(q.to(p.device))


@pytest.mark.parametrize("first_layer_on", ["cpu", "cpu:1"])
def test_jit_training_step_split_across_devices_equals_single_device(first_layer_on):
    split, single = _mlp(), _mlp()
    split[0].to(first_layer_on)
    _copy_params(split, single)
    opt_s = em.optim.SGD(split.parameters(), lr=0.1, momentum=0.9)
    opt_1 = em.optim.SGD(single.parameters(), lr=0.1, momentum=0.9)

    @em.jit
    def split_step(x, y):
        opt_s.zero_grad()
        with em.device("cpu:1"):  # first layer on cpu:1 ...
            h = split[1](split[0](x))
        with em.device("cpu"):  # ... the head and the loss on cpu
            loss = F.cross_entropy(split[2](h), y)
        loss.backward()
        opt_s.step()
        return loss

    @em.jit
    def single_step(x, y):
        opt_1.zero_grad()
        loss = F.cross_entropy(single(x), y)
        loss.backward()
        opt_1.step()
        return loss

    x, y = em.randn(8, 4), em.randint(0, 3, (8,))
    for _ in range(4):
        ls, l1 = split_step(x, y), single_step(x, y)
        assert ls.device == CPU
        assert ls.item() == pytest.approx(l1.item(), rel=1e-5)
    for p, q in zip(split.parameters(), single.parameters()):
        np.testing.assert_allclose(p.detach().cpu().numpy(), q.detach().numpy(), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(p.grad.cpu().numpy(), q.grad.numpy(), rtol=1e-5, atol=1e-6)
    assert split[0].weight.device == em.device(first_layer_on) and split[0].weight.grad.device == split[0].weight.device
    plan = _plan(split_step)
    assert isinstance(plan, PlacedPlan) and set(plan.parts) == {CPU, CPU1}
    assert isinstance(_plan(single_step), Plan)  # one device: the plain plan, no placement machinery


def test_values_and_gradients_cross_back_to_the_source_device():
    em.manual_seed(1)
    w1, w2 = em.randn(4, 8, requires_grad=True), em.randn(8, 2, requires_grad=True)

    def f(x):
        with em.device("cpu:1"):
            h = (x @ w1).tanh()
        with em.device("cpu"):
            out = (h @ w2).pow(2).mean()
        out.backward()
        return out, h

    x = em.randn(5, 4)
    out, h = em.jit(f)(x)
    g1, g2 = w1.grad.numpy().copy(), w2.grad.numpy().copy()
    assert h.device == CPU1 and out.device == CPU and w1.grad.device == CPU
    w1.grad = w2.grad = None
    ref = ((x @ w1).tanh() @ w2).pow(2).mean()
    ref.backward()
    assert out.item() == pytest.approx(ref.item(), rel=1e-6)
    np.testing.assert_allclose(g1, w1.grad.numpy(), rtol=1e-5)
    np.testing.assert_allclose(g2, w2.grad.numpy(), rtol=1e-5)


def test_to_device_inside_jit_is_a_send_recv_pair():
    w = em.randn(3, 3, requires_grad=True)

    @em.jit
    def f(x):
        y = (x @ w).to("cpu:1").exp().sum()
        y.backward()
        return y

    x = em.randn(2, 3)
    y = f(x)
    assert y.device == CPU1 and isinstance(_plan(f), PlacedPlan)
    g = w.grad.numpy().copy()
    w.grad = None
    (x @ w).exp().sum().backward()
    np.testing.assert_allclose(g, w.grad.numpy(), rtol=1e-5)


def test_scopes_opened_before_the_trace_do_not_place_it():
    @em.jit
    def f(x):
        return x * 2

    x = em.ones(3)
    with em.device("cpu:1"):
        y = f(x)
    assert y.device == CPU and isinstance(_plan(f), Plan)


def _scoped_graph():
    """x (cpu) -> [cpu:1: x*2, exp] -> [cpu: sum], with its gradient built by autograd."""
    g = Graph("scoped")
    x = em.Tensor._make(g.placeholder((2, 3), np.float32, CPU, "x"), CPU).requires_grad_()
    with em.device("cpu:1"):
        y = (x * 2).exp()
    with em.device("cpu"):
        z = y.sum() + y.mean()
    (gx,) = em.autograd.grad([z], [x])
    return g, x, y, z, gx


def test_partition_parts_hold_only_their_device_and_every_cross_edge_is_a_pair():
    g, x, y, z, gx = _scoped_graph()
    g.check()
    assert y.device == CPU1 and z.device == CPU and gx.device == CPU
    outs = [z._data, gx._data]
    for n in g.needed_for(outs):  # in the whole graph: devices meet only at send -> recv
        for v in n.value_inputs():
            if node_device(v.node) is not node_device(n):
                assert (v.node.op_name, n.op_name) == ("send", "recv")
                assert v.node.attrs["key"] == n.attrs["key"] and n.attrs["src"] is node_device(v.node)
    parts = partition(g, outs)
    assert set(parts) == {CPU, CPU1}
    keys = {}
    for dev, part in parts.items():
        part.graph.check()
        for n in part.graph.nodes:
            assert node_device(n, dev) is dev, f"{n!r} of the {dev} part is on {node_device(n)}"
            assert all(v.device is dev for v in n.value_inputs())
            if n.op_name in ("send", "recv"):
                keys.setdefault(n.attrs["key"], []).append((n.op_name, dev))
                if n.op_name == "recv":
                    assert n.inputs == []  # cut: it takes its value from the rendezvous
    assert keys and all(sorted(k for k, _ in ends) == ["recv", "send"] for ends in keys.values())
    assert all(ends[0][1] is not ends[1][1] for ends in keys.values())

    xv = np.arange(6, dtype=np.float32).reshape(2, 3) / 6
    zr, gr = PlacedPlan(g, outs).run({x._data: xv})
    e = np.exp(2 * xv)
    assert zr == pytest.approx(e.sum() + e.mean(), rel=1e-6)
    np.testing.assert_allclose(gr, 2 * e * (1 + 1 / 6), rtol=1e-6)


def test_partition_rejects_a_cross_device_edge_without_a_pair():
    g = Graph("bad")
    x = g.placeholder((3,), np.float32, CPU, "x")
    y = g.add_op(OPS["exp"], [x], {}, CPU1)  # built by hand, bypassing the builder's send/recv
    with pytest.raises(AssertionError, match="send/recv pair"):
        partition(g, [y])


class _FailingKernel(Op):
    """x unchanged by its shape rule; its kernel always fails (test-only)."""

    name = "test_failing_kernel"

    def infer(self, x):
        return spec(x.shape, x.dtype)

    def kernel(self, xp, x):
        raise ValueError("this kernel always fails")


FAILING = OPS.get(_FailingKernel.name) or register(_FailingKernel())


@pytest.mark.parametrize("fail_on, wait_on", [("cpu:1", "cpu"), ("cpu", "cpu:1")])
def test_a_failing_kernel_on_one_device_surfaces_with_its_name_without_hanging(fail_on, wait_on):
    @em.jit
    def f(x):
        with em.device(fail_on):
            y = em.ops.apply(FAILING, x.exp())
        with em.device(wait_on):
            return (y * 2).sum()  # this part waits in a recv for y

    start = time.monotonic()
    with pytest.raises(RuntimeError, match=rf"test_failing_kernel \(node %\d+ on {fail_on}\).*always fails"):
        f(em.ones(4))
    assert time.monotonic() - start < 5
    assert isinstance(_plan(f), PlacedPlan)


def test_rendezvous_times_out_and_abort_wakes_waiters():
    rv = Rendezvous(timeout=0.05)
    with pytest.raises(TimeoutError, match="nothing arrived from cpu:1"):
        rv.take("k", CPU1)
    rv = Rendezvous(timeout=30)
    caught = []

    def wait():
        try:
            rv.take("k")
        except Cancelled as e:
            caught.append(e)

    t = threading.Thread(target=wait)
    t.start()
    time.sleep(0.02)
    start = time.monotonic()
    rv.abort(ValueError("boom"))
    t.join(5)
    assert caught and time.monotonic() - start < 1
    rv2 = Rendezvous()
    rv2.put("a", 1)
    assert rv2.take("a") == 1


def test_eager_ops_keep_their_device_rules():
    a = em.ones(2)
    with em.device("cpu:1"):
        b = em.ones(2)
        assert b.device == CPU1
        assert (a + a).device == CPU  # an eager op runs where its tensors are
        with pytest.raises(DeviceMismatchError, match=r"cpu and cpu:1"):
            a + b
    with pytest.raises(DeviceMismatchError, match=r"cpu and cpu:1"):
        em.ops.mul(a, b)


def test_mixed_devices_without_a_scope_still_fail_while_tracing():
    w = em.ones(3, device="cpu:1")

    @em.jit
    def f(x):
        return x * w

    with pytest.raises(DeviceMismatchError, match=r"cpu and cpu:1"):
        f(em.ones(3))


def test_dot_shows_devices_and_send_recv_pairs():
    g, x, y, z, gx = _scoped_graph()
    text = g.to_dot([z._data, gx._data])
    assert '@cpu:1"' in text and '@cpu"' in text  # labels end with the output's device
    assert "send to cpu:1" in text and "recv from cpu" in text
    assert "legend" in text and ">cpu<" in text and ">cpu:1<" in text
    key = next(n.attrs["key"] for n in g.nodes if n.op_name == "recv")
    assert f'label="{key}"' in text and "style=dashed" in text
