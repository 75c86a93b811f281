"""em.amp.GradScaler against torch.amp.GradScaler('cpu'): scale, unscale_, skipped steps, growth, state."""

import numpy as np
import pytest
import torch

import ember as em

W0 = np.random.default_rng(1).standard_normal((3, 4)).astype(np.float32)
X = np.random.default_rng(2).standard_normal((5, 4)).astype(np.float32)


def _run(lib, scaler_cls, steps, poison, **kwargs):
    """Train a tiny linear model; at steps in `poison` the loss is multiplied by inf (gradients inf/NaN)."""
    w = lib.nn.Parameter(lib.tensor(W0.copy()))
    opt = lib.optim.SGD([w], lr=0.1, momentum=0.9)
    scaler = scaler_cls("cpu", **kwargs)
    x = lib.tensor(X)
    record = []
    for i in range(steps):
        opt.zero_grad()
        loss = (x @ w.T).pow(2).mean()
        if i in poison:
            loss = loss * float("inf")
        scaler.scale(loss).backward()
        scaler.unscale_(opt)
        grad = w.grad.detach().numpy().copy()
        scaler.step(opt)
        scaler.update()
        record.append((scaler.get_scale(), w.detach().numpy().copy(), grad))
    return record, scaler.state_dict()


@pytest.mark.parametrize("poison", [(), (0,), (1, 2, 5), (3, 4, 6, 7)])
def test_scale_steps_and_skips_match_torch(poison):
    kwargs = dict(init_scale=2.0**10, growth_factor=2.0, backoff_factor=0.25, growth_interval=3)
    got, got_state = _run(em, em.amp.GradScaler, 10, set(poison), **kwargs)
    want, want_state = _run(torch, torch.amp.GradScaler, 10, set(poison), **kwargs)
    for (gs, gw, gg), (ws, ww, wg) in zip(got, want):
        assert gs == ws
        np.testing.assert_allclose(gw, ww, rtol=1e-5, atol=1e-6)
        np.testing.assert_array_equal(np.isfinite(gg), np.isfinite(wg))
        np.testing.assert_allclose(gg[np.isfinite(gg)], wg[np.isfinite(wg)], rtol=1e-5, atol=1e-6)
    assert got_state == want_state


def test_state_dict_round_trip_and_disabled():
    s = em.amp.GradScaler(init_scale=8.0, growth_interval=5)
    t = em.amp.GradScaler()
    t.load_state_dict(s.state_dict())
    assert t.get_scale() == 8.0 and t.get_growth_interval() == 5
    off = em.amp.GradScaler(enabled=False)
    loss = em.tensor(2.0)
    assert off.scale(loss) is loss and off.get_scale() == 1.0 and off.state_dict() == {}
    with pytest.raises(RuntimeError, match="state dict is empty"):
        t.load_state_dict({})


def test_misuse_is_reported_as_pytorch_does():
    w = em.nn.Parameter(em.ones(2))
    opt = em.optim.SGD([w], lr=0.1)
    scaler = em.amp.GradScaler()
    scaler.scale((w * 2).sum()).backward()
    scaler.unscale_(opt)
    with pytest.raises(RuntimeError, match="unscale_\\(\\) has already been called"):
        scaler.unscale_(opt)
    scaler.step(opt)
    with pytest.raises(RuntimeError, match="step\\(\\) has already been called"):
        scaler.step(opt)
    with pytest.raises(RuntimeError, match="Closure use is not currently supported"):
        scaler.step(opt, closure=lambda: None)
    with pytest.raises(TypeError, match="outputs must be a Tensor"):
        scaler.scale(3.0)
    with pytest.raises(ValueError, match="growth_factor"):
        em.amp.GradScaler(growth_factor=0.5)
    scaled = scaler.scale([em.tensor(1.0), (em.tensor(2.0),)])
    assert isinstance(scaled, list) and isinstance(scaled[1], tuple)


def test_float16_gradients_are_refused_as_pytorch_does():
    for lib, cls in ((em, em.amp.GradScaler), (torch, torch.amp.GradScaler)):
        w = lib.nn.Parameter(lib.ones(2, dtype=lib.float16))
        opt = lib.optim.SGD([w], lr=0.1)
        scaler = cls("cpu")
        scaler.scale((w * 2).sum()).backward()
        with pytest.raises(ValueError, match="Attempting to unscale FP16 gradients"):
            scaler.unscale_(opt)
