"""PyTorch's top-level forms of Tensor methods (torch.relu_, torch.t_copy, torch.real, ...) and unravel_index,
asarray, scalar_tensor and fill, against PyTorch."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

import ember as em
from ember.ops.torch_forms import COPY_FORMS, METHOD_FORMS

X = np.array([[0.25, -0.5, 0.75], [0.5, 0.9, -0.1]])
ARGS = {  # the arguments each form needs beyond the tensor
    "addmv_": None, "clamp_": lambda L: (-0.2, 0.3),
    "clamp_max_": lambda L: (0.3,), "clamp_min_": lambda L: (-0.2,), "clip_": lambda L: (-0.2, 0.3),
    "fill_": lambda L: (2.0,), "gcd_": None, "lcm_": None, "ldexp_": lambda L: (L.tensor([[1, 2, 3], [0, -1, 2]]),),
    "index_put_": lambda L: ((L.tensor([0, 1]), L.tensor([2, 0])), L.tensor([5.0, 6.0], dtype=L.float64)), "xlogy_": lambda L: (2.0,),
    "split_with_sizes": lambda L: ([1, 2], 1), "unsafe_chunk": lambda L: (2, 1), "unsafe_split": lambda L: (2, 1),
    "acosh_": "shift", "arccosh_": "shift",
}
COPY_ARGS = {
    "diagonal": (), "expand": ((2, 2, 3),), "narrow": (1, 0, 2), "permute": ((1, 0),), "select": (1, 2), "split": (2, 1),
    "split_with_sizes": ([1, 2], 1), "squeeze": (), "t": (), "transpose": (0, 1), "unbind": (1,), "unfold": (1, 2, 1),
    "unsqueeze": (0,), "view": ((3, 2),), "detach": (),
}


def _numpy_tree(x):
    if isinstance(x, (tuple, list)):
        return [_numpy_tree(v) for v in x]
    return x.detach().numpy() if hasattr(x, "detach") else x


@pytest.mark.parametrize("name", [n for n in METHOD_FORMS if ARGS.get(n, 0) is not None])
def test_method_forms_match_torch(name) -> None:
    results = []
    for lib in (torch, em):
        data = X + 1.5 if ARGS.get(name) == "shift" else X
        t = lib.tensor(data)
        args = ARGS[name](lib) if callable(ARGS.get(name)) else ()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            results.append(_numpy_tree(getattr(lib, name)(t, *args)))
        if name.endswith("_") and name != "detach_":
            np.testing.assert_allclose(_numpy_tree(t), results[-1], equal_nan=True)  # written in place
    _close(results[1], results[0])


def _close(ours, theirs) -> None:
    if isinstance(theirs, list):
        assert len(ours) == len(theirs)
        for o, t in zip(ours, theirs):
            _close(o, t)
    else:  # one ulp apart where NumPy's libm and PyTorch's differ (acos, ...)
        np.testing.assert_allclose(ours, theirs, rtol=1e-14, atol=0, equal_nan=True)


@pytest.mark.parametrize("name", list(COPY_FORMS))
def test_copy_forms_match_torch_and_own_their_memory(name) -> None:
    results = []
    for lib in (torch, em):
        t = lib.tensor(X)
        out = getattr(lib, name + "_copy")(t, *COPY_ARGS[name])
        for o in out if isinstance(out, tuple) else (out,):
            o.fill_(7.0)  # a copy: the source keeps its values
        np.testing.assert_array_equal(_numpy_tree(t), X)
        results.append(_numpy_tree(getattr(t, name)(*COPY_ARGS[name])))
    np.testing.assert_equal(results[1], results[0])


def test_unravel_index_asarray_scalar_tensor_fill() -> None:
    outs = []
    for lib in (torch, em):
        flat = lib.tensor([4, 1, -1, 7, 0])
        coords = [c.numpy() for c in lib.unravel_index(flat, (2, 3))]
        scalar = lib.unravel_index(lib.tensor(5), (2, 3))
        array = np.arange(3.0)
        shared = lib.asarray(array)
        array[0] = 9.0  # the tensor shares the array's memory
        t = lib.tensor([1, 2])
        outs.append((coords, [c.item() for c in scalar], shared.tolist(), lib.asarray(t) is t,
                     str(lib.asarray(t, dtype=lib.float32).dtype).split(".")[-1],
                     str(lib.scalar_tensor(3).dtype).split(".")[-1], lib.fill(lib.ones(2), 5.0).tolist()))
    assert str(outs[0]) == str(outs[1])
    with pytest.raises(TypeError, match="unravel_index: expected 'indices' to be an integer tensor"):
        em.unravel_index(em.tensor([1.0]), (2, 3))
    with pytest.raises(ValueError, match="copy=False"):
        em.asarray([1, 2], copy=False)


@pytest.mark.parametrize("call, message", [
    (lambda L: L.gradient(L.tensor([1.0, 2.0]), edge_order=2), "expected each dimension size to be at least"),
    (lambda L: L.gradient(L.ones(2, 3), spacing=[1.0, 2.0, 3.0]), "a list of length equal to 'self.dim() = 2'"),
    (lambda L: L.gradient(L.ones(2, 3), edge_order=3), "only supports edge_order=1 and edge_order=2"),
])
def test_gradient_refusals_match_torch(call, message) -> None:
    for lib in (torch, em):
        with pytest.raises(RuntimeError) as info:
            call(lib)
    assert message in str(info.value) and len(str(info.value).splitlines()) == 1


def test_gradient_of_integers_is_in_the_default_float_dtype() -> None:
    ours, theirs = em.gradient(em.tensor([1, 2, 4]))[0], torch.gradient(torch.tensor([1, 2, 4]))[0]
    assert ours.dtype == em.float32 and theirs.dtype == torch.float32
    np.testing.assert_array_equal(ours.numpy(), theirs.numpy())
