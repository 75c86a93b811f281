"""A first training step's kernels compile ahead in a second process (ember.kernels.ahead) where kernels compile where
called: the run's results are those of a run without it, a later run with the same step starts no such process, and
the process dies with its parent."""

import json
import os
import subprocess
import sys
import textwrap
import time

import pytest

from ember.kernels import ahead

pytestmark = pytest.mark.skipif(not (hasattr(os, "fork") and sys.platform.startswith("linux")
                                     and ahead.compiled_allowed() and ahead.parallel.cores() >= 2),
                                reason="needs Linux, fork(), Numba and two cores")

_TRAIN = textwrap.dedent('''
    import hashlib, json, os, time
    import numpy as np
    import ember as em
    from ember.kernels import ahead
    from ember.models import lenet5

    em.use_deterministic_algorithms(True)
    started = []
    compile_ahead = ahead.compile_ahead
    def recorded(*args):
        started.append(compile_ahead(*args))
        if os.environ.get("EXIT_AFTER_FORK"):
            print(json.dumps({"child": started[0]}), flush=True)
            os._exit(0)  # the parent dies while its child compiles
        return started[-1]
    ahead.compile_ahead = recorded

    em.manual_seed(0)
    rng = np.random.default_rng(0)
    x = em.tensor(rng.standard_normal((96, 1, 28, 28)).astype(np.float32))
    y = em.tensor(rng.integers(0, 10, 96))
    loader = em.data.DataLoader(em.data.TensorDataset(x, y), batch_size=32)
    model = lenet5()
    em.train.fit(model, loader, epochs=1, optimizer=em.optim.SGD(model.parameters(), lr=0.05, momentum=0.9),
                 progress=False, log=lambda *a: None)
    while started and started[0]:  # the child finishes its compiles (and marks the step done); a thread reaps it
        try:
            os.kill(started[0], 0)
        except ProcessLookupError:
            break
        time.sleep(0.05)
    weights = hashlib.sha256(b"".join(p.detach().numpy().tobytes() for p in model.parameters())).hexdigest()
    print(json.dumps({"child": started[0] if started else None, "weights": weights}))
''')


def _run(cache, **env):
    out = subprocess.run([sys.executable, "-c", _TRAIN], capture_output=True, text=True, timeout=300,
                         env={**os.environ, "EMBER_CACHE": str(cache), **env})
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_a_first_step_compiles_ahead_and_the_run_equals_one_without(tmp_path):
    first = _run(tmp_path / "ahead", EMBER_COMPILE_AHEAD="1")
    assert first["child"] > 0  # a child was started on the empty cache
    assert list((tmp_path / "ahead" / "kernels" / "ahead").iterdir())  # ... and marked its step done
    again = _run(tmp_path / "ahead", EMBER_COMPILE_AHEAD="1")
    assert again["child"] == 0  # the same step again: no child
    without = _run(tmp_path / "without", EMBER_COMPILE_AHEAD="0")
    assert not without["child"]  # off: no child (compile_ahead is not even asked)
    assert first["weights"] == again["weights"] == without["weights"]  # bit for bit


def test_the_compiling_process_dies_with_its_parent(tmp_path):
    got = _run(tmp_path, EMBER_COMPILE_AHEAD="1", EXIT_AFTER_FORK="1")
    child = got["child"]
    assert child > 0
    deadline = time.time() + 10
    while time.time() < deadline:
        try:
            os.kill(child, 0)
        except ProcessLookupError:
            return
        with open(f"/proc/{child}/stat") as f:
            if f.read().split()[2] == "Z":  # a zombie, waiting for init to reap it: gone all the same
                return
        time.sleep(0.1)
    os.kill(child, 9)
    pytest.fail(f"the compiling process {child} outlived its parent")


_POOL = textwrap.dedent('''
    import json
    import ember as em
    from ember.kernels import ahead, thread_pool

    em.use_deterministic_algorithms(True)
    em.set_num_threads(2)
    before = thread_pool.loops_loadable()
    pid = ahead.compile_pool_ahead()
    finished = ahead._pool_compiled.wait(timeout=240)
    print(json.dumps({"before": before, "child": pid, "finished": finished, "after": thread_pool.loops_loadable(),
                      "again": ahead.compile_pool_ahead()}))
''')


def test_the_pools_loops_compile_ahead_into_the_cache_once(tmp_path):
    # `ember train` asks for it before it loads its data: on an empty cache a process compiles the worker pool's
    # loops meanwhile, and compile_ahead then loads them from the disk
    env = {**os.environ, "EMBER_CACHE": str(tmp_path), "EMBER_COMPILE_AHEAD": "1"}
    out = subprocess.run([sys.executable, "-c", _POOL], capture_output=True, text=True, timeout=300, env=env)
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["before"] is False and got["child"] > 0 and got["finished"] is True
    assert got["after"] is True and got["again"] == 0  # on disk now: no second process
    env["EMBER_COMPILE_AHEAD"] = "0"
    out = subprocess.run([sys.executable, "-c", _POOL], capture_output=True, text=True, timeout=300,
                         env={**env, "EMBER_CACHE": str(tmp_path / "off")})
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout.strip().splitlines()[-1])["child"] == 0  # off: none
