"""The micro-kernels of every register block this CPU runs (sgemm_microkernel: AVX-512's 8 x 32 and 8 x 48, AVX2's
4 x 24), against float64 NumPy: whole and partial column blocks (plain and masked loads), partial row blocks, the
three store modes and the taps loop; the transposing copy and the pair split; and the block a process picks."""

import ctypes
import os
import subprocess
import sys

import numpy as np
import pytest

from ember.kernels import sgemm_microkernel as mk

pytest.importorskip("llvmlite")
BLOCKS = [b for b in (mk.AVX512, mk.AVX2) if mk.runs_here(b)]
pytestmark = pytest.mark.skipif(not BLOCKS, reason="neither AVX-512 nor AVX2 with FMA on this CPU")
_compiled: dict = {}
_I64, _PTR = ctypes.c_int64, ctypes.c_void_p


def _kernels(block):
    if block not in _compiled:
        _compiled[block] = mk.compile_block(block)
    return _compiled[block]


def _ukr(block, name):
    args = [_I64, _PTR, _I64, _I64, _PTR, _I64, _PTR, _I64, _I64, _I64, _I64, _PTR]
    if "taps" in name:
        args += [_I64, _PTR, _PTR]
    return ctypes.CFUNCTYPE(None, *args)(_kernels(block)[name])


def _want(before, sums, mvalid, nvalid, acc, bias):
    want = before.copy()
    live = (slice(0, mvalid), slice(0, nvalid))
    want[live] = sums[live] + (before[live] if acc == 1 else bias[:nvalid] if acc == 2 else 0)
    return want


@pytest.mark.parametrize("block", BLOCKS, ids=lambda b: b.isa)
@pytest.mark.parametrize("wide", [False, True], ids=["narrow", "wide"])
@pytest.mark.parametrize("columns, rows, acc", [(0, 0, 0), (0, 0, 1), (0, 0, 2), (-1, 0, 1), (-9, -1, 0), (1, 1, 2),
                                                (0, 1, 1)])
def test_every_block_sums_and_stores_live_rows_and_columns_only(block, wide, columns, rows, acc):
    """ukr and ukr_wide: C (+)= A B over the live rows and columns (all of them: the plain-load body; fewer: the
    masked one), the bias row added for acc 2, nothing stored outside them; A packed, row-major and transposed."""
    nr = block.wide_nr if wide else block.nr
    nvalid = nr + columns if columns <= 0 else columns
    mvalid = block.mr + rows if rows <= 0 else rows
    rng = np.random.default_rng(nvalid * 10 + mvalid + acc)
    k = 37
    ukr = _ukr(block, "ukr_wide" if wide else "ukr")
    b = rng.standard_normal((k, nr + 5), np.float32)
    bias = rng.standard_normal(nr, np.float32)
    packed = rng.standard_normal((k, block.mr), np.float32)
    strided = np.zeros((k, block.mr + 3), np.float32)  # transposed in place: each k's rows contiguous, lda apart
    strided[:, :block.mr] = packed
    for a, ask, asr in [(packed, block.mr, 1), (np.ascontiguousarray(packed.T), 1, k), (strided, block.mr + 3, 1)]:
        c = rng.standard_normal((block.mr, nr + 3), np.float32)
        before = c.copy()
        ukr(k, a.ctypes.data, ask, asr, b.ctypes.data, b.shape[1], c.ctypes.data, c.shape[1], nvalid, mvalid, acc,
            bias.ctypes.data)
        sums = np.zeros((block.mr, nr + 3))
        sums[:, :nr] = packed.T.astype(np.float64) @ b[:, :nr].astype(np.float64)
        np.testing.assert_allclose(c, _want(before, sums, mvalid, nvalid, acc, bias), rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("block", BLOCKS, ids=lambda b: b.isa)
@pytest.mark.parametrize("wide", [False, True], ids=["narrow", "wide"])
@pytest.mark.parametrize("taps, k, columns, rows, acc", [(9, 16, 0, 0, 0), (5, 7, -3, -2, 1), (1, 40, -1, 0, 2),
                                                         (0, 16, 0, 0, 1), (3, 0, 0, 0, 0), (9, 16, 0, -1, 1)])
def test_the_taps_kernels_sum_every_tap_in_one_call(block, wide, taps, k, columns, rows, acc):
    """ukr_taps and ukr_wide_taps: C (+)= the sum over taps t of A_t B_t, A_t and B_t at their offsets, over the
    live rows and columns; no taps or K = 0 sum to zero."""
    nr = block.wide_nr if wide else block.nr
    nvalid, mvalid, mr = nr + columns, block.mr + rows, block.mr
    rng = np.random.default_rng(taps * 100 + k)
    a = rng.standard_normal(4000, np.float32)
    b = rng.standard_normal(9000, np.float32)
    ldb = nr + 7
    aoff = rng.integers(0, 4000 - max(k, 1) * mr, max(taps, 1)).astype(np.int64)
    boff = rng.integers(0, 9000 - max(k, 1) * ldb, max(taps, 1)).astype(np.int64)
    c = rng.standard_normal((mr, nr + 3), np.float32)
    bias = rng.standard_normal(nr, np.float32)
    before = c.copy()
    _ukr(block, "ukr_wide_taps" if wide else "ukr_taps")(
        k, a.ctypes.data, mr, 1, b.ctypes.data, ldb, c.ctypes.data, c.shape[1], nvalid, mvalid, acc, bias.ctypes.data,
        taps, aoff.ctypes.data, boff.ctypes.data)
    sums = np.zeros((mr, nr + 3))
    for t in range(taps):
        at = a[aoff[t]:aoff[t] + k * mr].reshape(k, mr).astype(np.float64)  # packed: ask = MR, asr = 1
        bt = np.stack([b[boff[t] + i * ldb:boff[t] + i * ldb + nr] for i in range(k)]).astype(np.float64) if k else \
            np.zeros((0, nr))
        sums[:, :nr] += at.T @ bt
    np.testing.assert_allclose(c, _want(before, sums, mvalid, nvalid, acc, bias), rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("block", BLOCKS, ids=lambda b: b.isa)
def test_the_transposing_copy_moves_one_16_x_16_block(block):
    src = np.arange(20 * 37, dtype=np.float32).reshape(20, 37)
    dst = np.full((18, 23), -1, np.float32)
    ctypes.CFUNCTYPE(None, _PTR, _I64, _PTR, _I64)(_kernels(block)["tr"])(src[2:, 3:].ctypes.data, 37,
                                                                         dst.ctypes.data, 23)
    want = np.full_like(dst, -1)
    want[:16, :16] = src[2:18, 3:19].T
    np.testing.assert_array_equal(dst, want)


@pytest.mark.parametrize("block", BLOCKS, ids=lambda b: b.isa)
@pytest.mark.parametrize("count", [0, 1, 15, 16, 17, 40])
def test_the_pair_split_puts_even_and_odd_values_apart(block, count):
    """deint: 16-pair vector blocks and a scalar rest, nothing written past `count` values of either side."""
    src = np.arange(2 * count + 1, dtype=np.float32)  # one value more than the pairs: it must stay unread
    even, odd = np.full(count + 2, -1, np.float32), np.full(count + 2, -1, np.float32)
    split = ctypes.CFUNCTYPE(None, _PTR, _I64, _PTR, _PTR)(_kernels(block)["deint"])
    split(src.ctypes.data, count, even.ctypes.data, odd.ctypes.data)
    np.testing.assert_array_equal(even, np.r_[src[0:2 * count:2], -1, -1])
    np.testing.assert_array_equal(odd, np.r_[src[1:2 * count:2], -1, -1])


def _block_in_process(capability: str) -> str:
    code = "from ember.kernels import sgemm_microkernel as m; print(m.BLOCK.isa if m.BLOCK else None, m.MR, m.NR)"
    env = dict(os.environ, EMBER_CPU_CAPABILITY=capability)
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout


def test_a_process_takes_the_widest_block_the_setting_allows():
    """EMBER_CPU_CAPABILITY caps the block as ATEN_CPU_CAPABILITY caps PyTorch's kernels: `avx2` takes AVX2's on
    an AVX-512 CPU too, `default` none; `auto` the widest the CPU has, and `avx512` on an AVX2 CPU AVX2's."""
    widest = BLOCKS[0] if BLOCKS else None
    assert _block_in_process("auto").split()[0] == (widest.isa if widest else "None")
    assert _block_in_process("avx512").split()[0] == (widest.isa if widest else "None")  # a cap, not a demand
    assert _block_in_process("avx2").split() == (["avx2", "4", "24"] if mk.AVX2 in BLOCKS else ["None", "8", "32"])
    assert _block_in_process("default").split()[0] == "None"


def test_a_bad_capability_is_a_one_line_error():
    env = dict(os.environ, EMBER_CPU_CAPABILITY="avx9")
    run = subprocess.run([sys.executable, "-c", "import ember.kernels.sgemm_microkernel"], env=env,
                         capture_output=True, text=True)
    assert run.returncode != 0 and "EMBER_CPU_CAPABILITY='avx9': expected one of" in run.stderr
    assert "ember/kernels" not in run.stderr  # raised where the package starts, not inside its kernels' imports


@pytest.mark.skipif(mk.BLOCK is not mk.AVX512 or mk.AVX2 not in BLOCKS,
                    reason="this process runs AVX2's block already, or the CPU has no AVX-512")
def test_the_direct_convolution_matches_torch_on_avx2s_block_too():
    """On an AVX-512 CPU the direct convolution's value and gradient tests run again in a process held to AVX2's
    block (4 x 24: other panels, column blocks and masks)."""
    pytest.importorskip("torch")
    tests = os.path.join(os.path.dirname(__file__), "test_direct_conv.py")
    env = dict(os.environ, EMBER_CPU_CAPABILITY="avx2")
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", tests, "-k",
                          "match_torch or trains_the_same or positions_as_rows"], env=env, capture_output=True,
                         text=True)
    assert run.returncode == 0, run.stdout[-3000:]
