"""A fused elementwise region over many values runs as chunks split over the threads (its generated `chunk` loop on the
pool's GIL-free workers) and gives the one-loop kernel's values bit for bit: fresh outputs, outputs written through
an input, broadcast single values, eager and jit alike."""

import numpy as np
import pytest

import ember as em
from ember.kernels import elementwise, parallel

pytestmark = pytest.mark.skipif(not elementwise._kernel("relu_forward", np.dtype(np.float32)), reason="needs Numba")

N = 2 * elementwise.SPLIT["split_min"] + 5


@pytest.fixture
def two_threads():
    before = parallel.get_num_threads()
    em.set_num_threads(2)
    yield
    em.set_num_threads(before)


def _pair(seed):
    rng = np.random.default_rng(seed)
    return rng.standard_normal(N).astype(np.float32), rng.standard_normal(N).astype(np.float32)


def _recording(monkeypatch) -> list:
    ran = []
    real = parallel.try_run_kernel
    monkeypatch.setattr(parallel, "try_run_kernel", lambda *a: ran.append(real(*a)) or ran[-1])
    return ran


def test_a_large_region_splits_and_equals_eager(two_threads, monkeypatch):
    ran = _recording(monkeypatch)
    a, b = _pair(0)
    fn = em.jit(lambda x, y: ((x * 2.0 + y).relu() - x) * y)
    eager = ((em.tensor(a) * 2.0 + em.tensor(b)).relu() - em.tensor(a)) * em.tensor(b)
    for _ in range(3):  # trace, then the planned steady state
        np.testing.assert_array_equal(fn(em.tensor(a), em.tensor(b)).numpy(), eager.numpy())
    assert ran and ran[-1] is True  # the split ran on the workers


def test_an_update_written_through_its_input_splits_and_equals_eager(two_threads, monkeypatch):
    ran = _recording(monkeypatch)
    a, b = _pair(1)
    p_jit, p_eager = em.tensor(a.copy()), em.tensor(a.copy())

    @em.jit
    def step(p, g):
        p.sub_(g * 0.1)
        return p

    for _ in range(3):
        step(p_jit, em.tensor(b))
        p_eager.sub_(em.tensor(b) * 0.1)
        np.testing.assert_array_equal(p_jit.numpy(), p_eager.numpy())
    assert ran and all(ran)  # split, the output stored through its input


def test_a_float32_single_value_the_workers_cannot_carry_runs_the_one_loop(two_threads, monkeypatch):
    ran = _recording(monkeypatch)
    a, b = _pair(3)
    p_jit, p_eager = em.tensor(a.copy()), em.tensor(a.copy())

    @em.jit
    def step(p, g, lr):
        p.sub_(g * lr)
        return p

    for lr in (0.1, 0.05, 0.2):  # the rate changes between steps: a single value read at every call
        step(p_jit, em.tensor(b), em.tensor(np.float32(lr)))
        p_eager.sub_(em.tensor(b) * em.tensor(np.float32(lr)))
        np.testing.assert_array_equal(p_jit.numpy(), p_eager.numpy())
    assert ran and not any(ran)


def test_one_thread_and_two_give_the_same_bits():
    a, b = _pair(2)
    fn = em.jit(lambda x, y: (x - y).abs() * 0.5 + x.exp())
    before = parallel.get_num_threads()
    try:
        em.set_num_threads(1)
        one = [fn(em.tensor(a), em.tensor(b)).numpy() for _ in range(2)][-1]
        em.set_num_threads(2)
        two = [fn(em.tensor(a), em.tensor(b)).numpy() for _ in range(2)][-1]
    finally:
        em.set_num_threads(before)
    np.testing.assert_array_equal(one, two)
