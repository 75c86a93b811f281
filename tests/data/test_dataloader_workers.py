"""DataLoader with worker processes: ordering, seeding, errors, dead workers and clean shutdown."""

import gc
import multiprocessing
import os
import random
import signal
import threading
import time

import numpy as np
import pytest

import ember as em
from ember.data import DataLoader, Dataset, IterableDataset, get_worker_info

SHM = "/dev/shm"
pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="worker tests use fork start-up")


def _ours(prefix_only=False):
    """Shared-memory segments made by this process's DataLoaders."""
    if not os.path.isdir(SHM):
        return set()
    return {n for n in os.listdir(SHM) if n.startswith(f"emb{os.getpid():x}x")}


def _alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _assert_clean(pids=()):
    assert multiprocessing.active_children() == []
    assert not [p for p in pids if _alive(p)]
    assert _ours() == set()


class Samples(Dataset):
    """Sample i: an 8x8 image filled with i, the index, the worker's pid and id, and three random draws."""

    def __init__(self, n=24, fail_at=None, kill_at=None, sleep_at=None):
        self.n, self.fail_at, self.kill_at, self.sleep_at = n, fail_at, kill_at, sleep_at

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if i == self.fail_at:
            raise ValueError(f"bad sample {i}")
        if i == self.kill_at:
            os.kill(os.getpid(), signal.SIGKILL)
        if i == self.sleep_at:
            time.sleep(30)
        info = get_worker_info()
        return {
            "x": np.full((8, 8), i, np.float32),
            "i": i,
            "pid": os.getpid(),
            "wid": -1 if info is None else info.id,
            "rand": np.array([random.random(), np.random.rand(), em.rand(1).item()]),
        }


def _epoch(loader):
    return [b for b in loader]


def _field(batches, key):
    return [v for b in batches for v in b[key].tolist()]


def test_workers_give_same_batches_in_same_order_as_main_process():
    kwargs = dict(batch_size=5, shuffle=True)
    single = _epoch(DataLoader(Samples(), generator=em.Generator().manual_seed(7), **kwargs))
    multi = _epoch(DataLoader(Samples(), num_workers=2, timeout=20, generator=em.Generator().manual_seed(7), **kwargs))
    assert _field(single, "i") == _field(multi, "i")
    assert sorted(_field(multi, "i")) == list(range(24))
    for a, b in zip(single, multi):
        np.testing.assert_array_equal(a["x"].numpy(), b["x"].numpy())
        assert b["x"].dtype == em.float32 and tuple(b["x"].shape) == tuple(a["x"].shape)
    assert set(_field(multi, "wid")) == {0, 1}
    assert all(p != os.getpid() for p in _field(multi, "pid"))
    _assert_clean(set(_field(multi, "pid")))


def test_worker_seeds_differ_across_workers_and_repeat_with_the_generator():
    def run(seed):
        batches = _epoch(DataLoader(Samples(8), batch_size=1, num_workers=2, timeout=20,
                                    generator=em.Generator().manual_seed(seed)))
        by_worker = {}
        for b in batches:
            by_worker.setdefault(b["wid"].item(), b["rand"].numpy()[0])
        return by_worker

    a, b, c = run(3), run(3), run(4)
    assert set(a) == {0, 1}
    # each source (random, NumPy, Ember) gives different numbers in the two workers
    assert np.all(a[0] != a[1])
    np.testing.assert_array_equal(a[0], b[0])
    np.testing.assert_array_equal(a[1], b[1])
    assert np.all(a[0] != c[0])


def test_worker_info_and_init_fn():
    seen = multiprocessing.get_context("fork").Queue()

    def init(worker_id):
        info = get_worker_info()
        seen.put((worker_id, info.id, info.num_workers, info.seed, type(info.dataset).__name__))

    loader = DataLoader(Samples(4), batch_size=2, num_workers=2, worker_init_fn=init, timeout=20,
                        generator=em.Generator().manual_seed(0))
    list(loader)
    got = sorted(seen.get(timeout=5) for _ in range(2))
    assert [g[:3] for g in got] == [(0, 0, 2), (1, 1, 2)]
    assert got[1][3] == got[0][3] + 1 and got[0][4] == "Samples"


def test_worker_exception_is_raised_in_parent_with_worker_traceback():
    loader = DataLoader(Samples(fail_at=7), batch_size=2, num_workers=2, timeout=20)
    with pytest.raises(ValueError) as info:
        list(loader)
    msg = str(info.value)
    assert "bad sample 7" in msg and "DataLoader worker process" in msg
    assert "Original Traceback" in msg and "__getitem__" in msg and "test_dataloader_workers.py" in msg
    _assert_clean()


def test_worker_init_fn_exception_is_raised():
    def init(worker_id):
        raise KeyError("no such resource")

    with pytest.raises(KeyError, match="no such resource"):
        list(DataLoader(Samples(4), num_workers=1, worker_init_fn=init, timeout=20))
    _assert_clean()


def test_killed_worker_gives_an_error_not_a_hang():
    start = time.monotonic()
    with pytest.raises(RuntimeError, match=r"killed by signal 9 \(SIGKILL\)"):
        list(DataLoader(Samples(kill_at=5), batch_size=2, num_workers=2))
    assert time.monotonic() - start < 15
    _assert_clean()


def test_timeout_raises():
    start = time.monotonic()
    with pytest.raises(RuntimeError, match="timed out after 0.5 seconds"):
        list(DataLoader(Samples(sleep_at=0), batch_size=2, num_workers=1, timeout=0.5))
    assert time.monotonic() - start < 10
    _assert_clean()


def test_clean_after_full_epoch_and_after_break():
    loader = DataLoader(Samples(), batch_size=2, num_workers=2, timeout=20)
    pids = set(_field(_epoch(loader), "pid"))
    _assert_clean(pids)
    for k, batch in enumerate(loader):
        pids.add(batch["pid"][0].item())
        if k == 1:
            break
    _assert_clean(pids)  # the for loop dropped its iterator: no gc.collect() needed


def test_clean_after_iterator_is_dropped_or_closed():
    loader = DataLoader(Samples(), batch_size=2, num_workers=2, timeout=20)
    it = iter(loader)
    pid = next(it)["pid"][0].item()
    del it
    _assert_clean([pid])
    it = iter(loader)
    pid = next(it)["pid"][0].item()
    it.close()
    _assert_clean([pid])


def test_persistent_workers_reuse_processes_and_keep_the_order():
    g = em.Generator().manual_seed(5)
    loader = DataLoader(Samples(12), batch_size=3, shuffle=True, num_workers=2, persistent_workers=True,
                        timeout=20, generator=g)
    first, second = _epoch(loader), _epoch(loader)
    assert set(_field(first, "pid")) == set(_field(second, "pid"))
    g2 = em.Generator().manual_seed(5)
    single = DataLoader(Samples(12), batch_size=3, shuffle=True, generator=g2)
    assert _field(first, "i") == _field(_epoch(single), "i")
    assert _field(second, "i") == _field(_epoch(single), "i")
    # an abandoned epoch is fine: the next one starts cleanly
    it = iter(loader)
    next(it)
    third = _epoch(loader)
    assert sorted(_field(third, "i")) == list(range(12))
    pids = set(_field(first, "pid"))
    del loader, it
    gc.collect()
    _assert_clean(pids)


def test_keyboard_interrupt_stops_workers():
    loader = DataLoader(Samples(sleep_at=2), batch_size=1, num_workers=2)
    pids = set()
    # A shell that starts the suite in the background (or under nohup) may hand it SIGINT ignored;
    # Ctrl-C must still raise here, so the test sets the disposition it is about.
    inherited = signal.signal(signal.SIGINT, signal.default_int_handler)
    timer = threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGINT))
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            for batch in loader:
                pids.add(batch["pid"][0].item())
    finally:
        timer.cancel()
        signal.signal(signal.SIGINT, inherited)
    _assert_clean(pids)


def test_big_arrays_and_dtypes_survive_the_trip():
    class Mixed(Dataset):
        def __len__(self):
            return 4

        def __getitem__(self, i):
            rng = np.random.default_rng(i)
            return (em.from_numpy(rng.standard_normal((64, 64, 16)).astype(np.float32)),
                    rng.integers(0, 255, (32, 32, 3), dtype=np.uint8), np.array([i % 2 == 0]), em.tensor(i) * 2)

    single = _epoch(DataLoader(Mixed(), batch_size=2))
    multi = _epoch(DataLoader(Mixed(), batch_size=2, num_workers=2, timeout=20))
    for a, b in zip(single, multi):
        for x, y in zip(a, b):
            assert x.dtype == y.dtype and tuple(x.shape) == tuple(y.shape)
            np.testing.assert_array_equal(x.numpy(), y.numpy())
    _assert_clean()


class Sharded(IterableDataset):
    def __init__(self, n):
        self.n = n

    def __iter__(self):
        info = get_worker_info()
        wid, num = (0, 1) if info is None else (info.id, info.num_workers)
        return iter(range(wid, self.n, num))


def test_iterable_dataset_sharded_across_workers():
    out = [v for b in DataLoader(Sharded(11), batch_size=2, num_workers=2, timeout=20) for v in b.tolist()]
    assert sorted(out) == list(range(11))
    _assert_clean()


def test_iterable_dataset_with_persistent_workers_restarts_each_epoch():
    loader = DataLoader(Sharded(7), batch_size=3, num_workers=2, persistent_workers=True, timeout=20)
    for _ in range(2):
        assert sorted(v for b in loader for v in b.tolist()) == list(range(7))
    del loader
    gc.collect()
    _assert_clean()


def test_spawn_context_works():
    loader = DataLoader(Samples(6), batch_size=3, num_workers=1, multiprocessing_context="spawn", timeout=60)
    assert _field(_epoch(loader), "i") == list(range(6))
    _assert_clean()
