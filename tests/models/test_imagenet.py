"""ImageNet models: torchvision's parameter counts, state-dict keys and shapes, checkpoints and outputs."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import ember as em
from ember import models

from .torch_reference import BUILDERS

# torchvision's published parameter counts (1000 classes).
PUBLISHED = {
    "alexnet": 61_100_840,
    "vgg11": 132_863_336,
    "vgg16": 138_357_544,
    "vgg19": 143_667_240,
    "vgg11_bn": 132_868_840,
    "vgg16_bn": 138_365_992,
    "vgg19_bn": 143_678_248,
    "resnet18": 11_689_512,
    "resnet34": 21_797_672,
    "resnet50": 25_557_032,
    "mobilenet_v2": 3_504_872,
}


def meta_model(name: str, **kwargs) -> em.nn.Module:
    """The Ember model built on the meta device: shapes only, no memory."""
    with em.device("meta"):
        return getattr(models, name)(**kwargs)


def torch_meta_model(name: str, **kwargs) -> torch.nn.Module:
    with torch.device("meta"):
        return BUILDERS[name](**kwargs)


def shapes(state: dict) -> list[tuple[str, tuple]]:
    return [(k, tuple(v.shape)) for k, v in state.items()]


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_parameter_count_matches_torchvision(name):
    model = meta_model(name)
    assert sum(p.numel() for p in model.parameters()) == PUBLISHED[name]
    assert next(model.parameters()).device.type == "meta"


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_state_dict_keys_and_shapes_match_torch_reference(name):
    ours = shapes(meta_model(name).state_dict())
    ref = shapes(torch_meta_model(name).state_dict())
    assert ours == ref  # same keys, same order, same shapes
    assert sum(math.prod(s) for k, s in ref if "running" not in k and "num_batches" not in k) == PUBLISHED[name]


@pytest.mark.parametrize("name,kwargs", [
    ("resnet50", {"num_classes": 10}),
    ("mobilenet_v2", {"width_mult": 0.5, "num_classes": 7}),
    ("mobilenet_v2", {"width_mult": 1.4}),
    ("vgg16_bn", {"num_classes": 5}),
    ("alexnet", {"num_classes": 3}),
])
def test_keyword_arguments_match_torch_reference(name, kwargs):
    assert shapes(meta_model(name, **kwargs).state_dict()) == shapes(torch_meta_model(name, **kwargs).state_dict())


def test_known_state_dict_keys():
    assert "layer1.0.downsample.1.running_mean" in meta_model("resnet50").state_dict()
    assert "layer2.0.downsample.0.weight" in meta_model("resnet18").state_dict()
    mb = meta_model("mobilenet_v2").state_dict()
    assert {"features.0.0.weight", "features.1.conv.0.0.weight", "features.2.conv.3.running_var",
            "features.18.1.num_batches_tracked", "classifier.1.weight"} <= set(mb)
    assert {"features.0.weight", "classifier.1.weight", "classifier.6.bias"} <= set(meta_model("alexnet").state_dict())


def _torch_state(name: str, seed: int = 0) -> dict:
    torch.manual_seed(seed)
    ref = BUILDERS[name]()
    # Non-trivial running statistics, so a forward in eval mode checks that they were loaded too.
    for m in ref.modules():
        if isinstance(m, torch.nn.BatchNorm2d):
            m.running_mean.uniform_(-0.1, 0.1)
            m.running_var.uniform_(0.5, 1.5)
            m.weight.data.uniform_(0.5, 1.5)
            m.bias.data.uniform_(-0.1, 0.1)
            m.num_batches_tracked.fill_(7)
    return ref


def _load_torch_safetensors(tmp_path, name: str, ref: torch.nn.Module) -> em.nn.Module:
    """Save ref's state dict with safetensors' torch writer, read it with em.load, load strictly."""
    from safetensors.torch import save_file

    path = tmp_path / f"{name}.safetensors"
    save_file({k: v.contiguous() for k, v in ref.state_dict().items()}, str(path))
    model = models.get_model(name)
    model.load_state_dict(em.load(path), strict=True)
    return model


def _assert_same_state(model: em.nn.Module, ref: torch.nn.Module) -> None:
    ours = model.state_dict()
    for k, v in ref.state_dict().items():
        np.testing.assert_array_equal(ours[k].detach().numpy(), v.numpy(), err_msg=k)


def test_resnet18_loads_torchvision_checkpoint_and_matches_forward(tmp_path):
    ref = _torch_state("resnet18")
    model = _load_torch_safetensors(tmp_path, "resnet18", ref)
    _assert_same_state(model, ref)
    model.eval()
    ref.eval()
    x = np.random.default_rng(0).standard_normal((2, 3, 64, 64)).astype(np.float32)
    with em.no_grad():
        ours = model(em.tensor(x)).numpy()
    with torch.no_grad():
        expected = ref(torch.from_numpy(x)).numpy()
    assert ours.shape == (2, 1000)
    np.testing.assert_allclose(ours, expected, atol=2e-4, rtol=1e-3)


def test_mobilenet_v2_round_trips_em_save_and_matches_forward(tmp_path):
    ref = _torch_state("mobilenet_v2", seed=1)
    path = tmp_path / "mobilenet_v2.safetensors"
    em.save({k: em.tensor(v.numpy()) for k, v in ref.state_dict().items()}, path)
    model = models.mobilenet_v2()
    model.load_state_dict(em.load(path), strict=True)
    _assert_same_state(model, ref)
    model.eval()
    ref.eval()
    x = np.random.default_rng(1).standard_normal((1, 3, 64, 64)).astype(np.float32)
    with em.no_grad():
        ours = model(em.tensor(x)).numpy()
    with torch.no_grad():
        expected = ref(torch.from_numpy(x)).numpy()
    np.testing.assert_allclose(ours, expected, atol=2e-4, rtol=1e-3)


def test_resnet50_loads_torchvision_checkpoint(tmp_path):
    ref = _torch_state("resnet50", seed=2)
    _assert_same_state(_load_torch_safetensors(tmp_path, "resnet50", ref), ref)


def test_strict_load_reports_a_wrong_checkpoint():
    state = {k: em.zeros(tuple(v.shape), dtype=v.dtype) for k, v in models.resnet18().state_dict().items()}
    del state["fc.bias"]
    with pytest.raises(RuntimeError, match="fc.bias"):
        models.resnet18().load_state_dict(state, strict=True)
    with pytest.raises(RuntimeError, match="size mismatch for fc.weight"):
        models.resnet18(num_classes=10).load_state_dict(
            {k: em.zeros(tuple(v.shape), dtype=v.dtype) for k, v in models.resnet18().state_dict().items()})


@pytest.mark.slow
@pytest.mark.parametrize("name", ["alexnet", "vgg11_bn"])
def test_large_models_load_torchvision_checkpoints(tmp_path, name):
    ref = _torch_state(name, seed=3)
    _assert_same_state(_load_torch_safetensors(tmp_path, name, ref), ref)


def _np(t: em.Tensor) -> np.ndarray:
    return t.detach().numpy()


def _std(t: em.Tensor) -> float:
    return float(np.std(_np(t)))


def test_resnet_initialisation_follows_torchvision():
    em.manual_seed(0)
    model = models.resnet18()
    w = model.get_parameter("layer3.0.conv1.weight")
    fan_out = w.shape[0] * w.shape[2] * w.shape[3]
    assert _std(w) == pytest.approx(math.sqrt(2.0 / fan_out), rel=0.05)  # kaiming_normal_, fan_out, relu
    assert np.all(_np(model.bn1.weight) == 1) and np.all(_np(model.bn1.bias) == 0)
    bound = 1 / math.sqrt(512)  # the fc layer keeps PyTorch's default init
    assert np.abs(_np(model.fc.weight)).max() <= bound
    zero = models.resnet50(zero_init_residual=True)
    assert np.all(_np(zero.get_parameter("layer1.0.bn3.weight")) == 0)
    assert np.all(_np(models.resnet18(zero_init_residual=True).get_parameter("layer4.1.bn2.weight")) == 0)


def test_mobilenet_initialisation_follows_torchvision():
    em.manual_seed(0)
    model = models.mobilenet_v2()
    lin = model.classifier[1]
    assert _std(lin.weight) == pytest.approx(0.01, rel=0.05)
    assert np.all(_np(lin.bias) == 0)
    w = model.get_parameter("features.18.0.weight")  # 1x1 conv, 320 -> 1280
    assert _std(w) == pytest.approx(math.sqrt(2.0 / 1280), rel=0.05)


@pytest.mark.slow
def test_vgg_initialisation_follows_torchvision():
    em.manual_seed(0)
    model = models.vgg11_bn()
    assert _std(model.classifier[0].weight) == pytest.approx(0.01, rel=0.02)
    assert np.all(_np(model.classifier[0].bias) == 0)
    w = model.features[0].weight
    assert _std(w) == pytest.approx(math.sqrt(2.0 / (64 * 9)), rel=0.1)
    assert np.all(_np(model.features[1].weight) == 1)


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_forward_on_meta(name):
    model = meta_model(name, num_classes=17)
    out = model(em.empty(2, 3, 224, 224, device="meta"))
    assert tuple(out.shape) == (2, 17) and out.device.type == "meta"
