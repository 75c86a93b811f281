"""ember.numpy's arrays behave as NumPy's: promotion, methods, printing, augmented assignment, shapes;
ember.numpy.linalg and ember.numpy.random against NumPy."""

import numpy as onp
import pytest

import ember as em
import ember.numpy as enp
import ember.numpy.random as npr

_rng = onp.random.default_rng(0)
A = _rng.standard_normal((3, 4))
SQ = _rng.standard_normal((3, 3)) + 3 * onp.eye(3)

# operands as NumPy arrays of each kind; the same values go to ember.numpy
ARRAYS = {
    "bool": onp.array([True, False, True]),
    "int64": onp.array([1, -2, 3]),
    "int32": onp.array([1, -2, 3], dtype=onp.int32),
    "float32": onp.array([0.5, -1.5, 2.0], dtype=onp.float32),
    "float64": onp.array([0.25, -1.0, 3.5]),
}
SCALARS = [1, 2.5, True, onp.float64(1.5), onp.float32(2.0), onp.int64(2)]
OPS = ["add", "subtract", "multiply", "divide", "power", "maximum", "minimum", "floor_divide"]


def _numpy_result(fn, *args):
    with onp.errstate(all="ignore"):
        try:
            return getattr(onp, fn)(*args)
        except (TypeError, ValueError):  # boolean subtract; integers to negative integer powers
            return TypeError


def _check(got, want):
    g = onp.asarray(got)
    assert g.dtype == want.dtype, f"dtype {g.dtype}, NumPy gives {want.dtype}"
    onp.testing.assert_allclose(g, want, rtol=1e-6)


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("left", list(ARRAYS))
@pytest.mark.parametrize("right", list(ARRAYS) + [repr(s) for s in SCALARS])
def test_binary_promotion_matches_numpy(op, left, right):
    a = ARRAYS[left]
    b = ARRAYS[right] if right in ARRAYS else SCALARS[[repr(s) for s in SCALARS].index(right)]
    want = _numpy_result(op, a, b)
    eb = b if right not in ARRAYS else enp.array(b)
    if want is TypeError:  # NumPy refuses (boolean subtract, negative integer powers): Ember refuses too
        with pytest.raises((TypeError, ValueError, RuntimeError)):
            getattr(enp, op)(enp.array(a), eb)
        return
    if op == "floor_divide" and want.dtype.kind in "iub" and (onp.asarray(b) == 0).any():
        return  # integer division by zero: NumPy gives 0 with a warning, Ember raises (a difference kept)
    _check(getattr(enp, op)(enp.array(a), eb), want)
    if op in ("add", "subtract", "multiply", "divide"):  # the operators too, both ways round
        symbol = {"add": "__add__", "subtract": "__sub__", "multiply": "__mul__", "divide": "__truediv__"}[op]
        _check(getattr(enp.array(a), symbol)(eb), want)


def test_masks_in_arithmetic_are_integers_as_in_numpy():
    x = enp.array([-1.0, 2.0, -3.0])
    mask = x > 0
    assert isinstance(mask, enp.ndarray) and mask.dtype is em.bool
    for got, want in [(1 - mask, 1 - (onp.array([-1.0, 2, -3]) > 0)), (mask * 2.5, onp.array([0.0, 2.5, 0.0])),
                      (mask + mask, onp.array([False, True, False])), (mask.sum(), onp.int64(1))]:
        _check(got, onp.asarray(want))
    assert (x * mask).tolist() == [-0.0, 2.0, -0.0]


def test_reductions_return_scalars_that_plus_equals_rebinds():
    x = enp.array([1.0, 2.0])
    total = enp.sum(x)
    saved = total
    total += 1.0
    assert saved.item() == 3.0 and total.item() == 4.0  # NumPy scalars are immutable: += made a new one
    one = enp.array([5.0])
    m = enp.max(one)
    m += 1
    assert one.tolist() == [5.0]

    def loss(w):
        s = enp.sum(w**2)
        r = enp.log(s)  # log saves s for its gradient
        s += 1.0  # rebinding, as in NumPy and HIPS autograd: no in-place write into the saved value
        return r + s

    onp.testing.assert_allclose(em.grad(loss)(onp.array([1.0, 2.0])), [2 / 5 + 2, 4 / 5 + 4])


def test_arrays_are_updated_in_place_and_values_being_differentiated_are_rebound():
    x = enp.zeros(3)
    alias = x
    x += 1.0
    assert alias is x and alias.tolist() == [1.0, 1.0, 1.0]
    with pytest.raises(TypeError, match="can't be cast"):
        ints = enp.array([1, 2])
        ints += 1.5  # NumPy refuses this same_kind cast too

    def f(w):
        w += 1.0  # w is being differentiated: a new value, as autograd's boxes
        w *= w
        return enp.sum(w)

    onp.testing.assert_allclose(em.grad(f)(onp.array([1.0, 2.0])), [4.0, 6.0])


def test_numpy_methods_and_attributes():
    x = enp.array(A)
    checks = [
        (x.sum(axis=0), A.sum(axis=0)), (x.sum(1, keepdims=True), A.sum(1, keepdims=True)), (x.max(1), A.max(1)),
        (x.min(), A.min()), (x.mean(0), A.mean(0)), (x.std(), A.std()), (x.var(axis=1), A.var(axis=1)),
        (x.argmax(1), A.argmax(1)), (x.prod(0), A.prod(0)), (x.cumsum(1), A.cumsum(1)), (x.T, A.T),
        (x.reshape(2, 6), A.reshape(2, 6)), (x.reshape((4, 3)), A.reshape((4, 3))), (x.transpose(), A.transpose()),
        (x.flatten(), A.flatten()), (x.ravel(), A.ravel()), (x.dot(A.T), A.dot(A.T)), (x.clip(-0.5, 0.5), A.clip(-0.5, 0.5)),
        (x.round(2), A.round(2)), (x.repeat(2, axis=0), A.repeat(2, axis=0)), (x[1:], A[1:]), (x[:, 0], A[:, 0]),
        (x.astype(enp.float32), A.astype(onp.float32)), (x.swapaxes(0, 1), A.swapaxes(0, 1)),
        (x.all(), A.all()), (x.any(0), A.any(0)),
    ]
    for got, want in checks:
        assert isinstance(got, enp.ndarray)
        _check(got, onp.asarray(want))
    assert x.size == A.size == 12 and x.ndim == 2 and x.shape == A.shape and len(x) == 3
    assert x.sum(dim=0, keepdim=True).shape == (1, 4)  # PyTorch's keywords still work
    rows = list(x)
    assert len(rows) == 3 and isinstance(rows[0], enp.ndarray)
    idx = enp.array([[0.0, 1.0], [2.0, 0.0]]).nonzero()
    assert [i.tolist() for i in idx] == [list(v) for v in onp.array([[0.0, 1.0], [2.0, 0.0]]).nonzero()]


def test_printing_is_numpys():
    for values in ([1.0, 2.5, 1 / 3], [[1, 2], [3, 4]], 0.6931471805599453, [True, False]):
        arr = onp.array(values)
        ours = enp.array(values)
        assert str(ours) == str(arr[()] if arr.ndim == 0 else arr) and repr(ours) == repr(arr[()] if arr.ndim == 0 else arr)
    loss = enp.sum(enp.array([0.1, 0.2]))
    assert f"{loss}" == str(onp.sum([0.1, 0.2])) and f"{loss:.3f}" == "0.300"


def test_shapes_may_be_given_as_zero_d_values():
    n = enp.sum(enp.array([1, 2]))  # a 0-d int64 result
    for make in (enp.zeros, enp.ones, enp.empty):
        assert make(n).shape == (3,) and make((n, onp.int64(2))).shape == (3, 2)
    assert enp.zeros(onp.array(2)).shape == (2,) and enp.full(em.tensor(2), 1.5).shape == (2,)
    assert enp.reshape(enp.arange(6), (n, -1)).shape == (3, 2)
    assert npr.randn(n, 2).shape == (3, 2)  # numpy.random takes them through __index__
    with pytest.raises(TypeError):
        enp.zeros(2.5)


def test_results_that_are_arguments_come_back_as_aliases_not_converted_tensors():
    t = em.ones(2)
    out = enp.asarray(t)
    assert type(t) is em.Tensor and isinstance(out, enp.ndarray)
    out += 1
    assert t.tolist() == [2.0, 2.0]  # an alias, as NumPy's asarray


def test_random_is_numpys():
    assert npr.randn is onp.random.randn and npr.RandomState is onp.random.RandomState
    npr.seed(0)
    a = npr.randn(3)
    onp.random.seed(0)
    assert onp.array_equal(a, onp.random.randn(3)) and type(a) is onp.ndarray


@pytest.mark.parametrize(("name", "args"), [
    ("det", (SQ,)), ("inv", (SQ,)), ("solve", (SQ, A[:, :2])), ("solve", (SQ, A[:, 0])), ("cholesky", (SQ @ SQ.T,)),
    ("eigvalsh", (SQ + SQ.T,)), ("pinv", (A,)), ("matrix_power", (SQ, 3)), ("matrix_power", (SQ, -2)),
    ("matrix_power", (SQ, 0)), ("multi_dot", ([A.T, A, A.T],)), ("norm", (A, "nuc")), ("svd", (A, False, False)),
])
def test_linalg_matches_numpy(name, args):
    _check(getattr(enp.linalg, name)(*args), onp.asarray(getattr(onp.linalg, name)(*args)))


def test_linalg_named_results_match_numpy():
    sign, logdet = enp.linalg.slogdet(SQ)
    want = onp.linalg.slogdet(SQ)
    assert sign.item() == want.sign and abs(logdet.item() - want.logabsdet) < 1e-12
    w, v = enp.linalg.eigh(SQ + SQ.T)
    onp.testing.assert_allclose(onp.asarray(w), onp.linalg.eigh(SQ + SQ.T).eigenvalues, rtol=1e-12)
    onp.testing.assert_allclose(onp.abs(onp.asarray(v)), onp.abs(onp.linalg.eigh(SQ + SQ.T).eigenvectors), rtol=1e-10)
    u, s, vh = enp.linalg.svd(A, full_matrices=False)
    onp.testing.assert_allclose(onp.asarray(u @ (s[:, None] * vh)), A, rtol=1e-10, atol=1e-12)
    q, r = enp.linalg.qr(A.T)
    onp.testing.assert_allclose(onp.asarray(q @ r), A.T, rtol=1e-10, atol=1e-12)
    b = _rng.standard_normal(4)
    x, res, rank, sv = enp.linalg.lstsq(A.T, b)
    wx, wres, wrank, wsv = onp.linalg.lstsq(A.T, b)
    onp.testing.assert_allclose(onp.asarray(x), wx, rtol=1e-10)
    onp.testing.assert_allclose(onp.asarray(res), wres, rtol=1e-10)
    assert rank == wrank and type(rank) is int
    onp.testing.assert_allclose(onp.asarray(sv), wsv, rtol=1e-10)
