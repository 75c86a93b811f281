"""The lazy batch and instance norms against PyTorch's: reprs and state dicts before the first input, the norm they
become, an optimizer built before the first forward training the shaped parameters, running statistics over several
training steps on changing data, eval mode, loading a state dict into a lazy norm, .to() before the first input,
UninitializedBuffer itself, and errors."""

from __future__ import annotations

import copy
import pickle

import numpy as np
import pytest
import torch

import ember as em
from tests.nn.helpers import assert_close, randn

LAYERS = {  # name: (arguments, input shape)
    "LazyBatchNorm1d (N, C)": ("LazyBatchNorm1d", {}, (6, 3)),
    "LazyBatchNorm1d (N, C, L)": ("LazyBatchNorm1d", {"momentum": 0.3}, (4, 3, 5)),
    "LazyBatchNorm1d cumulative average": ("LazyBatchNorm1d", {"momentum": None}, (5, 4)),
    "LazyBatchNorm2d": ("LazyBatchNorm2d", {"eps": 1e-3}, (3, 2, 4, 5)),
    "LazyBatchNorm2d no bias": ("LazyBatchNorm2d", {"bias": False}, (3, 2, 4, 4)),
    "LazyBatchNorm2d not affine": ("LazyBatchNorm2d", {"affine": False}, (3, 2, 4, 4)),
    "LazyBatchNorm3d": ("LazyBatchNorm3d", {}, (2, 3, 3, 4, 2)),
    "LazyBatchNorm3d without running stats": ("LazyBatchNorm3d", {"track_running_stats": False}, (2, 3, 3, 2, 2)),
    "LazyInstanceNorm1d": ("LazyInstanceNorm1d", {}, (4, 3, 6)),
    "LazyInstanceNorm2d": ("LazyInstanceNorm2d", {"momentum": 0.2}, (3, 2, 4, 5)),
    "LazyInstanceNorm2d not affine": ("LazyInstanceNorm2d", {"affine": False}, (3, 2, 4, 5)),
    "LazyInstanceNorm3d": ("LazyInstanceNorm3d", {}, (2, 3, 3, 4, 2)),
    "LazyInstanceNorm3d without running stats": ("LazyInstanceNorm3d", {"track_running_stats": False},
                                                 (2, 2, 3, 2, 2)),
}


def _build(case: str):
    name, kwargs, shape = LAYERS[case]
    return getattr(em.nn, name)(**kwargs), getattr(torch.nn, name)(**kwargs), shape


def _assert_same_state(ours, theirs, what: str) -> None:
    mine, other = ours.state_dict(), theirs.state_dict()
    assert list(mine) == list(other), what
    for key, value in mine.items():
        assert_close(value, other[key], 1e-5, 1e-5, f"{key} {what}")


@pytest.mark.parametrize("case", list(LAYERS))
def test_lazy_norm_trains_like_torch(case: str) -> None:
    ours, theirs, shape = _build(case)
    assert repr(ours) == repr(theirs)
    assert ours.has_uninitialized_params() == theirs.has_uninitialized_params()
    assert list(ours.state_dict()) == list(theirs.state_dict())
    # built before the shapes are known, and then stepping the shaped parameters, as PyTorch allows
    affine = LAYERS[case][1].get("affine", True)
    opt = em.optim.SGD(ours.parameters(), lr=0.1) if affine else None
    topt = torch.optim.SGD(theirs.parameters(), lr=0.1) if affine else None
    for step in range(4):  # new data each step: the running statistics follow PyTorch's
        x = randn(*shape) * (step + 1) + step
        e_in, t_in = em.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
        out, tout = ours(e_in), theirs(t_in)
        if step == 0:
            assert type(ours).__name__ == type(theirs).__name__ == LAYERS[case][0].removeprefix("Lazy")
            assert repr(ours) == repr(theirs)
        assert_close(out, tout, 1e-5, 1e-5, f"output at step {step}")
        g = randn(*shape)
        out.backward(em.tensor(g))
        tout.backward(torch.tensor(g))
        assert_close(e_in.grad, t_in.grad, 1e-5, 1e-4, f"input gradient at step {step}")
        for (name, p), tp in zip(ours.named_parameters(), theirs.parameters()):
            assert_close(p.grad, tp.grad, 1e-5, 1e-4, f"grad of {name} at step {step}")
        if affine:
            opt.step()
            topt.step()
            opt.zero_grad()
            topt.zero_grad()
        _assert_same_state(ours, theirs, f"after step {step}")
    if affine:  # the optimizer built before the first forward moved the shaped weight
        assert not np.allclose(ours.weight.detach().numpy(), 1.0)
    ours.eval()
    theirs.eval()
    x = randn(*shape) * 2 - 1
    assert_close(ours(em.tensor(x)), theirs(torch.tensor(x)), 1e-5, 1e-5, "eval output")
    _assert_same_state(ours, theirs, "after eval")


@pytest.mark.parametrize("case", ["LazyBatchNorm1d (N, C, L)", "LazyBatchNorm2d no bias", "LazyInstanceNorm3d",
                                  "LazyBatchNorm3d without running stats"])
def test_loading_a_state_dict_materialises_the_lazy_norm(case: str) -> None:
    ours, theirs, shape = _build(case)
    for _ in range(2):
        theirs(torch.tensor(randn(*shape)))
    state = {k: em.tensor(v.detach().numpy().copy()) for k, v in theirs.state_dict().items()}
    ours.load_state_dict(state)
    # shaped at once, with num_features from the loaded tensors (PyTorch keeps LazyX(0, ...) until a forward)
    assert type(ours).__name__ == type(theirs).__name__ and repr(ours) == repr(theirs)
    _assert_same_state(ours, theirs, "after loading")
    ours.eval()
    theirs.eval()
    x = randn(*shape)
    assert_close(ours(em.tensor(x)), theirs(torch.tensor(x)), 1e-5, 1e-5, "eval output after loading")


def test_an_uninitialized_state_dict_leaves_a_lazy_norm_lazy() -> None:
    source, ours = em.nn.LazyBatchNorm2d(), em.nn.LazyBatchNorm2d()
    state = source.state_dict()
    assert repr(state["running_mean"]) == repr(torch.nn.LazyBatchNorm2d().state_dict()["running_mean"])
    ours.load_state_dict(state)
    assert type(ours) is em.nn.LazyBatchNorm2d and ours.has_uninitialized_params()
    ours(em.ones(2, 3, 2, 2))
    assert type(ours) is em.nn.BatchNorm2d and ours.num_features == 3


def test_to_before_the_first_input_keeps_it_lazy_and_sets_the_dtype() -> None:
    ours, theirs = em.nn.LazyInstanceNorm2d().double(), torch.nn.LazyInstanceNorm2d().double()
    for name in ("weight", "running_mean", "running_var"):
        mine, other = getattr(ours, name), getattr(theirs, name)
        assert type(mine).__name__ == type(other).__name__ and mine.dtype.name == str(other.dtype).split(".")[1]
    assert ours.num_batches_tracked.dtype is em.int64
    buffer = ours.running_mean
    ours(em.ones(2, 4, 3, 3, dtype=em.float64))
    assert ours.running_mean is buffer and type(buffer) is em.Tensor and buffer.dtype is em.float64
    assert tuple(buffer.shape) == (4,) and not buffer.requires_grad


def test_unbatched_instance_norm_takes_its_channels_from_dim_0() -> None:
    # PyTorch reads dim 1 of an unbatched input (the first spatial size); the channel dim is 0
    ours, eager = em.nn.LazyInstanceNorm1d(), torch.nn.InstanceNorm1d(3, affine=True, track_running_stats=True)
    x = randn(3, 7)
    out = ours(em.tensor(x))
    assert ours.num_features == 3 and tuple(ours.weight.shape) == (3,) and tuple(out.shape) == (3, 7)
    assert_close(out, eager(torch.tensor(x)), 1e-5, 1e-5, "unbatched output")
    _assert_same_state(ours, eager, "unbatched")


def test_uninitialized_buffer() -> None:
    b = em.nn.UninitializedBuffer(dtype=em.float64)
    assert repr(b) == str(b) == repr(torch.nn.UninitializedBuffer()) == "<UninitializedBuffer>"
    assert b.dtype is em.float64 and not b.requires_grad and em.nn.parameter.is_lazy(b)
    assert repr(em.nn.UninitializedParameter(requires_grad=False)) == "<UninitializedParameter>"
    copied, unpickled = copy.deepcopy(b), pickle.loads(pickle.dumps(b))
    assert type(copied) is type(unpickled) is em.nn.UninitializedBuffer
    assert copied.dtype is unpickled.dtype is em.float64
    b.materialize((2, 3))
    assert type(b) is em.Tensor and tuple(b.shape) == (2, 3) and not em.nn.parameter.is_lazy(b)


BAD = {
    "LazyBatchNorm1d of 1-D": (lambda: em.nn.LazyBatchNorm1d()(em.ones(3)),
                               r"LazyBatchNorm1d: expected 2D or 3D input \(got 1D input of shape \(3,\)\)"),
    "LazyBatchNorm2d of 3-D": (lambda: em.nn.LazyBatchNorm2d()(em.ones(2, 3, 4)),
                               r"LazyBatchNorm2d: expected 4D input \(got 3D input of shape \(2, 3, 4\)\)"),
    "LazyBatchNorm3d of 4-D": (lambda: em.nn.LazyBatchNorm3d()(em.ones(2, 3, 4, 4)),
                               r"LazyBatchNorm3d: expected 5D input \(got 4D input of shape \(2, 3, 4, 4\)\)"),
    "LazyInstanceNorm2d of 2-D": (lambda: em.nn.LazyInstanceNorm2d()(em.ones(3, 4)),
                                  r"LazyInstanceNorm2d: expected 3D or 4D input \(got 2D input of shape \(3, 4\)\)"),
    "LazyInstanceNorm1d of 4-D": (lambda: em.nn.LazyInstanceNorm1d()(em.ones(2, 3, 4, 5)),
                                  r"LazyInstanceNorm1d: expected 2D or 3D input \(got 4D input"),
}


@pytest.mark.parametrize("case", list(BAD))
def test_wrong_rank_names_the_module_and_shape_and_leaves_it_lazy(case: str) -> None:
    with pytest.raises(ValueError, match=BAD[case][1]):
        BAD[case][0]()
    module = em.nn.LazyBatchNorm2d()
    with pytest.raises(ValueError):
        module(em.ones(2, 3, 4))
    assert module.has_uninitialized_params()  # unlike PyTorch's, which is shaped from the bad input first
    module(em.ones(2, 5, 3, 3))
    assert module.num_features == 5
