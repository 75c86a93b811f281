"""Convolutions with the batch split over threads equal the unsplit ones, and BLAS's thread count is restored."""

import threading

import numpy as np
import pytest

from ember.ops import batch_threads, conv, winograd


def test_split_covers_the_batch_in_order():
    assert batch_threads.split(5, 2) == [(0, 2), (2, 5)]
    assert batch_threads.split(1, 4) == [(0, 1)]
    assert batch_threads.split(8, 3) == [(0, 2), (2, 5), (5, 8)]


@pytest.fixture
def two_workers(monkeypatch):
    if batch_threads.workers() < 2:
        pytest.skip("NumPy's BLAS thread count cannot be set here, or one core")
    monkeypatch.setitem(batch_threads._state, "workers", 2)
    monkeypatch.setattr(batch_threads, "_MIN_FLOPS", 0)  # split even these small test convolutions
    monkeypatch.setattr(batch_threads, "_MIN_NATIVE_FLOPS", 0)


def _blas_threads():
    return batch_threads._state["controls"][0]()


def test_run_restores_blas_threads_under_concurrent_splits(two_workers):
    """Concurrent splits each get their chunks back in order, every chunk runs on one BLAS thread, and the
    BLAS thread count is restored."""
    before = _blas_threads()
    seen = []

    def work(a, b):
        seen.append(_blas_threads())
        return a, b

    errors = []

    def caller():
        try:
            for _ in range(50):
                chunks = batch_threads.run(work, 9)
                assert chunks == batch_threads.split(9, 2) and sum(b - a for a, b in chunks) == 9
        except AssertionError as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=caller) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert set(seen) == {1}  # single-threaded BLAS inside every chunk
    assert _blas_threads() == before


def test_an_error_in_a_pool_thread_reaches_the_caller(two_workers):
    def work(a, b):
        if a:
            raise ValueError(f"chunk {a}..{b}")
        return b - a

    with pytest.raises(ValueError, match="chunk 3..6"):
        batch_threads.run(work, 6)
    assert batch_threads.run(lambda a, b: b - a, 6) == [3, 3]  # the thread is free again


@pytest.mark.parametrize("stride,padding,groups", [(1, 1, 1), (2, 1, 1), (1, 0, 2), (3, 2, 4)])
def test_split_convolution_equals_unsplit(two_workers, monkeypatch, stride, padding, groups):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((5, 8, 19, 17)).astype(np.float32)
    w = rng.standard_normal((12, 8 // groups, 3, 3)).astype(np.float32)
    attrs = dict(stride=(stride, stride), padding=(padding,) * 4, dilation=(1, 1), groups=groups)
    split_y = conv._conv2d_op.kernel(np, x, w, **attrs)
    g = rng.standard_normal(split_y.shape).astype(np.float32)
    split_gw = conv._conv2d_weight_grad_op.kernel(np, x, g, kernel_hw=(3, 3), **attrs)
    split_gx = conv._conv_transpose2d_op.kernel(np, g, w, out_hw=x.shape[2:], **attrs)
    monkeypatch.setitem(batch_threads._state, "workers", 1)
    y = conv._conv2d_op.kernel(np, x, w, **attrs)
    gw = conv._conv2d_weight_grad_op.kernel(np, x, g, kernel_hw=(3, 3), **attrs)
    gx = conv._conv_transpose2d_op.kernel(np, g, w, out_hw=x.shape[2:], **attrs)
    np.testing.assert_allclose(split_y, y, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(split_gw, gw, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(split_gx, gx, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("channels,kernel,stride,padding", [(1, 5, 1, 2), (3, 3, 2, 1), (3, 3, 1, 0)])
def test_split_weight_gradient_with_few_patch_rows_matches_torch(two_workers, channels, kernel, stride, padding):
    """Image layers (1-3 input channels) take a GEMM per sample, summed, for the weight's gradient."""
    torch = pytest.importorskip("torch")
    assert channels * kernel * kernel <= conv._PER_SAMPLE_WGRAD_ROWS
    rng = np.random.default_rng(1)
    x = rng.standard_normal((9, channels, 21, 19)).astype(np.float32)
    w = rng.standard_normal((6, channels, kernel, kernel)).astype(np.float32)
    ty = torch.nn.functional.conv2d(torch.tensor(x), torch.tensor(w), stride=stride, padding=padding)
    g = rng.standard_normal(tuple(ty.shape)).astype(np.float32)
    want = torch.ops.aten.convolution_backward(torch.tensor(g), torch.tensor(x), torch.tensor(w), None,
                                               [stride] * 2, [padding] * 2, [1, 1], False, [0, 0], 1,
                                               [False, True, False])[1]
    got = conv._conv2d_weight_grad_op.kernel(np, x, g, stride=(stride, stride), padding=(padding,) * 4,
                                             dilation=(1, 1), groups=1, kernel_hw=(kernel, kernel))
    np.testing.assert_allclose(got, want.numpy(), rtol=1e-4, atol=1e-4)


def test_a_forked_child_makes_its_own_threads(two_workers):
    import multiprocessing

    ctx = multiprocessing.get_context("fork")
    with ctx.Pool(1) as pool:  # the child must not wait on the parent's (absent) pool threads
        assert pool.apply_async(_conv_in_child).get(timeout=60) == (5, 12, 15, 15)


def _conv_in_child():
    batch_threads._state["workers"] = 2 if batch_threads.workers() > 1 else 1
    x = np.ones((5, 8, 19, 17), np.float32)
    return conv._conv2d_op.kernel(np, x, np.ones((12, 8, 5, 3), np.float32), stride=(1, 1), padding=(0, 0, 0, 0),
                                  dilation=(1, 1), groups=1).shape


def test_a_small_batch_runs_in_one_chunk_with_one_blas_thread(monkeypatch):
    if batch_threads.workers() < 2:
        pytest.skip("NumPy's BLAS thread count cannot be set here, or one core")
    monkeypatch.setitem(batch_threads._state, "workers", 2)
    seen = []
    before = _blas_threads()
    assert batch_threads.run(lambda a, b: seen.append((a, b, _blas_threads())) or b - a, 9, flops=1e6) == [9]
    assert seen == [(0, 9, 1)] and _blas_threads() == before
    assert len(batch_threads.run(lambda a, b: b - a, 9, flops=1e9)) == 2


def test_ember_conv_threads_sets_the_split_and_a_bad_value_is_named(monkeypatch):
    monkeypatch.setattr(batch_threads, "_state", {})  # a fresh start, as in a new process
    monkeypatch.setenv("EMBER_CONV_THREADS", "1")
    assert batch_threads.workers() == 1
    monkeypatch.setattr(batch_threads, "_state", {})
    monkeypatch.setenv("EMBER_CONV_THREADS", "two")
    with pytest.raises(ValueError, match="EMBER_CONV_THREADS must be a positive integer, got 'two'"):
        batch_threads.workers()


def _import_ember_and_report(env_value):
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_THREAD_TIMEOUT"}
    if env_value is not None:
        env["OPENBLAS_THREAD_TIMEOUT"] = env_value
    code = ("import numpy as np\n"
            "a = np.random.default_rng(0).standard_normal((600, 600)).astype(np.float32)\n"
            "before = a @ a\n"
            "import os, ember\n"
            "from ember.ops import batch_threads\n"
            "threads = batch_threads._blas_controls()[0]() if batch_threads._blas_controls() else -1\n"
            "print(os.environ.get('OPENBLAS_THREAD_TIMEOUT'), threads, np.array_equal(a @ a, before))\n")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    return out.stdout.split()


def test_import_shortens_openblas_spin_unless_the_user_set_it():
    """Ember restarts NumPy's OpenBLAS threads with a short spin; BLAS then still computes the same GEMM on
    as many threads, and a user's own OPENBLAS_THREAD_TIMEOUT is kept."""
    if batch_threads._blas_controls() is None:
        pytest.skip("NumPy's BLAS is not a bundled OpenBLAS")
    timeout, threads, same = _import_ember_and_report(None)
    assert timeout == str(batch_threads.SPIN_CYCLES_LOG2) and same == "True"
    assert int(threads) == batch_threads._blas_controls()[0]()
    assert _import_ember_and_report("25")[0] == "25"


@pytest.mark.parametrize("channels,kernel,stride,padding,dilation,groups", [
    (3, 7, 2, 3, 1, 1),     # an image stem
    (16, 3, 1, 1, 1, 1),    # by Winograd's tile rows, or in bands by Winograd without Ember's GEMM
    (8, 3, 2, 1, 1, 1),
    (8, 3, 1, 2, 2, 1),
    (8, 5, 3, 0, 1, 2),
    (6, 4, 1, (2, 1), 1, 1),
])
def test_a_single_sample_split_by_output_rows_matches_torch(two_workers, channels, kernel, stride, padding,
                                                             dilation, groups):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(6)
    x = rng.standard_normal((1, channels, 64, 59)).astype(np.float32)
    w = rng.standard_normal((16, channels // groups, kernel, kernel)).astype(np.float32)
    ph, pw = padding if isinstance(padding, tuple) else (padding, padding)
    want = torch.nn.functional.conv2d(torch.tensor(x), torch.tensor(w), stride=stride, padding=(ph, pw),
                                      dilation=dilation, groups=groups).numpy()
    attrs = dict(stride=(stride, stride), padding=(ph, ph, pw, pw), dilation=(dilation, dilation), groups=groups)
    # Winograd's compiled kernel splits its tile rows itself, where it runs
    by_winograd = winograd.splits_tile_rows() and winograd.applies(x.shape, w.shape, x.dtype, **attrs)
    assert conv._rows_pay(x, w, attrs["stride"], attrs["padding"], attrs["dilation"]) is not by_winograd
    got = conv._conv2d_op.kernel(np, x, w, **attrs)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("shape,out_channels,kernel,stride", [
    ((1, 64, 14, 14), 96, 3, 1),  # ResNet-18's 14x14 layers, narrowed
    ((1, 65, 20, 20), 32, 3, 2),  # an odd channel count: halves of 32 and 33
])
def test_a_single_sample_split_by_input_channels_matches_torch_on_any_thread_count(monkeypatch, shape, out_channels,
                                                                                    kernel, stride):
    """Maps too small to split by rows are split into two halves of the input channels, summed: values match
    PyTorch, and are the same bit for bit with one worker thread or two. One worker is a one-core machine, so
    its GEMMs run on one BLAS thread too: OpenBLAS's Haswell kernels (which OPENBLAS_CORETYPE=Haswell forces
    on AVX-512 machines) round a GEMM on two threads differently from one."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(7)
    x = rng.standard_normal(shape).astype(np.float32)
    w = rng.standard_normal((out_channels, shape[1], kernel, kernel)).astype(np.float32)
    monkeypatch.setattr(conv, "_HALVES_MIN_FLOPS", 0)
    attrs = dict(stride=(stride, stride), padding=(1, 1, 1, 1), dilation=(1, 1), groups=1)
    assert conv._halves_pay(x, w, attrs["stride"], attrs["padding"], attrs["dilation"], 1)
    if batch_threads.workers() < 2:
        pytest.skip("NumPy's BLAS thread count cannot be set here, or one core")
    results = []
    get_threads, set_threads = batch_threads._state["controls"]
    saved = get_threads()
    for workers in (1, 2):
        monkeypatch.setitem(batch_threads._state, "workers", workers)
        set_threads(1 if workers == 1 else saved)
        try:
            results.append(conv._conv2d_op.kernel(np, x, w, **attrs))
        finally:
            set_threads(saved)
    np.testing.assert_array_equal(results[0], results[1])
    want = torch.nn.functional.conv2d(torch.tensor(x), torch.tensor(w), stride=stride, padding=1).numpy()
    np.testing.assert_allclose(results[1], want, rtol=1e-4, atol=1e-4)
    monkeypatch.setattr(conv, "_HALVES_MIN_CHANNELS", 1 << 30)  # the one-GEMM path: the same values within rounding
    np.testing.assert_allclose(conv._conv2d_op.kernel(np, x, w, **attrs), results[1], rtol=1e-4, atol=1e-4)
