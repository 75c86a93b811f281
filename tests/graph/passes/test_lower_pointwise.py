"""lerp, addcmul and addcdiv lowered to elementary ops before fusion: the jitted values are the eager kernels'
bit for bit, for Python and 0-d tensor coefficients on both sides of lerp's 0.5 switch (the updated
arguments written back, as eagerly), and fusion then runs an optimizer-style update in few kernels."""

from __future__ import annotations

import numpy as np
import pytest

import ember as em


def _update(p, m, v, g, w, value):
    m.lerp_(g, w)
    v.mul_(0.99).addcmul_(g, g, value=value * value)
    p.addcdiv_(m, v.sqrt() + 1e-8, value=value)
    return p


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("tensor_coefficients", [False, True])
def test_jitted_pointwise_ops_equal_the_eager_kernels(dtype, tensor_coefficients):
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal((64, 33)).astype(dtype) for _ in range(4)]
    arrays[2] = np.abs(arrays[2])
    results = []
    for use_jit in (False, True):
        p, m, v, g = (em.tensor(a.copy()) for a in arrays)
        fn = em.jit(_update) if use_jit else _update
        out = []
        for w, value in ((0.1, -0.01), (0.7, 0.02), (0.49999997, -0.03), (0.5, 0.04)):  # lerp's two forms
            if tensor_coefficients:
                w, value = em.tensor(w, dtype=em.float64), em.tensor(value, dtype=em.float64)
            fn(p, m, v, g, w, value)
            out.append([t.numpy().copy() for t in (p, m, v)])
        results.append(out)
    for eager, jitted in zip(*results):
        for a, b in zip(eager, jitted):
            np.testing.assert_array_equal(a, b)


def test_an_update_fuses_into_one_kernel():
    p, m, v, g = (em.tensor(np.ones((64, 33), np.float32)) for _ in range(4))
    w, value = em.tensor(0.1, dtype=em.float64), em.tensor(-0.01, dtype=em.float64)
    fn = em.jit(_update)
    fn(p, m, v, g, w, value)
    with em.profiler.profile() as prof:
        fn(p, m, v, g, w, value)
    names = [e.name for e in prof.events if e.cat != "range"]
    assert not {"lerp", "addcmul", "addcdiv"} & set(names)
    # the full-size update fuses into few kernels (0-d coefficient arithmetic is a region of its own shape)
    assert len(names) <= 4, names


def test_lowered_updates_share_their_coefficient_arithmetic():
    # Two moments updated with one 0-d lerp weight (as Adam's 1 - beta1 for every parameter): lowering writes the
    # weight's cast, 1 - w and the 0.5 test once per lerp, and CSE after lowering keeps one of each.
    from passes_util import sym, values

    from ember.graph import Graph
    from ember.graph.passes import optimize

    g = Graph()
    m1, m2, g1, g2 = (sym(g, (8, 4)) for _ in range(4))
    w = sym(g, (), np.float64)
    outs = values(m1.lerp(g1, w), m2.lerp(g2, w))
    lowered = optimize(g, outs, ["lower_pointwise", "fusion"]).graph
    shared = optimize(g, outs, ["cse", "fusion"]).graph

    def scalar_instructions(graph):
        regions = [n.attrs["region"] for n in graph.nodes if n.op_name == "fused_elementwise"]
        return sum(len(r.instrs) for r in regions if not any(nd for _, nd in r.inputs))

    assert scalar_instructions(shared) < scalar_instructions(lowered)
