"""Training-step time: Ember eager and Ember jit vs PyTorch eager, same models, data, batch and threads.

Run: python benchmarks/train_step.py [--threads N] [--models mlp,lenet5,...]
Each model is written once against the shared PyTorch-style API and built with both `torch.nn`
and `ember.nn`, so the architectures (and state-dict keys) are identical; Ember's initial weights
are copied into the PyTorch model. Ratios are Ember time / PyTorch time (lower is better).
"""

from __future__ import annotations

import argparse
import math
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))

import numpy as np  # noqa: E402
import torch  # noqa: E402
from _timing import best_time, fmt_ms  # noqa: E402

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
            pos = lib.arange(t)
            x = self.tok(idx) + self.pos(pos)
            return self.head(self.ln(self.blocks(x)))

    return LM()


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
}


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


def run_case(name: str, with_jit: bool) -> dict:
    build, make_data, kind, opt_name = CASES[name]
    rng = np.random.default_rng(0)
    x_np, y_np = make_data(rng)
    em.manual_seed(0)
    torch.manual_seed(0)
    em_model, t_model = build(em), build(torch)
    _copy_weights(em_model, t_model)
    ex, ey = em.tensor(x_np), em.tensor(y_np)
    tx, ty = torch.from_numpy(x_np), torch.from_numpy(y_np)
    e_step = _step_fn(em, em_model, _optimizer(em, em_model.parameters(), opt_name), kind)
    t_step = _step_fn(torch, t_model, _optimizer(torch, t_model.parameters(), opt_name), kind)
    result = {
        "torch": best_time(lambda: t_step(tx, ty), repeat=5, min_time=0.2),
        "ember": best_time(lambda: e_step(ex, ey), repeat=5, min_time=0.2),
    }
    if with_jit:
        em.manual_seed(0)
        jm = build(em)
        j_step = em.jit(_step_fn(em, jm, _optimizer(em, jm.parameters(), opt_name), kind))
        j_step(ex, ey)
        j_step(ex, ey)  # first call creates optimizer state, second traces the steady state
        result["jit"] = best_time(lambda: j_step(ex, ey), repeat=5, min_time=0.2)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    parser.add_argument("--models", default=",".join(CASES))
    parser.add_argument("--no-jit", action="store_true")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    print(f"torch {torch.__version__} threads {args.threads}  numpy {np.__version__}  ember {em.__version__}")
    header = f"{'model':15s} {'torch eager':>12s} {'ember eager':>12s} {'ember jit':>12s} {'eager ratio':>12s} {'jit ratio':>10s}"
    print(header)
    for name in args.models.split(","):
        r = run_case(name, not args.no_jit)
        jit = r.get("jit", math.nan)
        print(f"{name:15s} {fmt_ms(r['torch'])} {fmt_ms(r['ember'])} {fmt_ms(jit)}"
              f" {r['ember'] / r['torch']:11.2f}x {jit / r['torch']:9.2f}x", flush=True)


if __name__ == "__main__":
    main()
