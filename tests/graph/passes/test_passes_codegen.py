"""Generated kernels: the Numba and NumPy renderers against the unfused ops, layouts, fallback, disk cache."""

import inspect
import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from passes_util import assert_same, op_count, run, run_optimized, sym, values

import ember as em
from ember.graph import Graph, codegen
from ember.graph.codegen import NumbaRenderer
from ember.graph.passes import optimize

needs_numba = pytest.mark.skipif(not NumbaRenderer().available(), reason="numba is not installed")
RENDERERS = [pytest.param("numba", marks=needs_numba), "numpy"]
SPECIAL = [np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, 0.5, 2.5, -3.5, 1e-3, 40.0]


@pytest.fixture
def backend(request):
    codegen.set_backend(request.param)
    yield request.param
    codegen.set_backend(None)


def _float_ops(x, y):
    return [
        -x, x.abs(), x.sign(), x.exp(), x.log(), x.log2(), x.log10(), x.log1p(), x.expm1(), x.sqrt(), x.rsqrt(),
        x.square(), x.sin(), x.cos(), x.tan(), x.tanh(), x.sigmoid(), em.nn.functional.silu(x) if hasattr(em, "nn")
        else x.sigmoid() * x, x.relu(), em.ops.elementwise.leaky_relu(x, 0.2), x.reciprocal(), x.floor(), x.ceil(),
        x.trunc(), x.round(), x.frac(), x.erf(), x.isnan(), x.isinf(), x.isfinite(), x.logical_not(),
        x + y, x - y, x * y, x / y, x.abs() ** y, x ** 2, em.maximum(x, y), em.minimum(x, y), em.atan2(x, y),
        em.fmod(x, y), x == y, x != y, x < y, x <= y, x > y, x >= y, em.logical_and(x, y), em.logical_or(x, y),
        em.logical_xor(x, y), em.where(x > y, x, 2.0), x.clamp(-0.5, 0.5), x.clamp(min=0.0), x.int() + 0,
        x.bool() | (y > 0), x.double() * 3, 2 - x, 1.5 / y,
    ]


def _int_ops(x, y):
    ops = [
        x.abs(), x.sign(), x.square(), x.relu(), em.maximum(x, y), em.minimum(x, y), x + y, x - y, x * y, x / y,
        x & y, x | y, x ^ y, ~x, em.logical_and(x, y), em.logical_xor(x, y), x == y, x < y, x >= 3,
        em.where(x > y, x, 7), x.clamp(1, 5), x.clamp(min=0.5), x.float() * 0.5, x.to(em.int8) + 1, x * 3 + 100,
        x.floor(), x.round(), x.isnan(), x.isfinite(), x.logical_not(), x.exp(), x * 2.5,
    ]
    return ops + [-x] if x.dtype != em.uint8 else ops


def _bool_ops(x, y):
    return [x & y, x | y, x ^ y, ~x, x + y, x * y, x == y, em.where(x, y, False), x.int() + y, x.float() - 0.5,
            em.logical_xor(x, y), x.sign(), x.logical_not()]  # abs and relu refuse bool, as in PyTorch


def _inputs(dtype, shape=(6, 8), rng=None):
    rng = rng or np.random.default_rng(3)
    if dtype == np.bool_:
        return rng.random(shape) > 0.5
    if np.dtype(dtype).kind in "iu":
        lo = 0 if np.dtype(dtype).kind == "u" else -20
        return rng.integers(lo, 20, shape).astype(dtype)
    a = (rng.standard_normal(shape) * 3).astype(dtype)
    a.flat[: len(SPECIAL)] = SPECIAL
    return a


@pytest.mark.parametrize("backend", RENDERERS, indirect=True)
@pytest.mark.parametrize("dtype, make", [
    (np.float32, _float_ops), (np.float64, _float_ops), (np.int32, _int_ops), (np.uint8, _int_ops),
    (np.int64, _int_ops), (np.bool_, _bool_ops),
])
def test_every_op_matches_the_unfused_ops(backend, dtype, make):
    g = Graph()
    x = sym(g, (6, 8), dtype, name="x")
    y = sym(g, (6, 8), dtype, name="y")
    outs = values(*make(x, y))
    opt = optimize(g, outs, ["fusion"])
    regions = [n.attrs["region"] for n in opt.graph.nodes if n.op_name == "fused_elementwise"]
    assert regions
    if backend == "numba":
        assert all(codegen.choose_renderer(r).name == "numba" for r in regions)
    rng = np.random.default_rng(4)
    feeds = {x._data: _inputs(dtype, rng=rng), y._data: _inputs(dtype, rng=rng)}
    with np.errstate(all="ignore"):
        expected = run(g, outs, feeds)
        got = run_optimized(g, outs, feeds, ["fusion"])[0]
    assert_same(expected, got, rtol=2e-6 if dtype == np.float64 else 1e-5, atol=1e-6)


@pytest.mark.parametrize("backend", RENDERERS, indirect=True)
def test_python_scalar_promotion_and_broadcast_layouts(backend):
    g = Graph()
    a = sym(g, (5, 1, 3), np.int32, name="a")  # int tensor with float scalars: computes in float32
    b = sym(g, (4, 1), np.float32, name="b")
    c = sym(g, (3, 4), np.float32, name="c")  # fed transposed (non-contiguous)
    d = sym(g, (), np.float64, name="d")  # 0-dim float64 does not promote float32 tensors
    y = (a * 2.5 + b) * 2 - d
    z = (c.permute(1, 0) + b) * 3 + a.sum() * 0 + 1  # int64 sum of a
    w = (a + 7) * 3  # stays int32
    outs = values(y, z, w)
    opt = optimize(g, outs, ["fusion"])
    assert [(v.shape, v.dtype) for v in opt.outputs] == [
        ((5, 4, 3), np.float32), ((4, 3), np.float32), ((5, 1, 3), np.int32)]
    feeds = {a._data: np.arange(15, dtype=np.int32).reshape(5, 1, 3), b._data: _inputs(np.float32, (4, 1)),
             c._data: _inputs(np.float32, (4, 3)).T, d._data: np.array(0.25)}
    assert_same(run(g, outs, feeds), run_optimized(g, outs, feeds, ["fusion"])[0], rtol=1e-6)


@pytest.mark.parametrize("backend", RENDERERS, indirect=True)
def test_zero_dim_and_one_element_inputs_with_contiguous_ones(backend):
    # an optimizer update: full-size tensors with 0-d hyperparameters (the one-loop path reads them once)
    g = Graph()
    p, grad, buf = (sym(g, (6, 5), np.float32, name=n) for n in ("p", "g", "buf"))
    lr, mom = sym(g, (), np.float64, name="lr"), sym(g, (1, 1), np.float32, name="mom")
    new_buf = buf * mom + grad
    outs = values(p - new_buf * lr, new_buf, (p * 0 + lr) * 2)
    feeds = {p._data: _inputs(np.float32, (6, 5)), grad._data: _inputs(np.float32, (6, 5)) * 0.5,
             buf._data: _inputs(np.float32, (6, 5)) * 0.25, lr._data: np.array(0.1), mom._data: np.full((1, 1), 0.9, np.float32)}
    assert_same(run(g, outs, feeds), run_optimized(g, outs, feeds, ["fusion"])[0], rtol=1e-6)
    assert op_count(optimize(g, outs, ["fusion"]).graph, "fused_elementwise") >= 1


@pytest.mark.parametrize("backend", RENDERERS, indirect=True)
def test_many_dims_large_arrays_and_reductions(backend):
    g = Graph()
    shape = (2, 3, 1, 4, 5, 1, 3)
    x = sym(g, shape, name="x")
    b = sym(g, (3, 1, 1, 5, 2, 1), name="b")  # alternating broadcast: too many dims to merge
    big = sym(g, (300, 400), name="big")  # the chunked/flat paths
    y = (x + b) * 2 - 1
    s = (big * 2).exp().mean(0)
    r = ((x * b).relu() + 1).sum((1, 3), keepdim=True)
    outs = values(y, s, r, (big - 1).abs() * 3)
    opt = optimize(g, outs, ["fusion"])
    assert op_count(opt.graph, "fused_elementwise") == 4
    feeds = {x._data: _inputs(np.float32, shape), b._data: _inputs(np.float32, (3, 1, 1, 5, 2, 1)),
             big._data: np.random.default_rng(5).standard_normal((300, 400)).astype(np.float32)}
    with np.errstate(all="ignore"):
        assert_same(run(g, outs, feeds), run_optimized(g, outs, feeds, ["fusion"])[0], rtol=1e-5, atol=1e-6)


def test_out_of_range_python_ints_keep_their_error():
    g = Graph()
    x = sym(g, (3,), np.int8, name="x")
    y = (x + 300) * 2
    feeds = {x._data: np.ones(3, np.int8)}
    for passes in ([], ["fusion"]):
        with pytest.raises(RuntimeError, match="out of bounds"):
            run_optimized(g, values(y), feeds, passes)


def test_numpy_renderer_is_used_without_numba(monkeypatch):
    monkeypatch.setattr(NumbaRenderer, "available", lambda self: False)
    g = Graph()
    x = sym(g, (4,), name="x")
    y = (x * 2 + 1).relu()
    opt = optimize(g, values(y), ["fusion"])
    region = next(n.attrs["region"] for n in opt.graph.nodes if n.op_name == "fused_elementwise")
    assert codegen.choose_renderer(region).name == "numpy"
    feeds = {x._data: np.array([-1, 0, 1, 2], np.float32)}
    assert_same(run(g, values(y), feeds), run_optimized(g, values(y), feeds, ["fusion"])[0])


def test_backend_setting_from_the_environment(monkeypatch):
    monkeypatch.setenv("EMBER_FUSION_BACKEND", "numpy")
    codegen.set_backend(None)  # the variable is read once; set_backend(None) reads it again
    assert codegen.get_backend() == "numpy"
    codegen.set_backend("numba")
    assert codegen.get_backend() == "numba"
    codegen.set_backend(None)
    assert codegen.get_backend() == "numpy"
    monkeypatch.delenv("EMBER_FUSION_BACKEND")
    codegen.set_backend(None)
    assert codegen.get_backend() == "auto"
    with pytest.raises(ValueError, match="unknown fusion backend"):
        codegen.set_backend("cuda-ptx")


def test_numpy_renderer_source_reuses_scratch_buffers():
    from ember.graph.codegen import NumpyRenderer

    g = Graph()
    x = sym(g, (4,), name="x")
    y = ((((x * 2) + 1) * 3) - 4) * 5
    opt = optimize(g, values(y), ["fusion"])
    region = next(n.attrs["region"] for n in opt.graph.nodes if n.op_name == "fused_elementwise")
    text, _ = NumpyRenderer().render(region)
    assert "out=" in text and "b1 =" not in text  # one scratch buffer serves the whole chain


_CACHE_SCRIPT = textwrap.dedent("""
    import json, numpy as np, ember as em
    from ember.graph import Graph, codegen
    from ember.graph.executor import Plan
    from ember.graph.passes import optimize
    g = Graph()
    x = em.Tensor._make(g.placeholder((8,), np.float32, em.device("cpu"), "x"), em.device("cpu"))
    y = ((x * 3 - 1).abs() + 0.125).sqrt()
    opt = optimize(g, [y._data], ["fusion"])
    out = Plan(opt.graph, opt.outputs).run({opt.map(x._data): np.arange(8, dtype=np.float32)})[0]
    print(json.dumps({"stats": dict(codegen.stats), "value": out.tolist()}))
""")


@needs_numba
def test_a_second_process_loads_the_compiled_kernel_from_the_disk_cache(tmp_path):
    env = dict(os.environ, EMBER_CACHE=str(tmp_path), EMBER_FUSION_BACKEND="numba")

    def child():
        done = subprocess.run([sys.executable, "-c", _CACHE_SCRIPT], env=env, capture_output=True, text=True,
                              timeout=120)
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout.strip().splitlines()[-1])

    first, second = child(), child()
    assert first["stats"].get("sources_written") == 1 and first["stats"].get("numba_compiled") == 1
    assert second["stats"].get("sources_reused") == 1 and second["stats"].get("numba_cache_hits") == 1
    assert second["stats"].get("numba_compiled", 0) == 0
    assert first["value"] == second["value"]
    kernels = tmp_path / "kernels"
    assert len(list(kernels.glob("ember_k_*.py"))) == 1
    assert list((kernels / "__pycache__").glob("*.nbi"))  # Numba's index of the cached machine code


def test_fmod_region_compiles_with_numba():
    """Numba has no math.fmod: the renderer writes np.fmod (a region of fmod alone used to fail to type)."""
    pytest.importorskip("numba")
    from ember.graph.codegen import Arg, Instr, Region

    f32 = np.dtype(np.float32)
    region = Region([(f32, 1)], [Instr("fmod", (Arg("in", 0), Arg("c", 1.5)), (), f32, f32)], [0])
    x = np.array([5.5, -5.5, 0.25, np.inf], np.float32)
    with np.errstate(invalid="ignore"):
        (out,) = codegen.NumbaRenderer().build(region)([x])
        np.testing.assert_array_equal(out, np.fmod(x, np.float32(1.5)))


@pytest.mark.parametrize("shape, dims", [((3, 5, 7), (0, 2)), ((3, 5, 7), (2,)), ((4, 9), (0, 1)), ((13,), (0,)),
                                         ((6, 3), (0,)), ((2, 3, 4), (1,))])
def test_numba_vectorised_sum_matches_numpy(shape, dims):
    """A summed inner loop adds through a reassociable float64 add (vectorised partial sums and a remainder):
    every length and layout adds up, and the elementwise output is exact."""
    pytest.importorskip("numba")
    from ember.graph.codegen import Arg, Instr, Reduce, Region

    f32 = np.dtype(np.float32)
    nd = len(shape)
    region = Region([(f32, nd), (f32, nd)], [
        Instr("gt", (Arg("in", 0), Arg("c", 0)), (), f32, np.dtype(bool)),
        Instr("where", (Arg("t", 0), Arg("in", 1), Arg("c", 0.0)), (), f32, f32)], [1],
        Reduce("sum", 1, dims, False, f32))
    rng = np.random.default_rng(5)
    x, g = rng.standard_normal(shape).astype(np.float32), rng.standard_normal(shape).astype(np.float32)
    red, out = codegen.NumbaRenderer().build(region)([x, g])
    ref = np.where(x > 0, g, np.float32(0))
    np.testing.assert_array_equal(out, ref)
    np.testing.assert_allclose(red, ref.astype(np.float64).sum(axis=dims), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("op, keepdim", [("sum", False), ("mean", False), ("sum", True), ("mean", True)])
def test_numba_reductions_over_every_layout_and_repeated_shapes(op, keepdim):
    """Contiguous inputs take a reduction call planned once per input shapes; broadcast, non-contiguous and
    new shapes give the same values as the general path, for sum and mean, keepdim or not."""
    pytest.importorskip("numba")
    from ember.graph.codegen import Arg, Instr, Reduce, Region

    f32 = np.dtype(np.float32)
    region = Region([(f32, 2), (f32, 2)], [Instr("mul", (Arg("in", 0), Arg("in", 1)), (), f32, f32)], [0],
                    Reduce(op, 0, (0,), keepdim, f32))
    kernel = codegen.NumbaRenderer().build(region)
    rng = np.random.default_rng(7)
    for a_shape, b_shape in [((6, 5), (6, 5)), ((6, 5), (6, 5)), ((6, 5), (1, 5)), ((9, 3), (9, 1)), ((1, 4), (1, 4))]:
        for contiguous in (True, False):
            a = rng.standard_normal(a_shape).astype(np.float32)
            b = rng.standard_normal(b_shape).astype(np.float32)
            if not contiguous:
                a = np.asfortranarray(a)[:, ::-1].copy(order="F")[:, ::-1]
            red, out = kernel([a, b])
            prod = a * b
            np.testing.assert_array_equal(out, prod)
            want = getattr(prod.astype(np.float64), op)(axis=0, keepdims=keepdim).astype(np.float32)
            assert red.shape == want.shape and red.dtype == np.float32
            np.testing.assert_allclose(red, want, rtol=1e-6, atol=1e-7)


def test_numba_vectorised_sum_propagates_nan_and_inf():
    """Reassociating the sum's adds assumes nothing about NaN or inf: rows holding them sum as NumPy's do."""
    pytest.importorskip("numba")
    from ember.graph.codegen import Arg, Instr, Reduce, Region

    f32 = np.dtype(np.float32)
    region = Region([(f32, 2)], [Instr("mul", (Arg("in", 0), Arg("c", 2.0)), (), f32, f32)], [0],
                    Reduce("sum", 0, (1,), False, f32))
    x = np.ones((4, 37), np.float32)
    x[0, 30], x[1, 3], x[2, 5], x[2, 36], x[3, 17] = np.nan, np.inf, np.inf, -np.inf, -np.inf
    red, out = codegen.NumbaRenderer().build(region)([x])
    np.testing.assert_array_equal(out, x * 2)
    with np.errstate(invalid="ignore"):
        np.testing.assert_array_equal(red, (x * 2).astype(np.float64).sum(axis=1).astype(np.float32))


def test_auto_runs_strided_calls_of_cheap_regions_with_numpy():
    """Under "auto", Numba's loop over a strided (non-contiguous) view is not vectorised: such calls of cheap
    ops take NumPy's code, while ops costly in NumPy's code (clamp: its own kernel) keep Numba. Calls whose
    operands are contiguous, broadcast or not, take Numba's (broadcast operands are passed without their
    broadcast dims, so the loop still vectorises)."""
    pytest.importorskip("numba")
    from ember.graph.codegen import Arg, Instr, Region

    f32 = np.dtype(np.float32)
    cheap = Region([(f32, 4), (f32, 4)], [Instr("mul", (Arg("in", 0), Arg("in", 1)), (), f32, f32),
                                          Instr("relu", (Arg("t", 0),), (), f32, f32)], [1])
    costly = Region([(f32, 4), (f32, 4)], [Instr("mul", (Arg("in", 0), Arg("in", 1)), (), f32, f32),
                                           Instr("clamp", (Arg("t", 0),), (("max", 6.0), ("min", 0.0)), f32, f32)], [1])
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 8, 32, 32)).astype(np.float32)
    scale = rng.standard_normal((1, 8, 1, 1)).astype(np.float32)
    strided = x.transpose(0, 1, 3, 2)
    codegen.set_backend("auto")
    try:
        for region in (cheap, costly):
            for args in ([x, scale], [strided, x]):
                np.testing.assert_allclose(codegen.run_region(region, args)[0], region.evaluate(np, args)[0],
                                           rtol=1e-6, atol=1e-6)
        assert cheap.compiled[("setting", "auto")] is cheap.compiled["numba"]  # the broadcast call
        assert cheap.compiled[("setting", codegen.STRIDED)] is cheap.compiled["numpy"]
        assert costly.compiled[("setting", codegen.STRIDED)] is costly.compiled["numba"]
    finally:
        codegen.set_backend(None)


def test_auto_runs_small_regions_compiled_only_for_long_programs():
    """Under "auto", a region over few values runs NumPy's code when its program is short, or its operands are
    single values (0-d optimizer arithmetic); a longer program (an optimizer's update of a bias) runs compiled.
    Both give the region's values."""
    pytest.importorskip("numba")
    from ember.graph.codegen import Arg, Instr, Region

    f32 = np.dtype(np.float32)

    def chain(n_ops, ndim):
        instrs = [Instr("mul", (Arg("in", 0), Arg("in", 1)), (), f32, f32)]
        instrs += [Instr("add" if k % 2 else "mul", (Arg("t", k), Arg("in", 1)), (), f32, f32) for k in range(n_ops - 1)]
        return Region([(f32, ndim), (f32, ndim)], instrs, [n_ops - 1])

    short, long_, scalar = chain(2, 1), chain(codegen.SMALL_REGION_COMPILED_OPS, 1), chain(8, 0)
    rng = np.random.default_rng(1)
    vec = [rng.standard_normal(512).astype(np.float32) for _ in range(2)]
    one = [np.asarray(v[0]) for v in vec]
    codegen.set_backend("auto")
    try:
        for region, args in ((short, vec), (long_, vec), (scalar, one)):
            np.testing.assert_array_equal(codegen.run_region(region, args)[0], region.evaluate(np, args)[0])
        assert ("setting", "auto") not in short.compiled and ("setting", "numpy") in short.compiled
        assert long_.compiled[("setting", "auto")] is long_.compiled["numba"]
        assert ("setting", "auto") not in scalar.compiled and ("setting", "numpy") in scalar.compiled
    finally:
        codegen.set_backend(None)


def test_numba_output_written_over_its_input():
    """An output given as an input's own array (a weight updated in place) is stored through that input."""
    pytest.importorskip("numba")
    from ember.graph.codegen import Arg, Instr, Region
    from ember.graph.codegen.numba_cpu import kernel_source

    f32 = np.dtype(np.float32)
    # buf' = buf * 0.9 + g ; p' = p - 0.1 * buf'   (SGD with momentum), both written in place
    region = Region([(f32, 1), (f32, 1), (f32, 1)], [
        Instr("mul", (Arg("in", 0), Arg("c", 0.9)), (), f32, f32), Instr("add", (Arg("t", 0), Arg("in", 1)), (), f32, f32),
        Instr("mul", (Arg("t", 1), Arg("c", 0.1)), (), f32, f32), Instr("sub", (Arg("in", 2), Arg("t", 2)), (), f32, f32)],
        [1, 3])
    assert "in0[i0] = t1" in kernel_source(region, 1, (False,), (), ((0, 0), (1, 2)))
    rng = np.random.default_rng(2)
    buf, g, p = (rng.standard_normal(1000).astype(np.float32) for _ in range(3))
    ref = region.evaluate(np, [buf, g, p])
    outs = codegen.NumbaRenderer().build(region)([buf, g, p], [buf, p])
    assert outs[0] is buf and outs[1] is p
    np.testing.assert_array_equal(buf, ref[0])
    np.testing.assert_array_equal(p, ref[1])


@pytest.mark.parametrize("threads", [1, 2])
def test_numba_flat_loop_splits_over_the_threads_from_split_min(monkeypatch, set_threads, threads):
    """From FUSED's split_min values the flat loop runs in chunks over the threads, single values of any dtype
    passed along and outputs written through their inputs, with the values of the unsplit loop bit for bit."""
    pytest.importorskip("numba")
    from ember.graph.codegen import Arg, Instr, Region
    from ember.kernels import parallel
    from ember.kernels.elementwise import FUSED

    set_threads(threads)
    f32, f64, i32, b8 = (np.dtype(t) for t in (np.float32, np.float64, np.int32, np.bool_))
    # buf' = buf * mom + g ; p' = where(mask, p - lr * buf', p) + k, in float32 with mom float32, lr float64 and k
    # int32 single values
    region = Region([(f32, 1), (f32, 1), (f32, 1), (f32, 0), (f64, 0), (b8, 1), (i32, 0)], [
        Instr("mul", (Arg("in", 0), Arg("in", 3)), (), f32, f32), Instr("add", (Arg("t", 0), Arg("in", 1)), (), f32, f32),
        Instr("mul", (Arg("t", 1), Arg("in", 4)), (), f32, f32), Instr("sub", (Arg("in", 2), Arg("t", 2)), (), f32, f32),
        Instr("where", (Arg("in", 5), Arg("t", 3), Arg("in", 2)), (), f32, f32),
        Instr("add", (Arg("t", 4), Arg("in", 6)), (), f32, f32)], [1, 5])
    kernel = codegen.NumbaRenderer().build(region)
    seen = []
    real = parallel.run_kernel
    monkeypatch.setattr(parallel, "run_kernel", lambda fn, parts, head, *a: (seen.append(parts), real(fn, parts, head, *a)))
    rng = np.random.default_rng(4)
    for n in (FUSED["split_min"] - 1, FUSED["split_min"], 3 * FUSED["split_min"] + 5):
        buf, g = (_values_with_specials(rng, n) for _ in range(2))
        p = _values_with_specials(rng, n)
        mask = rng.random(n) > 0.3
        singles = [np.float32(0.9), np.float64(0.01), np.int32(3)]
        arrays = [buf, g, p, np.array(singles[0]), np.array(singles[1]), mask, np.array(singles[2])]
        ref = region.evaluate(np, [a.copy() for a in arrays])
        seen.clear()
        with np.errstate(all="ignore"):
            outs = kernel(arrays, [buf, np.empty(n, np.float32)])
        assert outs[0] is buf
        np.testing.assert_array_equal(buf, ref[0], strict=True)
        np.testing.assert_array_equal(outs[1], ref[1], strict=True)
        split = n >= FUSED["split_min"]
        assert len(seen) == int(split)
        if split:
            assert seen[0] == parallel.split(n, threads)


def _values_with_specials(rng, n):
    x = rng.standard_normal(n).astype(np.float32)
    x[rng.integers(0, n, 40)] = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0] * 8, np.float32)
    return x


@pytest.mark.parametrize("shapes", [[(2, 3), (2, 3)], [(2, 3), ()], [(2, 3), (3,)], [(1, 3), (2, 1)], [(), ()],
                                    [(2, 3), (), (1, 3)], [(5,), (1,)], [(4, 1), ()]])
def test_common_shape_is_numpys_broadcast(shapes):
    from ember.graph.codegen.renderer import common_shape

    assert common_shape(shapes) == np.broadcast_shapes(*shapes)


def test_numba_broadcast_operands_are_passed_contiguous_and_read_outside_the_inner_loop():
    """Layer norm's weight-gradient region (a per-row and a per-column operand, a sum over the rows): each
    broadcast operand is passed without its broadcast dims, so Numba sees C-contiguous arrays (a strided
    view is a scalar loop), and the per-row values are read once per row; values are NumPy's."""
    pytest.importorskip("numba")
    from ember.graph.codegen import Arg, Instr, Region
    from ember.graph.codegen.region import Reduce

    f32 = np.dtype(np.float32)
    # t0 = (x - mean) * rstd ; t1 = g * t0 ; t2 = g * w ; sum(t1 over the rows)
    region = Region([(f32, 3), (f32, 3), (f32, 3), (f32, 3), (f32, 1)], [
        Instr("sub", (Arg("in", 0), Arg("in", 1)), (), f32, f32), Instr("mul", (Arg("t", 0), Arg("in", 2)), (), f32, f32),
        Instr("mul", (Arg("in", 3), Arg("t", 1)), (), f32, f32), Instr("mul", (Arg("in", 3), Arg("in", 4)), (), f32, f32)],
        [1, 3], Reduce("sum", 2, (0, 1), False, f32))
    rng = np.random.default_rng(3)
    arrays = [rng.standard_normal(s).astype(np.float32) for s in ((4, 8, 16), (4, 8, 1), (4, 8, 1), (4, 8, 16), (16,))]
    kernel = codegen.NumbaRenderer().build(region)
    got = kernel(arrays)
    for a, b in zip(got, region.evaluate(np, arrays)):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)
    source = codegen.numba_cpu.kernel_source(region, 2, (True, False), (), (), ((0, 1), (0,), (0,), (0, 1), (1,)))
    assert "x1 = in1[i0]\n" in source and "x4 = in4[i1]\n" in source and "acc[i1] +=" in source
    assert source.index("x1 = in1[i0]") < source.index("for i1 in range(n1)")  # read once per row
    variants = inspect.getclosurevars(inspect.getclosurevars(kernel).nonlocals["variant"]).nonlocals["variants"]
    (fn,) = variants.values()
    assert all(t.layout == "C" for sig in fn.signatures for t in sig if hasattr(t, "layout"))


@pytest.mark.parametrize("dtype, make", [
    (np.float16, _float_ops), (np.float32, _float_ops), (np.float64, _float_ops), (np.int32, _int_ops),
    (np.uint8, _int_ops), (np.int64, _int_ops), (np.bool_, _bool_ops),
])
def test_numpy_renderer_on_zero_dim_operands_equals_its_array_loop(dtype, make):
    """0-d regions (an optimizer's bias corrections) run on NumPy scalars: the same values and dtypes, bit for
    bit, as the ufunc calls into arrays that one-element operands take."""
    from ember.graph.codegen import FUSED

    g = Graph()
    x = sym(g, (), dtype, name="x")
    y = sym(g, (), dtype, name="y")
    # each op in its own region (times 1, so that it is a chain worth fusing): ops without a scalar form
    # leave the others theirs
    regions = []
    for out in make(x, y):
        outs = values(out * 1)
        regions += [n for n in optimize(g, outs, ["fusion"]).graph.nodes if n.op_name == "fused_elementwise"]
    scalar_forms = sum("[()]" in codegen.NumpyRenderer().render(n.attrs["region"])[0] for n in regions)
    assert len(regions) >= 10 and scalar_forms >= len(regions) * 2 // 3
    rng = np.random.default_rng(5)
    xs, ys = _inputs(dtype, (12,), rng), _inputs(dtype, (12,), rng)
    codegen.set_backend("numpy")
    try:
        for node in regions:
            region = node.attrs["region"]
            for k in range(12):
                # x, y, or an unfused op's result (fed x's value in its dtype)
                feeds = [xs[k] if v is x._data else ys[k] if v is y._data else np.asarray(xs[k]).astype(v.dtype)
                         for v in node.inputs]
                with np.errstate(all="ignore"):
                    scalar = FUSED.kernel(np, *[np.asarray(f) for f in feeds], region=region)
                    array = FUSED.kernel(np, *[np.full((1,), f) for f in feeds], region=region)
                scalar = scalar if isinstance(scalar, tuple) else (scalar,)
                array = array if isinstance(array, tuple) else (array,)
                for s, a in zip(scalar, array):
                    assert s.shape == () and s.dtype == a.dtype
                    np.testing.assert_array_equal(s, a[0])
    finally:
        codegen.set_backend(None)


def test_fusion_alone_leaves_a_dead_chain_unfused():
    """Without DCE first, a chain nothing reads is not a region (it used to fail: a region with no results)."""
    g = Graph()
    x = sym(g, (4,), np.float32, name="x")
    _dead = (x * 2).exp()
    live = (x + 1) * 3
    outs = values(live)
    opt = optimize(g, outs, ["fusion"])
    assert op_count(opt.graph, "fused_elementwise") == 1
    feeds = {x._data: np.arange(4, dtype=np.float32)}
    assert_same(run(g, outs, feeds), run_optimized(g, outs, feeds, ["fusion"])[0])
