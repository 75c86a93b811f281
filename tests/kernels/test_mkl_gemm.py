"""oneMKL's GEMM as one of gemm.matmul's algorithms (ember.kernels.mkl, the optional `mkl` extra): values against
float64 NumPy and PyTorch on every operand layout, the arrays it must refuse, which products the selection gives it,
its thread count held by parallel, and a process without the wheel running NumPy's path with the reason on record.
"""

from __future__ import annotations

import numpy as np
import pytest

import ember as em
from ember import config
from ember.kernels import explain, gemm, mkl, parallel

needs_mkl = pytest.mark.skipif(not mkl.available(), reason=f"MKL does not run here: {mkl.why_not()}")


@pytest.fixture
def gemm_setting():
    """set(value): EMBER_GEMM for this test, the selection's cached choice forgotten (both restored after)."""

    def set_value(value):
        config.GEMM.set(value)
        gemm._state.clear()

    yield set_value
    config.GEMM.reset()
    gemm._state.clear()


def _close(got, a, b, add=None):
    want = a.astype(np.float64) @ b.astype(np.float64) + (0 if add is None else add)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4 * np.sqrt(a.shape[1]))


def test_without_the_wheel_numpy_computes_and_the_reason_is_on_record(monkeypatch, gemm_setting):
    monkeypatch.setattr(mkl, "_state", {})
    monkeypatch.setattr(mkl, "_candidates", lambda: [])
    gemm_setting("auto")
    assert not mkl.available() and "pip install" in mkl.why_not()
    assert mkl.version() is None and mkl.get_threads() is None and gemm.mkl_mode() is None
    a = np.random.default_rng(0).standard_normal((128, 300), np.float32)
    b = np.random.default_rng(1).standard_normal((300, 200), np.float32)
    assert not gemm.takes_mkl(a, b)
    _close(gemm.matmul(a, b), a, b)
    parallel.set_num_threads(parallel.get_num_threads())  # thread settings reach no library and do not fail
    gemm_setting("mkl")
    assert gemm.mkl_mode() is None  # asked for, absent: NumPy's path, not an error
    _close(gemm.matmul(a, b), a, b)


@needs_mkl
@pytest.mark.parametrize("layout", ["", "aT", "bT", "aT bT"])
@pytest.mark.parametrize("m,k,n", [(1, 7, 3), (37, 64, 129), (256, 300, 200)])
def test_every_layout_matches_float64(layout, m, k, n):
    rng = np.random.default_rng(m + k + n)
    a = rng.standard_normal((k, m) if "aT" in layout else (m, k), np.float32)
    b = rng.standard_normal((n, k) if "bT" in layout else (k, n), np.float32)
    a, b = (a.T if "aT" in layout else a), (b.T if "bT" in layout else b)
    out = np.full((m, n), np.nan, np.float32)
    assert mkl.sgemm(a, b, out) is out
    _close(out, a, b)
    _close(mkl.sgemm(a, b), a, b)


@needs_mkl
def test_into_a_view_of_wider_rows_and_adding_into_it():
    rng = np.random.default_rng(3)
    a, b = rng.standard_normal((40, 50), np.float32), rng.standard_normal((50, 30), np.float32)
    wide = np.zeros((40, 70), np.float32)
    mkl.sgemm(a, b, wide[:, 20:50])
    _close(wide[:, 20:50], a, b)
    assert not wide[:, :20].any() and not wide[:, 50:].any()
    acc = rng.standard_normal((40, 30), np.float32)
    start = acc.copy()
    mkl.sgemm(a, b, acc, beta=1.0)
    _close(acc, a, b, add=start)


@needs_mkl
def test_arrays_it_cannot_take_as_they_lie_are_refused_and_numpy_computes_them(gemm_setting):
    gemm_setting("mkl")
    rng = np.random.default_rng(4)
    a, b = rng.standard_normal((64, 96), np.float32), rng.standard_normal((96, 80), np.float32)
    buf = np.zeros(64 * 96 + 1, np.float32)
    refused = {
        "float64": (a.astype(np.float64), b.astype(np.float64), None),
        "3-D": (a[None], b[None], None),
        "every other column": (np.repeat(a, 2, axis=1)[:, ::2], b, None),
        "a broadcast row": (np.broadcast_to(a[:1], a.shape), b, None),
        "output overlapping an operand": (a[:, :80], b[:80], a[:, :80]),
        "a view off by a byte": (np.frombuffer(buf.view(np.uint8)[1:1 + a.nbytes], np.float32).reshape(a.shape), b,
                                 None),
    }
    for what, (x, y, out) in refused.items():
        assert not mkl.fits(x, y, out), what
        assert mkl.sgemm(x, y, out) is None, what
        want = np.matmul(x, y)
        np.testing.assert_allclose(gemm.matmul(x, y, out=None), want, rtol=1e-5, atol=1e-3, err_msg=what)


@needs_mkl
def test_the_selection_gives_mkl_the_sizes_of_its_table(gemm_setting):
    gemm_setting("mkl")
    rng = np.random.default_rng(5)

    def product(m, k, n):
        return rng.standard_normal((m, k), np.float32), rng.standard_normal((k, n), np.float32)

    big, tiny, one_row, shallow = product(128, 784, 512), product(16, 64, 64), product(1, 512, 1000), \
        product(96, 16, 3136)
    assert gemm.mkl_mode() == "table"
    assert gemm.takes_mkl(*big)
    for what, (a, b) in {"tiny": tiny, "one row": one_row, "shallow": shallow}.items():
        assert not gemm.takes_mkl(a, b), what
    x = em.tensor(big[0])
    w = em.tensor(np.ascontiguousarray(big[1].T))
    report = explain(lambda: em.nn.functional.linear(x, w))
    assert "mkl sgemm" in str(report)
    # auto leaves MKL alone (its OpenMP threads spin on the cores convolutions need); NumPy's BLAS always;
    # Ember's kernel wherever it runs, then NumPy's
    for other in ("auto", "blas", "ember"):
        gemm_setting(other)
        assert gemm.mkl_mode() is None and not gemm.takes_mkl(*big), other


@needs_mkl
def test_ops_on_mkl_match_pytorch(gemm_setting):
    torch = pytest.importorskip("torch")
    gemm_setting("mkl")
    rng = np.random.default_rng(6)
    x = rng.standard_normal((300, 128), np.float32)  # 300 x 512 outputs: linear's bias-prefill path too
    w, bias = rng.standard_normal((512, 128), np.float32) * 0.1, rng.standard_normal(512, np.float32)
    ex, ew, eb = (em.tensor(v, requires_grad=True) for v in (x, w, bias))
    tx, tw, tb = (torch.tensor(v, requires_grad=True) for v in (x, w, bias))
    ey = em.nn.functional.linear(ex, ew, eb)
    ty = torch.nn.functional.linear(tx, tw, tb)
    np.testing.assert_allclose(ey.detach().numpy(), ty.detach().numpy(), rtol=1e-5, atol=1e-4)
    g = rng.standard_normal(ty.shape, np.float32)
    ey.backward(em.tensor(g))
    ty.backward(torch.tensor(g))
    for e, t in ((ex, tx), (ew, tw), (eb, tb)):
        np.testing.assert_allclose(e.grad.numpy(), t.grad.numpy(), rtol=1e-4, atol=1e-3)
    a, b = rng.standard_normal((64, 200), np.float32), rng.standard_normal((200, 90), np.float32)
    np.testing.assert_allclose((em.tensor(a) @ em.tensor(b)).numpy(), (torch.tensor(a) @ torch.tensor(b)).numpy(),
                               rtol=1e-5, atol=1e-4)


@needs_mkl
def test_threads_follow_set_num_threads_and_are_held_to_one_inside_a_split(split_everything):
    assert mkl.get_threads() == 2  # split_everything: set_num_threads(2)
    seen = []

    def work(a, b):
        seen.append(mkl.get_threads())

    parallel.parallel_for(8, work)
    assert seen == [1, 1]
    assert mkl.get_threads() == 2
    parallel.set_num_threads(1)
    assert mkl.get_threads() == 1
    parallel.set_num_threads(2)
    assert mkl.get_threads() == 2


def test_asking_whether_mkl_takes_a_product_never_compiles_the_gemm_driver(monkeypatch, gemm_setting):
    # on a Zen 4 `auto` takes Ember's driver, whose first compile (1.3 s) this question once ran in the caller, even
    # inside an op's NumPy path while its kernels compiled in the background
    def compiled():
        raise AssertionError("the driver was compiled")

    monkeypatch.setattr(gemm, "_driver_runs", compiled)
    for value in ("auto", "ember", "blas", "mkl"):
        gemm_setting(value)
        assert gemm.mkl_mode() in (None, "table")
