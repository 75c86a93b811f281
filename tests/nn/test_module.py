"""The Module API: registration, traversal, modes, state dicts (against torch's keys), hooks, repr, to()."""

from __future__ import annotations

import copy
import pickle
from collections import OrderedDict

import numpy as np
import pytest
import torch

import ember as em
from ember import nn

from .helpers import assert_close, copy_weights, randn, to_ember, to_torch

tnn = torch.nn


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU())
        self.head = nn.Linear(4, 2)
        self.register_buffer("scale", em.ones(2))
        self.register_buffer("cache", em.zeros(3), persistent=False)

    def forward(self, x):
        x = self.features(x).mean((2, 3))
        return self.head(x) * self.scale


class TNet(tnn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.features = tnn.Sequential(tnn.Conv2d(3, 4, 3), tnn.BatchNorm2d(4), tnn.ReLU())
        self.head = tnn.Linear(4, 2)
        self.register_buffer("scale", torch.ones(2))
        self.register_buffer("cache", torch.zeros(3), persistent=False)

    def forward(self, x):
        x = self.features(x).mean((2, 3))
        return self.head(x) * self.scale


# --- registration and traversal ------------------------------------------------------------------
def test_attribute_registration_and_traversal() -> None:
    net = Net()
    assert [n for n, _ in net.named_parameters()] == [
        "features.0.weight", "features.0.bias", "features.1.weight", "features.1.bias", "head.weight", "head.bias"]
    assert [n for n, _ in net.named_buffers()] == [
        "scale", "cache", "features.1.running_mean", "features.1.running_var", "features.1.num_batches_tracked"]
    assert [n for n, _ in net.named_children()] == ["features", "head"]
    assert [n for n, _ in net.named_modules()] == ["", "features", "features.0", "features.1", "features.2", "head"]
    assert len(list(net.parameters())) == 6
    assert len(list(net.parameters(recurse=False))) == 0
    assert len(list(net.buffers())) == 5
    assert list(net.children())[1] is net.head
    assert list(net.modules())[0] is net
    assert isinstance(net.head.weight, nn.Parameter)
    assert net.get_submodule("features.1") is net.features[1]
    assert net.get_parameter("head.bias") is net.head.bias
    assert net.get_buffer("features.1.running_var") is net.features[1].running_var


def test_register_methods_and_errors() -> None:
    m = nn.Module()
    m.register_parameter("w", nn.Parameter(em.ones(2)))
    m.register_buffer("b", em.zeros(2))
    m.add_module("sub", nn.Linear(2, 2))
    m.register_parameter("none", None)
    assert [n for n, _ in m.named_parameters()] == ["w", "sub.weight", "sub.bias"]
    assert m.none is None
    with pytest.raises(TypeError):
        m.register_parameter("x", em.ones(2))  # a plain tensor is not a Parameter
    with pytest.raises(KeyError):
        m.register_buffer("a.b", em.ones(1))
    with pytest.raises(KeyError):
        m.add_module("w", nn.ReLU())  # name taken by a parameter
    with pytest.raises(TypeError):
        m.w = em.ones(2)  # assigning a plain tensor over a parameter
    with pytest.raises(AttributeError, match="no attribute 'missing'"):
        _ = m.missing
    with pytest.raises(AttributeError):
        class Bad(nn.Module):
            def __init__(self):
                self.w = nn.Parameter(em.ones(1))  # before super().__init__()
        Bad()


def test_reassign_and_delete() -> None:
    m = nn.Module()
    m.x = nn.Parameter(em.ones(1))
    with pytest.raises(TypeError):
        m.x = nn.Linear(1, 1)  # as in PyTorch, only a Parameter or None may replace a parameter
    m.x = None
    assert m.x is None
    m.register_buffer("y", em.ones(1))
    m.y = nn.Linear(1, 1)  # a module replaces a buffer
    assert "y" not in m._buffers and "y" in m._modules
    m.x = nn.Parameter(em.ones(1))
    del m.x
    m.x = nn.Linear(1, 1)
    m.register_buffer("buf", em.ones(1))
    m.buf = em.zeros(1)
    assert m._buffers["buf"].item() == 0
    del m.x
    assert "x" not in m._modules
    m.plain = 3
    assert m.plain == 3 and "plain" not in m._parameters


def test_shared_parameters_are_listed_once() -> None:
    lin = nn.Linear(3, 3)
    seq = nn.Sequential(lin, nn.ReLU(), lin)
    assert len(list(seq.parameters())) == 2
    assert [n for n, _ in seq.named_modules()] == ["", "0", "1"]
    assert len(list(seq.named_parameters(remove_duplicate=False))) == 4


def test_train_eval_apply_requires_grad_zero_grad() -> None:
    net = Net()
    assert net.training and net.features[1].training
    net.eval()
    assert not net.training and not net.features[1].training
    net.train()
    assert net.features[2].training
    with pytest.raises(ValueError):
        net.train("yes")
    seen = []
    net.apply(lambda m: seen.append(type(m).__name__))
    assert seen == ["Conv2d", "BatchNorm2d", "ReLU", "Sequential", "Linear", "Net"]
    net.requires_grad_(False)
    assert not any(p.requires_grad for p in net.parameters())
    net.requires_grad_(True)
    net(em.randn(2, 3, 5, 5)).sum().backward()
    assert all(p.grad is not None for p in net.parameters())
    net.zero_grad(set_to_none=False)
    assert all(p.grad is not None and not np.any(p.grad.numpy()) for p in net.parameters())
    net.zero_grad()
    assert all(p.grad is None for p in net.parameters())


def test_forward_is_required() -> None:
    with pytest.raises(NotImplementedError, match="forward"):
        nn.Module()(em.ones(1))


# --- state dicts ---------------------------------------------------------------------------------
def test_state_dict_keys_and_shapes_match_torch() -> None:
    net, tnet = Net(), TNet()
    sd, tsd = net.state_dict(), tnet.state_dict()
    assert list(sd) == list(tsd)
    for k in sd:
        assert tuple(sd[k].shape) == tuple(tsd[k].shape), k
        assert not sd[k].requires_grad
    assert sd["features.1.num_batches_tracked"].dtype == em.int64
    assert "cache" not in sd  # non-persistent buffers are not saved


def test_state_dict_round_trip_through_torch() -> None:
    net, tnet = Net(), TNet()
    tnet.load_state_dict({k: to_torch(v) for k, v in net.state_dict().items()})  # ember -> torch
    x = randn(2, 3, 6, 6)
    net.eval()
    tnet.eval()
    assert_close(net(em.tensor(x)), tnet(torch.tensor(x)))
    with torch.no_grad():
        for p in tnet.parameters():
            p.add_(1.0)
    result = net.load_state_dict({k: to_ember(v) for k, v in tnet.state_dict().items()})  # torch -> ember
    assert result.missing_keys == [] and result.unexpected_keys == []
    assert_close(net(em.tensor(x)), tnet(torch.tensor(x)))
    # plain arrays and foreign tensors are accepted too
    net.load_state_dict({k: v.numpy() for k, v in tnet.state_dict().items()})
    net.load_state_dict(tnet.state_dict())


def test_state_dict_shares_storage_and_load_copies_in_place() -> None:
    lin = nn.Linear(2, 2)
    w = lin.weight
    sd = lin.state_dict()
    with em.no_grad():
        sd["weight"].fill_(3.0)
    assert lin.weight.numpy(force=True)[0, 0] == 3.0
    lin.load_state_dict({"weight": em.zeros(2, 2), "bias": em.ones(2)})
    assert lin.weight is w and lin.weight.sum().item() == 0 and lin.bias.sum().item() == 2
    assert lin.state_dict(keep_vars=True)["weight"] is w


def test_load_state_dict_assign() -> None:
    lin = nn.Linear(2, 2)
    w = lin.weight
    new = {"weight": em.ones(2, 2, dtype=em.float64), "bias": em.zeros(2, dtype=em.float64)}
    lin.load_state_dict(new, assign=True)
    assert lin.weight is not w and isinstance(lin.weight, nn.Parameter) and lin.weight.requires_grad
    assert lin.weight.dtype == em.float64
    bn = nn.BatchNorm1d(2)
    bn.load_state_dict({**bn.state_dict(), "running_mean": em.ones(2)}, assign=True)
    assert bn.running_mean.numpy().tolist() == [1.0, 1.0]


def test_load_state_dict_strict_errors() -> None:
    net = Net()
    sd = net.state_dict()
    del sd["head.bias"]
    sd["extra.weight"] = em.ones(1)
    sd["features.0.weight"] = em.ones(5, 3, 3, 3)
    with pytest.raises(RuntimeError) as info:
        net.load_state_dict(sd)
    msg = str(info.value)
    assert "Error(s) in loading state_dict for Net" in msg
    assert 'Missing key(s) in state_dict: "head.bias"' in msg
    assert 'Unexpected key(s) in state_dict: "extra.weight"' in msg
    assert "size mismatch for features.0.weight" in msg and "(5, 3, 3, 3)" in msg and "(4, 3, 3, 3)" in msg
    del sd["features.0.weight"]
    result = Net().load_state_dict(sd, strict=False)
    assert result.missing_keys == ["features.0.weight", "head.bias"]
    assert result.unexpected_keys == ["extra.weight"]
    with pytest.raises(RuntimeError, match="size mismatch"):
        Net().load_state_dict({**Net().state_dict(), "scale": em.ones(3)}, strict=False)


def test_batchnorm_state_dict_without_num_batches_tracked() -> None:
    # Like PyTorch, state dicts without metadata from before num_batches_tracked existed still load.
    bn = nn.BatchNorm1d(3)
    sd = {k: v for k, v in bn.state_dict().items() if k != "num_batches_tracked"}
    bn.load_state_dict(sd)
    assert bn.num_batches_tracked.item() == 0


# --- hooks ------------------------------------------------------------------------------------------
def test_forward_hooks_modify_and_remove() -> None:
    lin = nn.Linear(2, 2)
    calls = []
    h1 = lin.register_forward_pre_hook(lambda m, args: (args[0] * 0,))
    h2 = lin.register_forward_hook(lambda m, args, out: calls.append(out.shape) or out + 1)
    x = em.ones(1, 2)
    out = lin(x)
    assert calls == [(1, 2)]
    assert_close(out, (lin.bias + 1).detach().numpy()[None])
    h1.remove()
    h2.remove()
    h2.remove()  # removing twice is harmless
    assert_close(lin(x), (x @ lin.weight.T + lin.bias).detach().numpy())
    assert calls == [(1, 2)]


def test_hook_kwargs_prepend_and_context_manager() -> None:
    order = []
    lin = nn.Linear(2, 2)
    lin.register_forward_hook(lambda m, a, o: order.append("second"))
    lin.register_forward_hook(lambda m, a, o: order.append("first"), prepend=True)

    def pre(m, args, kwargs):
        order.append(("pre", sorted(kwargs)))
        return args, kwargs

    with lin.register_forward_pre_hook(pre, with_kwargs=True):
        lin(em.ones(1, 2))
    lin(em.ones(1, 2))
    assert order == [("pre", []), "first", "second", "first", "second"]


def test_always_call_hook_runs_on_error() -> None:
    class Boom(nn.Module):
        def forward(self, x):
            raise ValueError("boom")

    seen = []
    m = Boom()
    m.register_forward_hook(lambda mod, args, out: seen.append(out), always_call=True)
    with pytest.raises(ValueError):
        m(em.ones(1))
    assert seen == [None]


# --- repr ---------------------------------------------------------------------------------------------
REPR_CASES = [
    lambda nn_: nn_.Sequential(nn_.Linear(4, 2), nn_.ReLU(), nn_.Linear(2, 1, bias=False)),
    lambda nn_: nn_.Sequential(nn_.Conv2d(3, 8, 3, stride=2, padding=1, bias=False), nn_.BatchNorm2d(8),
                               nn_.LeakyReLU(0.2, inplace=True), nn_.MaxPool2d(2), nn_.AdaptiveAvgPool2d((1, 1)),
                               nn_.Flatten(), nn_.Dropout(0.1), nn_.Linear(8, 10)),
    lambda nn_: nn_.ModuleList([nn_.Linear(2, 2) for _ in range(3)] + [nn_.GELU("tanh"), nn_.LayerNorm(4)]),
    lambda nn_: nn_.ModuleDict({"emb": nn_.Embedding(10, 3, padding_idx=0), "gn": nn_.GroupNorm(2, 4),
                                "sm": nn_.Softmax(dim=1), "ct": nn_.ConvTranspose2d(4, 2, 3, stride=2, output_padding=1)}),
    lambda nn_: nn_.Sequential(OrderedDict(c1=nn_.Conv1d(2, 4, 3, padding="same"), act=nn_.SiLU(),
                                           bn=nn_.BatchNorm1d(4, momentum=None, affine=False),
                                           un=nn_.Unflatten(1, (2, 2)), ap=nn_.AvgPool2d(2), e=nn_.ELU(),
                                           sp=nn_.Softplus(), ls=nn_.LogSoftmax(-1), t=nn_.Tanh(), s=nn_.Sigmoid(),
                                           i=nn_.Identity())),
]


@pytest.mark.parametrize("build", REPR_CASES)
def test_repr_matches_torch(build) -> None:
    assert repr(build(nn)) == repr(build(tnn))


def test_custom_module_repr_and_extra_repr() -> None:
    class Scale(nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = nn.Linear(1, 1)

        def extra_repr(self):
            return "factor=2"

    assert repr(Scale()) == "Scale(\n  factor=2\n  (inner): Linear(in_features=1, out_features=1, bias=True)\n)"
    assert repr(nn.Module()) == "Module()"


def test_parameter_basics() -> None:
    t = em.ones(2, 3)
    p = nn.Parameter(t)
    assert isinstance(p, em.Tensor) and p.requires_grad and p.is_leaf
    assert repr(p).startswith("Parameter containing:\ntensor(")
    assert str(p).startswith("Parameter containing:")
    with em.no_grad():
        p.fill_(2.0)
    assert t.numpy()[0, 0] == 2.0  # shares storage with the wrapped tensor
    assert not nn.Parameter(em.ones(1), requires_grad=False).requires_grad
    q = p * 2
    assert type(q) is em.Tensor
    assert isinstance(nn.Parameter(), nn.Parameter)
    assert p.data.shape == (2, 3) and not p.data.requires_grad


# --- to(), copies ------------------------------------------------------------------------------------
def test_to_dtype_keeps_parameter_identity() -> None:
    net = Net()
    params = list(net.parameters())
    net(em.randn(2, 3, 5, 5)).sum().backward()
    net.to(em.float64)
    assert all(a is b for a, b in zip(params, net.parameters()))
    assert all(p.dtype == em.float64 and p.grad.dtype == em.float64 for p in net.parameters())
    assert net.features[1].running_mean.dtype == em.float64
    assert net.features[1].num_batches_tracked.dtype == em.int64  # integer buffers keep their dtype
    out = net(em.randn(2, 3, 5, 5, dtype=em.float64))
    assert out.dtype == em.float64
    net.float()
    assert net.head.weight.dtype == em.float32
    net.to("cpu", em.float64)
    assert net.head.bias.dtype == em.float64 and net.head.bias.device == em.device("cpu")
    net.to(em.zeros(1, dtype=em.float32))
    assert net.head.bias.dtype == em.float32
    with pytest.raises(TypeError):
        net.to(em.int64)


def test_to_meta_device() -> None:
    lin = nn.Linear(3, 2).to("meta")
    assert lin.weight.device == em.device("meta") and lin.weight.shape == (2, 3)
    assert lin(em.zeros(4, 3, device="meta")).shape == (4, 2)


def test_deepcopy_and_pickle() -> None:
    net = Net()
    clone = copy.deepcopy(net)
    assert clone.head.weight is not net.head.weight
    assert isinstance(clone.head.weight, nn.Parameter) and clone.head.weight.requires_grad
    assert_close(clone.head.weight, net.head.weight.detach().numpy())
    x = em.randn(2, 3, 5, 5)
    net.eval()
    clone.eval()
    assert_close(clone(x), net(x).detach().numpy())
    restored = pickle.loads(pickle.dumps(net))
    assert_close(restored(x), net(x).detach().numpy())


def test_copy_weights_helper_matches_torch_forward() -> None:
    net, tnet = Net(), TNet()
    copy_weights(net, tnet)
    x = randn(2, 3, 6, 6)
    assert_close(net(em.tensor(x)), tnet(torch.tensor(x)))
