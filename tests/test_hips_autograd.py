"""HIPS autograd's modules in Ember — ember.scipy (special, signal, stats), ember.misc (flatten, optimizers),
the transforms (make_vjp, make_jvp, elementwise_grad, jacobian, hessian, ...) and ember.test_util — against
HIPS autograd itself (values and gradients) and SciPy."""

import numpy as onp
import pytest

import ember as em
import ember.numpy as np
import ember.scipy.special as esp
import ember.scipy.stats as es
import ember.scipy.stats.norm as norm
from ember.misc import flatten
from ember.misc.optimizers import adam, rmsprop, sgd
from ember.scipy.signal import convolve
from ember.test_util import check_grads

autograd = pytest.importorskip("autograd")
anp = pytest.importorskip("autograd.numpy")
asp = pytest.importorskip("autograd.scipy.special")
ast = pytest.importorskip("autograd.scipy.stats")
asignal = pytest.importorskip("autograd.scipy.signal")
amisc = pytest.importorskip("autograd.misc")
aopt = pytest.importorskip("autograd.misc.optimizers")
sst = pytest.importorskip("scipy.stats")

RNG = onp.random.default_rng(0)
X = RNG.standard_normal(5)
POS = onp.abs(X) + 0.3
UNIT = RNG.uniform(0.05, 0.95, 5)
M = RNG.standard_normal((4, 3))
C = onp.array([[2.0, 0.3, 0.1], [0.3, 1.0, 0.2], [0.1, 0.2, 1.5]])
MEAN = onp.array([0.1, -0.2, 0.3])
ALPHA = onp.array([1.5, 2.0, 3.0])
P = RNG.dirichlet(ALPHA)
K = onp.array([0.0, 1.0, 3.0, 5.0])


def _close(ours, theirs, rtol=1e-10, atol=1e-12):
    onp.testing.assert_allclose(onp.asarray(ours, dtype=float), onp.asarray(theirs, dtype=float), rtol=rtol, atol=atol)


def _same_grad(name, args, argnum=0, rtol=1e-9):
    """The value and the gradient (of the sum, w.r.t. argument argnum) equal autograd's."""
    ours, theirs = NAMES[name]
    _close(ours(*args), theirs(*args))
    ge = em.grad(lambda *a: np.sum(ours(*a)), argnum)(*args)
    ga = autograd.grad(lambda *a: anp.sum(theirs(*a)), argnum)(*args)
    _close(ge, ga, rtol=rtol, atol=1e-11)


NAMES = {
    "gammaln": (esp.gammaln, asp.gammaln), "digamma": (esp.digamma, asp.digamma), "psi": (esp.psi, asp.psi),
    "gamma": (esp.gamma, asp.gamma), "rgamma": (esp.rgamma, asp.rgamma), "erf": (esp.erf, asp.erf),
    "erfc": (esp.erfc, asp.erfc), "erfinv": (esp.erfinv, asp.erfinv), "erfcinv": (esp.erfcinv, asp.erfcinv),
    "expit": (esp.expit, asp.expit), "logit": (esp.logit, asp.logit),
    "polygamma": (lambda x: esp.polygamma(2, x), lambda x: asp.polygamma(2, x)),
    "multigammaln": (lambda x: esp.multigammaln(x + 2, 3), lambda x: asp.multigammaln(x + 2, 3)),
    "beta": (lambda a: esp.beta(a, 2.5), lambda a: asp.beta(a, 2.5)),
    "betaln": (lambda a: esp.betaln(2.5, a), lambda a: asp.betaln(2.5, a)),
    "gammainc": (lambda x: esp.gammainc(2.5, x), lambda x: asp.gammainc(2.5, x)),
    "gammaincc": (lambda x: esp.gammaincc(2.5, x), lambda x: asp.gammaincc(2.5, x)),
    "logsumexp": (esp.logsumexp, asp.logsumexp),
    "logsumexp_axis": (lambda m: esp.logsumexp(m, axis=1, keepdims=True), lambda m: asp.logsumexp(m, axis=1, keepdims=True)),
    "logsumexp_b": (lambda m: esp.logsumexp(m, axis=0, b=M[:, :1] ** 2), lambda m: asp.logsumexp(m, axis=0, b=M[:, :1] ** 2)),
    "norm.logpdf": (lambda x: norm.logpdf(x, 0.3, 1.7), lambda x: ast.norm.logpdf(x, 0.3, 1.7)),
    "norm.pdf_scale": (lambda s: norm.pdf(X, 0.3, s), lambda s: ast.norm.pdf(X, 0.3, s)),
    "norm.cdf": (lambda x: norm.cdf(x, 0.3, 1.7), lambda x: ast.norm.cdf(x, 0.3, 1.7)),
    "norm.logcdf": (norm.logcdf, ast.norm.logcdf), "norm.sf": (norm.sf, ast.norm.sf),
    "norm.logsf": (norm.logsf, ast.norm.logsf),
    "t.logpdf": (lambda x: es.t.logpdf(x, 3.5, 0.2, 1.3), lambda x: ast.t.logpdf(x, 3.5, 0.2, 1.3)),
    "t.logpdf_df": (lambda df: es.t.logpdf(X, df), lambda df: ast.t.logpdf(X, df)),
    "gamma.logpdf": (lambda a: es.gamma.logpdf(POS, a), lambda a: ast.gamma.logpdf(POS, a)),
    "gamma.logpdf_x": (lambda x: es.gamma.logpdf(x, 2.5), lambda x: ast.gamma.logpdf(x, 2.5)),
    "gamma.cdf": (lambda x: es.gamma.cdf(x, 2.5), lambda x: ast.gamma.cdf(x, 2.5)),
    "chi2.logpdf": (lambda x: es.chi2.logpdf(x, 3.0), lambda x: ast.chi2.logpdf(x, 3.0)),
    "beta.logpdf": (lambda x: es.beta.logpdf(x, 2.0, 3.0), lambda x: ast.beta.logpdf(x, 2.0, 3.0)),
    "poisson.logpmf": (lambda mu: es.poisson.logpmf(K, mu), lambda mu: ast.poisson.logpmf(K, mu)),
    "dirichlet.logpdf": (lambda a: es.dirichlet.logpdf(P, a), lambda a: ast.dirichlet.logpdf(P, a)),
    "mvn.logpdf_x": (lambda x: es.multivariate_normal.logpdf(x, MEAN, C),
                     lambda x: ast.multivariate_normal.logpdf(x, MEAN, C)),
    "mvn.logpdf_cov": (lambda c: es.multivariate_normal.logpdf(M, MEAN, c),
                       lambda c: ast.multivariate_normal.logpdf(M, MEAN, c)),
    "mvn.entropy": (lambda c: es.multivariate_normal.entropy(MEAN, c), lambda c: ast.multivariate_normal.entropy(MEAN, c)),
}
ARGS = {
    "gammaln": (POS,), "digamma": (POS,), "psi": (POS,), "gamma": (POS,), "rgamma": (POS,), "erf": (X,), "erfc": (X,),
    "erfinv": (UNIT,), "erfcinv": (UNIT,), "expit": (X,), "logit": (UNIT,), "polygamma": (POS,),
    "multigammaln": (POS,), "beta": (POS,), "betaln": (POS,),
    "gammainc": (POS,), "gammaincc": (POS,), "logsumexp": (M,), "logsumexp_axis": (M,), "logsumexp_b": (M,),
    "norm.logpdf": (X,), "norm.pdf_scale": (1.3,), "norm.cdf": (X,), "norm.logcdf": (X,), "norm.sf": (X,),
    "norm.logsf": (X,), "t.logpdf": (X,), "t.logpdf_df": (3.5,), "gamma.logpdf": (2.5,), "gamma.logpdf_x": (POS,), "gamma.cdf": (POS,),
    "chi2.logpdf": (POS,), "beta.logpdf": (UNIT,), "poisson.logpmf": (2.3,), "dirichlet.logpdf": (ALPHA,),
    "mvn.logpdf_x": (M,), "mvn.logpdf_cov": (C,), "mvn.entropy": (C,),
}


@pytest.mark.parametrize("name", sorted(NAMES))
def test_values_and_gradients_match_hips_autograd(name):
    _same_grad(name, ARGS[name])


@pytest.mark.parametrize(("name", "args"), [("xlogy", (X, POS)), ("xlog1py", (X, POS)), ("entr", (POS,)),
                                           ("ndtr", (X,)), ("log_ndtr", (X * 10,)), ("ndtri", (UNIT,))])
def test_functions_autograd_lacks_match_scipy_and_finite_differences(name, args):
    scipy_special = pytest.importorskip("scipy.special")
    _close(getattr(esp, name)(*args), getattr(scipy_special, name)(*args))
    check_grads(getattr(esp, name), argnum=len(args) - 1, modes=["rev"])(*args)


@pytest.mark.parametrize(("dist", "fn", "args"), [
    ("norm", "logpdf", (X, 0.3, 1.7)), ("norm", "ppf", (UNIT, 1.0, 2.0)), ("t", "pdf", (X, 3.5)),
    ("gamma", "logpdf", (X, 2.5)), ("gamma", "pdf", (POS, 2.5, 0.1, 2.0)), ("chi2", "cdf", (POS, 3.0)),
    ("beta", "logpdf", (onp.append(UNIT, [-0.1, 1.2]), 2.0, 3.0)), ("poisson", "logpmf", (onp.array([0.0, 2, 2.5, -1]), 2.3)),
    ("poisson", "cdf", (onp.array([0.0, 2, 2.5, -1]), 2.3)), ("multivariate_normal", "pdf", (M, MEAN, C)),
])
def test_distributions_match_scipy_outside_their_support_too(dist, fn, args):
    _close(getattr(getattr(es, dist), fn)(*args), getattr(getattr(sst, dist), fn)(*args))


CONV = [((5,), (3,), None, ((), ()), "full"), ((3,), (5,), None, ((), ()), "valid"), ((6,), (4,), None, ((), ()), "same"),
        ((4, 5), (3, 2), None, ((), ()), "same"), ((2, 3, 6, 6), (3, 4, 3, 3), ([2, 3], [2, 3]), ([1], [0]), "valid"),
        ((2, 3, 5, 5), (3, 4, 2, 2), ([2, 3], [2, 3]), ([1], [0]), "full")]


@pytest.mark.parametrize(("sa", "sb", "axes", "dots", "mode"), CONV)
def test_convolve_matches_hips_autograd(sa, sb, axes, dots, mode):
    a, b = RNG.standard_normal(sa), RNG.standard_normal(sb)
    ours = convolve(a, b, axes=axes, dot_axes=dots, mode=mode)
    theirs = asignal.convolve(a, b, axes=axes, dot_axes=dots, mode=mode)
    _close(ours, theirs)
    w = RNG.standard_normal(theirs.shape)
    for argnum in (0, 1):
        ge = em.grad(lambda a, b: np.sum(convolve(a, b, axes, dots, mode) * w), argnum)(a, b)
        ga = autograd.grad(lambda a, b: anp.sum(asignal.convolve(a, b, axes=axes, dot_axes=dots, mode=mode) * w),
                           argnum)(a, b)
        _close(ge, ga)


def test_convolve_second_derivatives_are_exact():
    check_grads(lambda a: convolve(a, onp.array([0.5, -1.0, 2.0]), mode="same") ** 2, modes=["rev"])(X)


def _f(np_):
    return lambda x: np_.tanh(x) * np_.sum(x**2)


TRANSFORMS = [
    ("jacobian", lambda m: m.jacobian(_f(np)), lambda: autograd.jacobian(_f(anp)), (X[:3],)),
    ("hessian", lambda m: m.hessian(lambda x: np.sum(_f(np)(x))), lambda: autograd.hessian(lambda x: anp.sum(_f(anp)(x))),
     (X[:3],)),
    ("elementwise_grad", lambda m: m.elementwise_grad(np.tanh), lambda: autograd.elementwise_grad(anp.tanh), (X,)),
    ("hessian_vector_product", lambda m: m.hessian_vector_product(lambda x: np.sum(_f(np)(x))),
     lambda: autograd.hessian_vector_product(lambda x: anp.sum(_f(anp)(x))), (X[:3], X[2:])),
    ("tensor_jacobian_product", lambda m: m.tensor_jacobian_product(_f(np)),
     lambda: autograd.tensor_jacobian_product(_f(anp)), (X[:3], X[2:])),
    ("jacobian_of_a_matrix", lambda m: m.jacobian(lambda w: np.dot(M, w)), lambda: autograd.jacobian(lambda w: anp.dot(M, w)),
     (X[:3],)),
    ("jacobian_scalar_arg", lambda m: m.jacobian(lambda s: np.sin(s * X)), lambda: autograd.jacobian(lambda s: anp.sin(s * X)),
     (0.7,)),
]


@pytest.mark.parametrize(("name", "ours", "theirs", "args"), TRANSFORMS, ids=[t[0] for t in TRANSFORMS])
def test_transforms_match_hips_autograd(name, ours, theirs, args):
    got, want = ours(em)(*args), theirs()(*args)
    assert onp.shape(got) == onp.shape(want)
    _close(got, want)


def test_make_vjp_and_make_jvp_match_hips_autograd():
    f, af = _f(np), _f(anp)
    v = X[2:]
    vjp, value = em.make_vjp(f)(X[:3])
    avjp, avalue = autograd.make_vjp(af)(X[:3])
    _close(value, avalue)
    _close(vjp(v), avjp(v))
    _close(vjp(2 * v), avjp(2 * v))  # a VJP can be applied again
    ours = em.make_jvp(f)(X[:3])(v)
    theirs = autograd.make_jvp(af)(X[:3])(v)
    _close(ours[0], theirs[0])
    _close(ours[1], theirs[1])
    # containers: the gradient has the argument's structure
    params = {"w": M, "b": [X[:3], 0.5]}

    def loss(p, np_=np):
        return np_.sum(np_.tanh(np_.dot(M.T, p["w"]) + p["b"][0] * p["b"][1]))

    vjp_c, _ = em.make_vjp(loss)(params)
    avjp_c, _ = autograd.make_vjp(lambda p: loss(p, anp))(params)
    g, ag = vjp_c(1.0), avjp_c(1.0)
    _close(g["w"], ag["w"])
    _close(g["b"][0], ag["b"][0])
    assert isinstance(g["b"][1], float) and abs(g["b"][1] - ag["b"][1]) < 1e-12


def test_check_grads_passes_right_derivatives_and_catches_wrong_ones():
    check_grads(_f(np), modes=["fwd", "rev"], order=2)(X[:3])
    check_grads(lambda p: np.sum(p["a"] ** 3) * p["b"][0], modes=["rev"])({"a": X[:2], "b": [1.5]})
    check_grads(lambda x, y: np.sin(x) * y, argnum=1, modes=["rev"])(X[:2], X[2:4])
    with pytest.raises(AssertionError, match="derivative \\(VJP\\) check"):
        check_grads(lambda x: x * onp.array(x), modes=["rev"], order=1)(X[:3])  # a constant copy: half the derivative
    with pytest.raises(AssertionError, match="derivative \\(JVP\\) check"):
        check_grads(lambda x: x * onp.array(x), modes=["fwd"], order=1)(X[:3])


def test_flatten_matches_hips_autograd():
    value = {"w": M, "b": [X[:2], 0.5], "a": (onp.float64(2.0), onp.ones((2, 1)))}
    flat, unflatten = flatten(value)
    aflat, _ = amisc.flatten(value)
    assert type(flat) is onp.ndarray
    _close(flat, aflat)
    back = unflatten(flat * 2)
    _close(back["w"], 2 * M)
    assert back["b"][1] == 1.0 and isinstance(back["a"], tuple) and back["a"][1].shape == (2, 1)
    tflat, tunflatten = flatten([em.ones(2), em.zeros(1, 2)])
    assert isinstance(tflat, np.ndarray) and tunflatten(tflat)[1].shape == (1, 2)


@pytest.mark.parametrize("name", ["adam", "sgd", "rmsprop"])
def test_optimizers_match_hips_autograd_step_for_step(name):
    ours, theirs = {"adam": (adam, aopt.adam), "sgd": (sgd, aopt.sgd), "rmsprop": (rmsprop, aopt.rmsprop)}[name]
    targets = RNG.standard_normal((4, 2))
    init = {"w": RNG.standard_normal((3, 2)), "b": [RNG.standard_normal(2), 0.5]}

    def objective(p, i, np_=np):
        return np_.sum((np_.dot(M, p["w"]) + p["b"][0] * p["b"][1] - targets) ** 2) / (i + 1)

    seen, aseen = [], []
    out = ours(em.grad(objective), init, callback=lambda x, i, g: seen.append((i, x["b"][1], g["w"].copy())),
               num_iters=20, step_size=0.05)
    ref = theirs(autograd.grad(lambda p, i: objective(p, i, anp)), init,
                 callback=lambda x, i, g: aseen.append((i, x["b"][1], g["w"].copy())), num_iters=20, step_size=0.05)
    _close(out["w"], ref["w"], rtol=1e-12)
    assert type(out["w"]) is onp.ndarray and isinstance(out["b"][1], float)
    assert [s[0] for s in seen] == [s[0] for s in aseen] == list(range(20))
    for (_, b, g), (_, ab, ag) in zip(seen, aseen):
        assert abs(b - ab) < 1e-12
        _close(g, ag)


def test_import_forms_of_autograd_programs():
    import ember.numpy.random as npr
    import ember.scipy.stats.multivariate_normal as mvn
    from ember.scipy.stats import t

    assert npr.randn(2).shape == (2,) and t is es.t and mvn is es.multivariate_normal
    assert callable(em.scipy.special.logsumexp) and em.misc.optimizers.adam is adam
