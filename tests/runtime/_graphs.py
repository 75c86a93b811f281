"""Graphs for the runtime tests: random programs over symbolic tensors and small training steps."""

import numpy as np

import ember as em
from ember.graph import Graph, Value
from ember.graph.executor import Plan

CPU = em.device("cpu")
N = 4  # every random value is a (N, N) matrix, an (N,) vector or a (1, N) row


def sym(graph, shape, dtype=np.float64, name=None):
    """A symbolic tensor fed at run time."""
    return em.Tensor._make(graph.placeholder(shape, dtype, CPU, name), CPU)


def _unary(k, x):
    return [lambda t: t.tanh(), lambda t: t.sin(), lambda t: -t, lambda t: t.abs(), lambda t: t.relu(),
            lambda t: t * t, lambda t: t.exp().clamp(max=5.0), lambda t: t.clone()][k % 8](x)


def _binary(k, a, b):
    return [lambda: a + b, lambda: a - b, lambda: a * b, lambda: em.maximum(a, b),
            lambda: em.where(a > 0, a, b), lambda: a + 0.5, lambda: 2.0 * b][k % 7]()


def build_random(choices, n_outputs_pick):
    """A random program from integer `choices`: returns (graph, feeds, output values, plan)."""
    g = Graph()
    x = sym(g, (N, N), name="x")
    y = sym(g, (N, N), name="y")
    w = em.tensor(np.linspace(-1, 1, N * N).reshape(N, N))  # captured
    pool = [x, y, w]
    it = iter(choices)
    for c in it:
        kind = c % 9
        a = pool[next(it, 0) % len(pool)]
        b = pool[next(it, 1) % len(pool)]
        if kind <= 2:
            v = _unary(next(it, 0), a)
        elif kind <= 5:
            v = _binary(next(it, 0), a, b)
        elif kind == 6:
            v = a @ b
        elif kind == 7:
            v = [lambda: a.T, lambda: a.reshape(N * N).reshape(N, N), lambda: a.sum_to_size(N, N),
                 lambda: a.sum(0, keepdim=True) + b][next(it, 0) % 4]()
        else:
            v = (a.sum(1) + b[0]).reshape(1, N) * b
        pool.append(v)
    outs = []
    for k in n_outputs_pick:
        v = pool[k % len(pool)]._data
        if isinstance(v, Value) and not any(v is o for o in outs):
            outs.append(v)
    if not outs:
        outs.append(pool[-1]._data if isinstance(pool[-1]._data, Value) else x._data)
    rng = np.random.default_rng(len(choices))
    feeds = {x._data: rng.standard_normal((N, N)), y._data: rng.standard_normal((N, N))}
    return g, feeds, outs, Plan(g, outs)


def mlp_step(sizes=(784, 512, 256, 10), batch=128, passes=(), momentum=0.0):
    """A jitted SGD training step of an MLP and its inputs; returns (step, x, y, model)."""
    nn = em.nn
    em.manual_seed(0)
    layers = []
    for i in range(len(sizes) - 1):
        layers.append(nn.Linear(sizes[i], sizes[i + 1]))
        if i < len(sizes) - 2:
            layers.append(nn.ReLU())
    model = nn.Sequential(*layers)
    opt = em.optim.SGD(model.parameters(), lr=0.05, momentum=momentum)
    loss_fn = nn.CrossEntropyLoss()

    def step(x, y):
        opt.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        return loss

    x = em.randn(batch, sizes[0])
    y = em.randint(0, sizes[-1], (batch,))
    return em.jit(step, passes=passes), x, y, model


def conv_step(momentum=0.0, pool=False):
    """A jitted SGD training step of a small conv net (conv, batch norm, ReLU, optional pooling, linear);
    returns (step, model, opt) for (4, 3, 8, 8) inputs and 5 classes."""
    nn = em.nn
    em.manual_seed(0)
    side = 4 if pool else 8
    model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
                          *([nn.MaxPool2d(2)] if pool else []), nn.Conv2d(8, 8, 3, padding=1), nn.ReLU(),
                          nn.Flatten(), nn.Linear(8 * side * side, 5))
    opt = em.optim.SGD(model.parameters(), lr=0.05, momentum=momentum)

    def step(x, y):
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss

    return em.jit(step), model, opt


def plan_of(jitted):
    """The plan of a jitted function's (single) cached trace."""
    return jitted.entries()[-1].plan
