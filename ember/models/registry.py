"""The model registry: build any zoo model by name, list the names, and give each one's usual input size."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ember import nn
from ember.models.alexnet import alexnet
from ember.models.cifar_resnet import resnet18_cifar, resnet20
from ember.models.lstm_classifier import lstm_classifier
from ember.models.mobilenet import mobilenet_v2
from ember.models.ncf import ncf
from ember.models.resnet import resnet18, resnet34, resnet50
from ember.models.small import lenet5, mlp, mlp_in_features
from ember.models.transformer_lm import transformer_lm
from ember.models.vgg import vgg11, vgg11_bn, vgg16, vgg16_bn, vgg19, vgg19_bn

_IMAGENET = (1, 3, 224, 224)
_MNIST = (1, 1, 28, 28)
_CIFAR = (1, 3, 32, 32)


@dataclass(frozen=True)
class ModelSpec:
    """How to build one registered model."""

    builder: Callable[..., nn.Module]
    input_size: tuple  # one example batch: a shape, or a tuple of shapes for several inputs
    hints: Callable[[dict, Any, Any], None] | None = None  # applies in_channels / input_size hints to kwargs
    defaults: dict = field(default_factory=dict)  # required arguments filled in when not given


def _fixed_rgb(kwargs: dict, in_channels, input_size) -> None:
    """ImageNet models are defined for RGB input only."""
    if in_channels is not None and in_channels != 3:
        raise ValueError(f"this model takes 3-channel input, got in_channels={in_channels} "
                         "(use lenet5, mlp, resnet20 or resnet18_cifar for other inputs)")


def _channels(kwargs: dict, in_channels, input_size) -> None:
    if in_channels is not None:
        kwargs.setdefault("in_channels", in_channels)


def _lenet_hints(kwargs: dict, in_channels, input_size) -> None:
    _channels(kwargs, in_channels, input_size)
    if input_size is not None:
        kwargs.setdefault("input_size", tuple(input_size))


def _mlp_hints(kwargs: dict, in_channels, input_size) -> None:
    if input_size is not None:
        kwargs.setdefault("in_features", mlp_in_features(input_size))


_REGISTRY: dict[str, ModelSpec] = {
    "alexnet": ModelSpec(alexnet, _IMAGENET, _fixed_rgb),
    "vgg11": ModelSpec(vgg11, _IMAGENET, _fixed_rgb),
    "vgg11_bn": ModelSpec(vgg11_bn, _IMAGENET, _fixed_rgb),
    "vgg16": ModelSpec(vgg16, _IMAGENET, _fixed_rgb),
    "vgg16_bn": ModelSpec(vgg16_bn, _IMAGENET, _fixed_rgb),
    "vgg19": ModelSpec(vgg19, _IMAGENET, _fixed_rgb),
    "vgg19_bn": ModelSpec(vgg19_bn, _IMAGENET, _fixed_rgb),
    "resnet18": ModelSpec(resnet18, _IMAGENET, _fixed_rgb),
    "resnet34": ModelSpec(resnet34, _IMAGENET, _fixed_rgb),
    "resnet50": ModelSpec(resnet50, _IMAGENET, _fixed_rgb),
    "mobilenet_v2": ModelSpec(mobilenet_v2, _IMAGENET, _fixed_rgb),
    "mlp": ModelSpec(mlp, _MNIST, _mlp_hints),
    "lenet5": ModelSpec(lenet5, _MNIST, _lenet_hints),
    "resnet20": ModelSpec(resnet20, _CIFAR, _channels),
    "resnet18_cifar": ModelSpec(resnet18_cifar, _CIFAR, _channels),
    # Sequence models: the defaults are the usual small benchmarks (65 characters of Tiny Shakespeare,
    # a 10k-word vocabulary, MovieLens-100k's 943 users and 1,682 items).
    "transformer_lm": ModelSpec(transformer_lm, (1, 64), defaults={"vocab_size": 65}),
    "lstm_classifier": ModelSpec(lstm_classifier, (1, 32), defaults={"vocab_size": 10000}),
    "ncf": ModelSpec(ncf, ((1,), (1,)), defaults={"num_users": 943, "num_items": 1682}),
}


def _spec(name: str) -> ModelSpec:
    try:
        return _REGISTRY[name]
    except KeyError:
        raise ValueError(f"unknown model {name!r}; available: {', '.join(list_models())}") from None


def list_models() -> list[str]:
    """The names get_model accepts, sorted."""
    return sorted(_REGISTRY)


def get_model(name: str, **kwargs) -> nn.Module:
    """Build the model called name with kwargs (e.g. num_classes).

    `in_channels` and `input_size` (one sample's shape, e.g. (1, 28, 28)) are hints: models that can
    adapt to them do (mlp, lenet5, resnet20, resnet18_cifar), the sequence models ignore them, and the
    ImageNet models accept only in_channels=3.
    """
    spec = _spec(name)
    in_channels = kwargs.pop("in_channels", None)
    input_size = kwargs.pop("input_size", None)
    if spec.hints is not None:
        spec.hints(kwargs, in_channels, input_size)
    for k, v in spec.defaults.items():
        kwargs.setdefault(k, v)
    return spec.builder(**kwargs)


def model_arguments(name: str) -> set[str]:
    """The keyword arguments get_model(name, ...) accepts (besides the in_channels / input_size hints)."""
    return set(inspect.signature(_spec(name).builder).parameters)


def default_input_size(name: str) -> tuple:
    """A usual example batch for the model: (1, 3, 224, 224) for ImageNet models, (1, 64) tokens for transformer_lm.

    Models with several inputs (ncf) give a tuple of shapes; integer inputs (token or id tensors) are
    described by the model's `input_dtypes`, which em.summary reads.
    """
    return _spec(name).input_size
