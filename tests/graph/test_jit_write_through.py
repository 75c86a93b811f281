"""Jitted steps compute updated weights and optimizer state straight into their tensors (no copy-back)
where that is safe, and keep the copy where an old value is still read or memory is shared."""

import numpy as np
import pytest

import ember as em
from ember.graph import codegen

F = em.nn.functional


def _entry(fn):
    (entry,) = fn.entries()
    return entry


@pytest.fixture(params=["auto", "numba", "numpy"])
def backend(request):
    if request.param == "numba":
        pytest.importorskip("numba")
    codegen.set_backend(request.param)
    yield request.param
    codegen.set_backend(None)


def _train(jitted: bool, model_fn, opt_fn, steps=4):
    em.manual_seed(3)
    model = model_fn()
    opt = opt_fn(model.parameters())

    def step(x, y):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss

    fn = em.jit(step) if jitted else step
    rng = np.random.default_rng(0)
    losses = []
    for _ in range(steps):
        x = em.tensor(rng.standard_normal((8, 3, 8, 8)).astype(np.float32))
        y = em.tensor(rng.integers(0, 4, 8))
        losses.append(float(fn(x, y).item()))
    state = {k: v.numpy().copy() for k, v in model.state_dict().items()}
    return fn, losses, state, opt


def _cnn():
    nn = em.nn
    return nn.Sequential(nn.Conv2d(3, 4, 3, padding=1, bias=False), nn.BatchNorm2d(4), nn.ReLU(),
                         nn.Flatten(), nn.Linear(4 * 8 * 8, 4))


@pytest.mark.parametrize("opt", ["sgd_momentum", "adam"])
def test_training_step_writes_its_updates_in_place_and_equals_eager(backend, opt):
    make = {"sgd_momentum": lambda ps: em.optim.SGD(ps, lr=0.05, momentum=0.9, weight_decay=1e-3),
            "adam": lambda ps: em.optim.Adam(ps, lr=0.01)}[opt]
    fn, losses, state, _ = _train(True, _cnn, make)
    _, ref_losses, ref_state, _ = _train(False, _cnn, make)
    np.testing.assert_allclose(losses, ref_losses, rtol=1e-5)
    for k in ref_state:
        np.testing.assert_allclose(state[k], ref_state[k], rtol=1e-5, atol=1e-6, err_msg=k)
    entry = _entry(fn)
    if opt == "sgd_momentum":
        # every weight, momentum buffer and batch-norm statistic, and the int64 num_batches_tracked (its
        # 0-d add joins the step's merged 0-d region, whose kernel writes into it)
        assert entry.copied_back == 0, (entry.copied_back, len(entry.mutated))
    else:
        assert entry.copied_back < len(entry.mutated)


def test_old_value_read_after_the_update_keeps_the_copy(backend):
    w = em.tensor(np.arange(6, dtype=np.float32))

    @em.jit
    def f():
        new = w * 2
        old_plus = w + 1  # reads the old w after `new` was computed
        w.copy_(new)
        return old_plus

    for _ in range(3):
        before = w.numpy().copy()
        out = f()
        np.testing.assert_array_equal(out.numpy(), before + 1)
        np.testing.assert_array_equal(w.numpy(), before * 2)


@pytest.mark.parametrize("arg", ["itself", "view"])
def test_argument_sharing_memory_with_an_updated_tensor(backend, arg):
    w = em.tensor(np.arange(1, 7, dtype=np.float32))
    @em.jit
    def f(x):
        w.mul_(x)

    ref = w.numpy().copy()
    for _ in range(3):
        x = w if arg == "itself" else w[:]  # the argument is the very memory being updated
        f(x)
        ref = ref * ref
        np.testing.assert_array_equal(w.numpy(), ref)
    assert _entry(f).copied_back == 1


def test_distinct_argument_is_written_in_place_again_after_sharing(backend):
    w = em.tensor(np.ones(4, dtype=np.float32))
    @em.jit
    def f(x):
        w.add_(x)

    f(em.tensor(np.ones(4, dtype=np.float32)))
    assert _entry(f).copied_back == 0
    f(w)
    np.testing.assert_array_equal(w.numpy(), np.full(4, 4, np.float32))
    assert _entry(f).copied_back == 1
    f(em.tensor(np.ones(4, dtype=np.float32)))
    np.testing.assert_array_equal(w.numpy(), np.full(4, 5, np.float32))
    assert _entry(f).copied_back == 0
