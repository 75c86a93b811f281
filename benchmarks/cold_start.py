"""Cold start: how long a user waits for the first result, in a fresh process, on an empty kernel cache and on a
warm one.

Run: python benchmarks/cold_start.py [--cases resnet18_infer_b1,lenet5,...] [--runs 3] [--train]
Each case runs in a fresh subprocess with OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE unset: first with EMBER_CACHE a new
empty folder ("empty"), then again on the folder that run filled ("warm"). The cases are the models of
benchmarks/train_step.py (one eager training step: forward, backward, optimizer step) and its inference rows
(an eval-mode forward under no_grad). Columns: `to result` is the wall time from starting the process to the first
call's result (import, building the model and data, the call); `import`, `build` and `first` split it; `second` is
the next call, for scale; `CPU` is the process's CPU time to the result (a background compile's included). With
--train, the first `ember train` (default settings: LeNet-5 on the MNIST sample, 20 epochs) is timed the same way,
whole. Each figure is the best of --runs runs (the range beside it); the machine's load average is printed, since
these are wall times.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
INFER = ("resnet18_infer_b1", "resnet18_infer_b32", "mobilenet_v2_infer_b1", "mobilenet_v2_infer_b32")
TRAIN = ("mlp", "tiny_mlp", "lenet5", "resnet20", "transformer_lm", "lstm", "gru")

_CHILD = r'''
import sys, time, types
wall0, cpu0 = time.time(), time.process_time()
sys.path.insert(0, {here!r})
sys.modules["torch"] = types.ModuleType("torch")  # train_step's PyTorch side is not run here: no need to import it
import ember
import numpy as np
wall1, cpu1 = time.time(), time.process_time()
import train_step
if hasattr(ember, "use_deterministic_algorithms"):  # train_step's _timing asked for the steady state: first calls
    from ember import config  # are timed here as users meet them, with the setting this run was given
    config.COMPILE_IN_BACKGROUND.reset()
name = {name!r}
ember.manual_seed(0)
if name in train_step.INFER_CASES:
    build, shape = train_step.INFER_CASES[name]
    model = build(ember).eval()
    x = ember.tensor(np.random.default_rng(0).standard_normal(shape).astype(np.float32))

    def call():
        with ember.no_grad():
            return model(x).numpy()
else:
    build, make_inputs, kind, optimizer = train_step.CASES[name]
    model = build(ember)
    x_np, y_np = make_inputs(np.random.default_rng(0))
    x, y = ember.tensor(x_np), ember.tensor(y_np)
    step = train_step._step_fn(ember, model, train_step._optimizer(ember, model.parameters(), optimizer), kind)

    def call():
        return step(x, y).item()
wall2, cpu2 = time.time(), time.process_time()
call()
wall3, cpu3 = time.time(), time.process_time()
call()
wall4 = time.time()
import json
print(json.dumps({{"import": wall1 - wall0, "build": wall2 - wall1, "first": wall3 - wall2, "second": wall4 - wall3,
       "result_at": wall3, "cpu": cpu3 - cpu0}}))
'''


def _env(cache: str, extra: dict) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")}
    env.update(EMBER_CACHE=cache, **extra)
    return env


def run_case(name: str, cache: str, extra: dict) -> dict:
    """One fresh process computing case `name` on the kernel cache in `cache`: its timings (seconds)."""
    start = time.time()
    out = subprocess.run([sys.executable, "-c", _CHILD.format(here=HERE, name=name)], env=_env(cache, extra),
                         capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise RuntimeError(f"{name}: {out.stderr.strip().splitlines()[-1] if out.stderr.strip() else out.returncode}")
    found = json.loads(out.stdout.strip().splitlines()[-1])
    found["to_result"] = found.pop("result_at") - start
    return found


def run_train(cache: str, extra: dict) -> dict:
    """`ember train` with its default settings in a fresh process: wall and CPU seconds of the whole command."""
    with tempfile.TemporaryDirectory() as out_dir:
        start = time.time()
        before = os.times()
        done = subprocess.run([sys.executable, "-m", "ember", "train", "--no-progress", "--out", out_dir],
                              env=_env(cache, extra), capture_output=True, text=True, check=False)
        after = os.times()
    if done.returncode != 0:
        raise RuntimeError(f"ember train: {done.stderr.strip()[-300:]}")
    cpu = (after.children_user - before.children_user) + (after.children_system - before.children_system)
    return {"to_result": time.time() - start, "cpu": cpu}


def _cell(values: list) -> str:
    best, worst = min(values), max(values)
    return f"{best:6.2f}" + (f" ({best:.2f}-{worst:.2f})" if len(values) > 1 else "")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", default=",".join(INFER + TRAIN))
    parser.add_argument("--runs", type=int, default=3, help="runs of each case (best and range reported)")
    parser.add_argument("--train", action="store_true", help="also time `ember train` (about a minute a run)")
    parser.add_argument("--sync", action="store_true", help="compile where called (EMBER_COMPILE_IN_BACKGROUND=0)")
    args = parser.parse_args()
    extra = {"EMBER_COMPILE_IN_BACKGROUND": "0"} if args.sync else {}

    sys.path.insert(0, HERE)
    from _timing import machine_line

    print(machine_line())
    print(f"load average at start: {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs; "
          f"compile in background: {'no' if args.sync else 'yes'}")
    header = f"{'case':24} {'cache':6} {'to result s':>22} {'import':>7} {'build':>7} {'first':>7} {'second':>7} {'CPU':>7}"
    print(header)
    print("-" * len(header))
    cases = [c for c in args.cases.split(",") if c]
    if args.train:
        cases.append("ember train")
    for name in cases:
        rows: dict = {"empty": [], "warm": []}
        for _ in range(args.runs):
            with tempfile.TemporaryDirectory() as cache:
                for state in ("empty", "warm"):  # alternating: a slow spell of the machine falls on both
                    rows[state].append(run_train(cache, extra) if name == "ember train" else run_case(name, cache, extra))
        for state, runs in rows.items():
            best = min(runs, key=lambda r: r["to_result"])
            parts = [f"{name:24} {state:6} {_cell([r['to_result'] for r in runs]):>22}"]
            for key in ("import", "build", "first", "second"):
                parts.append(f"{best[key]:7.2f}" if key in best else f"{'':>7}")
            parts.append(f"{best['cpu']:7.2f}")
            print(" ".join(parts), flush=True)
    print(f"load average at end: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
