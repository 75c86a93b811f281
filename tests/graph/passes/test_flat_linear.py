"""The algebraic pass runs `linear` over (..., C) as one 2-D product, as the eager kernel does."""

import numpy as np

import ember as em


def test_linear_over_three_dims_becomes_one_2d_product_with_the_same_result():
    em.manual_seed(0)
    lin = em.nn.Linear(8, 5)
    x = em.tensor(np.random.default_rng(0).standard_normal((3, 4, 8)).astype(np.float32))
    f = em.jit(lambda t: lin(t).relu())
    graph = f.lower(x, optimized=True)
    linears = [n for n in graph.nodes if n.kind == "op" and n.op.name == "linear"]
    assert linears and all(len(n.inputs[0].shape) == 2 for n in linears)
    np.testing.assert_allclose(f(x).detach().numpy(), lin(x).relu().detach().numpy(), rtol=1e-6, atol=1e-6)


def test_transposed_input_is_flattened_too():
    em.manual_seed(0)
    lin = em.nn.Linear(4, 6, bias=False)
    x = em.tensor(np.random.default_rng(1).standard_normal((2, 4, 5)).astype(np.float32))
    f = em.jit(lambda t: lin(t.transpose(1, 2)))
    np.testing.assert_allclose(f(x).detach().numpy(), lin(x.transpose(1, 2)).detach().numpy(), rtol=1e-6, atol=1e-6)
    assert tuple(f(x).shape) == (2, 5, 6)
