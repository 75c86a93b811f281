"""Every module class of torch.nn (163 in PyTorch 2.13) has an ember.nn namesake, but for the listed few."""

from __future__ import annotations

import inspect

import torch

import ember as em

# Container: deprecated since PyTorch 1.x; LinearCrossEntropyLoss: new in PyTorch, not yet in Ember
EXPECTED_MISSING = {"Container", "LinearCrossEntropyLoss"}


def test_torch_nn_module_classes_exist_in_ember_nn() -> None:
    theirs = {name for name, obj in vars(torch.nn).items()
              if inspect.isclass(obj) and issubclass(obj, torch.nn.Module)}
    missing = {name for name in theirs if not hasattr(em.nn, name)}
    assert missing == EXPECTED_MISSING


def test_functional_forms_of_the_new_layers_exist() -> None:
    for name in ("fractional_max_pool2d", "fractional_max_pool2d_with_indices", "fractional_max_pool3d",
                 "fractional_max_pool3d_with_indices", "conv_tbc", "multi_head_attention_forward"):
        assert callable(getattr(em.nn.functional, name)), name
    for name in ("UninitializedParameter", "UninitializedBuffer"):
        assert hasattr(em.nn, name) and hasattr(em.nn.parameter, name), name
