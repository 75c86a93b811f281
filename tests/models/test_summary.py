"""em.summary: the table, parameter and mult-add totals, and the training-memory estimate, computed on meta."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import ember as em
from ember import models
from ember.models.summary import ModelSummary


def test_exported_as_em_summary():
    assert em.summary is models.summary


@pytest.mark.parametrize("name", [n for n in models.list_models() if n != "lstm_classifier" or hasattr(em.nn, "LSTM")])
def test_totals_for_every_model(name):
    with em.device("meta"):
        model = models.get_model(name)
    s = em.summary(model, models.default_input_size(name))
    assert isinstance(s, ModelSummary)
    n = sum(p.numel() for p in model.parameters())
    assert s.total_params == s.trainable_params == n
    assert sum(r.params for r in s.rows) == n  # every parameter is used, so the column adds up
    assert s.total_mult_adds == sum(r.mult_adds for r in s.rows) > 0
    assert s.rows[0].name == "" and s.rows[0].depth == 0
    assert s.estimated_memory_bytes == (s.param_bytes + s.buffer_bytes + s.gradient_bytes + s.optimizer_bytes
                                        + s.activation_bytes)
    assert s.optimizer_bytes == 2 * s.gradient_bytes == 2 * 4 * n
    assert s.activation_bytes > 0


@pytest.mark.parametrize("name,macs,rel", [
    ("resnet50", 4.09e9, 0.005), ("resnet18", 1.81e9, 0.005), ("resnet34", 3.66e9, 0.005),
    ("mobilenet_v2", 0.30e9, 0.01), ("alexnet", 0.71e9, 0.01), ("vgg16", 15.47e9, 0.005),
])
def test_mult_adds_match_published_numbers(name, macs, rel):
    with em.device("meta"):
        model = models.get_model(name)
    assert em.summary(model, (1, 3, 224, 224)).total_mult_adds == pytest.approx(macs, rel=rel)


def test_exact_mult_adds_of_small_models():
    lenet = em.summary(models.lenet5(), (1, 1, 28, 28))
    assert lenet.total_mult_adds == 6 * 28 * 28 * 25 + 16 * 10 * 10 * 150 + 400 * 120 + 120 * 84 + 84 * 10
    assert em.summary(models.mlp(), (3, 784)).total_mult_adds == 3 * (784 * 512 + 512 * 256 + 256 * 10)
    # Grouped (depthwise) convolution: one input channel per output channel.
    conv = em.nn.Conv2d(8, 8, 3, padding=1, groups=8, bias=False)
    assert em.summary(conv, (1, 8, 10, 10)).total_mult_adds == 8 * 10 * 10 * 9


def test_attention_matmuls_are_counted():
    lm = models.transformer_lm(vocab_size=50, block_size=32, n_layer=1, n_head=2, n_embd=16)
    s = em.summary(lm, (2, 32), depth=4)
    linear = 2 * 32 * (16 * 48 + 16 * 16 + 16 * 64 + 64 * 16 + 16 * 50)
    attention = 2 * (2 * 2 * 32 * 32 * 8)  # QK^T and AV per head
    assert s.total_mult_adds == linear + attention
    attn_row = next(r for r in s.rows if r.name == "transformer.h.0.attn")
    assert attn_row.mult_adds == attention  # the functional matmuls belong to the module that ran them


def test_table_text():
    text = str(em.summary(models.resnet18(), (1, 3, 224, 224)))
    for piece in ("Layer (type)", "Output shape", "Param #", "Mult-adds", "ResNet", "layer1.0.conv1 (Conv2d)",
                  "[1, 64, 56, 56]", "fc (Linear)", "[1, 1000]", "513,000", "Total params: 11,689,512",
                  "Trainable params: 11,689,512", "Non-trainable params: 0", "Total mult-adds: 1.81 G",
                  "Params size (MB): 44.59", "Estimated training memory (MB)"):
        assert piece in text, piece
    assert "layer1.0.downsample" not in text and "layer2.0.downsample (Sequential)" in text
    assert "layer2.0.downsample.0" not in text  # depth 3 by default: folded into its parent's row
    assert repr(em.summary(models.lenet5(), (1, 1, 28, 28))).startswith("=")


def test_depth_folds_rows_without_changing_totals():
    model = models.resnet20()
    full = em.summary(model, (1, 3, 32, 32), depth=10)
    flat = em.summary(model, (1, 3, 32, 32), depth=0)
    assert len(flat.rows) == 1 and len(full.rows) > 60
    assert flat.rows[0].params == full.total_params
    assert flat.rows[0].mult_adds == full.total_mult_adds == flat.total_mult_adds


def test_example_tensor_and_batch_size():
    model = models.lenet5()
    one = em.summary(model, (1, 1, 28, 28))
    four = em.summary(model, em.randn(4, 1, 28, 28))
    assert four.input_shapes == [(4, 1, 28, 28)]
    assert four.total_mult_adds == 4 * one.total_mult_adds
    assert four.rows[0].output_shape == [(4, 10)]


def test_integer_inputs_and_several_inputs():
    lm = em.summary(models.transformer_lm(20, block_size=8), (2, 8))  # dtype from TransformerLM.input_dtypes
    assert lm.rows[0].output_shape == [(2, 8, 20)]
    explicit = em.summary(models.transformer_lm(20, block_size=8), (2, 8), dtypes=[em.int64])
    assert explicit.total_mult_adds == lm.total_mult_adds
    rec = em.summary(models.ncf(10, 20), ((5,), (5,)))
    assert rec.rows[0].output_shape == [(5,)]
    assert rec.total_mult_adds == 5 * (64 * 32 + 32 * 16 + 48)
    assert em.summary(models.ncf(10, 20), (5,)).total_mult_adds == rec.total_mult_adds  # one shape for both
    tensors = em.summary(models.ncf(10, 20), (em.zeros(3, dtype=em.int64), em.zeros(3, dtype=em.int64)))
    assert tensors.rows[0].output_shape == [(3,)]


def test_cpu_device_gives_the_same_numbers():
    for model, size in ((models.lenet5(), (2, 1, 28, 28)), (models.transformer_lm(20, block_size=8), (2, 8))):
        meta = em.summary(model, size)
        cpu = em.summary(model, size, device="cpu")
        assert (cpu.total_params, cpu.total_mult_adds) == (meta.total_params, meta.total_mult_adds)
        assert [r.output_shape for r in cpu.rows] == [r.output_shape for r in meta.rows]
        assert cpu.activation_bytes == meta.activation_bytes


def test_cpu_device_restores_buffers_and_modes():
    model = models.resnet20()
    model.layer1.eval()
    before = {k: v.detach().numpy().copy() for k, v in model.state_dict().items()}
    em.summary(model, (2, 3, 32, 32), device="cpu")
    assert model.training and not model.layer1.training and not model.layer1[0].bn1.training
    assert model.layer2.training
    for k, v in model.state_dict().items():
        np.testing.assert_array_equal(v.detach().numpy(), before[k], err_msg=k)


def test_original_model_is_untouched():
    model = models.resnet20().eval()
    seen = []
    handle = model.register_forward_hook(lambda m, a, o: seen.append(o))
    before = {k: v.detach().numpy().copy() for k, v in model.state_dict().items()}
    em.summary(model, (1, 3, 32, 32))
    assert not seen  # the meta copy ran, not the model (and without the model's hooks)
    assert not model.training
    assert all(p.device.type == "cpu" and p.grad is None for p in model.parameters())
    assert all(not m._forward_hooks or m is model for m in model.modules())
    assert all(not m._forward_pre_hooks for m in model.modules())
    for k, v in model.state_dict().items():
        np.testing.assert_array_equal(v.detach().numpy(), before[k])
    handle.remove()


def test_frozen_parameters_and_optimizer_state():
    model = models.mlp()
    for p in model.layers[0].parameters():
        p.requires_grad_(False)
    s = em.summary(model, (1, 784), optimizer="sgd")
    frozen = 784 * 512 + 512
    assert s.trainable_params == s.total_params - frozen and s.non_trainable_params == frozen
    assert s.gradient_bytes == 4 * s.trainable_params and s.optimizer_bytes == 0
    assert s.total_mult_adds == 784 * 512 + 512 * 256 + 256 * 10  # frozen layers still cost compute
    assert "Non-trainable params: 401,920" in str(s)
    assert em.summary(model, (1, 784), optimizer="momentum").optimizer_bytes == s.gradient_bytes


def _torch_saved_bytes(model: torch.nn.Module, x: torch.Tensor) -> int:
    """Bytes of the distinct storages PyTorch's autograd saves for backward, parameters excluded; its int64 max
    pooling indices counted at 4 bytes each, the width of the window-local int32 argmax that Ember keeps."""
    state = {t.untyped_storage().data_ptr() for t in list(model.parameters()) + list(model.buffers())}
    saved: dict[int, int] = {}

    def pack(t: torch.Tensor) -> torch.Tensor:
        st = t.untyped_storage()
        if st.data_ptr() not in state:
            saved[st.data_ptr()] = st.nbytes() // 2 if t.dtype == torch.int64 else st.nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        model(x)
    return sum(saved.values())


def test_saved_activations_match_pytorch():
    tn = torch.nn
    torch_lenet = tn.Sequential(tn.Conv2d(1, 6, 5, padding=2), tn.ReLU(), tn.MaxPool2d(2), tn.Conv2d(6, 16, 5),
                                tn.ReLU(), tn.MaxPool2d(2), tn.Flatten(), tn.Linear(400, 120), tn.ReLU(),
                                tn.Linear(120, 84), tn.ReLU(), tn.Linear(84, 10))
    torch_mlp = tn.Sequential(tn.Flatten(), tn.Linear(784, 512), tn.ReLU(), tn.Linear(512, 256), tn.ReLU(),
                              tn.Linear(256, 10))
    for ours, ref in ((models.lenet5(), torch_lenet), (models.mlp(), torch_mlp)):
        x = torch.randn(3, 1, 28, 28, requires_grad=False)
        assert em.summary(ours, (3, 1, 28, 28)).activation_bytes == _torch_saved_bytes(ref, x)


def test_plain_tensor_attributes_move_to_meta():
    class Scaled(em.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc = em.nn.Linear(4, 2)
            self.scale = em.tensor([2.0, 3.0])  # neither a parameter nor a buffer

        def forward(self, x):
            return self.fc(x) * self.scale

    s = em.summary(Scaled(), (5, 4))
    assert s.rows[0].output_shape == [(5, 2)] and s.total_mult_adds == 5 * 4 * 2


def test_bad_arguments():
    model = models.lenet5()
    with pytest.raises(ValueError, match="input size"):
        em.summary(model)
    with pytest.raises(TypeError, match="input_size"):
        em.summary(model, "1,1,28,28")
    with pytest.raises(ValueError, match="dtype"):
        em.summary(model, (1, 1, 28, 28), dtypes=[em.float32, em.float32])
    with pytest.raises(ValueError, match="optimizer"):
        em.summary(model, (1, 1, 28, 28), optimizer="lbfgs")
