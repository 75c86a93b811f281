"""Ember's own float32 GEMM (sgemm_microkernel, sgemm) and the choice between it and NumPy's BLAS
(gemm.matmul): values against float64 NumPy on shapes around every block edge, layouts and splits, and the
products the ops route through it against PyTorch."""

import dataclasses

import numpy as np
import pytest

from ember.kernels import blas, gemm, parallel
from ember.kernels.sgemm_microkernel import MR, NR

pytest.importorskip("numba")
from ember.kernels.sgemm import KC, ROWS_SOURCE, driver_address, pack_rows, sgemm  # noqa: E402

pytestmark = pytest.mark.skipif(not driver_address(), reason="needs a micro-kernel block (AVX-512 or AVX2)")


@pytest.fixture
def own_gemm(monkeypatch):
    """gemm.matmul choosing Ember's kernel, whatever NumPy's BLAS here is (and MKL off, which would come first)."""
    monkeypatch.setattr(gemm, "_state", {"own": True, "mkl": None})


def _close(got, a, b, add=None):
    want = np.matmul(a.astype(np.float64), b.astype(np.float64))
    if add is not None:
        want = want + add
    k = a.shape[-1]
    # float32 sums of k products: error grows like sqrt(k) eps |a||b|
    tol = 4e-7 * np.sqrt(max(k, 1)) * (np.abs(a).max(initial=0) * np.abs(b).max(initial=0) * max(k, 1) ** 0.5 + 1)
    np.testing.assert_allclose(got, want, rtol=0, atol=tol)


@pytest.mark.parametrize("m", [1, MR - 1, MR, MR + 1, 3 * MR + 5])
@pytest.mark.parametrize("n", [1, NR - 1, NR, NR + 1, 3 * NR + 7])
@pytest.mark.parametrize("k", [1, 17, KC, KC + 1])
def test_block_edges_match_float64(m, n, k):
    rng = np.random.default_rng(m * 1000 + n * 10 + k)
    a, b = rng.standard_normal((m, k), np.float32), rng.standard_normal((k, n), np.float32)
    out = np.full((m, n), np.nan, np.float32)
    sgemm(a, b, out)
    _close(out, a, b)


@pytest.mark.parametrize("n", [1, 15, 16, 17, 33])
@pytest.mark.parametrize("k", [15, 16, 17, KC + 20])
def test_transposed_b_around_the_transpose_blocks(n, k):
    """A B whose K axis is contiguous goes through 16 x 16 transposing copies and a scalar rest."""
    rng = np.random.default_rng(n * 100 + k)
    a, b = rng.standard_normal((20, k), np.float32), rng.standard_normal((n, k), np.float32).T
    out = np.empty((20, n), np.float32)
    sgemm(a, b, out)
    _close(out, a, b)


@pytest.mark.parametrize("m, k", [(MR * 4, KC + 40), (MR * 4 + 3, 33)])
def test_a_transposed_is_read_in_place_with_the_values_of_its_copy(m, k):
    """A weight gradient's g.T (each k's rows contiguous) is read in place through the micro-kernel's strides: the
    same sums in the same order as from a contiguous copy, bit for bit, batched or not, partial panels included."""
    rng = np.random.default_rng(m + k)
    a = rng.standard_normal((3, k, m), np.float32).transpose(0, 2, 1)
    b = rng.standard_normal((3, k, 40), np.float32)
    for x, y in ((a, b), (a[1], b[1])):
        got, want = np.empty(x.shape[:-1] + (40,), np.float32), np.empty(x.shape[:-1] + (40,), np.float32)
        sgemm(x, y, got)
        sgemm(np.ascontiguousarray(x), y, want)
        np.testing.assert_array_equal(got, want)
        _close(got, x, y)


@pytest.mark.parametrize("m, k, n", [(MR - 1, 17, NR + 1), (3 * MR + 5, KC + 1, 3 * NR + 7), (600, 64, 512)])
def test_a_bias_row_gives_the_bits_of_a_prefilled_output(m, k, n):
    """sgemm(bias=b) adds b as the micro-kernel stores the product: bit for bit what accumulating into an output
    prefilled with b gives (linear_with_bias's old way, and NumPy's addmm form), for every panel edge, K over
    one block, and the thread splits (by rows, and by columns for a transposed B)."""
    rng = np.random.default_rng(m + k + n)
    a, b = rng.standard_normal((m, k), np.float32), rng.standard_normal((k, n), np.float32)
    bias = rng.standard_normal(n).astype(np.float32)
    for rhs in (b, np.ascontiguousarray(b.T).T):
        want = np.empty((m, n), np.float32)
        want[...] = bias
        sgemm(a, rhs, want, accumulate=True)
        got = np.full((m, n), np.nan, np.float32)
        sgemm(a, rhs, got, bias=bias)
        np.testing.assert_array_equal(got, want)
        _close(got, a, rhs, add=bias.astype(np.float64))
    with pytest.raises(ValueError, match="bias row and accumulate"):
        sgemm(a, b, got, accumulate=True, bias=bias)


def test_linear_with_bias_adds_the_bias_in_the_kernel(own_gemm):
    from ember.kernels import blas

    rng = np.random.default_rng(4)
    x, w = rng.standard_normal((400, 48), np.float32), rng.standard_normal((512, 48), np.float32)
    b = rng.standard_normal(512).astype(np.float32)
    got = blas.linear_with_bias(x, w, b)
    want = np.empty((400, 512), np.float32)
    want[...] = b
    sgemm(x, w.T, want, accumulate=True)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("layout", ["a transposed", "b transposed", "both transposed", "sliced", "batched",
                                    "reversed"])
def test_layouts_match_float64(layout):
    rng = np.random.default_rng(7)
    m, k, n = 53, 700, 75  # K over one block, partial row and column panels
    a = rng.standard_normal((k, m), np.float32).T if "a" in layout or "both" in layout else rng.standard_normal(
        (m, k), np.float32)
    b = rng.standard_normal((n, k), np.float32).T if "b" in layout or "both" in layout else rng.standard_normal(
        (k, n), np.float32)
    if layout == "sliced":  # every operand a view with a longer leading dimension
        a = rng.standard_normal((m, k + 9), np.float32)[:, 3:k + 3]
        b = rng.standard_normal((k, n + 11), np.float32)[:, 5:n + 5]
    if layout == "batched":
        a, b = rng.standard_normal((3, m, k), np.float32), rng.standard_normal((3, k, n), np.float32)
    if layout == "reversed":  # negative strides
        a, b = a[::-1, ::-1], b[::-1]
    big = np.full(a.shape[:-2] + (m, n + 6), np.nan, np.float32)
    out = big[..., 2:n + 2]
    sgemm(a, b, out)
    _close(out, a, b)
    assert np.isnan(big[..., :2]).all() and np.isnan(big[..., n + 2:]).all()  # nothing written outside


def test_accumulate_adds_to_the_output():
    rng = np.random.default_rng(3)
    a, b = rng.standard_normal((40, 1100), np.float32), rng.standard_normal((1100, 70), np.float32)
    start = rng.standard_normal((40, 70), np.float32)
    out = start.copy()
    sgemm(a, b, out, accumulate=True)
    _close(out, a, b, add=start)


def test_empty_inner_dimension_writes_zeros_or_keeps_the_output():
    a, b = np.ones((5, 0), np.float32), np.ones((0, 40), np.float32)
    out = np.full((5, 40), 7.0, np.float32)
    sgemm(a, b, out, accumulate=True)
    np.testing.assert_array_equal(out, 7.0)
    sgemm(a, b, out)
    np.testing.assert_array_equal(out, 0.0)


@pytest.mark.parametrize("shape", [(8, 600, 300, 600), (1, 2000, 300, 120), (1, 40, 700, 4000)],
                         ids=["batch split", "row split", "column split"])
def test_rows_do_not_depend_on_the_split(shape, monkeypatch):
    """Each value is one in-order sum over K: split over threads (batch, rows or columns), computed alone, or
    with its neighbours, a row comes out bit for bit the same."""
    batch, m, k, n = shape
    rng = np.random.default_rng(11)
    a, b = rng.standard_normal((batch, m, k), np.float32), rng.standard_normal((batch, k, n), np.float32)
    whole = np.empty((batch, m, n), np.float32)
    sgemm(a, b, whole)
    _close(whole, a, b)
    monkeypatch.setattr(parallel, "worth_splitting", lambda flops, compiled=False: False)
    alone = np.empty((batch, m, n), np.float32)
    sgemm(a, b, alone)
    np.testing.assert_array_equal(alone, whole)
    row = np.empty((1, 1, n), np.float32)
    sgemm(a[-1:, -1:], b[-1:], row)
    np.testing.assert_array_equal(row[0, 0], whole[-1, -1])


@pytest.mark.parametrize("affine", [False, True])
def test_a_product_of_a_compiled_chunks_worth_splits_over_the_threads(two_threads, monkeypatch, affine):
    """sgemm's chunks are compiled: a product splits from min_kernel_chunk_flops (MobileNetV2's 5-10 MFLOP pointwise
    layers at batch 1 ran on one thread under the Python chunks' 10 MFLOP), with the unsplit values."""
    if not parallel.native():
        pytest.skip("no GIL-free workers on this platform")
    rng = np.random.default_rng(5)
    a, b = rng.standard_normal((1, 64, 192), np.float32), rng.standard_normal((1, 192, 196), np.float32)  # 4.8 MFLOP
    assert parallel.THRESHOLDS["min_kernel_chunk_flops"] <= 2.0 * a.size * b.shape[-1] < \
        parallel.THRESHOLDS["min_python_chunk_flops"]
    scale, shift = rng.standard_normal(64, np.float32), rng.standard_normal(64, np.float32)
    extra = {"affine": (scale, shift, ("relu",))} if affine else {}
    splits, run_kernel = [], parallel.run_kernel
    monkeypatch.setattr(parallel, "run_kernel", lambda kernel, parts, *args, **kw: splits.append(len(parts)) or
                        run_kernel(kernel, parts, *args, **kw))
    split = sgemm(a, b, np.empty((1, 64, 196), np.float32), **extra)
    assert splits == [2]
    monkeypatch.setattr(parallel, "worth_splitting", lambda flops, compiled=False: False)
    np.testing.assert_array_equal(split, sgemm(a, b, np.empty((1, 64, 196), np.float32), **extra))


@pytest.mark.parametrize("activation", [None, ("relu",), ("clamp", -0.5, 6.0)])
@pytest.mark.parametrize("shape", [
    (1, 24, 40, 300), (1, 8, 9, 3), (3, 40, 33, 200),  # one chunk
    (1, 96, 64, 3136), (1, 24, 96, 3136), (4, 24, 64, 2048),  # split by rows, by columns, by batch (two workers)
])
def test_an_affine_epilogue_gives_channel_affines_values(shape, activation):
    """sgemm(..., affine=(scale, shift, activation)): each row r * scale[r] + shift[r], then the activation, bit for
    bit what channel_affine's NumPy kernel gives on the plain product, NaN kept, on one chunk and split ones."""
    from ember.ops.channel_affine import _channel_affine_op

    batch, m, k, n = shape
    rng = np.random.default_rng(9)
    a, b = rng.standard_normal((batch, m, k), np.float32), rng.standard_normal((batch, k, n), np.float32)
    a[0, 0, 0] = np.nan  # a NaN row through the activation
    scale, shift = rng.standard_normal(m).astype(np.float32), rng.standard_normal(m).astype(np.float32)
    plain, got = np.empty((batch, m, n), np.float32), np.empty((batch, m, n), np.float32)
    sgemm(a, b, plain)
    sgemm(a, b, got, affine=(scale, shift, activation))
    want = np.stack([_channel_affine_op.kernel(np, p[None], scale, shift, activation=activation)[0] for p in plain])
    np.testing.assert_array_equal(got, want)
    with pytest.raises(ValueError, match="affine epilogue cannot be combined"):
        sgemm(a, b, got, accumulate=True, affine=(scale, shift, activation))


def test_matmul_chooses_by_dtype_size_layout_and_aliasing(own_gemm):
    rng = np.random.default_rng(5)
    a, b = rng.standard_normal((64, 256), np.float32), rng.standard_normal((256, 128), np.float32)
    assert gemm.takes_own(a, b)
    assert not gemm.takes_own(a.astype(np.float64), b.astype(np.float64))  # float32 only
    assert not gemm.takes_own(a[:4, :16], b[:16, :8])  # too small to repay the call
    assert not gemm.takes_own(a[:8], b.T.copy().T)  # a strided B with few rows of A: NumPy
    assert gemm.takes_own(a, b.T.copy().T)
    assert gemm.takes_own(np.ones((256, 256), np.float32), np.ones((128, 256), np.float32).T)  # many rows: ours
    assert not gemm.takes_own(a[None], b[None].repeat(2, 0))  # batches differ
    assert not gemm.takes_own(a[None, None], b[None, None])  # 4-D: NumPy's broadcasting
    square = rng.standard_normal((128, 128), np.float32)
    assert not gemm.takes_own(square, square, out=square)  # out overlaps an input
    raw = np.zeros(4 * 64 * 256 + 1, np.uint8)[1:].view(np.float32).reshape(64, 256)  # misaligned by a byte
    assert gemm.takes_own(raw.copy(), b) and not gemm.takes_own(
        np.lib.stride_tricks.as_strided(raw, strides=(1025, 4)), b)
    np.testing.assert_array_equal(gemm.matmul(a, b), sgemm(a, b, np.empty((64, 128), np.float32)))
    a.flags.writeable = b.flags.writeable = False  # read-only operands (ONNX initializers, np.frombuffer)
    np.testing.assert_array_equal(gemm.matmul(a, b), sgemm(a, b, np.empty((64, 128), np.float32)))


@pytest.mark.parametrize("avx512", [True, False], ids=["AVX-512 CPU", "AVX2 CPU"])
@pytest.mark.parametrize("core, chosen", [("Haswell", True), ("Zen", True), ("SkylakeX", False),
                                          ("Cooperlake", False), (None, False)])
@pytest.mark.parametrize("zen4", [False, True], ids=["Intel", "Zen 4"])
def test_auto_takes_the_kernel_over_narrower_openblas_kernels_or_on_zen4(core, chosen, avx512, zen4, monkeypatch):
    """Haswell's kernels are narrower than an AVX-512 CPU's, not than an AVX2 one's; on a Zen 4 (AVX-512 run as two
    256-bit halves) the kernel is taken over OpenBLAS's AVX-512 kernels too."""
    monkeypatch.setattr(blas, "openblas_core", lambda: core)
    monkeypatch.setattr(gemm, "_wide_block", lambda: avx512)
    monkeypatch.setattr(gemm, "_halved_avx512", lambda: zen4)
    assert gemm._choose("auto") is ((chosen or (zen4 and core is not None)) and avx512)
    assert gemm._choose("ember") is True  # wherever the kernel runs
    assert gemm._choose("blas") is False


def test_zen4_is_told_from_its_family(monkeypatch):
    from ember.kernels import machine

    real = machine.detect()
    for vendor, family, avx512, expected in (("AuthenticAMD", 25, True, True), ("AuthenticAMD", 25, False, False),
                                             ("AuthenticAMD", 26, True, False), ("GenuineIntel", 6, True, False)):
        isa = frozenset({"avx512f"} if avx512 else {"avx2", "fma"})
        fake = dataclasses.replace(real, vendor=vendor, family=family, isa=isa)
        monkeypatch.setattr(machine, "detect", lambda fake=fake: fake)
        assert gemm._halved_avx512() is expected, (vendor, family, avx512)


def test_settings_and_numpy_backend(monkeypatch):
    from ember import config
    from ember.graph import codegen

    for value, expected in (("blas", False), ("ember", True)):
        monkeypatch.setattr(gemm, "_state", {})
        monkeypatch.setenv("EMBER_GEMM", value)
        config.GEMM.reset()
        assert gemm.enabled() is expected
    monkeypatch.setattr(gemm, "_state", {})
    monkeypatch.setenv("EMBER_GEMM", "fast")
    config.GEMM.reset()
    with pytest.raises(ValueError, match="EMBER_GEMM='fast': expected one of 'auto', 'ember', 'blas'"):
        gemm.enabled()
    monkeypatch.setattr(gemm, "_state", {"own": True})
    codegen.set_backend("numpy")
    assert not gemm.enabled()


def test_the_kernels_built_on_the_driver_take_it_over_avx512_openblas_too(monkeypatch):
    """driver_enabled: the convolutions' compiled kernels run on the driver where OpenBLAS runs its own AVX-512
    kernels, though plain products stay on OpenBLAS there; EMBER_GEMM=blas and the numpy backend turn both off."""
    from ember import config
    from ember.graph import codegen

    monkeypatch.setattr(blas, "openblas_core", lambda: "SkylakeX")
    monkeypatch.setattr(gemm, "_wide_block", lambda: True)
    monkeypatch.setattr(gemm, "_halved_avx512", lambda: False)  # Intel's AVX-512 cores
    for value, products, kernels in (("auto", False, True), ("ember", True, True), ("blas", False, False)):
        monkeypatch.setattr(gemm, "_state", {})
        monkeypatch.setenv("EMBER_GEMM", value)
        config.GEMM.reset()
        assert (gemm.enabled(), gemm.driver_enabled()) == (products, kernels), value
    monkeypatch.setattr(gemm, "_state", {})
    monkeypatch.setenv("EMBER_GEMM", "auto")
    config.GEMM.reset()
    codegen.set_backend("numpy")
    assert not gemm.driver_enabled()


def test_on_avx2s_block_only_the_recurrent_loops_take_the_driver(monkeypatch):
    """Where AVX2 is the widest, plain products and the convolutions' kernels stay on OpenBLAS's Haswell kernels;
    the recurrent time loops take the driver (`auto`; `ember` everything, `blas` nothing)."""
    from ember import config
    from ember.kernels import sgemm_microkernel

    monkeypatch.setattr(blas, "openblas_core", lambda: "Haswell")
    monkeypatch.setattr(gemm, "_wide_block", lambda: False)
    monkeypatch.setattr(sgemm_microkernel, "BLOCK", sgemm_microkernel.AVX2)
    for value, products, kernels, loops in (("auto", False, False, True), ("ember", True, False, True),
                                            ("blas", False, False, False)):
        monkeypatch.setattr(gemm, "_state", {})
        monkeypatch.setenv("EMBER_GEMM", value)
        config.GEMM.reset()
        assert (gemm.enabled(), gemm.driver_enabled(), gemm.loops_take_driver()) == (products, kernels, loops), value
        assert gemm.narrow_driver() == loops, value


def test_on_avx2s_block_pointwise_layers_of_few_channels_on_large_maps_take_the_driver(monkeypatch):
    """conv2d's pointwise GEMM (and the jit's with its affine epilogue): on AVX-512's block every float32 layer; on
    AVX2's those of at most pointwise_avx2_max_channels inputs on maps of pointwise_avx2_min_pixels or more, and
    none under EMBER_GEMM=blas."""
    from ember import config
    from ember.kernels import conv

    def layer(channels, side, dtype=np.float32):
        return np.zeros((1, channels, side, side), dtype), np.zeros((8, channels, 1, 1), dtype)

    layers = {(16, 112): True, (192, 14): True, (384, 14): False, (160, 7): False}
    monkeypatch.setattr(gemm, "driver_enabled", lambda: False)
    for value, takes in (("auto", True), ("blas", False)):
        monkeypatch.setattr(gemm, "_state", {"narrow": True})
        monkeypatch.setenv("EMBER_GEMM", value)
        config.GEMM.reset()
        assert {k: conv.pointwise_on_driver(*layer(*k), 1) for k in layers} == {
            k: takes and on for k, on in layers.items()}, value
    monkeypatch.setattr(gemm, "driver_enabled", lambda: True)
    assert all(conv.pointwise_on_driver(*layer(*k), 1) for k in layers)
    assert not conv.pointwise_on_driver(*layer(16, 112, np.float64), 1)
    assert not conv.pointwise_on_driver(*layer(16, 112), 2)


def test_the_drivers_c_entry_asked_for_first_compiles_the_driver_too(monkeypatch):
    """driver_address() from a fresh start (a kernel built on the entry point asked first): it compiles or loads the
    driver itself and returns, where it once waited forever on the lock it held."""
    import threading

    from ember.kernels import sgemm as sgemm_module

    monkeypatch.setattr(sgemm_module, "_drivers", {})
    monkeypatch.setattr(sgemm_module, "_lock", type(sgemm_module._lock)())  # a thread stuck on it holds only this
    monkeypatch.setattr(sgemm_module.background, "served", lambda: False)  # compile here, not in the background
    got = []
    thread = threading.Thread(target=lambda: got.append(sgemm_module.driver_address()), daemon=True)
    thread.start()
    thread.join(60)
    assert not thread.is_alive(), "driver_address() waited on its own lock"
    assert got[0] != 0 and sgemm_module._drivers["entry"][1] is not None


@pytest.mark.parametrize("case", ["matmul", "linear", "conv2d", "batched matmul"])
def test_ops_on_the_kernel_match_torch(case, monkeypatch, own_gemm):
    """Products large enough to take the kernel, forward and backward, against PyTorch."""
    torch = pytest.importorskip("torch")
    import ember as em
    from ember.kernels import sgemm

    calls = []
    real = sgemm.sgemm
    monkeypatch.setattr(sgemm, "sgemm", lambda *args, **kw: calls.append(1) or real(*args, **kw))

    rng = np.random.default_rng(9)
    if case == "matmul":
        shapes = [(96, 300), (300, 130)]
    elif case == "batched matmul":
        shapes = [(4, 40, 200), (4, 200, 70)]
    elif case == "linear":
        shapes = [(200, 300), (130, 300), (130,)]
    else:
        shapes = [(8, 32, 16, 16), (48, 32, 4, 4)]  # a 4x4 kernel: im2col's GEMMs (3x3 and 5x5 convolve directly)
    arrays = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    ours = [em.tensor(x, requires_grad=True) for x in arrays]
    theirs = [torch.tensor(x, requires_grad=True) for x in arrays]

    def run(lib, args):
        F = lib.nn.functional
        if case in ("matmul", "batched matmul"):
            return lib.matmul(*args)
        if case == "linear":
            return F.linear(*args)
        return F.conv2d(*args, padding=1)

    y, t = run(em, ours), run(torch, theirs)
    np.testing.assert_allclose(y.detach().numpy(), t.detach().numpy(), rtol=1e-4, atol=1e-4)
    g = rng.standard_normal(t.shape).astype(np.float32)
    y.backward(em.tensor(g))
    t.backward(torch.tensor(g))
    for mine, ref in zip(ours, theirs):
        np.testing.assert_allclose(mine.grad.numpy(), ref.grad.numpy(), rtol=1e-4, atol=1e-3)
    assert calls  # the products ran on the kernel


_ROWS_PACKED = '''
import numpy as np
from numba import njit
''' + ROWS_SOURCE + '''


def product(a, b, bp, out):
    M, K = a.shape
    N = b.shape[1]
    sgemm_rows_packed(M, N, K, a.ctypes.data, K, bp, b.ctypes.data, N, out.ctypes.data, N)
'''


@pytest.mark.parametrize("m,n,k", [(16, 512, 128), (15, 512, 128), (16, 128, 512), (MR - 1, NR, 7),
                                   (3 * MR + 2, 2 * NR + 5, KC + 9), (MR, NR - 3, 0)])
def test_a_recurrent_loops_prepacked_weight_gives_the_drivers_values(m, n, k):
    """A time loop's weight is packed once (pack_rows) for every step's sgemm_rows_packed: the driver's values
    (which packs it at every call) bit for bit, across partial row panels, column panels, K blocks and K = 0."""
    from ember.kernels.numba_loader import compile_source

    product = compile_source(_ROWS_PACKED, "product", cache=False)
    rng = np.random.default_rng(12)
    a, b = rng.standard_normal((m, k), np.float32), rng.standard_normal((k, n), np.float32)
    packed, driven = np.full((m, n), np.nan, np.float32), np.full((1, m, n), np.nan, np.float32)
    product(a, b, pack_rows(b), packed)
    sgemm(a[None], b[None], driven)
    np.testing.assert_array_equal(packed, driven[0])
    _close(packed, a, b)
