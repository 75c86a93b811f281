"""ember.models.get_model / list_models / default_input_size, including the CLI's input hints."""

from __future__ import annotations

import pytest

import ember as em
from ember import models

ALL = ["alexnet", "lenet5", "lstm_classifier", "mlp", "mobilenet_v2", "ncf", "resnet18", "resnet18_cifar",
       "resnet20", "resnet34", "resnet50", "transformer_lm", "vgg11", "vgg11_bn", "vgg16", "vgg16_bn", "vgg19",
       "vgg19_bn"]
IMAGENET = ["alexnet", "mobilenet_v2", "resnet18", "resnet34", "resnet50", "vgg11", "vgg11_bn", "vgg16", "vgg16_bn",
            "vgg19", "vgg19_bn"]


def test_list_models():
    assert models.list_models() == ALL


def test_unknown_name_lists_the_available_ones():
    with pytest.raises(ValueError, match="unknown model 'resnet1000'.*lenet5.*vgg19_bn"):
        models.get_model("resnet1000")
    with pytest.raises(ValueError, match="available"):
        models.default_input_size("nope")


def test_unknown_keyword_is_a_type_error():
    with pytest.raises(TypeError):
        models.get_model("lenet5", depth=5)


def test_default_input_sizes():
    for name in IMAGENET:
        assert models.default_input_size(name) == (1, 3, 224, 224)
    assert models.default_input_size("lenet5") == models.default_input_size("mlp") == (1, 1, 28, 28)
    assert models.default_input_size("resnet20") == models.default_input_size("resnet18_cifar") == (1, 3, 32, 32)
    assert models.default_input_size("transformer_lm") == (1, 64)
    assert models.get_model("transformer_lm").input_dtypes == (em.int64,)
    assert models.default_input_size("ncf") == ((1,), (1,))


def test_cli_hints_for_lenet5_and_mlp():
    lenet = models.get_model("lenet5", num_classes=10, in_channels=1, input_size=(1, 28, 28))
    assert tuple(lenet(em.randn(2, 1, 28, 28)).shape) == (2, 10)
    small = models.get_model("mlp", num_classes=10, in_channels=1, input_size=(1, 8, 8))
    assert small.in_features == 64
    assert tuple(small(em.randn(2, 1, 8, 8)).shape) == (2, 10)
    digits = models.get_model("lenet5", num_classes=10, in_channels=1, input_size=(1, 8, 8))
    assert tuple(digits(em.randn(2, 1, 8, 8)).shape) == (2, 10)
    rgb = models.get_model("lenet5", num_classes=10, in_channels=3, input_size=(3, 32, 32))
    assert tuple(rgb(em.randn(2, 3, 32, 32)).shape) == (2, 10)


def test_explicit_arguments_win_over_hints():
    model = models.get_model("mlp", in_features=10, input_size=(1, 8, 8))
    assert model.in_features == 10


def test_resnet20_takes_in_channels():
    model = models.get_model("resnet20", num_classes=10, in_channels=1, input_size=(1, 28, 28))
    assert tuple(model.conv1.weight.shape) == (16, 1, 3, 3)
    assert tuple(model(em.randn(2, 1, 28, 28)).shape) == (2, 10)


def test_imagenet_models_accept_only_rgb_hints():
    with em.device("meta"):
        model = models.get_model("resnet18", num_classes=10, in_channels=3, input_size=(3, 224, 224))
        assert tuple(model.fc.weight.shape) == (10, 512)
        with pytest.raises(ValueError, match="3-channel"):
            models.get_model("vgg11", in_channels=1, input_size=(1, 28, 28))


def test_sequence_models_ignore_hints_and_have_defaults():
    lm = models.get_model("transformer_lm", in_channels=1, input_size=(64,))
    assert lm.vocab_size == 65
    assert models.get_model("transformer_lm", vocab_size=10).vocab_size == 10
    rec = models.get_model("ncf")
    assert tuple(rec.gmf_user.weight.shape) == (943, 32) and tuple(rec.gmf_item.weight.shape) == (1682, 32)


@pytest.mark.parametrize("name", [n for n in ALL if n != "lstm_classifier" or hasattr(em.nn, "LSTM")])
def test_every_model_runs_on_meta(name):
    """Each registered model, built on the meta device, maps its default input to the expected output shape."""
    with em.device("meta"):
        model = models.get_model(name)
    size = models.default_input_size(name)
    shapes = size if isinstance(size[0], tuple) else (size,)
    dtypes = getattr(model, "input_dtypes", (em.float32,) * len(shapes))
    out = model(*(em.empty(s, dtype=d, device="meta") for s, d in zip(shapes, dtypes)))
    expected = {"transformer_lm": (1, 64, 65), "lstm_classifier": (1, 2), "ncf": (1,)}.get(name)
    if expected is None:
        expected = (1, 1000 if name in IMAGENET else 10)
    assert tuple(out.shape) == expected and out.device.type == "meta"
