"""The CPU caching allocator: size classes, reuse when arrays die (never while a view lives), stats,
empty_cache, and eager op outputs carved from the pool."""

import gc
import threading

import numpy as np
import pytest

import ember as em
from ember import dispatch
from ember.runtime.allocator import CachingAllocator, size_class


@pytest.mark.parametrize("n", [1, 511, 512, 513, 4096, 8193, 100_000, 1 << 20, (1 << 20) + 1, 123_456_789])
def test_size_classes_cover_the_request_with_little_slack(n):
    c = size_class(n)
    assert c >= n and c % 512 == 0
    assert c <= max(512, n * 1.125 + 512)


def test_blocks_are_reused_after_the_array_dies_and_not_before():
    p = CachingAllocator()
    a = p.empty((64, 64), np.float32)
    assert a.shape == (64, 64) and a.dtype == np.float32 and a.flags.writeable and a.flags.c_contiguous
    assert a.ctypes.data % 64 == 0
    view = a.T[3:]  # a view keeps the block
    del a
    gc.collect()
    s = p.stats()
    assert s["allocated_bytes"] == size_class(64 * 64 * 4) and s["num_frees"] == 0
    b = p.empty((64, 64), np.float32)
    assert p.stats()["num_cache_hits"] == 0  # the viewed block was not handed out again
    view[...] = 7
    assert not np.may_share_memory(b, view)
    del view
    gc.collect()
    assert p.stats()["num_frees"] == 1
    c = p.empty((4096,), np.float32)  # same size class: the freed block comes back
    s = p.stats()
    assert s["num_cache_hits"] == 1 and s["num_allocs"] == 3 and s["num_cache_misses"] == 2
    assert s["peak_allocated_bytes"] >= 2 * size_class(16384)
    del b, c


def test_stats_and_empty_cache():
    p = CachingAllocator()
    arrays = [p.empty((1000,), np.float64) for _ in range(4)]
    s = p.stats()
    assert s["allocated_bytes"] == 4 * size_class(8000) == s["reserved_bytes"]
    del arrays
    gc.collect()
    s = p.stats()
    assert s["allocated_bytes"] == 0 and s["cached_bytes"] == s["reserved_bytes"] == 4 * size_class(8000)
    assert p.empty_cache() == 4 * size_class(8000)
    assert p.stats()["reserved_bytes"] == 0 and p.stats()["peak_reserved_bytes"] == 4 * size_class(8000)
    p.reset_peak_stats()
    assert p.stats()["peak_reserved_bytes"] == 0


def test_many_threads_allocating_and_freeing_keep_the_books_straight():
    p = CachingAllocator()

    def work(seed):
        rng = np.random.default_rng(seed)
        keep = []
        for _ in range(200):
            a = p.empty((int(rng.integers(1, 5000)),), np.float32)
            a[...] = seed
            keep.append(a)
            if len(keep) > 5:
                x = keep.pop(0)
                assert (x == seed).all()  # nobody else wrote into a live block

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    gc.collect()
    s = p.stats()
    assert s["allocated_bytes"] == 0 and s["num_frees"] == s["num_allocs"] == 800
    assert s["num_cache_hits"] > 0


def test_eager_outputs_from_the_pool():
    was_async = em.is_async()
    em.set_async(False)  # counts below assume each op runs at the call
    pool = em.runtime.allocator.pool
    a = em.randn(1536, 1536)  # operands of 9 MiB: big enough for the pool
    small = em.randn(8, 8)
    ref = ((a * 2).relu() + 1.0).tanh().numpy().copy()
    em.memory.set_eager_pool(True)
    try:
        assert em.memory.eager_pool_enabled() and not dispatch.eager_now()
        before = pool.stats()["num_allocs"]
        out = ((a * 2).relu() + 1.0).tanh()
        assert pool.stats()["num_allocs"] - before == 4  # mul, relu, add, tanh
        np.testing.assert_array_equal(out.numpy(), ref)
        hits = pool.stats()["num_cache_hits"]
        for _ in range(3):
            ((a * 2).relu() + 1.0).tanh()
        assert pool.stats()["num_cache_hits"] > hits  # intermediates died and their blocks came back
        before = pool.stats()["num_allocs"]
        np.testing.assert_array_equal((small * 2).numpy(), small.numpy() * 2)
        assert pool.stats()["num_allocs"] == before  # small results stay with NumPy
    finally:
        em.memory.set_eager_pool(False)
        em.set_async(was_async)
    assert dispatch.eager_now() or was_async
    assert set(em.memory.stats()) >= {"allocated_bytes", "reserved_bytes", "peak_allocated_bytes", "num_allocs"}
    em.memory.empty_cache()
