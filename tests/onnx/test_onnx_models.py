"""Every ember.models network exports to ONNX, passes onnx's full checker, and onnxruntime matches Ember
(rtol 1e-4) at two batch sizes through one dynamic batch axis."""

import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from onnx_test_helpers import export_and_check  # noqa: E402

import ember as em  # noqa: E402
from ember.models import default_input_size, get_model, list_models  # noqa: E402

# ImageNet models at 64x64 (they pool adaptively); AlexNet and the VGGs carry 230-550 MB of weights (over 10 s each), so slow.
_SLOW = {"alexnet", "vgg11", "vgg11_bn", "vgg16", "vgg16_bn", "vgg19", "vgg19_bn"}
_SMALL_IMAGE = (3, 64, 64)


def _inputs(name, model, b):
    shape = default_input_size(name)
    shapes = shape if isinstance(shape[0], tuple) else (shape,)
    dtypes = getattr(model, "input_dtypes", None)
    gen = em.Generator().manual_seed(b)
    out = []
    for i, s in enumerate(shapes):
        s = (b,) + (_SMALL_IMAGE if s == (1, 3, 224, 224) else tuple(s[1:]))
        if dtypes:
            high = 64 if name == "transformer_lm" else 900
            out.append(em.randint(0, high, s, dtype=dtypes[i], generator=gen))
        else:
            out.append(em.randn(*s, generator=gen))
    return tuple(out)


def _trained_statistics(model):
    """BatchNorm statistics away from their initial 0 and 1, as after training, so folding them is tested."""
    gen = em.Generator().manual_seed(7)
    with em.no_grad():
        for name, b in model.named_buffers():
            if name.endswith("running_mean"):
                b.copy_(em.randn(*b.shape, generator=gen) * 0.1)
            elif name.endswith("running_var"):
                b.copy_(em.rand(*b.shape, generator=gen) + 0.5)


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow) if n in _SLOW else n for n in list_models()])
def test_model_exports_and_matches_onnxruntime(name, tmp_path):
    em.manual_seed(0)
    model = get_model(name)
    _trained_statistics(model)
    model.eval()
    diff = export_and_check(model, _inputs(name, model, 2), tmp_path / f"{name}.onnx",
                            make_args=lambda b: _inputs(name, model, b))
    print(f"{name}: max abs diff vs onnxruntime {diff:.3g}")


def test_export_leaves_training_mode_alone(tmp_path):
    model = get_model("lenet5")
    model.train()
    export_and_check(model, em.randn(2, 1, 28, 28), tmp_path / "m.onnx", make_args=lambda b: em.randn(b, 1, 28, 28),
                     batches=())
    assert all(m.training for m in model.modules())
