"""Checkpoints: peak memory of em.save on a large state, time and memory of em.load on many tiny tensors.

Run: python benchmarks/checkpoint.py [--mb 500] [--tiny 1000000]
Each measurement runs in a fresh process, so its peak RSS (ru_maxrss) belongs to that case alone:
1. save: a state dict of --mb megabytes of float32 tensors, saved with em.save and, for reference,
   safetensors.numpy.save_file; peak RSS during the save as a multiple of the checkpoint's size.
2. load: a safetensors file of --tiny one-element tensors, loaded with em.load and safetensors' safe_open.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import textwrap

_CHILD = textwrap.dedent("""
    import json, os, resource, sys, time
    import numpy as np
    import ember as em
    from safetensors import safe_open
    from safetensors.numpy import save_file

    def rss_mb():  # peak so far
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

    def cpu_s():  # less disturbed than wall time by other work on the machine
        r = resource.getrusage(resource.RUSAGE_SELF)
        return r.ru_utime + r.ru_stime

    case, path, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    if case in ("save", "save_file"):
        rows = n * 2**20 // (4 * 1024)
        state = {f"layer{i}.weight": em.ones(rows // 16, 1024) for i in range(16)}
        arrays = {k: np.asarray(v) for k, v in state.items()}
        base, c0 = rss_mb(), cpu_s()
        t0 = time.perf_counter()
        em.save(state, path) if case == "save" else save_file(arrays, path)
        print(json.dumps({"s": time.perf_counter() - t0, "cpu": cpu_s() - c0, "base": base, "peak": rss_mb(),
                          "size": os.path.getsize(path) / 2**20}))
    elif case == "make_tiny":
        # a plain safetensors file: with Ember's structure 1M entries pass safetensors' 100 MB header limit
        save_file({f"t{i}": np.full(1, i, np.float32) for i in range(n)}, path)
    else:
        base, c0 = rss_mb(), cpu_s()
        t0 = time.perf_counter()
        if case == "load":
            out = em.load(path)
        else:
            with safe_open(path, framework="np") as f:
                out = {k: f.get_tensor(k) for k in f.keys()}
        print(json.dumps({"s": time.perf_counter() - t0, "cpu": cpu_s() - c0, "base": base, "peak": rss_mb(),
                          "n": len(out)}))
""")


def child(*args) -> dict:
    done = subprocess.run([sys.executable, "-c", _CHILD, *map(str, args)], capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(done.stderr)
    lines = done.stdout.strip().splitlines()
    return json.loads(lines[-1]) if lines else {}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mb", type=int, default=500)
    parser.add_argument("--tiny", type=int, default=1_000_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "ckpt.safetensors")
        print(f"save of {args.mb} MB of float32 tensors (peak RSS during the save / checkpoint size)")
        for case in ("save", "save_file"):
            r = child(case, path, args.mb)
            print(f"  {'em.save' if case == 'save' else 'safetensors save_file':22s} {r['s']:6.2f} s ({r['cpu']:6.2f} s CPU)  "
                  f"before {r['base']:6.0f} MB  peak {r['peak']:6.0f} MB  "
                  f"peak/size {r['peak'] / r['size']:.2f}x  extra/size {(r['peak'] - r['base']) / r['size']:.2f}x")
            os.unlink(path)
        print(f"\nload of {args.tiny} one-element tensors")
        child("make_tiny", path, args.tiny)
        for case in ("load", "safe_open"):
            r = child(case, path, 0)
            print(f"  {'em.load' if case == 'load' else 'safetensors safe_open':22s} {r['s']:6.2f} s ({r['cpu']:6.2f} s CPU)  "
                  f"before {r['base']:6.0f} MB  peak {r['peak']:6.0f} MB  extra {r['peak'] - r['base']:7.0f} MB")


if __name__ == "__main__":
    main()
