"""Bad-input tables against PyTorch: run one call written once for both libraries, and require the same outcome.

A call is `lambda L: ...` using `L.m` (ember or torch), `L.F` (their nn.functional) and `L.t(values, dtype,
grad=False)` (a tensor; `grad=True` makes a leaf whose gradient is compared). Either both raise, ember's error
an instance of PyTorch's class (`except RuntimeError` written for PyTorch still catches it) and its message
naming the op, or both return the same dtypes, shapes and values (NaN where PyTorch has NaN), and the same
gradients of the outputs' sum.
"""

from __future__ import annotations

import warnings

import numpy as np
import torch
import torch.nn.functional as TF

import ember as em

EF = em.nn.functional


class Lib:
    """One library as a call sees it: its module, its functional namespace and a tensor maker."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.m, self.F = (torch, TF) if name == "torch" else (em, EF)
        self.leaves: list = []

    def t(self, values, dtype: str = "float32", grad: bool = False):
        """A tensor of `values` in `dtype`; grad=True: a leaf whose gradient the comparison checks."""
        arr = np.asarray(values, dtype=dtype)
        if self.name == "torch":
            t = torch.tensor(arr, requires_grad=grad)
        else:
            t = em.tensor(arr, requires_grad=grad)
        if grad:
            self.leaves.append(t)
        return t


def _arrays(out) -> list:
    items = out if isinstance(out, (tuple, list)) else [out]
    return [x for x in items if x is not None]


def _numpy(x) -> np.ndarray:
    return x.detach().cpu().numpy() if isinstance(x, torch.Tensor) else x.detach().numpy()


def run(call, name: str):
    """(outputs as NumPy arrays, leaf gradients) of `call` in one library, or the exception it raised."""
    lib = Lib(name)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            outs = _arrays(call(lib))
            arrays = [_numpy(o) for o in outs]
            if lib.leaves:
                total = sum(o.sum() for o in outs if o.is_floating_point() and o.requires_grad)
                if not isinstance(total, int):
                    total.backward()
            grads = [None if leaf.grad is None else _numpy(leaf.grad) for leaf in lib.leaves]
    except Exception as e:  # noqa: BLE001 - the outcome compared
        return e
    return arrays, grads


def _same(got: np.ndarray, want: np.ndarray, what: str, rtol: float, atol: float) -> None:
    assert got.dtype == want.dtype, f"{what}: dtype {got.dtype}, PyTorch {want.dtype}"
    assert got.shape == want.shape, f"{what}: shape {got.shape}, PyTorch {want.shape}"
    if got.dtype.kind in "fc":
        np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, equal_nan=True, err_msg=what)
    else:
        np.testing.assert_array_equal(got, want, err_msg=what)


def assert_like_torch(call, op: str, words=(), rtol: float = 1e-5, atol: float = 1e-6) -> None:
    """Ember's outcome of `call` is PyTorch's (see the module docstring); an error also names `op` (or one of a
    tuple of names) and `words`."""
    want, got = run(call, "torch"), run(call, "ember")
    if isinstance(want, Exception):
        assert isinstance(got, Exception), f"PyTorch raises {type(want).__name__}: {want}; ember returned {got}"
        assert isinstance(got, type(want)), (
            f"PyTorch raises {type(want).__name__} ({want}); ember raises {type(got).__name__}, not an instance: {got}")
        message = str(got)
        assert "\n" not in message.strip(), f"not a one-line error: {message!r}"
        names = (op,) if isinstance(op, str) else op
        assert any(n in message for n in names), f"none of {names} in {message!r}"
        for w in words:
            assert w in message, f"{w!r} not in {message!r}"
        return
    if isinstance(got, Exception):
        raise AssertionError(f"PyTorch returns a result; ember raises {type(got).__name__}: {got}") from got
    (outs_t, grads_t), (outs_e, grads_e) = want, got
    assert len(outs_e) == len(outs_t), f"{len(outs_e)} outputs, PyTorch {len(outs_t)}"
    for k, (e, t) in enumerate(zip(outs_e, outs_t)):
        _same(e, t, f"output {k}", rtol, atol)
    for k, (e, t) in enumerate(zip(grads_e, grads_t)):
        assert (e is None) == (t is None), f"gradient {k}: ember {e}, PyTorch {t}"
        if e is not None:
            _same(e, t, f"gradient {k}", rtol, atol)
