"""Every layer against its PyTorch twin with copied weights: forward, input and parameter gradients, buffers."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import ember as em
from ember import nn

from .helpers import RNG, assert_close, compare_module, randn

tnn = torch.nn

# (name, builder taking the nn namespace, input shapes). Every case runs in train and eval mode.
CASES = [
    ("linear", lambda n: n.Linear(5, 3), [(4, 5)]),
    ("linear-3d", lambda n: n.Linear(5, 3), [(2, 4, 5)]),
    ("linear-1d", lambda n: n.Linear(5, 3), [(5,)]),
    ("linear-nobias", lambda n: n.Linear(5, 3, bias=False), [(4, 5)]),
    ("bilinear", lambda n: n.Bilinear(3, 4, 2), [(5, 3), (5, 4)]),
    ("identity", lambda n: n.Identity(3, unused=True), [(2, 3)]),
    ("conv1d", lambda n: n.Conv1d(3, 4, 3), [(2, 3, 9)]),
    ("conv1d-stride-pad-dil", lambda n: n.Conv1d(4, 6, 3, stride=2, padding=2, dilation=2, groups=2), [(2, 4, 11)]),
    ("conv1d-same", lambda n: n.Conv1d(3, 2, 4, padding="same"), [(2, 3, 7)]),
    ("conv1d-reflect", lambda n: n.Conv1d(3, 2, 3, padding=1, padding_mode="reflect"), [(2, 3, 7)]),
    ("conv1d-unbatched", lambda n: n.Conv1d(3, 2, 3), [(3, 7)]),
    ("conv2d", lambda n: n.Conv2d(3, 4, 3), [(2, 3, 7, 6)]),
    ("conv2d-stride-pad", lambda n: n.Conv2d(3, 4, (3, 2), stride=(2, 1), padding=(1, 2), bias=False), [(2, 3, 7, 6)]),
    ("conv2d-groups-dil", lambda n: n.Conv2d(4, 6, 3, dilation=2, groups=2), [(1, 4, 8, 8)]),
    ("conv2d-same", lambda n: n.Conv2d(2, 3, 4, padding="same"), [(2, 2, 6, 5)]),
    ("conv2d-circular", lambda n: n.Conv2d(2, 3, 3, padding=1, padding_mode="circular"), [(2, 2, 5, 5)]),
    ("conv2d-replicate", lambda n: n.Conv2d(2, 3, 3, padding=(1, 2), padding_mode="replicate"), [(2, 2, 5, 5)]),
    ("conv2d-unbatched", lambda n: n.Conv2d(2, 3, 3), [(2, 5, 5)]),
    ("convT1d", lambda n: n.ConvTranspose1d(3, 2, 3, stride=2, padding=1, output_padding=1), [(2, 3, 5)]),
    ("convT2d", lambda n: n.ConvTranspose2d(3, 4, 3), [(2, 3, 4, 5)]),
    ("convT2d-stride", lambda n: n.ConvTranspose2d(4, 2, 3, stride=2, padding=1, output_padding=1, groups=2),
     [(2, 4, 4, 4)]),
    ("convT2d-dil", lambda n: n.ConvTranspose2d(2, 3, 2, dilation=2, bias=False), [(1, 2, 3, 3)]),
    ("maxpool1d", lambda n: n.MaxPool1d(3, stride=2, padding=1), [(2, 3, 9)]),
    ("maxpool2d", lambda n: n.MaxPool2d(2), [(2, 3, 6, 6)]),
    ("maxpool2d-ceil", lambda n: n.MaxPool2d(3, stride=2, padding=1, ceil_mode=True), [(2, 3, 8, 7)]),
    ("maxpool2d-dil", lambda n: n.MaxPool2d(2, stride=1, dilation=2), [(1, 2, 6, 6)]),
    ("avgpool1d", lambda n: n.AvgPool1d(3, stride=2, padding=1, count_include_pad=False), [(2, 3, 9)]),
    ("avgpool2d", lambda n: n.AvgPool2d(2), [(2, 3, 6, 6)]),
    ("avgpool2d-pad", lambda n: n.AvgPool2d(3, stride=2, padding=1, ceil_mode=True, count_include_pad=False),
     [(2, 3, 7, 8)]),
    ("adaptiveavg1d", lambda n: n.AdaptiveAvgPool1d(4), [(2, 3, 10)]),
    ("adaptiveavg2d", lambda n: n.AdaptiveAvgPool2d((1, 1)), [(2, 3, 5, 4)]),
    ("adaptiveavg2d-uneven", lambda n: n.AdaptiveAvgPool2d((3, 2)), [(2, 3, 7, 5)]),
    ("adaptivemax2d", lambda n: n.AdaptiveMaxPool2d((3, 2)), [(2, 3, 7, 5)]),
    ("batchnorm1d", lambda n: n.BatchNorm1d(4), [(8, 4)]),
    ("batchnorm1d-3d", lambda n: n.BatchNorm1d(4, momentum=0.3), [(5, 4, 6)]),
    ("batchnorm1d-noaffine", lambda n: n.BatchNorm1d(4, affine=False), [(8, 4)]),
    ("batchnorm1d-cma", lambda n: n.BatchNorm1d(4, momentum=None), [(8, 4)]),
    ("batchnorm2d", lambda n: n.BatchNorm2d(3), [(4, 3, 5, 5)]),
    ("batchnorm2d-nostats", lambda n: n.BatchNorm2d(3, track_running_stats=False), [(4, 3, 5, 5)]),
    ("batchnorm2d-nobias", lambda n: n.BatchNorm2d(3, bias=False, eps=1e-3), [(4, 3, 2, 3)]),
    ("instancenorm2d", lambda n: n.InstanceNorm2d(3, affine=True), [(2, 3, 4, 5)]),
    ("instancenorm1d-stats", lambda n: n.InstanceNorm1d(3, track_running_stats=True), [(2, 3, 6)]),
    ("layernorm", lambda n: n.LayerNorm(6), [(4, 6)]),
    ("layernorm-2d", lambda n: n.LayerNorm((3, 4), eps=1e-3), [(2, 5, 3, 4)]),
    ("layernorm-noaffine", lambda n: n.LayerNorm(6, elementwise_affine=False), [(2, 3, 6)]),
    ("layernorm-nobias", lambda n: n.LayerNorm(6, bias=False), [(3, 6)]),
    ("groupnorm", lambda n: n.GroupNorm(2, 6), [(3, 6, 4, 4)]),
    ("groupnorm-1d", lambda n: n.GroupNorm(3, 6, affine=False), [(3, 6, 5)]),
    ("groupnorm-2d-input", lambda n: n.GroupNorm(1, 4), [(3, 4)]),
    ("rmsnorm", lambda n: n.RMSNorm(6), [(3, 6)]),
    ("rmsnorm-eps", lambda n: n.RMSNorm((2, 6), eps=1e-3), [(3, 2, 6)]),
    ("flatten", lambda n: n.Flatten(), [(2, 3, 4, 5)]),
    ("flatten-range", lambda n: n.Flatten(0, 2), [(2, 3, 4, 5)]),
    ("unflatten", lambda n: n.Unflatten(1, (3, 4)), [(2, 12, 5)]),
    ("relu", lambda n: n.ReLU(), [(3, 7)]),
    ("relu6", lambda n: n.ReLU6(), [(3, 7)]),
    ("leaky_relu", lambda n: n.LeakyReLU(0.2), [(3, 7)]),
    ("elu", lambda n: n.ELU(0.7), [(3, 7)]),
    ("celu", lambda n: n.CELU(1.3), [(3, 7)]),
    ("selu", lambda n: n.SELU(), [(3, 7)]),
    ("gelu", lambda n: n.GELU(), [(3, 7)]),
    ("gelu-tanh", lambda n: n.GELU("tanh"), [(3, 7)]),
    ("silu", lambda n: n.SiLU(), [(3, 7)]),
    ("mish", lambda n: n.Mish(), [(3, 7)]),
    ("hardswish", lambda n: n.Hardswish(), [(3, 7)]),
    ("hardsigmoid", lambda n: n.Hardsigmoid(), [(3, 7)]),
    ("hardtanh", lambda n: n.Hardtanh(-0.5, 0.8), [(3, 7)]),
    ("tanh", lambda n: n.Tanh(), [(3, 7)]),
    ("sigmoid", lambda n: n.Sigmoid(), [(3, 7)]),
    ("logsigmoid", lambda n: n.LogSigmoid(), [(3, 7)]),
    ("softsign", lambda n: n.Softsign(), [(3, 7)]),
    ("tanhshrink", lambda n: n.Tanhshrink(), [(3, 7)]),
    ("softplus", lambda n: n.Softplus(beta=2.0, threshold=1.0), [(3, 7)]),
    ("threshold", lambda n: n.Threshold(0.1, -2.0), [(3, 7)]),
    ("prelu", lambda n: n.PReLU(), [(3, 7)]),
    ("prelu-channels", lambda n: n.PReLU(4, init=0.1), [(2, 4, 3)]),
    ("glu", lambda n: n.GLU(1), [(3, 8)]),
    ("softmax", lambda n: n.Softmax(dim=1), [(3, 7)]),
    ("softmax-3d", lambda n: n.Softmax(dim=-1), [(2, 3, 7)]),
    ("softmin", lambda n: n.Softmin(dim=0), [(3, 7)]),
    ("logsoftmax", lambda n: n.LogSoftmax(dim=1), [(3, 7)]),
    ("upsample-nearest", lambda n: n.Upsample(scale_factor=2), [(2, 3, 4, 5)]),
    ("upsample-bilinear", lambda n: n.Upsample(size=(7, 3), mode="bilinear"), [(2, 3, 4, 5)]),
    ("upsample-bilinear-ac", lambda n: n.Upsample(scale_factor=1.5, mode="bilinear", align_corners=True),
     [(1, 2, 4, 4)]),
    ("upsample-linear", lambda n: n.Upsample(scale_factor=3, mode="linear"), [(2, 3, 4)]),
    ("sequential", lambda n: n.Sequential(n.Conv2d(2, 4, 3, padding=1), n.BatchNorm2d(4), n.ReLU(),
                                          n.MaxPool2d(2), n.Flatten(), n.Linear(16, 3)), [(3, 2, 4, 4)]),
]


@pytest.mark.parametrize("train", [True, False], ids=["train", "eval"])
@pytest.mark.parametrize(("name", "build", "shapes"), CASES, ids=[c[0] for c in CASES])
@pytest.mark.filterwarnings("ignore:Using padding='same'")
def test_layer_matches_torch(name: str, build, shapes: list, train: bool) -> None:
    em.manual_seed(0)
    torch.manual_seed(0)
    em_mod, t_mod = build(nn), build(tnn)
    inputs = [randn(*s) for s in shapes]
    compare_module(em_mod, t_mod, *inputs, train=train)
    if train:  # a second step checks that running statistics keep evolving identically
        compare_module(em_mod, t_mod, *[randn(*s) for s in shapes], train=train, sync=False)


@pytest.mark.parametrize("build", [lambda n: n.Linear(4, 3), lambda n: n.Conv2d(2, 3, 3),
                                   lambda n: n.BatchNorm2d(2), lambda n: n.LayerNorm(4),
                                   lambda n: n.GroupNorm(2, 4)])
def test_layers_in_float64(build) -> None:
    em_mod, t_mod = build(nn).double(), build(tnn).double()
    shape = {nn.Linear: (3, 4), nn.Conv2d: (2, 2, 5, 5), nn.BatchNorm2d: (3, 2, 3, 3), nn.LayerNorm: (3, 4),
             nn.GroupNorm: (3, 4, 2)}[type(em_mod)]
    compare_module(em_mod, t_mod, randn(*shape, dtype=np.float64), atol=1e-10, rtol=1e-10)


def test_conv_transpose_output_size() -> None:
    m, tm = nn.ConvTranspose2d(3, 2, 3, stride=2, padding=1), tnn.ConvTranspose2d(3, 2, 3, stride=2, padding=1)
    x = randn(1, 3, 4, 4)
    out, tout = compare_module(m, tm, x, output_size=(8, 8))
    assert out.shape == (1, 2, 8, 8)
    with pytest.raises(ValueError, match="output size"):
        m(em.tensor(x), output_size=(20, 20))


def test_maxpool_return_indices() -> None:
    x = randn(2, 3, 6, 6)
    out, idx = nn.MaxPool2d(2, return_indices=True)(em.tensor(x))
    tout, tidx = tnn.MaxPool2d(2, return_indices=True)(torch.tensor(x))
    assert_close(out, tout)
    np.testing.assert_array_equal(idx.numpy(), tidx.numpy())
    out1, idx1 = nn.MaxPool1d(3, return_indices=True)(em.tensor(x[:, :, 0]))
    tout1, tidx1 = tnn.MaxPool1d(3, return_indices=True)(torch.tensor(x[:, :, 0]))
    assert_close(out1, tout1)
    np.testing.assert_array_equal(idx1.numpy(), tidx1.numpy())


def test_batchnorm_running_stats_over_steps() -> None:
    for momentum in (0.1, None):
        bn, tbn = nn.BatchNorm1d(3, momentum=momentum), tnn.BatchNorm1d(3, momentum=momentum)
        for _ in range(4):
            x = randn(6, 3) * 3 + 1
            bn(em.tensor(x))
            tbn(torch.tensor(x))
        assert_close(bn.running_mean, tbn.running_mean)
        assert_close(bn.running_var, tbn.running_var)  # stored unbiased, as PyTorch
        assert bn.num_batches_tracked.item() == 4
        bn.eval()
        tbn.eval()
        x = randn(5, 3)
        assert_close(bn(em.tensor(x)), tbn(torch.tensor(x)))
        bn.reset_running_stats()
        assert bn.num_batches_tracked.item() == 0 and bn.running_var.numpy().tolist() == [1, 1, 1]


def test_batchnorm_errors() -> None:
    with pytest.raises(ValueError, match="expected 4D input"):
        nn.BatchNorm2d(3)(em.zeros(2, 3))
    with pytest.raises(ValueError, match="more than 1 value per channel"):
        nn.BatchNorm1d(3)(em.zeros(1, 3))
    nn.BatchNorm1d(3).eval()(em.zeros(1, 3))  # eval mode works with one sample


def test_dropout_train_and_eval() -> None:
    em.manual_seed(1)
    drop = nn.Dropout(0.25)
    x = em.ones(200, 100, requires_grad=True)
    y = drop(x)
    values = y.detach().numpy()
    kept = values != 0
    np.testing.assert_allclose(np.unique(values), [0.0, 1 / 0.75], rtol=1e-6)
    assert abs(kept.mean() - 0.75) < 0.02
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), kept / 0.75, rtol=1e-6)
    y2 = drop(x).detach().numpy()
    assert (y2 != values).any()  # a fresh mask every call
    drop.eval()
    assert drop(x) is x
    assert not np.any(nn.Dropout(1.0)(x).detach().numpy())
    with pytest.raises(ValueError):
        nn.Dropout(1.5)


def test_dropout2d_zeroes_whole_channels() -> None:
    em.manual_seed(2)
    y = nn.Dropout2d(0.5)(em.ones(8, 16, 3, 3)).numpy()
    per_channel = y.reshape(8, 16, 9)
    assert np.all((per_channel == 0).all(-1) | (per_channel == 2.0).all(-1))
    assert 0.25 < (per_channel[..., 0] == 0).mean() < 0.75


def test_dropout_seeded_reproducible() -> None:
    em.manual_seed(5)
    a = nn.functional.dropout(em.ones(50), 0.5).numpy()
    em.manual_seed(5)
    b = nn.functional.dropout(em.ones(50), 0.5).numpy()
    np.testing.assert_array_equal(a, b)


def test_embedding_matches_torch() -> None:
    for kwargs in ({}, {"padding_idx": 1}, {"padding_idx": -2}):
        m, tm = nn.Embedding(7, 3, **kwargs), tnn.Embedding(7, 3, **kwargs)
        idx = np.array([[0, 1, 2, 1], [6, 5, 1, 0]])
        out, tout = compare_module(m, tm, idx)
        if "padding_idx" in kwargs:
            row = m.padding_idx
            assert not np.any(m.weight.grad.numpy()[row])
    m, tm = nn.Embedding(5, 2, padding_idx=0), tnn.Embedding(5, 2, padding_idx=0)
    assert not np.any(m.weight.detach().numpy()[0])  # the padding row starts at zero
    assert repr(m) == repr(tm)


def test_embedding_max_norm_and_from_pretrained() -> None:
    w = randn(6, 4) * 3
    m = nn.Embedding.from_pretrained(em.tensor(w), max_norm=1.0)
    tm = tnn.Embedding.from_pretrained(torch.tensor(w), max_norm=1.0)
    idx = np.array([0, 2, 2, 5])
    assert_close(m(em.tensor(idx)), tm(torch.tensor(idx)))
    assert_close(m.weight, tm.weight)
    assert not m.weight.requires_grad
    with pytest.raises(IndexError):
        nn.Embedding(3, 2)(em.tensor([3]))


def test_inplace_activations() -> None:
    x = em.randn(4, 5)
    ref = em.relu(x).numpy().copy()
    out = nn.ReLU(inplace=True)(x)
    assert out is x and np.array_equal(x.numpy(), ref)
    y = em.randn(4, 5)
    ref = nn.functional.leaky_relu(y, 0.3).numpy().copy()
    assert nn.LeakyReLU(0.3, inplace=True)(y) is y and np.allclose(y.numpy(), ref)
    # with autograd, inplace ReLU on an intermediate still differentiates correctly
    a = em.tensor(randn(3, 4), requires_grad=True)
    ta = torch.tensor(a.detach().numpy(), requires_grad=True)
    nn.ReLU(inplace=True)(a * 2).sum().backward()
    tnn.ReLU(inplace=True)(ta * 2).sum().backward()
    assert_close(a.grad, ta.grad)


def test_containers() -> None:
    seq = nn.Sequential(nn.Linear(2, 3), nn.ReLU(), nn.Linear(3, 1))
    assert len(seq) == 3 and isinstance(seq[-1], nn.Linear)
    sub = seq[:2]
    assert isinstance(sub, nn.Sequential) and len(sub) == 2 and sub[0] is seq[0]
    seq.append(nn.Sigmoid())
    assert [n for n, _ in seq.named_children()] == ["0", "1", "2", "3"]
    seq.insert(1, nn.Tanh())
    assert isinstance(seq[1], nn.Tanh) and isinstance(seq[4], nn.Sigmoid)
    del seq[1]
    assert [type(m).__name__ for m in seq] == ["Linear", "ReLU", "Linear", "Sigmoid"]
    assert list(seq._modules) == ["0", "1", "2", "3"]
    seq[1] = nn.GELU()
    assert isinstance(seq[1], nn.GELU)
    popped = seq.pop(3)
    assert isinstance(popped, nn.Sigmoid) and len(seq) == 3
    assert seq(em.ones(5, 2)).shape == (5, 1)
    with pytest.raises(IndexError):
        seq[5]
    assert len(seq + nn.Sequential(nn.ReLU())) == 4
    od = nn.Sequential(__import__("collections").OrderedDict(a=nn.Linear(1, 1)))
    assert [n for n, _ in od.named_parameters()] == ["a.weight", "a.bias"]

    ml = nn.ModuleList([nn.Linear(2, 2) for _ in range(3)])
    ml.append(nn.ReLU())
    ml.extend([nn.Tanh()])
    ml.insert(0, nn.Identity())
    assert len(ml) == 6 and isinstance(ml[0], nn.Identity) and isinstance(ml[-1], nn.Tanh)
    assert len(list(ml.parameters())) == 6
    assert isinstance(ml[1:3], nn.ModuleList) and len(ml[1:3]) == 2
    del ml[0]
    assert list(ml._modules) == [str(i) for i in range(5)]

    md = nn.ModuleDict({"a": nn.Linear(1, 2)})
    md["b"] = nn.ReLU()
    md.update([("c", nn.Tanh())])
    assert list(md.keys()) == ["a", "b", "c"] and "b" in md and len(md) == 3
    assert [n for n, _ in md.named_parameters()] == ["a.weight", "a.bias"]
    assert isinstance(md.pop("c"), nn.Tanh) and len(md) == 2


def test_parameter_list_and_dict() -> None:
    pl = nn.ParameterList([nn.Parameter(em.ones(2)), em.zeros(3)])
    pl.append(em.ones(1))
    assert len(pl) == 3 and all(isinstance(p, nn.Parameter) for p in pl)
    m = nn.Module()
    m.params = pl
    assert [n for n, _ in m.named_parameters()] == ["params.0", "params.1", "params.2"]
    tpl = tnn.ParameterList([tnn.Parameter(torch.ones(2)), torch.zeros(3), torch.ones(1)])
    assert repr(pl) == repr(tpl).replace("torch.", "ember.")
    pd = nn.ParameterDict({"w": em.ones(2)})
    pd["b"] = nn.Parameter(em.zeros(1))
    assert list(pd.keys()) == ["w", "b"] and [n for n, _ in pd.named_parameters()] == ["w", "b"]


def test_layer_on_meta_device() -> None:
    lin = nn.Linear(4, 3, device="meta")
    assert lin.weight.device == em.device("meta")
    out = lin(em.zeros(2, 4, device="meta"))
    assert out.shape == (2, 3)
    conv = nn.Conv2d(3, 8, 3, device="meta")
    assert conv(em.zeros(1, 3, 8, 8, device="meta")).shape == (1, 8, 6, 6)


def test_factory_dtype() -> None:
    lin = nn.Linear(2, 2, dtype=em.float64)
    assert lin.weight.dtype == em.float64
    bn = nn.BatchNorm1d(2, dtype=em.float64)
    assert bn.running_mean.dtype == em.float64 and bn.num_batches_tracked.dtype == em.int64


def test_gradients_flow_through_deep_stack() -> None:
    em.manual_seed(0)
    net = nn.Sequential(nn.Linear(3, 8), nn.LayerNorm(8), nn.GELU(), nn.Dropout(0.1), nn.Linear(8, 2))
    x = em.tensor(RNG.standard_normal((4, 3)).astype(np.float32))
    net(x).sum().backward()
    assert all(p.grad is not None and p.grad.shape == p.shape for p in net.parameters())


@pytest.mark.parametrize("momentum", [None, 0.3])
def test_instance_norm_running_stats_follow_torch_momentum(momentum) -> None:
    # PyTorch's instance norm takes momentum None as 0: its running statistics then never move
    theirs = torch.nn.InstanceNorm1d(3, momentum=momentum, track_running_stats=True)
    ours = nn.InstanceNorm1d(3, momentum=momentum, track_running_stats=True)
    for step in range(3):
        x = RNG.standard_normal((2, 3, 6)) * (step + 1)
        theirs(torch.tensor(x, dtype=torch.float32))
        ours(em.tensor(x, dtype=em.float32))
    for name in ("running_mean", "running_var"):
        np.testing.assert_allclose(getattr(ours, name).numpy(), getattr(theirs, name).numpy(), rtol=1e-5, atol=1e-6)
