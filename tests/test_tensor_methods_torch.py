"""Tensor methods PyTorch programs call, against PyTorch: the ops' method forms and their in-place forms (the same
object back, values, dtypes), in-place view ops with autograd, what a tensor is (is_cpu, storage_offset, layout, the
complex API on real values), `register_hook` on leaves and non-leaves, and `autograd.grad` leaving the graph above
its inputs alone."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

import ember as em

X = (np.arange(12.0).reshape(3, 4) - 5.5) / 7  # values in (-1, 1), none zero
Y = np.linspace(-0.9, 0.8, 12).reshape(3, 4)

METHODS = {  # method: (args, the data's transform into the domain)
    **{name: ((), None) for name in ("acos", "asin", "atan", "atanh", "arccos", "arcsin", "arctan", "arctanh", "cosh",
                                     "sinh", "signbit", "angle", "isreal", "conj", "resolve_conj", "resolve_neg")},
    **{name: ((), np.abs) for name in ("acosh", "arccosh")},
    **{name: ((), lambda v: np.abs(v) + 1) for name in ("acosh", "arccosh")},
    **{name: (("Y",), None) for name in ("hypot", "logaddexp", "copysign", "nextafter")},
    "asinh": ((), None), "arcsinh": ((), None),
    "unfold": ((1, 2, 1), None), "split_with_sizes": (([1, 3], 1), None), "unsafe_chunk": ((2, 1), None),
    "unsafe_split": ((2, 1), None), "narrow_copy": ((1, 1, 2), None), "ndimension": ((), None),
    "get_device": ((), None), "storage_offset": ((), None),
}

INPLACE = {  # in-place method: (args, domain)
    **{name + "_": ((), None) for name in ("acos", "asin", "atan", "atanh", "arccos", "arcsin", "arctan", "arctanh",
                                          "cosh", "sinh", "tan", "exp2", "expm1", "erf", "erfc", "erfinv", "negative",
                                          "frac", "tril", "triu", "logical_not", "t")},
    **{name + "_": ((), np.abs) for name in ("log2", "log10", "lgamma", "digamma")},
    "logit_": ((), lambda v: np.abs(v) * 0.9 + 0.05), "polygamma_": ((1,), lambda v: np.abs(v) + 0.5),
    **{name + "_": (("Y",), None) for name in ("atan2", "hypot", "copysign", "nextafter", "xlogy", "fmod", "divide",
                                              "true_divide", "multiply", "subtract", "eq", "ne", "not_equal", "lt",
                                              "less", "le", "less_equal", "gt", "greater", "ge", "greater_equal",
                                              "logical_and", "logical_or", "logical_xor", "floor_divide")},
    "cumsum_": ((1,), None), "cumprod_": ((0,), None), "fill_diagonal_": ((9.0,), None),
    "unsqueeze_": ((1,), None), "squeeze_": ((), lambda v: v[:1]), "transpose_": ((0, 1), None),
    "swapaxes_": ((0, 1), None), "swapdims_": ((1, 0), None),
}


def _call(lib, data, name, args):
    t = lib.tensor(data)
    args = [lib.tensor(Y[: data.shape[0], : data.shape[1]] if data.ndim == 2 else Y) if a == "Y" else a for a in args]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # PyTorch's deprecation notes
        return t, getattr(t, name)(*args)


def _assert_close(ours, theirs, rtol: float = 1e-12) -> None:
    if isinstance(theirs, (tuple, list)):
        assert len(ours) == len(theirs)
        for o, t in zip(ours, theirs):
            _assert_close(o, t, rtol)
        return
    o, t = (np.asarray(v.numpy() if hasattr(v, "numpy") else v, dtype=np.float64) for v in (ours, theirs))
    assert o.shape == t.shape
    np.testing.assert_allclose(o, t, rtol=rtol, equal_nan=True)


@pytest.mark.parametrize("name", list(METHODS))
def test_method_forms_match_torch(name) -> None:
    args, domain = METHODS[name]
    data = X if domain is None else domain(X)
    (_, theirs), (_, ours) = _call(torch, data, name, args), _call(em, data, name, args)
    _assert_close(ours, theirs)


@pytest.mark.parametrize("name", list(INPLACE))
def test_inplace_forms_match_torch(name) -> None:
    args, domain = INPLACE[name]
    data = X if domain is None else domain(X)
    (t_in, theirs), (e_in, ours) = _call(torch, data, name, args), _call(em, data, name, args)
    assert theirs is t_in and ours is e_in
    assert str(ours.dtype).split(".")[-1] == str(theirs.dtype).split(".")[-1]
    # PyTorch's float64 trigamma is good to 5e-10 (Ember's agrees with mpmath to 1e-15)
    _assert_close(ours, theirs, rtol=1e-9 if name == "polygamma_" else 1e-12)


def test_inplace_refusals_match_torch() -> None:
    for lib in (torch, em):
        with pytest.raises(RuntimeError):
            lib.ones(3, dtype=lib.float32).float_power_(2)  # the result needs float64
        with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
            lib.ones(3, requires_grad=True).unsqueeze_(0)
        with pytest.raises(RuntimeError):
            lib.arange(4).acos_()  # a float result into an integer tensor
    with pytest.raises(RuntimeError, match="fill_diagonal_"):
        em.ones(2, 3, 4).fill_diagonal_(1.0)


def test_inplace_view_ops_keep_autograd_and_storage() -> None:
    grads = {}
    for lib in (torch, em):
        x = lib.tensor(X, requires_grad=True)
        h = x * 2
        h.t_()
        h.unsqueeze_(0)
        (h * lib.tensor(np.arange(12.0).reshape(1, 4, 3))).sum().backward()
        grads[lib] = x.grad.numpy()
        base = lib.ones(2, 3)
        row = base[0]
        row.unsqueeze_(0)
        row.fill_(5.0)  # still a view of base's storage
        np.testing.assert_array_equal(base.numpy()[0], [5.0, 5.0, 5.0])
    np.testing.assert_array_equal(grads[em], grads[torch])


def test_what_a_tensor_is() -> None:
    for lib in (torch, em):
        t = lib.tensor(X)
        assert t.is_cpu and t.get_device() == -1 and t.ndimension() == 2 and t.layout == lib.strided
        assert t[1:, 2:].storage_offset() == 6 and t.real is t and not t.is_conj() and not t.is_sparse
        assert tuple(t.mH.shape) == (4, 3) and tuple(t.H.shape) == (4, 3)
        with pytest.raises(RuntimeError, match="imag is not implemented for tensors with non-complex dtypes"):
            _ = t.imag
    t = em.tensor(X)
    assert repr(em.strided) == "ember.strided" and t.pin_memory() is t and not t.is_pinned()
    u, s, v = em.tensor(X).svd()
    np.testing.assert_allclose((u * s) @ v.mT, X, atol=1e-12)


def test_apply_and_map_in_place() -> None:
    for lib in (torch, em):
        t = lib.tensor([1.0, 2.0, 3.0])
        assert t.apply_(lambda v: v * v + 1) is t
        t.map_(lib.tensor([1.0, 0.0, 2.0]), lambda a, b: a - b)
        np.testing.assert_array_equal(t.numpy(), [1.0, 5.0, 8.0])
    a, b = torch.zeros(2, 3), em.zeros(2, 3)
    a.put_(torch.tensor([0, 4, 4]), torch.tensor([1.0, 2.0, 3.0]), accumulate=True)
    b.put_(em.tensor([0, 4, 4]), em.tensor([1.0, 2.0, 3.0]), accumulate=True)
    np.testing.assert_array_equal(b.numpy(), a.numpy())


def _hooked(lib):
    seen = []
    x = lib.tensor(X, requires_grad=True)
    hx = x.register_hook(lambda g: seen.append(("x", g.clone())) or g * 10)
    y = x * 2
    y.register_hook(lambda g: g + 1)
    y.register_hook(lambda g: seen.append(("y", g.clone())))
    y.retain_grad()
    (y * lib.tensor(Y)).sum().backward(retain_graph=True)
    first = (x.grad.clone(), y.grad.clone())
    hx.remove()
    x.grad = None
    (gy,) = lib.autograd.grad((y * 3).sum(), y)  # hooks run on captured gradients too
    (gx,) = lib.autograd.grad((y * 3).sum(), x)
    (x * 2).sum().backward()
    return first + (gy, gx, x.grad) + tuple(g for _, g in seen), [who for who, _ in seen], y.retains_grad


def test_register_hook_matches_torch() -> None:
    theirs, their_order, their_retains = _hooked(torch)
    ours, our_order, our_retains = _hooked(em)
    assert our_order == their_order and our_retains == their_retains is True
    for o, t in zip(ours, theirs):
        np.testing.assert_allclose(o.detach().numpy(), t.detach().numpy(), rtol=1e-12)


def test_register_hook_refusals() -> None:
    with pytest.raises(RuntimeError, match="cannot register a hook on a tensor that doesn't require gradient"):
        em.ones(2).register_hook(lambda g: g)
    x = em.ones(2, requires_grad=True)
    x.register_hook(lambda g: em.ones(3))
    with pytest.raises(RuntimeError, match="has changed the size of value: from"):
        (x * 1.0).sum().backward()
    with pytest.raises(TypeError, match="hook must be callable"):
        em.ones(2, requires_grad=True).register_hook(3)


def test_grad_leaves_the_graph_above_its_inputs_alone() -> None:
    # autograd.grad(z, y) needs nothing above y: PyTorch neither runs nor frees y's history, so a later backward
    # through it works, and a hook above y does not run
    calls = []
    x = em.tensor(X, requires_grad=True)
    x.register_hook(lambda g: calls.append("x"))
    y = (x * 2).exp()
    (gy,) = em.autograd.grad((y * 3).sum(), y)
    np.testing.assert_allclose(gy.numpy(), np.full(X.shape, 3.0))
    assert calls == []
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), 2 * np.exp(2 * X))
    assert calls == ["x"]
