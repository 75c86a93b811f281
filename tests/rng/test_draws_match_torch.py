"""After the same manual_seed, every sampler draws PyTorch's numbers: integers and uniforms bit for bit,
normals bit for bit too (float32's Cephes kernel and float64's libm are reproduced), in every size class
(below 16, 16, above 16, not a multiple of 16) and layout, and through Numba's and NumPy's paths."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import ember as em
from ember.graph.codegen import set_backend

SHAPES = [(), (1,), (5,), (15,), (16,), (17,), (31,), (32,), (33,), (100,), (3, 7), (4, 16, 5), (20000,)]
FLOATS = [(em.float32, torch.float32), (em.float64, torch.float64)]


@pytest.fixture(params=["auto", "numpy"])
def paths(request):
    """Each test twice: compiled kernels where Numba is installed (for 16384+ values), and NumPy only."""
    set_backend(request.param)
    yield request.param
    set_backend(None)


def _seed(seed=0):
    em.manual_seed(seed)
    torch.manual_seed(seed)


def _same(a, b):
    a = a.numpy() if hasattr(a, "numpy") else a
    np.testing.assert_array_equal(np.asarray(a), b.numpy())


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("dtypes", FLOATS, ids=["float32", "float64"])
def test_rand_randn_and_in_place_fills(shape, dtypes, paths):
    e, t = dtypes
    if paths == "numpy" and e == em.float64 and int(np.prod(shape)) > 1 << 14:
        pytest.skip("NumPy's float64 log/sin/cos are not libm's: that path is tested to rounding below")
    _seed(1)
    for _ in range(2):  # twice: the scalar path's cached normal carries from one call to the next
        _same(em.randn(shape, dtype=e), torch.randn(shape, dtype=t))
        _same(em.rand(shape, dtype=e), torch.rand(shape, dtype=t))
        _same(em.empty(shape, dtype=e).uniform_(-0.37, 2.9), torch.empty(shape, dtype=t).uniform_(-0.37, 2.9))
        _same(em.empty(shape, dtype=e).normal_(0.3, 1.7), torch.empty(shape, dtype=t).normal_(0.3, 1.7))
        _same(em.normal(-2.0, 0.01, shape, dtype=e), torch.normal(-2.0, 0.01, shape, dtype=t))
        _same(em.empty(shape, dtype=e).bernoulli_(0.3), torch.empty(shape, dtype=t).bernoulli_(0.3))
    _same(em.randn(3), torch.randn(3))  # and the stream goes on in step


def test_float64_normals_on_numpys_path_agree_to_rounding():
    set_backend("numpy")
    try:
        _seed(2)
        a, b = em.randn(100_000, dtype=em.float64).numpy(), torch.randn(100_000, dtype=torch.float64).numpy()
    finally:
        set_backend(None)
    np.testing.assert_allclose(a, b, rtol=4e-16, atol=1e-300)
    _same(em.rand(5), torch.rand(5))  # the same words were used


def test_exponential_cauchy_log_normal_and_geometric():
    for e, t in FLOATS:
        for n in (3, 40):
            _seed(3)
            np.testing.assert_allclose(em.empty(n, dtype=e).exponential_(1.5).numpy(),
                                       torch.empty(n, dtype=t).exponential_(1.5).numpy(), rtol=4e-16)
            np.testing.assert_allclose(em.empty(n, dtype=e).cauchy_(0.5, 2.0).numpy(),
                                       torch.empty(n, dtype=t).cauchy_(0.5, 2.0).numpy(), rtol=1e-14)
            np.testing.assert_allclose(em.empty(n, dtype=e).log_normal_(0.1, 0.5).numpy(),
                                       torch.empty(n, dtype=t).log_normal_(0.1, 0.5).numpy(), rtol=1e-14)
            _same(em.empty(n, dtype=e).geometric_(0.3), torch.empty(n, dtype=t).geometric_(0.3))
            _same(em.rand(2), torch.rand(2))


@pytest.mark.filterwarnings("ignore:.*out of bounds")  # float32 beyond 2**24, as PyTorch warns
@pytest.mark.parametrize("low, high", [(0, 10), (-5, 3), (0, 2**31), (0, 2**32), (-(2**40), 2**41),
                                       (10, 2**62 + 7), (-(2**63), 2**63 - 1)])
@pytest.mark.parametrize("dtype", ["int64", "float64", "float32"])
def test_randint_ranges_32_and_64_bit(low, high, dtype):
    e, t = getattr(em, dtype), getattr(torch, dtype)
    if dtype != "int64" and (high - low > 2**40 or low < -(2**40)):
        pytest.skip("floats hold these bounds inexactly: PyTorch refuses them too")
    _seed(4)
    for shape in [(7,), (3, 5)]:
        _same(em.randint(low, high, shape, dtype=e), torch.randint(low, high, shape, dtype=t))
        _same(em.empty(shape, dtype=e).random_(low, high), torch.empty(shape, dtype=t).random_(low, high))
    _same(em.rand(2), torch.rand(2))


@pytest.mark.parametrize("dtype", ["int64", "int32", "int16", "int8", "uint8", "bool", "float32", "float64"])
def test_random_without_bounds_and_with_one(dtype):
    e, t = getattr(em, dtype), getattr(torch, dtype)
    _seed(5)
    _same(em.empty(9, dtype=e).random_(), torch.empty(9, dtype=t).random_())
    _same(em.empty(9, dtype=e).random_(2), torch.empty(9, dtype=t).random_(2))
    _same(em.randint(2, (4,), dtype=e), torch.randint(2, (4,), dtype=t))


@pytest.mark.parametrize("n", [0, 1, 2, 5, 16, 17, 1000, 20000])
def test_randperm(n, paths):
    _seed(6)
    _same(em.randperm(n), torch.randperm(n))
    g, tg = em.Generator().manual_seed(8), torch.Generator().manual_seed(8)
    _same(em.randperm(n, generator=g, dtype=em.float32), torch.randperm(n, generator=tg, dtype=torch.float32))
    _same(em.rand(3), torch.rand(3))


def test_bernoulli_with_probability_tensors():
    _seed(7)
    for e, t in FLOATS:
        p = np.linspace(0, 1, 37).reshape(37, 1).repeat(3, axis=1)
        _same(em.bernoulli(em.tensor(p, dtype=e)), torch.bernoulli(torch.tensor(p, dtype=t)))
        _same(em.bernoulli(em.tensor(p, dtype=e), 0.25), torch.bernoulli(torch.tensor(p, dtype=t), 0.25))
        _same(em.zeros(37, 3, dtype=e).bernoulli_(em.tensor(p, dtype=e)),
              torch.zeros(37, 3, dtype=t).bernoulli_(torch.tensor(p, dtype=t)))
        _same(em.zeros(37, 3, dtype=em.float32).bernoulli_(em.tensor(p[0], dtype=e)),  # broadcast probabilities
              torch.zeros(37, 3).bernoulli_(torch.tensor(p[0], dtype=t)))


def test_multinomial_with_and_without_replacement():
    w = np.random.default_rng(0).random((4, 30)).astype(np.float32)
    w[1, :20] = 0  # (beyond its 10 non-zero weights a row's order is a tie, which PyTorch's top-k leaves open)
    for e, t in FLOATS:
        for k, replacement in [(1, False), (5, False), (10, False), (1, True), (50, True)]:
            _seed(8)
            _same(em.multinomial(em.tensor(w, dtype=e), k, replacement),
                  torch.multinomial(torch.tensor(w, dtype=t), k, replacement))
            _same(em.multinomial(em.tensor(w[0], dtype=e), k, replacement),
                  torch.multinomial(torch.tensor(w[0], dtype=t), k, replacement))
    _seed(8)
    _same(em.multinomial(em.tensor(w[[0, 2, 3]]), 30), torch.multinomial(torch.tensor(w[[0, 2, 3]]), 30))
    with pytest.raises(ValueError, match="without replacement"):
        em.multinomial(em.tensor(w), 31)
    with pytest.raises(ValueError, match="element < 0"):
        em.multinomial(em.tensor([0.5, -1.0]), 1)
    with pytest.raises(ValueError, match="sum of probabilities"):
        em.multinomial(em.zeros(2, 3), 1)


def test_normal_with_tensor_mean_and_std():
    mean = np.linspace(-1, 1, 20).astype(np.float32)
    std = np.linspace(0.1, 2, 20).astype(np.float32)
    _seed(9)
    _same(em.normal(em.tensor(mean), em.tensor(std)), torch.normal(torch.tensor(mean), torch.tensor(std)))
    _same(em.normal(em.tensor(mean), 0.5), torch.normal(torch.tensor(mean), 0.5))
    _same(em.normal(0.5, em.tensor(std)), torch.normal(0.5, torch.tensor(std)))


@pytest.mark.parametrize("view", ["transposed", "strided", "column"])
def test_fills_of_strided_tensors_follow_memory_order(view, paths):
    def pick(x):
        return {"transposed": lambda: x.t(), "strided": lambda: x[:, ::2], "column": lambda: x[:, 3]}[view]()

    for e, t in FLOATS:
        _seed(10)
        a, b = em.zeros(40, 30, dtype=e), torch.zeros(40, 30, dtype=t)
        pick(a).normal_(0.1, 2.0), pick(b).normal_(0.1, 2.0)
        pick(a).uniform_(-1, 1), pick(b).uniform_(-1, 1)
        _same(a, b)
        _same(em.randn(5, dtype=e), torch.randn(5, dtype=t))


def test_generators_are_independent_of_the_default_one():
    _seed(11)
    g, tg = em.Generator().manual_seed(3), torch.Generator().manual_seed(3)
    _same(em.randn(20, generator=g), torch.randn(20, generator=tg))
    _same(em.randn(20), torch.randn(20))
    _same(em.rand(4, generator=g), torch.rand(4, generator=tg))


@pytest.mark.parametrize("name", ["float16", "bfloat16"])
def test_16_bit_floats(name):
    e, t = getattr(em, name), getattr(torch, name)
    if e is None:
        pytest.skip("bfloat16 needs the ml_dtypes package")
    _seed(12)
    for n in (5, 16, 17, 40, 20001):  # 16-bit normals: float32's kernel on whole blocks, 16 fresh for the rest
        _same(em.rand(n, dtype=e).float(), torch.rand(n, dtype=t).float())
        _same(em.empty(n, dtype=e).uniform_(-2.3, 3.1).float(), torch.empty(n, dtype=t).uniform_(-2.3, 3.1).float())
        _same(em.empty(n, dtype=e).normal_(0.2, 1.3).float(), torch.empty(n, dtype=t).normal_(0.2, 1.3).float())
        _same(em.empty(n, dtype=e).random_().float(), torch.empty(n, dtype=t).random_().float())
    _same(em.rand(2), torch.rand(2))


def test_bad_draws_are_refused_with_torchs_rules():
    with pytest.raises(ValueError, match="from=5 >= to=5"):
        em.randint(5, 5, (2,))
    with pytest.raises(ValueError, match="to - 1 is out of bounds for int8"):
        em.empty(3, dtype=em.int8).random_(0, 1000)
    with pytest.raises(ValueError, match="from=2 > to=1"):
        em.empty(3).uniform_(2, 1)
    with pytest.raises(ValueError, match="std >= 0.0"):
        em.empty(3).normal_(0, -1)
    with pytest.raises(TypeError, match="floating-point"):
        em.empty(3, dtype=em.int64).normal_()
    with pytest.raises(ValueError, match="lambda > 0.0"):
        em.empty(3).exponential_(0)
    with pytest.raises(ValueError, match="non-negative"):
        em.randperm(-1)


def test_distributions_sample_torchs_values():
    loc, scale = np.linspace(-1, 1, 6).astype(np.float32), np.linspace(0.1, 1, 6).astype(np.float32)
    probs = np.random.default_rng(0).random((4, 5)).astype(np.float32)
    _seed(13)
    for method in ("sample", "rsample"):
        _same(getattr(em.distributions.Normal(em.tensor(loc), em.tensor(scale)), method)((3,)),
              getattr(torch.distributions.Normal(torch.tensor(loc), torch.tensor(scale)), method)((3,)))
    _same(em.distributions.Categorical(probs=em.tensor(probs)).sample((7,)),
          torch.distributions.Categorical(probs=torch.tensor(probs)).sample((7,)))
    _same(em.distributions.Bernoulli(probs=em.tensor(probs)).sample((2,)),
          torch.distributions.Bernoulli(probs=torch.tensor(probs)).sample((2,)))
    assert em.default_generator is em.random.default_generator


def test_jitted_draws_are_eagers_and_torchs():
    # dropout of a transposed view draws in the view's memory order (PyTorch's empty_like), traced or not
    def step(x, lib):
        return lib.nn.functional.dropout(x.transpose(0, 1), 0.4) * 2 + lib.randn(3, 4, 5)

    x = np.random.default_rng(0).standard_normal((4, 3, 5)).astype(np.float32)
    jitted = em.jit(lambda t: step(t, em))
    _seed(1)
    expected = [step(torch.tensor(x), torch).numpy() for _ in range(3)]
    em.manual_seed(1)
    eager = [step(em.tensor(x), em).numpy() for _ in range(3)]
    em.manual_seed(1)
    traced = [jitted(em.tensor(x)).numpy() for _ in range(3)]
    for a, b, c in zip(eager, traced, expected):
        np.testing.assert_array_equal(a, c)
        np.testing.assert_array_equal(b, c)
