"""Reverse-mode autograd against PyTorch: backward, grad, higher order, in-place ops and views, errors."""

import numpy as np
import pytest
import torch

import ember as em


def _inputs(shapes, seed):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(s) for s in shapes]


def compare(fn, *shapes, seed=0, atol=1e-10):
    """Run fn(lib, *leaves) with torch and ember on the same float64 data; both must fail or agree.

    fn calls backward itself. Returns the ember leaves so a test can look further.
    """
    arrays = _inputs(shapes, seed)
    t_in = [torch.tensor(a, requires_grad=True) for a in arrays]
    e_in = [em.tensor(a, requires_grad=True) for a in arrays]
    t_err = e_err = None
    try:
        fn(torch, *t_in)
    except RuntimeError as exc:
        t_err = exc
    try:
        fn(em, *e_in)
    except RuntimeError as exc:
        e_err = exc
    assert (t_err is None) == (e_err is None), f"torch raised {t_err!r}, ember raised {e_err!r}"
    if t_err is None:
        for k, (t, e) in enumerate(zip(t_in, e_in)):
            assert (t.grad is None) == (e.grad is None), f"input {k}: torch grad {t.grad}, ember grad {e.grad}"
            if t.grad is not None:
                np.testing.assert_allclose(e.grad.numpy(), t.grad.numpy(), atol=atol, err_msg=f"input {k}")
    return e_in


# --- basics -------------------------------------------------------------------------------------
def test_backward_accumulates_into_leaves():
    def fn(L, x, w):
        (x @ w).tanh().sum().backward()
        ((x * 2).sum() + (w**2).mean()).backward()

    compare(fn, (3, 4), (4, 2))


def test_leaf_used_twice_and_broadcast_gradients_are_reduced():
    def fn(L, x, b):
        y = x * x + b  # b (4,) broadcast over x (3, 4)
        (y * x).sum().backward()

    compare(fn, (3, 4), (4,))


def test_backward_with_explicit_gradient():
    def fn(L, x):
        y = x.exp() * 3
        y.backward(L.tensor(np.arange(12.0).reshape(3, 4), dtype=L.float64))

    compare(fn, (3, 4))


def test_retain_graph_allows_second_backward():
    def fn(L, x):
        y = (x.sin() * x).sum()
        y.backward(retain_graph=True)
        y.backward()

    compare(fn, (5,))


def test_backward_on_non_scalar_without_gradient_raises():
    x = em.ones(3, requires_grad=True)
    with pytest.raises(RuntimeError, match="scalar outputs"):
        (x * 2).backward()


def test_backward_twice_through_freed_graph_raises():
    x = em.ones(3, requires_grad=True)
    y = (x * x).sum()
    y.backward()
    with pytest.raises(RuntimeError, match="second time"):
        y.backward()


def test_backward_on_tensor_without_grad_raises():
    with pytest.raises(RuntimeError, match="does not require grad"):
        em.ones(2).sum().backward()


def test_detach_requires_grad_and_is_leaf():
    x = em.tensor([1.0, 2.0], requires_grad=True)
    y = x * 2
    d = y.detach()
    assert x.is_leaf and not y.is_leaf and d.is_leaf
    assert not d.requires_grad and y.requires_grad and y.grad_fn is not None
    d[0] = 10.0  # shares storage with y
    assert y[0].item() == 10.0
    z = em.ones(2)
    assert z.requires_grad_() is z and z.requires_grad
    z.requires_grad_(False)
    assert not z.requires_grad
    with pytest.raises(RuntimeError, match="floating point"):
        em.ones(2, dtype=em.int64).requires_grad_()
    with pytest.raises(RuntimeError, match="leaf"):
        y.requires_grad_(False)


def test_tensor_requires_grad_argument():
    x = em.tensor([1.0, 2.0], requires_grad=True)
    assert x.requires_grad and x.is_leaf and x.grad is None
    (x * x).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [2.0, 4.0])


def test_retain_grad_matches_torch():
    grads = {}

    def fn(L, x):
        h = x * 2
        h.retain_grad()
        k = h.exp()
        k.retain_grad()
        (k * h).sum().backward()
        grads[L.__name__] = (h.grad.detach().numpy().copy(), k.grad.detach().numpy().copy())

    compare(fn, (2, 3))
    for e, t in zip(grads["ember"], grads["torch"]):
        np.testing.assert_allclose(e, t)


def _passes_through(L, x, y):
    """x + y and y + x: add's gradient hands the incoming gradient on as it is, to a leaf and to a retained grad."""
    return x + y


@pytest.mark.parametrize("root", ["leaf", "through_add", "retained"])
def test_gradients_never_share_memory_with_the_callers_gradient(root):
    """backward(G) twice: the second pass adds into .grad in place, which must not write into G (as in PyTorch,
    which copies G where a .grad would keep it); and a retained grad accumulates over passes, as PyTorch's."""
    seen = {}
    for L in (torch, em):
        x = L.tensor([1.0, 2.0, 3.0], requires_grad=True)
        z = L.tensor([0.5, 0.5, 0.5])
        G = L.tensor([1.0, 2.0, 3.0])
        held = L.tensor([1.0, 2.0, 3.0])
        out = x if root == "leaf" else _passes_through(L, x, z)
        if root == "retained":
            out.retain_grad()
        for _ in range(2):
            out.backward(G, retain_graph=True)
        assert G.tolist() == held.tolist(), f"{L.__name__}: the caller's gradient changed: {G.tolist()}"
        grads = [x.grad.tolist()] + ([out.grad.tolist()] if root == "retained" else [])
        seen[L.__name__] = grads
    assert seen["ember"] == seen["torch"] == [[2.0, 4.0, 6.0]] * (2 if root == "retained" else 1)


def test_a_leaf_and_a_retained_grad_fed_the_same_gradient_do_not_share_it():
    x = em.ones(3, requires_grad=True)
    y = x + 1
    y.retain_grad()
    y.sum().backward()
    x.grad.mul_(10)  # writing one must leave the other alone
    assert y.grad.tolist() == [1.0, 1.0, 1.0] and x.grad.tolist() == [10.0, 10.0, 10.0]


def test_non_leaf_grad_is_none_without_retain_grad():
    x = em.ones(2, requires_grad=True)
    h = x * 2
    h.sum().backward()
    assert h.grad is None and x.grad is not None


# --- grad modes -------------------------------------------------------------------------------------
def test_no_grad_and_enable_grad_context_managers():
    x = em.ones(2, requires_grad=True)
    with em.no_grad():
        assert not em.is_grad_enabled()
        assert not (x * 2).requires_grad
        with em.enable_grad():
            assert (x * 2).requires_grad
        assert not (x * 2).requires_grad
    assert em.is_grad_enabled() and (x * 2).requires_grad


def test_no_grad_and_enable_grad_decorators():
    x = em.ones(2, requires_grad=True)

    @em.no_grad()
    def f(t):
        return t * 2

    @em.no_grad
    def g(t):
        return t * 2

    @em.enable_grad()
    def h(t):
        return t * 2

    assert not f(x).requires_grad and not g(x).requires_grad
    with em.no_grad():
        assert h(x).requires_grad
    assert em.is_grad_enabled()
    assert f.__name__ == "f"


def test_set_grad_enabled():
    x = em.ones(2, requires_grad=True)
    with em.set_grad_enabled(False):
        assert not (x * 2).requires_grad
    assert (x * 2).requires_grad
    em.set_grad_enabled(False)
    try:
        assert not em.is_grad_enabled()
    finally:
        em.set_grad_enabled(True)


def test_grad_mode_restored_after_exception():
    with pytest.raises(ValueError):
        with em.no_grad():
            raise ValueError
    assert em.is_grad_enabled()


# --- autograd.grad and higher order --------------------------------------------------------------
def test_autograd_grad_does_not_touch_dot_grad():
    x = em.tensor([1.0, 2.0, 3.0], requires_grad=True)
    (g,) = em.autograd.grad((x**3).sum(), x)
    np.testing.assert_allclose(g.numpy(), 3 * np.array([1.0, 4.0, 9.0]))
    assert x.grad is None and not g.requires_grad


def test_autograd_grad_with_grad_outputs_and_several_inputs():
    a, b = _inputs([(3,), (3,)], 1)
    te = [em.tensor(v, requires_grad=True) for v in (a, b)]
    tt = [torch.tensor(v, requires_grad=True) for v in (a, b)]
    go = np.array([1.0, -2.0, 0.5])
    ge = em.autograd.grad(te[0] * te[1].exp(), te, grad_outputs=em.tensor(go))
    gt = torch.autograd.grad(tt[0] * tt[1].exp(), tt, grad_outputs=torch.tensor(go))
    for e, t in zip(ge, gt):
        np.testing.assert_allclose(e.numpy(), t.numpy())


def test_autograd_grad_unused_input():
    x, y = em.ones(2, requires_grad=True), em.ones(2, requires_grad=True)
    with pytest.raises(RuntimeError, match="allow_unused"):
        em.autograd.grad((x * 2).sum(), [x, y])
    gx, gy = em.autograd.grad((x * 2).sum(), [x, y], allow_unused=True)
    assert gy is None and gx.tolist() == [2.0, 2.0]


def test_autograd_grad_with_respect_to_intermediate():
    x = em.tensor([1.0, 2.0], requires_grad=True)
    h = x * 3
    (g,) = em.autograd.grad((h * h).sum(), h)
    np.testing.assert_allclose(g.numpy(), [6.0, 12.0])


@pytest.mark.parametrize(
    "name, fn",
    [
        ("sin_cubic", lambda L, x: (L.sin(x) * x**3).sum()),
        ("exp_tanh", lambda L, x: (x.exp() * x.tanh()).sum()),
        ("quadratic_form", lambda L, x: ((x @ x.T) ** 2).sum()),
        ("softmax", lambda L, x: (L.softmax(x, 1) * x).sum()),
        ("log_sigmoid", lambda L, x: L.log(L.sigmoid(x) + 1.0).sum()),
    ],
)
def test_higher_order_gradients_match_torch(name, fn):
    (a,) = _inputs([(3, 4)], 2)
    xe, xt = em.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
    ge, gt = em.autograd.grad(fn(em, xe), xe, create_graph=True)[0], torch.autograd.grad(fn(torch, xt), xt,
                                                                                          create_graph=True)[0]
    assert ge.requires_grad
    np.testing.assert_allclose(ge.detach().numpy(), gt.detach().numpy(), atol=1e-10)
    # second order: Hessian-vector product with a fixed vector, then third order of its sum
    v = np.linspace(-1, 1, a.size).reshape(a.shape)
    he = em.autograd.grad((ge * em.tensor(v)).sum(), xe, create_graph=True)[0]
    ht = torch.autograd.grad((gt * torch.tensor(v)).sum(), xt, create_graph=True)[0]
    np.testing.assert_allclose(he.detach().numpy(), ht.detach().numpy(), atol=1e-9)
    te = em.autograd.grad(he.sum(), xe)[0]
    tt = torch.autograd.grad(ht.sum(), xt)[0]
    np.testing.assert_allclose(te.numpy(), tt.numpy(), atol=1e-8)


@pytest.mark.filterwarnings("ignore:Using backward\\(\\) with create_graph=True")
def test_backward_create_graph_then_differentiate_grad():
    def fn(L, x):
        (x**4).sum().backward(create_graph=True)
        g = x.grad
        x.grad = None
        g.sum().backward()

    compare(fn, (4,))


# --- in-place operations and views under autograd (PyTorch is the judge) ------------------------
def _setitem_then_scale(L, x):
    y = x * 2
    y[0] = 0
    y[:, 1] *= 3
    y.sum().backward()


def _setitem_squared(L, x):
    y = x * 2
    y[0] = 0
    y[:, 1] *= 3
    (y * y).sum().backward()


def _chained_inplace(L, x):
    y = x * 1
    y.add_(x)
    y.mul_(x)
    y.sub_(x * 3)
    y.div_(2)
    y.clamp_(-1, 1)
    (y * y).sum().backward()


def _augmented_assignment(L, x):
    y = x * 1
    y += x
    y *= x
    y -= 1
    y /= x + 5
    y.sum().backward()


def _write_into_row_view(L, x):
    y = x * 1
    r = y[1]
    r[2] = x[0, 0] ** 2
    (y**2).sum().backward()


def _write_via_double_index(L, x):
    y = x * 1
    y[1][2] = x[0, 0] ** 2
    (y**2).sum().backward()


def _mul_view_by_other(L, x):
    y = x * 1
    r = y[1]
    r.mul_(x[2])
    (r * y[0]).sum().backward()


def _view_of_view(L, x):
    y = x * 1
    q = y[:, 1:3][1:]
    q.mul_(x[1:, :2])
    (y * y).sum().backward()


def _transposed_view_writes(L, x):
    y = x.clone()
    y.T[0, 0] = 7
    y.transpose(0, 1)[1] *= x[:, 0]
    (y * y).sum().backward()


def _reshape_view_writes(L, x):
    y = x + 0
    v = y.view(12)
    v[3:7] = x[0]
    w = y.unsqueeze(0)[0, 2]
    w.copy_(x[1] * x[2])
    (y**2).sum().backward()


def _boolean_mask_write(L, x):
    y = x * 1
    y[y > 0] = 0
    (y * x).sum().backward()


def _advanced_index_write(L, x):
    y = x * 1
    y[[0, 2], [1, 3]] = x[1, :2] * 5
    (y * y).sum().backward()


def _base_modified_after_view_taken(L, x):
    y = x * 1
    r = y[1]
    y.mul_(2)
    (r * r).sum().backward()


def _sibling_view_modified(L, x):
    y = x * 1
    a, b = y[0], y[:, 0]
    a.mul_(3)
    (b * b).sum().backward()


def _fill_and_zero_cut_history(L, x):
    y = x * 1
    y.zero_()
    y.fill_(2.0)
    (y * x).sum().backward()


def _copy_constant_into_non_leaf(L, x):
    y = x * 3
    y[1].copy_(L.ones(4, dtype=L.float64))
    (y * x).sum().backward()


def _copy_differentiable_into_view(L, x):
    y = L.zeros(3, 4, dtype=L.float64)
    y[:, 2].copy_(x[:, 0].exp())
    (y * y).sum().backward()


def _inplace_unary_methods(L, x):
    y = x * 1
    y.pow_(2)
    y.sin_()
    y.add_(1)
    y.tanh_()
    y.sum().backward()


def _write_on_leaf_via_no_grad_then_use(L, x):
    y = x.exp()
    with L.no_grad():
        x.mul_(1.0)
    (y * x).sum().backward()


def _inplace_on_non_leaf_from_nothing(L, x):
    y = L.zeros(3, 4, dtype=L.float64)
    y.add_(x)
    y.mul_(x)
    y.sum().backward()


def _write_through_detached_alias(L, x):
    y = x * 2
    d = y.detach()
    d[0].mul_(x[0])
    (y.sum() + (d * d).sum()).backward()


# Each of these is either fine in both libraries with the same gradients, or an error in both.
INPLACE_CASES = [
    _setitem_then_scale, _setitem_squared, _chained_inplace, _augmented_assignment, _write_into_row_view,
    _write_via_double_index, _mul_view_by_other, _view_of_view, _transposed_view_writes, _reshape_view_writes,
    _boolean_mask_write, _advanced_index_write, _base_modified_after_view_taken, _sibling_view_modified,
    _fill_and_zero_cut_history, _copy_constant_into_non_leaf, _copy_differentiable_into_view,
    _inplace_unary_methods, _write_on_leaf_via_no_grad_then_use, _inplace_on_non_leaf_from_nothing,
    _write_through_detached_alias,
]


@pytest.mark.parametrize("fn", INPLACE_CASES, ids=lambda f: f.__name__.strip("_"))
def test_inplace_and_view_gradients_match_torch(fn):
    compare(fn, (3, 4))


def test_higher_order_gradients_through_inplace_writes():
    (a,) = _inputs([(3, 4)], 3)
    results = []
    for L in (em, torch):
        x = L.tensor(a, requires_grad=True)
        y = x * x * x
        y[0] = 0
        y[:, 1] *= x[:, 2]
        y.T[3].fill_(1.0)
        (g,) = L.autograd.grad((y * y).sum(), x, create_graph=True)
        (h,) = L.autograd.grad((g * g).sum(), x)
        results.append((g.detach().numpy(), h.numpy()))
    np.testing.assert_allclose(results[0][0], results[1][0], atol=1e-10)
    np.testing.assert_allclose(results[0][1], results[1][1], atol=1e-8)


def test_issue_example_values():
    x = em.tensor(np.arange(12.0).reshape(3, 4), requires_grad=True)
    y = x * 2
    y[0] = 0
    y[:, 1] *= 3
    y.sum().backward()
    expected = np.full((3, 4), 2.0)
    expected[0] = 0
    expected[1:, 1] = 6
    np.testing.assert_allclose(x.grad.numpy(), expected)
    assert y[1, 1].item() == 30.0 and y[0, 1].item() == 0.0


def test_view_history_follows_base():
    x = em.ones(2, 3, requires_grad=True)
    y = x * 1
    r = y[0]
    y.mul_(5)
    assert r.grad_fn is not None
    r.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [[5.0] * 3, [0.0] * 3])


# --- version counter errors ------------------------------------------------------------------------
def test_saved_output_modified_in_place_raises():
    x = em.tensor([1.0, 2.0], requires_grad=True)
    y = x.exp()
    y.add_(1)
    with pytest.raises(RuntimeError, match="modified by an in-place operation"):
        y.sum().backward()


def test_saved_input_modified_in_place_raises():
    x = em.tensor([1.0, 2.0], requires_grad=True)
    a = x * 1
    b = x * 2
    y = a * b
    a.add_(1)
    with pytest.raises(RuntimeError, match="modified by an in-place operation") as info:
        y.sum().backward()
    assert "mul" in str(info.value) and "version" in str(info.value)


def test_saved_input_modified_through_a_view_raises():
    x = em.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    a = x * 1
    y = (a * a).sum()
    a[0, 0] = 5.0
    with pytest.raises(RuntimeError, match="modified by an in-place operation"):
        y.backward()


def test_version_counter_shared_by_views():
    x = em.zeros(2, 3)
    v = x[0]
    t = x.T
    start = x._version[0]
    v.add_(1)
    assert x._version[0] == v._version[0] == t._version[0] == start + 1
    x[1, 1] = 3
    assert t._version[0] == start + 2


# --- in-place on leaves -------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "op",
    [
        lambda w: w.add_(1),
        lambda w: w.mul_(2),
        lambda w: w.zero_(),
        lambda w: w.fill_(1.0),
        lambda w: w.copy_(em.ones(2, 3)),
        lambda w: w.clamp_(0, 1),
        lambda w: w.__setitem__(0, 1.0),
        lambda w: w.__iadd__(1),
    ],
)
def test_inplace_on_leaf_requiring_grad_raises(op):
    w = em.ones(2, 3, requires_grad=True)
    with pytest.raises(RuntimeError, match="leaf"):
        op(w)


@pytest.mark.parametrize(
    "view, op",
    [
        (lambda w: w[0], lambda v: v.add_(1)),
        (lambda w: w.T, lambda v: v.mul_(2)),
        (lambda w: w[:, 1:], lambda v: v.__setitem__(0, 5.0)),
        (lambda w: w.reshape(6), lambda v: v.zero_()),
    ],
)
def test_inplace_on_view_of_leaf_raises(view, op):
    w = em.ones(2, 3, requires_grad=True)
    with pytest.raises(RuntimeError, match="view of a leaf"):
        op(view(w))


def test_inplace_through_detached_leaf_is_allowed():
    w = em.ones(2, 3, requires_grad=True)
    w.detach()[0].zero_()
    w.detach().T[2].fill_(5.0)
    assert w.tolist() == [[0.0, 0.0, 5.0], [1.0, 1.0, 5.0]] and w.is_leaf and w.grad_fn is None


def test_inplace_on_leaf_is_allowed_under_no_grad():
    w = em.ones(2, 3, requires_grad=True)
    with em.no_grad():
        w.mul_(2)
        w[0, 0] = 7.0
        w -= 1
        w.T[0, 1] = 0.0
    assert w.requires_grad and w.is_leaf
    assert w.tolist() == [[6.0, 1.0, 1.0], [0.0, 1.0, 1.0]]
    (w * w).sum().backward()
    np.testing.assert_allclose(w.grad.numpy(), 2 * w.detach().numpy())


# --- gradcheck ---------------------------------------------------------------------------------------
def _f64(*shape, seed=0):
    rng = np.random.default_rng(seed)
    return em.tensor(rng.standard_normal(shape), requires_grad=True)


def test_gradcheck_passes_on_correct_gradients():
    a, b = _f64(3, 4), _f64(4, 2, seed=1)
    assert em.autograd.gradcheck(lambda x, y: ((x @ y).tanh(), x.sin() * 2), (a, b))


def test_gradcheck_detects_a_wrong_gradient():
    x = _f64(3)

    def wrong(t):
        return t.detach() * t  # the detached factor hides half of d(t^2)/dt

    with pytest.raises(RuntimeError, match="gradcheck"):
        em.autograd.gradcheck(wrong, (x,))
    assert em.autograd.gradcheck(wrong, (x,), raise_exception=False) is False


def test_gradcheck_evaluates_once_per_perturbation():
    calls = []

    def f(x, y):
        calls.append(1)
        return (x[:, None] * y).exp()  # 12 outputs

    x, y = _f64(3), _f64(4, seed=1)
    assert em.autograd.gradcheck(f, (x, y))
    n_inputs = x.numel() + y.numel()
    assert len(calls) == 1 + 2 * n_inputs  # once for autograd, then +eps and -eps per element


def test_gradcheck_on_non_contiguous_input_and_ignores_non_grad_inputs():
    base = em.tensor(np.random.default_rng(0).standard_normal((4, 3)))
    x = base.T.requires_grad_()
    c = em.tensor([1.0, 2.0, 3.0, 4.0], dtype=em.float64)
    assert not x.is_contiguous()
    assert em.autograd.gradcheck(lambda t, k: (t * t * k).cumsum(1), (x, c))


def test_gradcheck_requires_float64():
    with pytest.raises(TypeError, match="float64"):
        em.autograd.gradcheck(lambda t: t * t, (em.ones(3, requires_grad=True),))


def test_chained_inplace_unary_ops_are_refused_like_pytorch():
    # exp_ saves its output, which is the tensor's own storage (no second buffer, as in PyTorch),
    # so overwriting it with sqrt_ makes the saved value stale: an error at backward, as PyTorch.
    x = _f64(5)
    y = x * 1
    y.exp_()
    y.sqrt_()
    with pytest.raises(RuntimeError, match="modified by an in-place operation"):
        y.sum().backward()
    tx = torch.tensor(x.detach().numpy(), requires_grad=True)
    ty = tx * 1
    ty.exp_()
    ty.sqrt_()
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        ty.sum().backward()


def test_inplace_relu_saves_no_second_buffer():
    x = _f64(4, 3)
    y = x * 2
    y.relu_()
    node = y.grad_fn
    (data, *_rest) = node._out_saved[0]
    assert data is y._data  # the rule reads the tensor's own storage


# --- random programs of views and in-place writes, judged by PyTorch --------------------------------
_VIEWS = [
    lambda t: t[1],
    lambda t: t[:, 2],
    lambda t: t.T,
    lambda t: t.T[1:3],
    lambda t: t.reshape(12)[2:9],
    lambda t: t.unsqueeze(0)[0, 1:],
    lambda t: t.narrow(1, 1, 2),
    lambda t: t[::2, 1:],
    lambda t: t.view(2, 6)[1],
]
_WRITES = [
    lambda v, xv, L: v.mul_(xv),
    lambda v, xv, L: v.add_(xv.exp()),
    lambda v, xv, L: v.add_(0.5),
    lambda v, xv, L: v.fill_(1.5),
    lambda v, xv, L: v.zero_(),
    lambda v, xv, L: v.copy_(xv.sin()),
    lambda v, xv, L: v.__setitem__(0, xv.reshape(-1)[0] * 2),
    lambda v, xv, L: v.div_(xv * xv + 1.0),
    lambda v, xv, L: v.clamp_(-0.3, 0.3),
]


def _program(steps, final_view):
    def fn(L, x):
        y = x * 1.5
        views = []
        for view_k, write_k in steps:
            v = _VIEWS[view_k](y)
            _WRITES[write_k](v, _VIEWS[view_k](x), L)
            views.append(v)
        loss = (y * y).sum()
        if views:
            loss = loss + (views[final_view % len(views)] ** 3).sum()
        loss.backward()

    return fn


def test_random_view_and_inplace_programs_match_torch():
    hypothesis = pytest.importorskip("hypothesis")
    st = hypothesis.strategies

    @hypothesis.settings(max_examples=60, deadline=None, derandomize=True)
    @hypothesis.given(
        steps=st.lists(st.tuples(st.integers(0, len(_VIEWS) - 1), st.integers(0, len(_WRITES) - 1)), max_size=4),
        final_view=st.integers(0, 3),
    )
    def check(steps, final_view):
        compare(_program(steps, final_view), (3, 4), atol=1e-9)

    check()


@pytest.mark.parametrize("op", [lambda d: d * 2, lambda d: 2 * d, lambda d: d / 2, lambda d: d + 1, lambda d: d - 1])
def test_an_input_a_gradient_does_not_read_may_change_afterwards(op):
    # PyTorch saves nothing for x * 2: changing x before backward is fine (a false "modified" error before).
    x = em.ones(3, requires_grad=True)
    d = x * 1.0
    e = op(d)
    d += 1
    e.sum().backward()
    assert x.grad.shape == (3,)


@pytest.mark.parametrize("cut", [lambda t: t.split(2), lambda t: t.chunk(2), lambda t: t.unbind(0)])
def test_writing_into_a_piece_of_split_is_refused_under_autograd_as_in_pytorch(cut):
    import torch

    for lib in (torch, em):
        x = lib.ones(4, requires_grad=True) * 1
        with pytest.raises(RuntimeError, match="view"):
            cut(x)[0].mul_(2)
    z = em.zeros(4)
    with em.no_grad():
        cut(z)[0].add_(1)  # without autograd the write reaches the input, as in PyTorch
    assert z[0].item() == 1


def test_assigning_a_gradient_checks_it_like_pytorch():
    """p.grad = g needs a tensor of p's shape, dtype and device (PyTorch's checks); a bad one is named at the
    assignment, not deep inside the next optimizer step."""
    import pytest

    from ember.errors import DeviceMismatchError, ShapeError

    p = em.nn.Parameter(em.ones(3))
    with pytest.raises(ShapeError, match=r"gradient of shape \(5,\) to a tensor of shape \(3,\)"):
        p.grad = em.zeros(5)
    with pytest.raises(TypeError, match="gradient of dtype ember.float64 to a tensor of dtype ember.float32"):
        p.grad = em.zeros(3, dtype=em.float64)
    with pytest.raises(TypeError, match="a Tensor or None but got grad of type list"):
        p.grad = [0.0, 0.0, 0.0]
    with pytest.raises(DeviceMismatchError, match="gradient on cpu:1 to a tensor on cpu"):
        p.grad = em.zeros(3, device="cpu:1")
    assert p.grad is None
    p.grad = em.full((3,), 2.0)
    assert p.grad.tolist() == [2, 2, 2]
    p.grad = None
    assert p.grad is None


def test_backward_into_chosen_inputs_only_matches_torch():
    """backward(inputs=...): only those tensors' .grad change (leaves or not), accumulated over passes; an input
    the outputs do not reach keeps its .grad; bad inputs are one-line errors, as PyTorch's."""
    seen = {}
    for L in (torch, em):
        x, w, u = (L.tensor([1.0, 2.0, 3.0], requires_grad=True) for _ in range(3))
        h = x * 2
        y = (h * w).sum()
        y.backward(inputs=[h, x, u, x], retain_graph=True)
        first = (h.grad.tolist(), x.grad.tolist(), w.grad, u.grad)
        y.backward(inputs=x)
        seen[L.__name__] = first + (x.grad.tolist(),)
        with pytest.raises(RuntimeError):
            (x * 2).sum().backward(inputs=[])
        with pytest.raises(RuntimeError):
            (x * 2).sum().backward(inputs=[L.ones(3)])
        with pytest.raises((RuntimeError, TypeError)):  # PyTorch: RuntimeError; Ember: TypeError, as autograd.grad's
            (x * 2).sum().backward(inputs=[3])
    assert seen["ember"] == seen["torch"] == ([1.0, 2.0, 3.0], [2.0, 4.0, 6.0], None, None, [4.0, 8.0, 12.0])
