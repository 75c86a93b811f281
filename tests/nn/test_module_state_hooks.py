"""Module state-dict hooks, extra state, to_empty and set_submodule against PyTorch: the same programs, the same
keys, calls, loaded values and errors."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import ember as em


def _program(lib):
    """A module with extra state and every state hook; what the hooks saw and what loading gave."""
    lib.manual_seed(0)

    class WithExtra(lib.nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = lib.nn.Linear(3, 2)
            self.counter = 3

        def get_extra_state(self):
            return {"counter": self.counter}

        def set_extra_state(self, state):
            self.counter = state["counter"]

    log = []
    source = WithExtra()
    source.register_state_dict_pre_hook(lambda m, prefix, keep_vars: log.append(("pre", prefix, keep_vars)))
    source.inner.register_state_dict_post_hook(
        lambda m, sd, prefix, meta: (log.append(("post", prefix, sorted(sd))), sd.pop(prefix + "bias")) and None)
    saved = source.state_dict()

    target = WithExtra()
    target.counter = 0
    target.inner.register_load_state_dict_pre_hook(
        lambda m, sd, prefix, meta, strict, missing, unexpected, errors: sd.__setitem__(
            prefix + "bias", lib.full((2,), 7.0)))
    target.register_load_state_dict_post_hook(
        lambda m, keys: (log.append(("load post", list(keys.missing_keys), list(keys.unexpected_keys))),
                         keys.unexpected_keys.clear()) and None)
    loaded = dict(saved)
    loaded["stray"] = lib.zeros(1)
    result = target.load_state_dict(loaded)
    return (log, sorted(saved), target.counter, target.inner.weight.detach().numpy().tolist(),
            target.inner.bias.detach().numpy().tolist(), list(result.missing_keys), list(result.unexpected_keys))


def test_state_hooks_and_extra_state_match_torch() -> None:
    assert _program(em) == _program(torch)


def test_missing_extra_state_is_a_missing_key() -> None:
    for lib in (torch, em):
        class Extra(lib.nn.Module):
            def get_extra_state(self):
                return 1

            def set_extra_state(self, state):
                pass

        with pytest.raises(RuntimeError, match='Missing key\\(s\\) in state_dict: "_extra_state"'):
            Extra().load_state_dict({})


def test_to_empty_makes_a_meta_model_real_and_set_submodule() -> None:
    shapes = {}
    for lib in (torch, em):
        with lib.device("meta"):
            model = lib.nn.Sequential(lib.nn.Linear(3, 2), lib.nn.BatchNorm1d(2))
        assert model.to_empty(device="cpu") is model
        model.set_submodule("1", lib.nn.Tanh())
        with pytest.raises(AttributeError):
            model.set_submodule("5", lib.nn.ReLU(), strict=True)
        with lib.no_grad():
            model[0].weight.fill_(0.5)
            model[0].bias.zero_()
        out = model(lib.ones(4, 3))
        shapes[lib] = (str(model[0].weight.device), type(model[1]).__name__, out.detach().numpy())
    assert shapes[em][:2] == shapes[torch][:2]
    np.testing.assert_allclose(shapes[em][2], shapes[torch][2], rtol=1e-6)
