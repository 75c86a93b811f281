"""fit(resume=...): a run continued from any epoch's checkpoint equals the run without the stop; RNG states round-trip."""

import random
import shutil

import numpy as np
import pytest

import ember as em
from ember.data import DataLoader, TensorDataset, TransformDataset
from ember.train import EarlyStopping, LRSchedulerCallback, ModelCheckpoint, fit, rng_state

EPOCHS = 4


def _blobs(n=192, seed=0):
    g = em.Generator().manual_seed(seed)
    y = em.randint(0, 3, (n,), generator=g)
    centers = em.tensor([[2.0, 0.0], [-2.0, 0.0], [0.0, 2.5]])
    return TensorDataset(centers[y] + 0.8 * em.randn(n, 2, generator=g), y)


def _jitter(x):
    """An augmentation drawing from every global stream: Ember's default generator, NumPy's and Python's."""
    noise = 0.1 * em.randn(*x.shape) + float(np.random.normal(0, 0.05)) + random.gauss(0, 0.05)
    return x + noise


def _run(ckpt, resume=None):
    em.manual_seed(0)
    model = em.nn.Sequential(em.nn.Linear(2, 32), em.nn.ReLU(), em.nn.Dropout(0.3), em.nn.Linear(32, 3))
    opt = em.optim.SGD(model.parameters(), lr=0.2, momentum=0.9)
    sched = em.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.7)
    train = DataLoader(TransformDataset(_blobs(), _jitter), batch_size=32, shuffle=True,
                       generator=em.Generator().manual_seed(1))
    # The checkpoint callback comes first: its file must still hold the scheduler's and the early
    # stopper's state after *their* end of epoch.
    callbacks = [ModelCheckpoint(str(ckpt), save_best_only=False), LRSchedulerCallback(sched, per="epoch"),
                 EarlyStopping(monitor="val_loss", patience=100)]
    hist = fit(model, train, DataLoader(_blobs(64, seed=1), batch_size=64), epochs=EPOCHS, optimizer=opt,
               callbacks=callbacks, progress=False, log=None, resume=resume)
    hist.history.pop("time")
    return hist, model, callbacks


@pytest.fixture
def keep_every_epoch(monkeypatch):
    save = em.save

    def saving(obj, path):
        save(obj, path)
        shutil.copy(path, f"{path}.epoch{obj['epoch']}")

    monkeypatch.setattr(em.serialization, "save", saving)


def test_resumed_fit_equals_the_uninterrupted_one(tmp_path, keep_every_epoch):
    ckpt = tmp_path / "ckpt.safetensors"
    full, model, callbacks = _run(ckpt)
    assert full["lr"] == pytest.approx([0.2 * 0.7**e for e in range(EPOCHS)], rel=1e-12)  # the lr each epoch used
    final = em.load(str(ckpt))
    for k in range(1, EPOCHS):
        other = tmp_path / f"resumed{k}.safetensors"
        hist, resumed, resumed_callbacks = _run(other, resume=str(tmp_path / f"ckpt.safetensors.epoch{k}"))
        assert hist.epochs == full.epochs
        assert hist["lr"] == full["lr"]
        for key in ("loss", "accuracy", "val_loss", "val_accuracy"):
            assert hist[key] == pytest.approx(full[key], rel=1e-6), (k, key)
        for (name, a), b in zip(model.state_dict().items(), resumed.state_dict().values()):
            np.testing.assert_allclose(b.numpy(), a.numpy(), rtol=1e-6, atol=1e-7, err_msg=name)
        assert resumed_callbacks[2].wait == callbacks[2].wait and resumed_callbacks[2].best == callbacks[2].best
        again = em.load(str(other))
        assert again["step"] == final["step"] and again["callbacks"][1] == final["callbacks"][1]
        np.testing.assert_array_equal(again["rng"]["ember"]["mt19937"], final["rng"]["ember"]["mt19937"])


def test_resume_checks_the_checkpoint(tmp_path):
    ckpt = tmp_path / "ckpt.safetensors"
    model = em.nn.Linear(2, 3)
    opt = em.optim.SGD(model.parameters(), lr=0.1)
    fit(model, DataLoader(_blobs(64), batch_size=32), epochs=1, optimizer=opt, progress=False, log=None,
        callbacks=[ModelCheckpoint(str(ckpt), save_best_only=False)])
    with pytest.raises(ValueError, match=r"callbacks \['ModelCheckpoint'\]; this run has \[\]"):
        fit(model, DataLoader(_blobs(64), batch_size=32), epochs=2, optimizer=opt, progress=False, log=None,
            resume=str(ckpt))
    em.save({"model": model.state_dict(), "epoch": 1}, str(ckpt))
    with pytest.raises(ValueError, match="no optimizer, step, history, callbacks, rng"):
        fit(model, DataLoader(_blobs(64), batch_size=32), epochs=2, optimizer=opt, progress=False, log=None,
            resume=str(ckpt))
    with pytest.raises(ValueError, match="epochs must be a positive integer"):
        fit(model, DataLoader(_blobs(64), batch_size=32), epochs=0, optimizer=opt, progress=False, log=None)


def test_rng_state_round_trips_through_a_checkpoint(tmp_path):
    loader_gen = em.Generator().manual_seed(5)
    em.manual_seed(3), random.seed(3), np.random.seed(3)
    # Leave a cached Gaussian in Ember's (PyTorch's scalar Box-Muller keeps a pair's sine), Python's and
    # NumPy's generators: part of their state too.
    em.randn(7), random.gauss(0, 1), np.random.randn(3), loader_gen.numpy.random(2)
    state = rng_state.capture({"loader": loader_gen})
    assert state["ember"]["mt19937"].dtype == np.uint8 and state["ember"]["mt19937"][5040] == 1  # normal_is_valid
    em.save({"rng": state}, str(tmp_path / "rng.safetensors"))
    loaded = em.load(str(tmp_path / "rng.safetensors"))["rng"]

    def draws():
        return (em.randn(5).numpy(), random.gauss(0, 1), random.random(), np.random.randn(3),
                loader_gen.numpy.permutation(10), em.rand(2).numpy())

    expected = draws()
    em.manual_seed(99), random.seed(99), np.random.seed(99), loader_gen.manual_seed(99)
    rng_state.restore(loaded, {"loader": loader_gen})
    for a, b in zip(expected, draws()):
        np.testing.assert_array_equal(a, b)
    with pytest.raises(ValueError, match=r"generators \['loader'\], this run has \[\]"):
        rng_state.restore(loaded)


def test_a_state_of_the_former_generator_is_refused_by_name():
    old = {"bit_generator": "PCG64", "state": {"state": {"uint": np.array([1, 2, 3, 4])}, "inc": {"uint": np.array([5])}},
           "has_uint32": 0, "uinteger": 0}
    with pytest.raises(ValueError, match="former generator .NumPy's PCG64.*can't be resumed exactly"):
        rng_state.decode_generator(em.Generator(), old)
