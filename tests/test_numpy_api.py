"""`ember.numpy` against NumPy, its gradients, and HIPS-autograd-style programs with `ember.grad`."""

import numpy as onp
import pytest
import torch

import ember as em
import ember.numpy as enp

_rng = onp.random.default_rng(0)
A = _rng.standard_normal((3, 4))
B = _rng.standard_normal((4, 2))
V = _rng.standard_normal(4)
P = onp.abs(A) + 0.5  # positive, for log/sqrt/power
T3 = _rng.standard_normal((2, 3, 4))
M45 = _rng.standard_normal((4, 5))
INTS = onp.array([[1, 2], [3, 4]])

# (function name, arguments): ember.numpy and NumPy must agree on values, shape and dtype.
FORWARD = [
    ("exp", (A,)), ("exp", (2.0,)), ("exp", ([1.0, 2.0],)), ("exp2", (A,)), ("expm1", (A,)), ("log", (P,)),
    ("log2", (P,)), ("log10", (P,)), ("log1p", (P,)), ("tanh", (A,)), ("sqrt", (P,)), ("square", (A,)),
    ("abs", (A,)), ("abs", (INTS,)), ("absolute", (A,)), ("sign", (A,)), ("sin", (A,)), ("cos", (A,)),
    ("tan", (A,)), ("sinh", (A,)), ("cosh", (A,)), ("negative", (A,)), ("reciprocal", (P,)), ("floor", (A,)),
    ("ceil", (A,)), ("round", (A,)), ("round", (A, 2)), ("isnan", (A,)), ("isfinite", (A,)), ("exp", (INTS,)),
    ("sqrt", (INTS,)), ("square", (INTS,)), ("negative", (INTS,)), ("sign", (INTS,)), ("divide", (INTS, INTS)),
    ("divide", (INTS, 2.0)), ("divide", (2, INTS)), ("multiply", (INTS, 2.5)), ("add", (1.5, INTS)), ("add", (INTS, 1)),
    ("add", (A, 1)), ("subtract", (1.5, A)), ("multiply", (A, V)), ("divide", (A, P)), ("true_divide", (INTS, 2)),
    ("power", (P, 2.5)), ("power", (2.0, A)), ("maximum", (A, 0.0)), ("minimum", (A, V)), ("logaddexp", (A, V)),
    ("arctan2", (A, P)), ("floor_divide", (A, 0.3)), ("mod", (A, 0.7)), ("fmod", (A, 0.7)),
    ("dot", (A, B)), ("dot", (V, V)), ("dot", (A, V)), ("dot", (T3, B)), ("dot", (2.0, A)), ("matmul", (T3, B)),
    ("outer", (V, A[0])), ("inner", (A, V)), ("inner", (A, A)), ("vdot", (A, A)), ("tensordot", (T3, M45, 1)),
    ("tensordot", (T3, A, ([1, 2], [0, 1]))), ("einsum", ("ij,jk->ik", A, B)),
    ("sum", (A,)), ("sum", (A, 0)), ("sum", (A, 1, None, None, True)), ("sum", (T3, (0, 2))), ("sum", (INTS,)),
    ("mean", (A, 1)), ("mean", (INTS,)), ("prod", (P, 0)), ("max", (A,)), ("max", (A, 1)),
    ("min", (A, 0, None, True)), ("amax", (A, 1)), ("amin", (T3, (1, 2))), ("argmax", (A,)), ("argmax", (A, 1)),
    ("argmin", (A, 0)), ("var", (A,)), ("var", (A, 0, None, None, 1)), ("std", (A, 1)), ("std", (INTS,)),
    ("all", (A > 0,)), ("any", (A > 0, 1)), ("cumsum", (A,)), ("cumsum", (A, 1)), ("cumprod", (P, 0)),
    ("count_nonzero", (A > 0,)), ("trace", (A[:, :3],)), ("sort", (A,)), ("sort", (A, 0)), ("sort", (A, None)),
    ("argsort", (V,)),
    ("reshape", (A, (2, 6))), ("reshape", (A, -1)), ("ravel", (A,)), ("transpose", (T3,)),
    ("transpose", (T3, (1, 0, 2))), ("swapaxes", (T3, 0, 2)), ("moveaxis", (T3, 0, -1)), ("expand_dims", (A, 1)),
    ("expand_dims", (A, (0, 3))), ("squeeze", (A[None],)), ("squeeze", (A[:, None], 1)),
    ("broadcast_to", (V, (3, 4))), ("concatenate", ([A, A],)), ("concatenate", ([A, A], 1)),
    ("concatenate", ([A, V], None)), ("stack", ([V, V],)), ("stack", ([V, V], 1)), ("vstack", ([A, V],)),
    ("hstack", ([V, V],)), ("hstack", ([A, A],)), ("column_stack", ([V, V],)), ("tile", (V, 2)),
    ("tile", (A, (2, 1))), ("repeat", (V, 2)), ("repeat", (A, 2, 1)), ("flip", (A,)), ("flip", (A, 1)),
    ("fliplr", (A,)), ("flipud", (A,)), ("roll", (A, 1)), ("roll", (A, 2, 1)), ("tril", (A,)), ("triu", (A, 1)),
    ("diagonal", (A[:, :3],)), ("diag", (V,)), ("diag", (V, 1)), ("diag", (V, -2)), ("diag", (A[:, :3],)),
    ("where", (A > 0, A, 0.0)), ("where", (A > 0, 1.0, V)), ("clip", (A, -0.5, 0.5)), ("clip", (A, None, 0.2)),
    ("clip", (A, V, 1.0)), ("equal", (A, A)), ("less", (A, 0)), ("greater_equal", (A, V)),
    ("logical_and", (A > 0, A < 1)), ("logical_not", (A > 0,)), ("isclose", (A, A + 1e-9)),
    ("zeros", ((2, 3),)), ("zeros", (3,)), ("ones", ((2,), onp.float32)), ("empty", ((2, 2),)),
    ("full", ((2, 2), 7)), ("full", ((2,), 1.5)), ("eye", (3,)), ("eye", (3, 4, 1)), ("identity", (2,)),
    ("arange", (5,)), ("arange", (0.0, 1.0, 0.25)), ("linspace", (0, 1, 5)), ("linspace", (0, 1)),
    ("zeros_like", (A,)), ("ones_like", (INTS,)), ("full_like", (A, 3.0)), ("array", ([[1, 2], [3, 4]],)),
    ("array", ([1.0, 2.0],)), ("array", ([True, False],)), ("asarray", (A,)), ("copy", (A,)),
    ("split", (onp.arange(6.0), 3)), ("split", (onp.arange(6.0), [1, 4])),
]


@pytest.mark.parametrize("name, args", FORWARD, ids=[f"{n}-{i}" for i, (n, _) in enumerate(FORWARD)])
def test_forward_matches_numpy(name, args):
    got = getattr(enp, name)(*args)
    want = getattr(onp, name)(*args)
    if name == "empty":
        assert tuple(got.shape) == want.shape and got.dtype.np == want.dtype
        return
    if isinstance(want, (list, tuple)):
        assert len(got) == len(want)
        for g, w in zip(got, want):
            onp.testing.assert_allclose(onp.asarray(g), w)
        return
    assert isinstance(got, em.Tensor)
    g = onp.asarray(got)
    w = onp.asarray(want)
    assert g.shape == w.shape and g.dtype == w.dtype
    onp.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-12, equal_nan=True)


def test_inputs_of_every_kind_mix():
    t = em.tensor(A)
    for args in [(t, B), (A, em.tensor(B)), (t.tolist(), B), (em.tensor(A), em.tensor(B))]:
        onp.testing.assert_allclose(onp.asarray(enp.dot(*args)), A @ B)
    assert enp.add(t, onp.float64(2.0)).dtype is em.float64
    assert (enp.multiply(em.ones(2, dtype=em.float32), onp.ones(2)).dtype is em.float64)  # both promote like NumPy
    assert enp.multiply(em.ones(2, dtype=em.float32), 2.5).dtype is em.float32
    stacked = enp.array([em.tensor(1.0), 2.0, onp.float64(3.0)])
    assert stacked.tolist() == [1.0, 2.0, 3.0]


def test_constants_dtypes_and_random():
    assert enp.pi == onp.pi and enp.e == onp.e and enp.newaxis is None and enp.inf == onp.inf
    assert enp.float32 is em.float32 and enp.float64 is em.float64 and enp.int64 is em.int64
    assert enp.random.randn is onp.random.randn and enp.random.RandomState is onp.random.RandomState
    assert enp.zeros(2, dtype=enp.float32).dtype is em.float32
    x = enp.ones((2, 3))
    assert x[:, enp.newaxis].shape == (2, 1, 3)


def test_linalg_norm_and_predicates():
    for args in [(A,), (V,), (V, 1), (V, 3), (V, onp.inf), (V, -onp.inf), (V, 0), (A, None, 1), (A, "fro")]:
        onp.testing.assert_allclose(onp.asarray(enp.linalg.norm(*args)), onp.linalg.norm(*args), rtol=1e-12)
    for args in [(A, 2), (A, -2), (A, "nuc"), (A, onp.inf), (A, -1), (T3, None, (0, 2)), (T3, 3, 1), (A, None, None, True)]:
        onp.testing.assert_allclose(onp.asarray(enp.linalg.norm(*args)), onp.linalg.norm(*args), rtol=1e-12)
    assert enp.allclose(A, A + 1e-10) is True and enp.allclose(A, A + 1) is False
    assert enp.array_equal(A, A) and not enp.array_equal(A, A[:2])
    assert enp.shape(A) == (3, 4) and enp.ndim(T3) == 3 and enp.size(A) == 12 and enp.size(A, 1) == 4
    rows, cols = enp.where(A > 0)
    want = onp.where(A > 0)
    assert rows.tolist() == want[0].tolist() and cols.tolist() == want[1].tolist()


def test_out_argument_is_refused():
    with pytest.raises(NotImplementedError, match="out="):
        enp.sum(A, 0, None, onp.zeros(4))


# --- gradients through ember.numpy ---------------------------------------------------------------
GRADIENTS = [
    ("exp", lambda x: enp.exp(x)),
    ("log", lambda x: enp.log(enp.abs(x) + 1.0)),
    ("tanh_sqrt_square", lambda x: enp.tanh(x) * enp.sqrt(enp.square(x) + 1.0)),
    ("sin_cos_sinh_cosh", lambda x: enp.sin(x) * enp.cos(x) + enp.sinh(x) / enp.cosh(x)),
    ("log1p_abs", lambda x: enp.log1p(enp.abs(x))),
    ("power", lambda x: enp.power(enp.abs(x) + 0.5, 2.5) + enp.power(2.0, x)),
    ("maximum_minimum", lambda x: enp.maximum(x, 0.1) * enp.minimum(x, V)),
    ("logaddexp", lambda x: enp.logaddexp(x, 2 * x)),
    ("dot_matrix", lambda x: enp.dot(x, B)),
    ("dot_3d", lambda x: enp.dot(enp.stack([x, 2 * x]), B)),
    ("matmul_outer", lambda x: enp.matmul(x.T, x) + enp.outer(x[0], x[1])),
    ("inner_tensordot_einsum", lambda x: enp.inner(x, x) + enp.tensordot(x, x, ([1], [1])) + enp.einsum("ij,kj->ik", x, x)),
    ("sum_axis_keepdims", lambda x: x - enp.sum(x, axis=1, keepdims=True)),
    ("mean_var_std", lambda x: enp.mean(x, 0) + enp.var(x, axis=1).sum() + enp.std(x, ddof=1)),
    ("max_min", lambda x: enp.max(x, axis=1) + enp.min(x)),
    ("prod_cumsum", lambda x: enp.prod(x, 0) + enp.cumsum(x)[-1]),
    ("where_clip", lambda x: enp.where(x > 0, x * 3, enp.clip(x, -0.3, 0.3))),
    ("reshape_transpose", lambda x: enp.transpose(enp.reshape(x, (2, 6))) * enp.arange(6.0)[:, None]),
    ("concatenate_stack", lambda x: enp.concatenate([x, x ** 2], axis=1) + enp.stack([x, x], 2).sum(2).sum()),
    ("expand_squeeze_swap", lambda x: enp.squeeze(enp.swapaxes(enp.expand_dims(x, 0), 0, 1) ** 3, 1)),
    ("tile_repeat", lambda x: enp.tile(x, (1, 2)) * enp.repeat(x, 2, axis=1)),
    ("flip_roll_tril", lambda x: enp.tril(enp.roll(enp.flip(x, 0), 1, 1) * x)),
    ("diag_trace", lambda x: enp.diag(x[0]) * enp.trace(x[:, :3])),
    ("sort", lambda x: enp.sort(x, axis=1) * enp.arange(4.0)),
    ("linalg_norm", lambda x: enp.linalg.norm(x, axis=1) + enp.linalg.norm(x)),
    ("split_vstack", lambda x: enp.vstack(enp.split(x, 2, axis=1)) ** 2),
    ("array_of_tensors", lambda x: enp.array([x[0, 0], x[1, 1] * 2, 3.0]) * enp.array([x[2, 2], 1.0, 2.0])),
]


@pytest.mark.parametrize("name, fn", GRADIENTS, ids=[g[0] for g in GRADIENTS])
def test_gradients_through_numpy_api(name, fn):
    x = em.tensor(A + 0.1, requires_grad=True)  # no ties or kinks at the sample points
    assert em.autograd.gradcheck(fn, (x,))


def test_gradients_match_torch_on_a_small_network():
    def loss(lib_np, W1, W2, X, y):
        h = lib_np.tanh(X @ W1)
        out = h @ W2
        return ((out - y) ** 2).mean()

    X, y = _rng.standard_normal((8, 3)), _rng.standard_normal((8, 1))
    W1, W2 = _rng.standard_normal((3, 5)), _rng.standard_normal((5, 1))
    g1, g2 = em.grad(lambda a, b: loss(enp, a, b, X, y), argnums=(0, 1))(W1, W2)
    tW1, tW2 = torch.tensor(W1, requires_grad=True), torch.tensor(W2, requires_grad=True)
    loss(torch, tW1, tW2, torch.tensor(X), torch.tensor(y)).backward()
    onp.testing.assert_allclose(g1, tW1.grad.numpy(), rtol=1e-12)
    onp.testing.assert_allclose(g2, tW2.grad.numpy(), rtol=1e-12)
    assert isinstance(g1, onp.ndarray) and g1.dtype == onp.float64


# --- HIPS autograd programs -------------------------------------------------------------------
def _hips_logistic_regression(np, grad, steps=100):
    """The logistic regression example from HIPS autograd's README, with only its imports changed."""

    def sigmoid(x):
        return 0.5 * (np.tanh(x / 2.0) + 1)

    def logistic_predictions(weights, inputs):
        return sigmoid(np.dot(inputs, weights))

    def training_loss(weights, inputs, targets):
        preds = logistic_predictions(weights, inputs)
        label_probabilities = preds * targets + (1 - preds) * (1 - targets)
        return -np.sum(np.log(label_probabilities))

    inputs = onp.array([[0.52, 1.12, 0.77], [0.88, -1.08, 0.15], [0.52, 0.06, -1.30], [0.74, -2.49, 1.39]])
    targets = onp.array([True, True, False, True])
    training_gradient_fun = grad(training_loss, argnum=0)
    weights = onp.array([0.0, 0.0, 0.0])
    initial = training_loss(weights, inputs, targets)
    for _ in range(steps):
        weights -= training_gradient_fun(weights, inputs, targets) * 0.01
    return initial, training_loss(weights, inputs, targets), weights


def _torch_logistic_regression(steps=100):
    inputs = torch.tensor([[0.52, 1.12, 0.77], [0.88, -1.08, 0.15], [0.52, 0.06, -1.30], [0.74, -2.49, 1.39]],
                          dtype=torch.float64)
    targets = torch.tensor([1.0, 1.0, 0.0, 1.0], dtype=torch.float64)
    w = torch.zeros(3, dtype=torch.float64, requires_grad=True)
    for _ in range(steps):
        preds = 0.5 * (torch.tanh(inputs @ w / 2.0) + 1)
        loss = -torch.log(preds * targets + (1 - preds) * (1 - targets)).sum()
        (g,) = torch.autograd.grad(loss, w)
        with torch.no_grad():
            w -= g * 0.01
    return w.detach().numpy()


def test_hips_logistic_regression_program_runs_unchanged():
    initial, trained, weights = _hips_logistic_regression(enp, em.grad)
    assert isinstance(weights, onp.ndarray) and weights.dtype == onp.float64
    onp.testing.assert_allclose(float(initial), 4 * onp.log(2))
    assert float(trained) < 1.1 < float(initial)
    onp.testing.assert_allclose(weights, _torch_logistic_regression(), rtol=1e-10)


def test_hips_style_training_loop_with_tensor_weights_and_value_and_grad():
    X = _rng.standard_normal((32, 3))
    y = X @ onp.array([1.0, -2.0, 0.5]) + 0.1

    def loss(W, b, xs, ys):
        return enp.mean((enp.dot(xs, W) + b - ys) ** 2)

    W, b = enp.zeros(3), 0.0
    vg = em.value_and_grad(loss, argnums=(0, 1))
    first = None
    for _ in range(300):
        value, (gW, gb) = vg(W, b, X, y)
        first = float(value) if first is None else first
        W -= 0.1 * gW  # W is a tensor: updated in place
        b -= 0.1 * gb  # b is a Python float: gb is one too
    assert isinstance(W, em.Tensor) and isinstance(gb, float) and isinstance(b, float)
    onp.testing.assert_allclose(onp.asarray(W), [1.0, -2.0, 0.5], atol=1e-3)
    assert abs(b - 0.1) < 1e-3 and float(value) < 1e-5 < first


def test_hips_style_params_as_a_list_of_tuples():
    rs = onp.random.RandomState(0)
    params = [(rs.randn(3, 4) * 0.1, rs.randn(4) * 0.1), (rs.randn(4, 1) * 0.1, rs.randn(1) * 0.1)]
    X, y = rs.randn(16, 3), rs.randn(16, 1)

    def predict(params, inputs):
        for W, b in params:
            outputs = np.dot(inputs, W) + b
            inputs = np.tanh(outputs)
        return outputs

    np = enp

    def objective(params):
        return np.sum((predict(params, X) - y) ** 2)

    grads = em.grad(objective)(params)
    assert isinstance(grads, list) and isinstance(grads[0], tuple) and len(grads) == 2
    assert grads[0][0].shape == (3, 4) and isinstance(grads[1][1], onp.ndarray)
    # compare with torch
    tparams = [(torch.tensor(W, requires_grad=True), torch.tensor(b, requires_grad=True)) for W, b in params]
    inputs = torch.tensor(X)
    for W, b in tparams:
        outputs = inputs @ W + b
        inputs = torch.tanh(outputs)
    ((outputs - torch.tensor(y)) ** 2).sum().backward()
    for (gW, gb), (tW, tb) in zip(grads, tparams):
        onp.testing.assert_allclose(gW, tW.grad.numpy(), rtol=1e-10)
        onp.testing.assert_allclose(gb, tb.grad.numpy(), rtol=1e-10)


def test_grad_over_a_dict_of_params():
    params = {"w": em.tensor([1.0, 2.0]), "scale": 3.0}
    g = em.grad(lambda p: enp.sum(p["w"] ** 2) * p["scale"])(params)
    assert set(g) == {"w", "scale"} and g["w"].tolist() == [6.0, 12.0] and g["scale"] == 5.0


# --- transforms ------------------------------------------------------------------------------------
def test_grad_argnums_and_argnum():
    def f(x, y, z):
        return enp.sum(x * y**2) + z

    x, y = onp.array([1.0, 2.0]), onp.array([3.0, 4.0])
    onp.testing.assert_allclose(em.grad(f)(x, y, 1.0), y**2)
    onp.testing.assert_allclose(em.grad(f, argnum=1)(x, y, 1.0), 2 * x * y)
    onp.testing.assert_allclose(em.grad(f, argnums=1)(x, y, 1.0), 2 * x * y)
    gx, gz = em.grad(f, argnums=(0, 2))(x, y, 1.0)
    onp.testing.assert_allclose(gx, y**2)
    assert gz == 1.0
    assert em.grad(f, argnums=-1)(x, y, 1.0) == 1.0
    with pytest.raises(TypeError, match="argnums"):
        em.grad(f, argnums=5)(x, y, 1.0)


def test_grad_returns_the_kind_it_was_given():
    f = lambda x: enp.sum(x**3)  # noqa: E731
    assert isinstance(em.grad(f)(2.0), float) and em.grad(f)(2.0) == 12.0
    assert isinstance(em.grad(f)(onp.float64(2.0)), float)
    g = em.grad(f)(onp.array([1.0, 2.0], dtype=onp.float32))
    assert isinstance(g, onp.ndarray) and g.dtype == onp.float32
    t = em.tensor([1.0, 2.0])
    gt = em.grad(f)(t)
    assert isinstance(gt, em.Tensor) and gt.tolist() == [3.0, 12.0] and not gt.requires_grad
    assert not t.requires_grad and t.grad is None
    assert em.grad(f)(3) == 27.0  # an int is differentiated as a float


def test_value_and_grad_and_has_aux():
    def f(x):
        return enp.sum(enp.sin(x)), {"n": 3}

    x = onp.array([0.5, 1.0])
    (value, aux), g = em.value_and_grad(f, has_aux=True)(x)
    onp.testing.assert_allclose(float(value), onp.sin(x).sum())
    onp.testing.assert_allclose(g, onp.cos(x))
    assert aux == {"n": 3}
    g2, aux2 = em.grad(f, has_aux=True)(x)
    onp.testing.assert_allclose(g2, onp.cos(x))
    assert aux2 == {"n": 3}
    value, g3 = em.value_and_grad(lambda v: enp.sum(v**2))(x)
    assert not value.requires_grad
    onp.testing.assert_allclose(g3, 2 * x)


def test_grad_of_a_function_not_depending_on_its_argument_is_zero():
    g = em.grad(lambda x, y: enp.sum(y**2), argnums=0)(onp.array([1.0, 2.0]), onp.array([3.0]))
    assert g.tolist() == [0.0, 0.0]


def test_grad_rejects_non_scalar_outputs():
    with pytest.raises(TypeError, match="scalar"):
        em.grad(lambda x: x * 2)(onp.array([1.0, 2.0]))


def test_nested_grad_matches_analytic_derivatives():
    f = lambda x: enp.sin(x) * x**3  # noqa: E731
    d1 = em.grad(f)
    d2 = em.grad(em.grad(f))
    d3 = em.grad(em.grad(em.grad(f)))
    x = 0.7
    s, c = onp.sin(x), onp.cos(x)
    onp.testing.assert_allclose(d1(x), c * x**3 + 3 * x**2 * s)
    onp.testing.assert_allclose(d2(x), -s * x**3 + 6 * x**2 * c + 6 * x * s)
    onp.testing.assert_allclose(d3(x), -c * x**3 - 9 * x**2 * s + 18 * x * c + 6 * s)


def test_nested_grad_on_tensors_matches_torch():
    def f(L, x):
        return (L.tanh(x) ** 2).sum()

    a = _rng.standard_normal(5)
    hvp = em.grad(lambda x: enp.sum(em.grad(lambda y: f(em, y))(x) * a))(em.tensor(a))
    xt = torch.tensor(a, requires_grad=True)
    (gt,) = torch.autograd.grad(f(torch, xt), xt, create_graph=True)
    (ht,) = torch.autograd.grad((gt * torch.tensor(a)).sum(), xt)
    onp.testing.assert_allclose(onp.asarray(hvp), ht.numpy(), rtol=1e-10)


def test_grad_inside_grad_of_independent_variables():
    # d/dx [x * d/dy (x*y)^2 at y=1] = d/dx [2 x^3] = 6 x^2
    outer = em.grad(lambda x: x * em.grad(lambda y: (x * y) ** 2)(em.tensor(1.0, dtype=em.float64)))
    onp.testing.assert_allclose(outer(1.5), 6 * 1.5**2)
