"""The CPU kernel libraries PyTorch and TensorFlow stand on, against NumPy's OpenBLAS and Ember's own kernels, on the
products and convolutions the benchmark models (benchmarks/train_step.py) run.

Run: python benchmarks/cpu_libraries.py [--threads N | --cpu-time] [--rounds N] [--only TEXT] [--sections gemm,linear,conv]
     [--mkl-threading gnu|intel|tbb|sequential] [--lib-dir DIR]
Libraries are called through their C APIs with ctypes (benchmarks/_libraries.py): oneMKL's cblas_sgemm (wheel `mkl`),
BLIS's bli_sgemm (wheel `blis`), oneDNN's matmul and convolution primitives (wheel `onednn-cpu-gomp`); the ones not
installed are left out. Every column of a row runs on the same arrays, taking turns in one process (_timing's
`interleaved`), and the row prints each time and its ratio to the baseline: NumPy's OpenBLAS for products, Ember's
selected algorithm (ember.kernels.conv) for convolutions. `ember` calls ember.kernels.gemm.matmul and
ember.kernels.conv.conv2d / conv_transpose2d / conv2d_weight_grad directly, as the ops do.

oneDNN's convolutions run three ways: `onednn nchw` on Ember's NCHW arrays as they lie (oneDNN then runs its
im2col + GEMM, "gemm:jit"), `onednn blocked` in the layouts it prefers with the reorders from and back to NCHW
counted (what an NCHW framework pays per call), and `onednn kernel` the blocked primitive alone (the bound for a
framework that kept oneDNN's layouts from layer to layer). PyTorch's columns run oneDNN and MKL themselves.

--cpu-time times the process's CPU time on one thread (fair on a busy machine: waiting for a core is not counted);
otherwise wall time on --threads threads, every library set to that many. Benchmark as users run: unset
OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE for this command; the header names the CPU, the BLAS kernels, each
library's version and kernels, its installed size and the thread runtimes it brings.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))

import _libraries  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402  (loaded before the libraries are: the gomp build of oneDNN then shares its libgomp)
from _timing import CPU_CLOCK, interleaved  # noqa: E402
from kernel_choices import LAYERS  # noqa: E402

from ember.kernels import conv, gemm, machine, parallel, selection  # noqa: E402

# (model, product, M, K, N, how the operands lie: "" both row-major, "bT" B a transposed weight (x @ W.T), "aT" A
# transposed (a weight gradient, g.T @ x)); taken from the models' steps, by recording ember.kernels.gemm.matmul
GEMMS = [
    ("MLP b128", "layer 1 forward", 128, 784, 512, "bT"),
    ("MLP b128", "layer 2 forward", 128, 512, 256, "bT"),
    ("MLP b128", "layer 2 input grad", 128, 256, 512, ""),
    ("MLP b128", "layer 1 weight grad", 512, 128, 784, "aT"),
    ("tiny MLP b16", "layer 2 forward", 16, 64, 64, "bT"),
    ("LeNet-5 b64", "fc1 forward", 64, 400, 120, "bT"),
    ("transformer LM", "qkv forward", 1024, 128, 384, "bT"),
    ("transformer LM", "fc1 forward", 1024, 128, 512, "bT"),
    ("transformer LM", "fc2 forward", 1024, 512, 128, "bT"),
    ("transformer LM", "fc1 weight grad", 512, 1024, 128, "aT"),
    ("transformer LM", "qkv input grad", 1024, 384, 128, ""),
    ("LSTM", "input projection", 1600, 64, 512, "bT"),
    ("LSTM", "time step", 32, 128, 512, ""),
    ("LSTM", "backward time step", 32, 512, 128, ""),
    ("LSTM", "recurrent weight grad", 512, 1600, 128, "aT"),
    ("GRU", "time step", 32, 128, 384, ""),
    ("GRU", "recurrent weight grad", 384, 1600, 128, "aT"),
    ("ResNet-18 b1", "stem im2col", 64, 147, 12544, ""),
    ("ResNet-18 b1", "layer1 im2col", 64, 576, 3136, ""),
    ("ResNet-18 b1", "layer2 im2col", 128, 1152, 784, ""),
    ("ResNet-18 b1", "layer3 im2col", 256, 2304, 196, ""),
    ("ResNet-18 b1", "layer4 im2col", 512, 4608, 49, ""),
    ("ResNet-18 b1", "fc", 1, 512, 1000, "bT"),
    ("ResNet-20 b32", "stage 3 im2col (16 samples)", 64, 576, 1024, ""),
    ("MobileNetV2 b1", "1x1 expand 16->96", 96, 16, 12544, ""),
    ("MobileNetV2 b1", "1x1 expand 24->144", 144, 24, 3136, ""),
    ("MobileNetV2 b1", "1x1 project 384->64", 64, 384, 196, ""),
    ("MobileNetV2 b1", "1x1 960->320", 320, 960, 49, ""),
]

# Linear layers with bias and ReLU (the MLPs' hidden layers, LeNet-5's fc1, the transformer's fc1 without GELU):
# Ember and NumPy add the bias and apply ReLU as passes of their own; oneDNN as post-ops of its GEMM.
LINEARS = [
    ("MLP b128", "fc1 + bias + ReLU", 128, 784, 512),
    ("MLP b128", "fc2 + bias + ReLU", 128, 512, 256),
    ("tiny MLP b16", "fc2 + bias + ReLU", 16, 64, 64),
    ("LeNet-5 b64", "fc1 + bias + ReLU", 64, 400, 120),
    ("transformer LM", "fc1 + bias + ReLU", 1024, 128, 512),
]


def _report(title: str, baseline: str, times: dict, names: dict | None = None) -> dict:
    """Print one row (each column's time and ratio to `baseline`, fastest first); returns the ratios."""
    base = times[baseline]
    names = names or {}
    cells = [f"{names.get(k, k)} {t * 1e6:.1f} us ({t / base:.2f})" for k, t in sorted(times.items(), key=lambda kv: kv[1])]
    print(f"{title} | " + " | ".join(cells), flush=True)
    return {k: t / base for k, t in times.items()}


def _summary(label: str, baseline: str, rows: list[dict]) -> None:
    """Per column: geometric mean of its ratio to the baseline, and on how many rows it is >= 10% faster or slower."""
    if not rows:
        return
    print(f"\n{label}: geometric mean of time / {baseline} over {len(rows)} rows (rows >= 10% faster / >= 10% slower)")
    for col in sorted({c for r in rows for c in r} - {baseline}):
        ratios = [r[col] for r in rows if col in r]
        geo = math.exp(sum(math.log(x) for x in ratios) / len(ratios))
        faster = sum(x <= 1 / 1.1 for x in ratios)
        slower = sum(x >= 1.1 for x in ratios)
        print(f"  {col:18s} {geo:5.2f}   ({faster} faster, {slower} slower, of {len(ratios)})")


def _operands(m, k, n, layout, rng):
    a = rng.standard_normal((k, m) if layout == "aT" else (m, k), np.float32)
    b = rng.standard_normal((n, k) if layout == "bT" else (k, n), np.float32)
    return (a.T if layout == "aT" else a), (b.T if layout == "bT" else b)


def gemm_section(libs: dict, args, clock) -> None:
    """Every GEMM of GEMMS on every library; ratios to NumPy's OpenBLAS."""
    print(f"\nfloat32 GEMM C = A @ B, time per call (ratio to OpenBLAS); Ember's selection: {_gemm_choice()}")
    rng = np.random.default_rng(0)
    rows = []
    for model, what, m, k, n, layout in GEMMS:
        if args.only and args.only not in model and args.only not in what:
            continue
        a, b = _operands(m, k, n, layout, rng)
        outs = {name: np.empty((m, n), np.float32) for name in ("openblas", "ember", "mkl", "blis", "onednn", "torch")}
        fns = {"openblas": lambda: np.matmul(a, b, out=outs["openblas"]),
               "ember": lambda: gemm.matmul(a, b, out=outs["ember"])}
        if "mkl" in libs:
            fns["mkl"] = libs["mkl"].matmul(a, b, outs["mkl"])
        if "blis" in libs:
            fns["blis"] = libs["blis"].matmul(a, b, outs["blis"])
        if "onednn" in libs:
            fns["onednn"], _ = libs["onednn"].matmul(a, b, outs["onednn"])
        ta, tb, tout = torch.from_numpy(a), torch.from_numpy(b), torch.from_numpy(outs["torch"])
        fns["torch"] = lambda: torch.matmul(ta, tb, out=tout)
        _check_equal(f"{model} {what}", fns, outs, a @ b)
        times = interleaved(fns, rounds=args.rounds, clock=clock, min_time=args.min_time)
        rows.append(_report(f"{model:14s} {what:28s} {m}x{k}x{n} {layout or '  '}", "openblas", times))
    _summary("GEMM", "openblas", rows)


def _gemm_choice() -> str:
    return "Ember's sgemm kernel" if gemm.enabled() else "NumPy's matmul (OpenBLAS), Ember's kernel is off here"


def _check_equal(what: str, fns: dict, outs: dict, expected, atol: float = 1e-3) -> None:
    """Run each column once and check it computed `expected` (a wrong binding must not pass as a fast one)."""
    scale = max(1.0, float(np.abs(expected).max()))
    for name, fn in fns.items():
        result = fn()
        got = outs.get(name, result)
        if not np.allclose(got, expected, rtol=1e-3, atol=atol * scale):
            raise AssertionError(f"{what}: {name} differs from NumPy by {np.abs(got - expected).max():.3g}")


def linear_section(libs: dict, args, clock) -> None:
    """Linear layers with bias and ReLU: NumPy's three passes, Ember's, oneDNN's post-ops, PyTorch's addmm + relu."""
    print("\nLinear layer relu(x @ W.T + b), time per call (ratio to OpenBLAS + NumPy passes)")
    rng = np.random.default_rng(1)
    rows = []
    for model, what, m, k, n in LINEARS:
        if args.only and args.only not in model and args.only not in what:
            continue
        x = rng.standard_normal((m, k), np.float32)
        w = rng.standard_normal((n, k), np.float32)
        bias = rng.standard_normal(n, np.float32)
        outs = {name: np.empty((m, n), np.float32) for name in ("openblas", "ember", "mkl", "onednn", "torch")}

        def numpy_linear(out, product):
            product(out)
            np.add(out, bias, out=out)
            return np.maximum(out, 0, out=out)

        fns = {"openblas": lambda: numpy_linear(outs["openblas"], lambda o: np.matmul(x, w.T, out=o)),
               "ember": lambda: numpy_linear(outs["ember"], lambda o: gemm.matmul(x, w.T, out=o))}
        if "mkl" in libs:
            mkl_call = libs["mkl"].matmul(x, w.T, outs["mkl"])
            fns["mkl"] = lambda: numpy_linear(outs["mkl"], lambda o: mkl_call())
        if "onednn" in libs:
            fns["onednn"], _ = libs["onednn"].matmul(x, w.T, outs["onednn"], bias=bias, relu=True)
        tx, tw, tb, tout = (torch.from_numpy(v) for v in (x, w, bias, outs["torch"]))
        fns["torch"] = lambda: torch.addmm(tb, tx, tw.T, out=tout).relu_()
        _check_equal(f"{model} {what}", fns, outs, np.maximum(x @ w.T + bias, 0))
        times = interleaved(fns, rounds=args.rounds, clock=clock, min_time=args.min_time)
        rows.append(_report(f"{model:14s} {what:20s} {m}x{k}x{n}", "openblas", times))
    _summary("Linear + bias + ReLU", "openblas", rows)


# Sizes around gemm.MKL_GEMM's thresholds: (what the row varies, M, K, N)
SWEEP = ([("size", n, n, n) for n in (16, 24, 32, 48, 64, 80, 100)]
         + [("size", 32, 64, 128), ("size", 32, 128, 128), ("size", 64, 128, 128)]
         + [("rows", m, 512, 1000) for m in (1, 2, 4, 8, 16)]
         + [("depth", 96, k, 3136) for k in (8, 16, 24, 32, 48, 64)])


def sweep_section(libs: dict, args, clock) -> None:
    """Ember's matmul with MKL taking every size (EMBER_GEMM=mkl) against NumPy's, around MKL_GEMM's thresholds;
    `*` marks the rows the default selection gives MKL."""
    from ember import config

    print(f"\nThresholds of MKL's products: Ember's matmul on MKL (every size) vs NumPy's; * = taken by default "
          f"({', '.join(f'{name} {value:g}' for name, value, _ in gemm.MKL_GEMM.items())})")
    rng = np.random.default_rng(3)
    try:
        for what, m, k, n in SWEEP:
            if args.only and args.only not in what:
                continue
            a, b = rng.standard_normal((m, k), np.float32), rng.standard_normal((k, n), np.float32)
            out_np, out_mkl = np.empty((m, n), np.float32), np.empty((m, n), np.float32)
            config.GEMM.reset()
            gemm._state.clear()
            default = gemm.takes_mkl(a, b, out_mkl)
            config.GEMM.set("mkl")
            gemm._state.clear()
            if gemm.mkl_mode() != "all":
                print("  MKL does not run here: nothing to sweep")
                return
            fns = {"numpy": lambda: np.matmul(a, b, out=out_np), "mkl": lambda: gemm.matmul(a, b, out=out_mkl)}
            times = interleaved(fns, rounds=args.rounds, clock=clock, min_time=args.min_time)
            _report(f"{what:6s} {m}x{k}x{n} {2 * m * k * n:>10.3g} flops{' *' if default else '  '}", "numpy", times)
    finally:
        config.GEMM.reset()
        gemm._state.clear()


def _conv_problem(x_shape, out_channels, k, stride, padding, groups, rng):
    x = rng.standard_normal(x_shape).astype(np.float32)
    w = (rng.standard_normal((out_channels, x_shape[1] // groups, k, k)) * 0.1).astype(np.float32)
    oh = (x_shape[2] + 2 * padding - k) // stride + 1
    ow = (x_shape[3] + 2 * padding - k) // stride + 1
    g = rng.standard_normal((x_shape[0], out_channels, oh, ow)).astype(np.float32)
    return x, w, g


def conv_section(libs: dict, args, clock) -> None:
    """Every layer of kernel_choices.LAYERS in its three directions: Ember's selection, oneDNN three ways, PyTorch."""
    print("\nConvolutions, time per call (ratio to Ember's selected algorithm, named in brackets); oneDNN's "
          "implementation per direction: nchw / blocked")
    rng = np.random.default_rng(2)
    rows = []
    dnnl = libs.get("onednn")
    for net, layer, x_shape, out_channels, k, stride, padding, groups in LAYERS:
        if args.only and args.only not in net and args.only not in layer:
            continue
        x, w, g = _conv_problem(x_shape, out_channels, k, stride, padding, groups, rng)
        st, pad, dil = (stride, stride), (padding,) * 4, (1, 1)
        tx, tw, tg = torch.from_numpy(x), torch.from_numpy(w), torch.from_numpy(g)
        backward = torch.ops.aten.convolution_backward

        def torch_grad(mask, tg=tg, tx=tx, tw=tw, stride=stride, padding=padding, groups=groups):
            return lambda: backward(tg, tx, tw, None, [stride] * 2, [padding] * 2, [1, 1], False, [0, 0], groups, mask)

        directions = [
            ("forward", conv.CONV2D_ALGORITHMS, (np, x, w, st, pad, dil, groups), conv.conv2d, g.shape,
             lambda: torch.nn.functional.conv2d(tx, tw, stride=stride, padding=padding, groups=groups),
             lambda out, blocked: dnnl.conv2d(x, w, out, st, pad, dil, groups, blocked)),
            ("input grad", conv.CONV_TRANSPOSE2D_ALGORITHMS, (np, g, w, st, pad, dil, groups, tuple(x_shape[2:])),
             conv.conv_transpose2d, x.shape, torch_grad([True, False, False]),
             lambda out, blocked: dnnl.conv2d_input_grad(g, w, out, st, pad, dil, groups, blocked)),
            ("weight grad", conv.CONV2D_WEIGHT_GRAD_ALGORITHMS, (np, x, g, st, pad, dil, groups, (k, k)),
             conv.conv2d_weight_grad, w.shape, torch_grad([False, True, False]),
             lambda out, blocked: dnnl.conv2d_weight_grad(x, g, out, st, pad, dil, groups, blocked)),
        ]
        for direction, listed, problem, ember_fn, out_shape, torch_fn, dnnl_fn in directions:
            chosen = selection.choose(direction, listed, *problem).name
            outs = {}
            fns = {"ember": lambda ember_fn=ember_fn, problem=problem: ember_fn(*problem), "torch": torch_fn}
            impls = ""
            if dnnl is not None:
                outs = {"onednn nchw": np.empty(out_shape, np.float32), "onednn blocked": np.empty(out_shape, np.float32)}
                fns["onednn nchw"], plain_impl = dnnl_fn(outs["onednn nchw"], False)
                (fns["onednn blocked"], fns["onednn kernel"]), blocked_impl = dnnl_fn(outs["onednn blocked"], True)
                impls = f" [{plain_impl} / {blocked_impl}]"
            expected = np.asarray(fns["ember"]())
            checked = {name: fn for name, fn in fns.items() if name not in ("onednn kernel", "torch")}
            _check_equal(f"{net} {layer} {direction}", checked, outs, expected, atol=1e-4)
            times = interleaved(fns, rounds=args.rounds, clock=clock, min_time=args.min_time)
            title = (f"{net:15s} {layer:11s} {str(x_shape):18s} {out_channels:4d} {k}/{stride} g{groups:<3d} "
                     f"{direction:11s}{impls}")
            rows.append(_report(title, "ember", times, {"ember": f"ember [{chosen}]"}))
    _summary("Convolutions", "ember", rows)


def _load(args) -> dict:
    """Each library that loads here (name -> binding), its line for the header printed; the reason for the rest."""
    libs = {}
    loaders = {"mkl": ("mkl", lambda: _libraries.MKL(args.mkl_threading)),
               "blis": ("blis", _libraries.BLIS),
               "onednn": ("onednn-cpu-gomp", _libraries.OneDNN)}
    for name, (dist, make) in loaders.items():
        try:
            lib = make()
        except (OSError, ImportError, RuntimeError, AttributeError) as e:
            print(f"  {name}: not used ({type(e).__name__}: {e})")
            continue
        size, dists = _libraries.install_mb(dist)
        runtimes = [n for n in _libraries.needed(lib.path) if any(r in n for r in ("gomp", "iomp", "tbb", "sycl"))]
        print(f"  {name}: {lib.version()}; {lib.path}; installed {size:.0f} MB ({', '.join(dists)}); "
              f"thread runtime linked: {', '.join(runtimes) or 'none named (loaded at run time or built in)'}")
        libs[name] = lib
    return libs


def _set_threads(libs: dict, n: int) -> None:
    parallel.set_num_threads(n)  # Ember's pool and NumPy's OpenBLAS
    torch.set_num_threads(n)  # PyTorch's OpenMP (libgomp), which the gomp build of oneDNN shares
    if "onednn" in libs:
        _libraries.openmp_set_threads(n)
    for name in ("mkl", "blis"):
        if name in libs:
            libs[name].set_threads(n)


def _thread_runtimes_loaded() -> str:
    """The OpenMP, TBB and BLAS libraries mapped into this process now (by file)."""
    found = set()
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                path = line.split()[-1]
                if any(key in os.path.basename(path) for key in ("gomp", "iomp", "libtbb", "openblas", "mkl_", "dnnl")):
                    found.add(path)
    except OSError:
        return "unknown (no /proc/self/maps)"
    return ", ".join(sorted(found))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=parallel.cores())
    parser.add_argument("--cpu-time", action="store_true", help="time the process's CPU time (forces one thread)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--min-time", type=float, default=0.05, help="seconds each timed batch lasts at least")
    parser.add_argument("--only", default="", help="only rows whose model or product/layer contains this")
    parser.add_argument("--sections", default="gemm,linear,conv", help="of gemm, linear, conv, sweep (MKL's "
                        "thresholds through Ember's matmul)")
    parser.add_argument("--mkl-threading", default="gnu", choices=sorted(_libraries.MKL_THREADING),
                        help="MKL's threading layer (gnu: PyTorch's and oneDNN's libgomp, one OpenMP runtime)")
    parser.add_argument("--lib-dir", default=None, help="a directory holding wheels' shared libraries (pip --target)")
    args = parser.parse_args()
    if args.lib_dir:
        _libraries.LIB_DIRS.insert(0, args.lib_dir)
    threads = 1 if args.cpu_time else args.threads
    clock = CPU_CLOCK if args.cpu_time else time.perf_counter
    print(machine.describe())
    print(f"torch {torch.__version__} ({torch.backends.mkldnn.is_available() and 'oneDNN' or ''} for convolutions, "
          f"MKL for GEMM); {threads} thread(s); {'CPU time' if args.cpu_time else 'wall time'}, best of {args.rounds} "
          f"rounds; OPENBLAS_CORETYPE={os.environ.get('OPENBLAS_CORETYPE', 'unset')}, "
          f"OPENBLAS_L2_SIZE={os.environ.get('OPENBLAS_L2_SIZE', 'unset')}")
    print("Libraries:")
    libs = _load(args)
    _set_threads(libs, threads)
    sections = set(args.sections.split(","))
    if "gemm" in sections:
        gemm_section(libs, args, clock)
    if "linear" in sections:
        linear_section(libs, args, clock)
    if "conv" in sections:
        conv_section(libs, args, clock)
    if "sweep" in sections:
        sweep_section(libs, args, clock)
    print(f"\nThread runtimes and BLAS libraries mapped at the end: {_thread_runtimes_loaded()}")


if __name__ == "__main__":
    main()
