"""The elementwise passes split over the threads (ember.kernels.elementwise) equal NumPy's ufuncs bit for bit: above and
below the split threshold, in place, with NaN, infinities and signed zeros, in float32 and float64, eager and jit."""

import numpy as np
import pytest

import ember as em
from ember.kernels import elementwise, parallel

pytestmark = pytest.mark.skipif(not elementwise._kernel("relu_forward", np.dtype(np.float32)),
                                reason="needs Numba")

UFUNCS = {"add": np.add, "sub": np.subtract, "mul": np.multiply}
SPLIT = elementwise.SPLIT["split_min"]  # relu's passes
ADD_SUM_SPLIT = elementwise.SPLIT["add_sum_split_min"]  # add, sub, mul and sums


def _values(n, dtype, seed):
    """n values with NaN, +-inf, +-0.0 and ordinary ones mixed in."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(n).astype(dtype)
    specials = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0], dtype)
    at = rng.integers(0, n, 64)
    x[at] = specials[at % len(specials)]
    return x


@pytest.fixture(params=[1, 2], ids=["1-thread", "2-threads"])
def threads(request):
    before = parallel.get_num_threads()
    em.set_num_threads(request.param)
    yield request.param
    em.set_num_threads(before)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n", [SPLIT - 1, SPLIT, ADD_SUM_SPLIT - 1, ADD_SUM_SPLIT, 3 * ADD_SUM_SPLIT + 7])
def test_split_passes_equal_numpy(threads, dtype, n):
    a, b = _values(n, dtype, 0), _values(n, dtype, 1)
    for name, ufunc in UFUNCS.items():
        got = elementwise.binary(name, a, b)
        assert (got is None) == (n < ADD_SUM_SPLIT)
        if got is not None:
            np.testing.assert_array_equal(got, ufunc(a, b), strict=True)
    relu = elementwise.relu(np, a)
    expected = np.maximum(a, 0)
    np.testing.assert_array_equal(relu, expected, strict=True)
    assert not np.signbit(relu).any()  # -0.0 becomes +0.0, as np.maximum(x, 0) and torch.relu give
    grad = elementwise.relu_backward(np, b, a)
    np.testing.assert_array_equal(grad, np.where(~(a <= 0), b, 0).astype(dtype), strict=True)


@pytest.mark.parametrize("into", ["a", "b"])
def test_a_pass_into_one_of_its_inputs(threads, into):
    n = 2 * ADD_SUM_SPLIT + 3
    a, b = _values(n, np.float32, 2), _values(n, np.float32, 3)
    for name, ufunc in UFUNCS.items():
        x, y = a.copy(), b.copy()
        out = x if into == "a" else y
        assert elementwise.binary(name, x, y, out=out) is out
        np.testing.assert_array_equal(out, ufunc(a, b))
    x = a.copy()
    elementwise.relu(np, x, into=x)
    np.testing.assert_array_equal(x, np.maximum(a, 0))
    g, o = b.copy(), a.copy()
    elementwise.relu_backward(np, g, o, into=g if into == "a" else o)
    np.testing.assert_array_equal(g if into == "a" else o, np.where(~(a <= 0), b, 0).astype(np.float32))


def test_operands_the_split_pass_does_not_take_go_to_numpy():
    n = 2 * ADD_SUM_SPLIT
    a = np.ones(n, np.float32)
    assert elementwise.binary("add", a, np.ones(n, np.float64)) is None  # promotion
    assert elementwise.binary("add", a, np.ones(1, np.float32)) is None  # broadcasting
    assert elementwise.binary("add", a[::2], a[1::2]) is None  # strided
    assert elementwise.binary("add", a.astype(np.int32), a.astype(np.int32)) is None  # integers
    assert elementwise.binary("add", a, 2.0) is None  # a Python number


@pytest.mark.parametrize("op", ["add", "sub", "mul"])
def test_ops_eager_jit_and_gradients_on_the_split_path(threads, op):
    x_np, y_np = _values(2 * ADD_SUM_SPLIT, np.float32, 4), _values(2 * ADD_SUM_SPLIT, np.float32, 5)
    x_np[np.isnan(x_np) | np.isinf(x_np)] = 0.5
    y_np[np.isnan(y_np) | np.isinf(y_np)] = -0.5
    fn = {"add": lambda a, b: (a + b).relu(), "sub": lambda a, b: (a - b).relu(), "mul": lambda a, b: (a * b).relu()}[op]
    x, y = em.tensor(x_np, requires_grad=True), em.tensor(y_np, requires_grad=True)
    out = fn(x, y)
    out.backward(em.ones_like(out))
    expected = np.maximum(UFUNCS[op](x_np, y_np), 0)
    np.testing.assert_array_equal(out.detach().numpy(), expected)
    jitted = em.jit(lambda a, b: fn(a, b) * 1.0)
    a_in, b_in = em.tensor(x_np.copy()), em.tensor(y_np.copy())
    for k in range(3):  # trace, then the planned steady state, the inputs changed in place between calls
        if k:
            a_in.mul_(-1.5)
            b_in.add_(0.25)
        want = np.maximum(UFUNCS[op](a_in.numpy(), b_in.numpy()), 0)
        np.testing.assert_array_equal(jitted(a_in, b_in).numpy(), want)
    mask = (expected > 0).astype(np.float32)
    grad_x = {"add": mask, "sub": mask, "mul": mask * y_np}[op]
    np.testing.assert_array_equal(x.grad.numpy(), grad_x)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape,dims", [((1024, 384), 1), ((16, 64, 512), 2), ((8209, 33), 1), ((8, 3, 128, 128), 1)])
def test_a_sum_over_leading_dims_equals_numpys_bit_for_bit(threads, dtype, shape, dims):
    x = _values(int(np.prod(shape)), dtype, 6).reshape(shape) * dtype(1000)
    x[np.isnan(x)] = 1.0  # NaN and infinities stay: a column with one keeps it
    x.reshape(-1, *shape[dims:])[:, 0] = -0.0  # an all -0.0 column sums to +0.0, as NumPy's does
    expected = np.add.reduce(x, tuple(range(dims)))
    got = elementwise.leading_sum(x, dims)
    assert got is not None
    np.testing.assert_array_equal(got, expected, strict=True)
    assert np.array_equal(np.signbit(got), np.signbit(expected))
    t = em.tensor(x, requires_grad=True)
    total = t.sum(dim=tuple(range(dims)), keepdim=True)
    np.testing.assert_array_equal(total.detach().numpy(), np.add.reduce(x, tuple(range(dims)), keepdims=True))
    total.backward(em.ones_like(total))
    np.testing.assert_array_equal(t.grad.numpy(), np.ones_like(x))


def test_sums_the_column_split_does_not_take_go_to_numpy():
    assert elementwise.leading_sum(np.ones((32768, 16), np.float32), 1) is None  # fewer than 32 columns
    assert elementwise.leading_sum(np.ones((4, 100), np.float32), 1) is None  # below the threshold
    assert elementwise.leading_sum(np.ones((512, 512), np.float32).T, 1) is None  # not C-contiguous
    assert elementwise.leading_sum(np.ones((512, 512), np.int64), 1) is None


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("low, high", [(0, 6), (0.0, 6.0), (-0.0, 6.0), (0.0, -0.0), (6, 0), (0.1, 0.7), (-1.5, None),
                                       (0, None), (-0.0, None), (None, 6.0), (None, -0.0), (-np.inf, np.inf),
                                       (2**30, None)])
def test_clamp_pass_equals_numpy(threads, dtype, low, high):
    """The compiled clamp (ReLU6, hardtanh) keeps clip's values bit for bit, one-sided bounds np.maximum's and
    np.minimum's: signed zeros at a bound, NaN kept, low above high giving high, bounds rounded to the dtype."""
    x = _values(SPLIT + 5, dtype, 4) * 4
    got = elementwise.clamp(np, x, low, high)
    if low is not None and high is not None:
        want = x.clip(low, high)
    else:
        want = np.maximum(x, low) if high is None else np.minimum(x, high)
    np.testing.assert_array_equal(got, want, strict=True)
    assert np.array_equal(np.signbit(got), np.signbit(want))


def test_clamp_declines_bounds_numpy_must_judge():
    x = _values(SPLIT, np.float32, 5)
    assert elementwise.clamp(np, x, float("nan"), 1.0) is None  # NaN everywhere: NumPy's kernel
    assert elementwise.clamp(np, x, 1e39, None) is None  # beyond float32: NumPy's cast decides
    assert elementwise.clamp(np, x.astype(np.float16), 0, 6) is None


def test_relu6_and_hardtanh_on_large_tensors_match_torch(threads):
    torch = pytest.importorskip("torch")
    x = _values(2 * SPLIT + 3, np.float32, 6).reshape(1, -1) * 4
    for ember_fn, torch_fn in ((lambda t: em.nn.functional.relu6(t), torch.nn.functional.relu6),
                               (lambda t: em.nn.functional.hardtanh(t), torch.nn.functional.hardtanh),
                               (lambda t: em.clamp(t, min=-0.5), lambda t: torch.clamp(t, min=-0.5)),
                               (lambda t: em.clamp(t, max=0.5), lambda t: torch.clamp(t, max=0.5))):
        got = ember_fn(em.tensor(x)).numpy()
        want = torch_fn(torch.from_numpy(x)).numpy()
        np.testing.assert_array_equal(got, want)
