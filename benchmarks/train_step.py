"""Training-step time: Ember eager and Ember jit vs PyTorch eager and torch.compile, same models, data, batch and threads.

Run: python benchmarks/train_step.py [--threads N] [--models mlp,lenet5,...,resnet18_infer_b1,...] [--no-compile] [--cpu-time] [--held-down]
Each model is written once against the shared PyTorch-style API and built with both `torch.nn`
and `ember.nn`, so the architectures (and state-dict keys) are identical; Ember's initial weights
are copied into the PyTorch model. Ratios are Ember time / PyTorch eager time (lower is better);
"vs compile" is Ember jit / torch.compile (inductor, CPU), the choice an ember.jit user would
otherwise make. Times are the best of 5 rounds in which the four take turns, so that a slow spell
of a shared machine does not fall on one of them alone. The `*_infer_*` rows time an eval-mode forward under no_grad (224x224 input).
Peak memory is the resident-set high-water mark over 3 steps above the RSS once models and data are
built, in MB, for PyTorch eager, Ember eager and Ember jit (jit's includes tracing and its planned
arena), each measured in a fresh process (Linux; the mark is reset through /proc/self/clear_refs).
"""

from __future__ import annotations

import argparse
import math
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))

import numpy as np  # noqa: E402
import torch  # noqa: E402
from _cnn_models import mobilenet_v2, resnet18  # noqa: E402
from _timing import CPU_CLOCK, fmt_ms, interleaved, machine_line  # noqa: E402

import ember as em  # noqa: E402


# --- models written once for both frameworks ----------------------------------------------------
def mlp(lib, sizes=(784, 512, 256, 10)):
    nn = lib.nn
    layers = [nn.Flatten()]
    for i in range(len(sizes) - 1):
        layers.append(nn.Linear(sizes[i], sizes[i + 1]))
        if i < len(sizes) - 2:
            layers.append(nn.ReLU())
    return nn.Sequential(*layers)


def lenet5(lib):
    nn = lib.nn
    return nn.Sequential(
        nn.Conv2d(1, 6, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(6, 16, 5), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(16 * 5 * 5, 120), nn.ReLU(), nn.Linear(120, 84), nn.ReLU(), nn.Linear(84, 10),
    )


def resnet20(lib, num_classes=10):
    nn, F = lib.nn, lib.nn.functional

    class Block(nn.Module):
        def __init__(self, cin, cout, stride):
            super().__init__()
            self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
            self.bn1 = nn.BatchNorm2d(cout)
            self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
            self.bn2 = nn.BatchNorm2d(cout)
            self.shortcut = nn.Sequential()
            if stride != 1 or cin != cout:
                self.shortcut = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

        def forward(self, x):
            out = F.relu(self.bn1(self.conv1(x)))
            out = self.bn2(self.conv2(out))
            return F.relu(out + self.shortcut(x))

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(3, 16, 3, 1, 1, bias=False)
            self.bn = nn.BatchNorm2d(16)
            layers, cin = [], 16
            for cout, stride in ((16, 1), (32, 2), (64, 2)):
                for i in range(3):
                    layers.append(Block(cin, cout, stride if i == 0 else 1))
                    cin = cout
            self.layers = nn.Sequential(*layers)
            self.fc = nn.Linear(64, num_classes)

        def forward(self, x):
            x = F.relu(self.bn(self.conv(x)))
            x = self.layers(x)
            x = F.adaptive_avg_pool2d(x, 1).flatten(1)
            return self.fc(x)

    return Net()


def transformer_lm(lib, vocab=65, block=64, n_layer=2, n_head=4, n_embd=128):
    nn, F = lib.nn, lib.nn.functional

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1 = nn.LayerNorm(n_embd)
            self.qkv = nn.Linear(n_embd, 3 * n_embd)
            self.proj = nn.Linear(n_embd, n_embd)
            self.ln2 = nn.LayerNorm(n_embd)
            self.fc1 = nn.Linear(n_embd, 4 * n_embd)
            self.fc2 = nn.Linear(4 * n_embd, n_embd)

        def forward(self, x):
            b, t, c = x.shape
            q, k, v = self.qkv(self.ln1(x)).split(n_embd, dim=2)
            q = q.reshape(b, t, n_head, c // n_head).transpose(1, 2)
            k = k.reshape(b, t, n_head, c // n_head).transpose(1, 2)
            v = v.reshape(b, t, n_head, c // n_head).transpose(1, 2)
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.proj(y.transpose(1, 2).reshape(b, t, c))
            return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))

    class LM(nn.Module):
        def __init__(self):
            super().__init__()
            self.tok = nn.Embedding(vocab, n_embd)
            self.pos = nn.Embedding(block, n_embd)
            self.blocks = nn.Sequential(*[Block() for _ in range(n_layer)])
            self.ln = nn.LayerNorm(n_embd)
            self.head = nn.Linear(n_embd, vocab)

        def forward(self, idx):
            t = idx.shape[1]
            pos = lib.arange(t, device=idx.device)
            x = self.tok(idx) + self.pos(pos)
            return self.head(self.ln(self.blocks(x)))

    return LM()


def recurrent_classifier(lib, kind="LSTM", vocab=1000, embed=64, hidden=128, classes=2):
    nn = lib.nn

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.embedding = nn.Embedding(vocab, embed)
            self.rnn = getattr(nn, kind)(embed, hidden, batch_first=True)
            self.fc = nn.Linear(hidden, classes)

        def forward(self, tokens):
            _, state = self.rnn(self.embedding(tokens))
            h = state[0] if kind == "LSTM" else state  # an LSTM's state is (h, c)
            return self.fc(h[-1])

    return Net()


# --- the benchmark ---------------------------------------------------------------------------------
CASES = {
    # name: (builder, input maker (rng -> numpy x, numpy y), loss kind, optimizer)
    "mlp": (mlp, lambda r: (r.standard_normal((128, 1, 28, 28)).astype(np.float32), r.integers(0, 10, 128)), "ce", "sgd"),
    "tiny_mlp": (lambda lib: mlp(lib, (32, 64, 64, 4)),
                 lambda r: (r.standard_normal((16, 32)).astype(np.float32), r.integers(0, 4, 16)), "ce", "sgd"),
    "lenet5": (lenet5, lambda r: (r.standard_normal((64, 1, 28, 28)).astype(np.float32), r.integers(0, 10, 64)), "ce", "sgd"),
    "resnet20": (resnet20, lambda r: (r.standard_normal((32, 3, 32, 32)).astype(np.float32), r.integers(0, 10, 32)),
                 "ce", "sgd"),
    "transformer_lm": (transformer_lm, lambda r: (r.integers(0, 65, (16, 64)), r.integers(0, 65, (16, 64))), "lm", "adam"),
    "lstm": (recurrent_classifier, lambda r: (r.integers(0, 1000, (32, 50)), r.integers(0, 2, 32)), "ce", "adam"),
    "gru": (lambda lib: recurrent_classifier(lib, "GRU"), lambda r: (r.integers(0, 1000, (32, 50)), r.integers(0, 2, 32)), "ce", "adam"),
}


# Inference (eval mode, no_grad forward): name -> (builder, input shape).
INFER_CASES = {
    f"{name}_infer_b{b}": (build, (b, 3, 224, 224))
    for name, build in (("resnet18", resnet18), ("mobilenet_v2", mobilenet_v2)) for b in (1, 32)
}


def _status_kb(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise OSError(f"/proc/self/status has no {field}")


def _peak_here(name: str, which: str) -> float:
    """MB the RSS high-water mark rises above the ready state (models and data built, Ember's compiled im2col
    and LSTM time loop loaded) over 3 steps of one framework; for jit that includes its tracing calls and the
    planned arena it keeps."""
    build = _builders(name)[which]
    if which in ("ember", "jit"):  # kernels compiled once per process are not step memory: im2col, an image
        from ember.kernels import background  # layer's weight gradient, and the LSTM loop, which Numba cannot

        for _ in range(2):  # cache on disk (LLVM's ~20 MB would count as the first step's; only for the recurrent
            x = em.ones(1, 1, 32, 32, requires_grad=True)  # rows: in a process that compiled it, mobilenet_v2's
            em.nn.functional.conv2d(x, em.ones(1, 1, 5, 5, requires_grad=True)).sum().backward()  # first steps,
            if name in ("lstm", "gru"):  # loading their kernels, rose 9 MB more), and batch norm's, with and
                em.nn.LSTM(4, 128)(em.ones(1, 32, 4))  # without the jit's folded residual and relu; twice, the
            norm = em.nn.BatchNorm2d(1)  # second after the background compiles are done; small maps and larger
            for side in (4, 16):  # ones (batch norm's kernels by sample and by channel)
                em.jit(lambda t: (norm(t) + t).relu().sum().backward())(em.ones(2, 1, side, side, requires_grad=True))
                norm(em.ones(2, 1, side, side, requires_grad=True)).relu().sum().backward()
            background.wait()
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # reset VmHWM to the current RSS
    before = _status_kb("VmRSS")
    fn = build()
    for _ in range(3):
        fn()
    return (_status_kb("VmHWM") - before) / 1024


def peak_mb(name: str, which: str, threads: int) -> float:
    """Peak step memory of one framework, measured in a fresh process (an allocator keeps freed memory
    resident, so within one process the frameworks measured later would look free); NaN off Linux."""
    if not os.path.exists("/proc/self/clear_refs"):
        return math.nan
    cmd = [sys.executable, __file__, "--peak", f"{name}:{which}", "--threads", str(threads)]
    out = subprocess.run(cmd, capture_output=True, text=True, check=False)
    try:
        return float(out.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return math.nan


def _compile_or_none(t_model):
    """torch.compile(copy of t_model) (inductor), or None with the reason printed."""
    try:
        import copy

        return torch.compile(copy.deepcopy(t_model))
    except Exception as e:  # noqa: BLE001 - a reference column: report and go on
        print(f"  torch.compile unavailable: {type(e).__name__}: {str(e).splitlines()[0][:120]}", flush=True)
        return None


def _infer_builders(name: str) -> dict:
    build, shape = INFER_CASES[name]
    x_np = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    em.manual_seed(0)
    em_model, t_model = build(em), build(torch)
    _copy_weights(em_model, t_model)
    em_model.eval()
    t_model.eval()
    ex, tx = em.tensor(x_np), torch.from_numpy(x_np)

    def t_fwd(m):
        def f():
            with torch.no_grad():
                return m(tx)
        return f

    def e_fwd(fn):
        def f():
            with em.no_grad():
                return fn(ex)
        return f

    def compiled():
        cm = _compile_or_none(t_model)
        return None if cm is None else t_fwd(cm)

    def jitted():
        j = e_fwd(em.jit(lambda x: em_model(x)))
        j()  # traces
        return j

    return {"torch": lambda: t_fwd(t_model), "compile": compiled, "ember": lambda: e_fwd(em_model), "jit": jitted}


def _builders(name: str) -> dict:
    """Zero-argument builders of each framework's step for one benchmark row."""
    if name in INFER_CASES:
        return _infer_builders(name)
    build, make_data, kind, opt_name = CASES[name]
    x_np, y_np = make_data(np.random.default_rng(0))
    em.manual_seed(0)
    torch.manual_seed(0)
    em_model, t_model = build(em), build(torch)
    _copy_weights(em_model, t_model)
    ex, ey = em.tensor(x_np), em.tensor(y_np)
    tx, ty = torch.from_numpy(x_np), torch.from_numpy(y_np)

    def on(lib, model, x, y):
        step = _step_fn(lib, model, _optimizer(lib, model.parameters(), opt_name), kind)
        return lambda: step(x, y)

    def compiled():
        cm = _compile_or_none(t_model)
        return None if cm is None else on(torch, cm, tx, ty)

    def jitted():
        em.manual_seed(0)
        jm = build(em)
        j_step = em.jit(_step_fn(em, jm, _optimizer(em, jm.parameters(), opt_name), kind))
        j_step(ex, ey)
        j_step(ex, ey)  # first call creates optimizer state, second traces the steady state
        return lambda: j_step(ex, ey)

    return {"torch": lambda: on(torch, t_model, tx, ty), "compile": compiled,
            "ember": lambda: on(em, em_model, ex, ey), "jit": jitted}


def _copy_weights(em_model, torch_model) -> None:
    state = {k: torch.from_numpy(np.array(v.detach().numpy())) for k, v in em_model.state_dict().items()}
    torch_model.load_state_dict(state)


def _step_fn(lib, model, opt, kind):
    F = lib.nn.functional

    def step(x, y):
        opt.zero_grad()
        out = model(x)
        if kind == "lm":
            loss = F.cross_entropy(out.reshape(-1, out.shape[-1]), y.reshape(-1))
        else:
            loss = F.cross_entropy(out, y)
        loss.backward()
        opt.step()
        return loss

    return step


def _optimizer(lib, params, name):
    if name == "adam":
        return lib.optim.Adam(params, lr=1e-3)
    return lib.optim.SGD(params, lr=0.01, momentum=0.9)


def run_case(name: str, with_jit: bool, no_compile: bool = False, rounds: int = 5, clock=time.perf_counter) -> dict:
    """Seconds per step for each framework in this process: the best of `rounds` rounds in which the frameworks
    take turns (batches of at least 0.15 s each), so that the machine's slow spells do not fall on one of them."""
    builders = _builders(name)
    fns = {}
    for which in ("torch", "compile", "ember", "jit"):
        if (which == "jit" and not with_jit) or (which == "compile" and no_compile):
            continue
        try:
            fn = builders[which]()
            if fn is not None:
                fn()  # torch.compile compiles here, jit traces: a failure is reported before timing starts
                fns[which] = fn
        except Exception as e:  # noqa: BLE001 - torch.compile compiles on the first call
            if which != "compile":
                raise
            print(f"  torch.compile failed: {type(e).__name__}: {str(e).splitlines()[0][:120]}", flush=True)
    return interleaved(fns, rounds, clock=clock)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    parser.add_argument("--models", default=",".join(list(CASES) + list(INFER_CASES)))
    parser.add_argument("--no-jit", action="store_true")
    parser.add_argument("--no-compile", action="store_true", help="skip the torch.compile column")
    parser.add_argument("--no-memory", action="store_true", help="skip the peak-memory subprocesses")
    parser.add_argument("--cpu-time", action="store_true",
                        help="one thread for both, timed by the process's CPU time: fair on a busy machine")
    parser.add_argument("--peak", help=argparse.SUPPRESS)  # internal: "name:framework", prints MB
    args = parser.parse_args()
    unknown = [m for m in args.models.split(",") if m not in CASES and m not in INFER_CASES]
    if unknown:
        parser.error(f"--models: unknown {', '.join(unknown)}; choose from {', '.join(list(CASES) + list(INFER_CASES))}")
    if args.cpu_time:
        args.threads = 1
    clock = CPU_CLOCK if args.cpu_time else time.perf_counter
    torch.set_num_threads(args.threads)
    em.set_num_threads(args.threads)  # Ember's pool and NumPy's BLAS, as torch's intra-op threads
    if args.peak:
        print(_peak_here(*args.peak.split(":")))
        return
    print(f"torch {torch.__version__} threads {args.threads}  numpy {np.__version__}  ember {em.__version__}  "
          f"{'CPU time of the process' if args.cpu_time else 'wall time'}")
    print(machine_line())
    header = (f"{'model':22s} {'torch eager':>12s} {'torch compile':>13s} {'ember eager':>12s} {'ember jit':>12s}"
              f" {'eager ratio':>12s} {'jit ratio':>10s} {'vs compile':>10s}  peak MB torch/ember/jit")
    print(header)
    for name in args.models.split(","):
        r = run_case(name, not args.no_jit, args.no_compile, clock=clock)
        jit, comp = r.get("jit", math.nan), r.get("compile", math.nan)
        mb = {w: math.nan if args.no_memory or (w == "jit" and args.no_jit) else peak_mb(name, w, args.threads)
              for w in ("torch", "ember", "jit")}
        print(f"{name:22s} {fmt_ms(r['torch'])} {fmt_ms(comp):>13s} {fmt_ms(r['ember'])} {fmt_ms(jit)}"
              f" {r['ember'] / r['torch']:11.2f}x {jit / r['torch']:9.2f}x {jit / comp:9.2f}x"
              f"  {mb['torch']:.0f}/{mb['ember']:.0f}/{mb['jit']:.0f}", flush=True)


if __name__ == "__main__":
    main()
