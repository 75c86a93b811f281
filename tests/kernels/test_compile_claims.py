"""Where a training step's kernels compile in two processes at once (ember.kernels.ahead), the first to start a
kernel claims it: the other waits for its code on disk (the parent) or leaves it (the child's compiler thread), a
failed compile gives its claim up, and the child runs its step again while each run hands over new compiles."""

import os
import threading
import uuid

import numpy as np
import pytest

from ember.kernels import ahead, background
from ember.kernels.numba_loader import compile_source, numba_available

pytestmark = pytest.mark.skipif(not numba_available(), reason="needs Numba")

_SOURCE = '''
# {nonce}: a kernel no earlier run has compiled
def doubled(x, out):
    for i in range(x.shape[0]):
        out[i] = 2 * x[i]
'''


def _fresh_kernel():
    return compile_source(_SOURCE.format(nonce=uuid.uuid4().hex), "doubled")


def _types(*values):
    kernel = _fresh_kernel()
    return kernel, tuple(kernel.typeof_pyval(v) for v in values)


@pytest.fixture
def claims(tmp_path):
    """A claims folder and the gate around every deferred kernel's compile, as while a child compiles a step; the
    other process taken as alive."""
    ahead._claims[0] = tmp_path
    background.gate_compiles(ahead._claimed)
    background.compiling_elsewhere(True)
    yield tmp_path
    background.gate_compiles(None)
    background.compiling_elsewhere(False)
    ahead._claims[0] = None
    ahead._in_child[0] = 0


def test_the_first_to_compile_a_kernel_claims_it_while_it_compiles(claims):
    kernel, sig = _types(np.zeros(4), np.zeros(4))
    with ahead._claimed(kernel, sig):
        assert ahead._claim_file(kernel, sig).exists()
    assert not ahead._claim_file(kernel, sig).exists()
    kernel.compile(sig)  # through the gate
    assert sig in kernel.overloads and not list(claims.iterdir())


def test_a_kernel_claimed_by_the_other_process_is_waited_for_on_disk_and_loaded(claims):
    import numba

    kernel, sig = _types(np.zeros(4), np.zeros(4))
    ahead._claim_file(kernel, sig).touch()  # the other process is compiling it
    written = threading.Event()

    def other_process():  # the same function compiled elsewhere, written to the shared disk cache
        numba.njit(cache=True, nogil=True)(kernel.py_func).compile(sig)
        written.set()

    thread = threading.Thread(target=other_process)
    thread.start()
    kernel.compile(sig)
    thread.join()
    assert written.is_set() and kernel._cache_hits[sig] == 1  # loaded, not compiled a second time


_ENTRY_SOURCE = '''
# {nonce}: a C entry point no earlier run has compiled
def bumped(x):
    return x + 1
'''


def _entry_point(py_func=None):
    """A CFunc with its disk cache on, as the GEMM driver's entry point (sgemm._entry): of a fresh function, or of
    `py_func` again (the same code in another process)."""
    from numba import types
    from numba.core.ccallback import CFunc

    from ember.kernels import cache

    if py_func is None:
        py_func = cache.load_source(_ENTRY_SOURCE.format(nonce=uuid.uuid4().hex)).bumped
    entry = CFunc(py_func, ((types.int64,), types.int64), locals={}, options={})
    entry.enable_caching()
    return entry


def test_a_c_entry_point_claimed_by_the_other_process_is_waited_for_on_disk_and_loaded(claims):
    entry = background.gated_entry_point(_entry_point())
    ahead._claim_file(entry, entry._sig.args).touch()  # the other process is compiling it
    written = threading.Event()

    def other_process():
        _entry_point(entry._pyfunc).compile()
        written.set()

    thread = threading.Thread(target=other_process)
    thread.start()
    entry.compile()
    thread.join()
    assert written.is_set() and entry._cache_hits == 1 and entry.address  # loaded, not compiled a second time


def test_the_driver_left_to_the_other_process_is_asked_for_again_not_given_up(monkeypatch):
    """On the child's compiler thread the driver's entry point claimed by the parent raises ClaimedElsewhere: the
    child's later calls load it, rather than run without the driver for the rest of the process."""
    from ember.kernels import sgemm

    def claimed():
        raise background.ClaimedElsewhere("sgemm_entry")

    monkeypatch.setattr(sgemm, "_drivers", {})
    monkeypatch.setattr(sgemm, "_entry", claimed)
    monkeypatch.setattr(sgemm, "microkernel_address", lambda: 1)
    with pytest.raises(background.ClaimedElsewhere):
        sgemm.driver_address()
    assert "entry" not in sgemm._drivers


def test_a_claim_given_up_ends_the_wait_and_the_kernel_compiles_here(claims):
    kernel, sig = _types(np.zeros(4, np.float32), np.zeros(4, np.float32))
    claim = ahead._claim_file(kernel, sig)
    claim.touch()
    given_up = threading.Event()

    def failed_elsewhere():
        given_up.set()
        claim.unlink()

    timer = threading.Timer(0.2, failed_elsewhere)
    timer.start()
    kernel.compile(sig)
    timer.join()
    assert given_up.is_set() and sig in kernel.overloads and kernel._cache_hits[sig] == 0


def test_while_the_parent_waits_for_a_claimed_kernel_it_compiles_entry_points_the_child_would_later(claims,
                                                                                                      monkeypatch):
    from ember.kernels import thread_pool

    kernel, sig = _types(np.zeros(3, np.float32), np.zeros(3, np.float32))
    claim = ahead._claim_file(kernel, sig)
    claim.touch()
    built = []

    def compile_one():  # each call one kinds' entry points; the child's compile ends after the second
        built.append(len(built))
        if len(built) == 2:
            claim.unlink()
        return len(built) <= 2

    monkeypatch.setattr(thread_pool, "compile_wanted_entry_points", compile_one)
    safety = threading.Timer(10, lambda: claim.unlink(missing_ok=True))  # a wait that never calls it still ends
    safety.start()
    kernel.compile(sig)
    safety.cancel()
    assert built == [0, 1] and sig in kernel.overloads

    kernel, sig = _types(np.zeros(3, np.int32), np.zeros(3, np.int32))  # the child only sleeps while it waits
    claim = ahead._claim_file(kernel, sig)
    claim.touch()
    ahead._in_child[0] = os.getppid()
    built.clear()
    threading.Timer(0.2, claim.unlink).start()
    kernel.compile(sig)
    assert built == [] and sig in kernel.overloads


def test_the_childs_compiler_thread_leaves_a_kernel_the_parent_has_claimed(claims, monkeypatch):
    monkeypatch.setattr(background, "enabled", lambda: True)
    kernel, sig = _types(np.zeros(4, np.int64), np.zeros(4, np.int64))
    ahead._claim_file(kernel, sig).touch()
    ahead._in_child[0] = os.getppid()  # this process taken as the child of its parent
    key = ("claimed by the parent", uuid.uuid4().hex)
    background.submit(key, lambda: kernel.compile(sig))
    assert background.wait(timeout=60)
    assert sig not in kernel.overloads


def test_a_failed_compile_gives_its_claim_up(claims):
    kernel = _fresh_kernel()
    sig = (kernel.typeof_pyval("text"), kernel.typeof_pyval(np.zeros(4)))
    with pytest.raises(Exception, match="doubled|shape"):
        kernel.compile(sig)
    assert not ahead._claim_file(kernel, sig).exists()


def test_the_child_runs_its_step_again_while_each_run_hands_over_new_compiles():
    ran, jobs = [], []

    def step():
        ran.append(len(ran))
        if len(ran) <= 2:  # the first two runs meet kernels the previous ones did not reach
            background.submit(("next pass", uuid.uuid4().hex), lambda n=len(ran): jobs.append(n))

    assert ahead._compile_queued(step, (), os.getppid())
    assert ran == [0, 1, 2] and jobs == [1, 2]


def test_the_child_stops_when_its_step_raises():
    def step():
        raise ValueError("the parent reports this")

    assert not ahead._compile_queued(step, (), os.getppid())
