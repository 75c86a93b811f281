"""Compiling kernels in the background while the NumPy path serves (ember.kernels.background): the first calls on an
empty kernel cache give the values the compiled kernels give afterwards, the cache is filled and reused by the next
process, and kernels called outside an op still compile where they are called. Each case runs in a fresh process
with its own cache folder, so that no kernel is compiled before it starts."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import threading

import pytest

pytest.importorskip("numba")

_FIRST_AND_LATER = textwrap.dedent('''
    import json, sys
    import numpy as np
    import ember
    from ember.kernels import background, explain

    ember.manual_seed(0)
    net = ember.nn.Sequential(ember.nn.Conv2d(3, 16, 3, padding=1), ember.nn.BatchNorm2d(16), ember.nn.ReLU(),
                              ember.nn.MaxPool2d(3, 2, 1), ember.nn.Conv2d(16, 16, 3, padding=1)).eval()
    x = ember.randn(2, 3, 48, 48)

    def forward():
        with ember.no_grad():
            return net(x).numpy().copy()

    report = explain(forward)
    first = forward()
    background.wait()
    later = [forward() for _ in range(4)]  # kernels met only once others ran compile now
    background.wait()
    compiled = explain(forward)
    last = forward()
    again = forward()
    json.dump({"first": report.algorithms("relu"), "compiled": compiled.algorithms("relu"),
               "max_pool": compiled.algorithms("max_pool2d"),
               "diff": max(float(np.abs(a - last).max()) for a in [first] + later), "scale": float(np.abs(last).max()),
               "same_again": bool(np.array_equal(again, last))}, sys.stdout)
''')


def _run(script: str, cache, **env) -> dict:
    environ = dict(os.environ, EMBER_CACHE=str(cache), EMBER_FUSION_BACKEND="auto")
    environ.update({"EMBER_COMPILE_IN_BACKGROUND": "1", **env})
    out = subprocess.run([sys.executable, "-c", script], env=environ, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_first_calls_run_numpy_and_agree_with_the_compiled_kernels(tmp_path):
    got = _run(_FIRST_AND_LATER, tmp_path)
    assert got["first"] == ["numpy"]  # relu's kernel was compiling: the op ran its NumPy path
    assert got["compiled"] == ["compiled pass"]
    assert got["max_pool"] == ["compiled taps"]
    assert got["diff"] <= 1e-5 * got["scale"]  # the NumPy path's values, to the tolerance the fallback is held to
    assert got["same_again"]  # once compiled, the same kernels: the same values


def test_a_fresh_cache_is_filled_and_the_next_process_loads_it(tmp_path):
    _run(_FIRST_AND_LATER, tmp_path)
    written = sorted(p.name for p in (tmp_path / "kernels" / "__pycache__").iterdir())
    assert any(".relu_forward-" in name for name in written)
    again = _run(_FIRST_AND_LATER, tmp_path)
    assert again["first"] == ["compiled pass"]  # on disk: loaded where it is called, no NumPy first call
    assert sorted(p.name for p in (tmp_path / "kernels" / "__pycache__").iterdir()) == written


def test_the_setting_off_compiles_where_called(tmp_path):
    got = _run(_FIRST_AND_LATER, tmp_path, EMBER_COMPILE_IN_BACKGROUND="0")
    assert got["first"] == ["compiled pass"]


def test_kernels_called_outside_an_op_compile_where_called(tmp_path):
    script = textwrap.dedent('''
        import json, sys
        import numpy as np
        from ember.kernels import background, elementwise

        x = np.random.default_rng(0).standard_normal(1 << 16).astype(np.float32) - 0.5
        y = elementwise.relu(np, x)  # a kernel entry called directly: no op runner up the stack
        json.dump({"compiled": y is not None, "pending": background.pending(),
                   "right": bool(y is not None and np.array_equal(y, np.maximum(x, 0)))}, sys.stdout)
    ''')
    assert _run(script, tmp_path) == {"compiled": True, "pending": 0, "right": True}


def test_jit_equals_eager_while_kernels_compile(tmp_path):
    script = textwrap.dedent('''
        import json, sys
        import numpy as np
        import ember

        ember.manual_seed(0)
        # no bias before the batch norm: its gradient is rounding noise around zero, equal in no two orders of sums
        net = ember.nn.Sequential(ember.nn.Conv2d(3, 8, 3, padding=1, bias=False), ember.nn.BatchNorm2d(8), ember.nn.ReLU(),
                                  ember.nn.Flatten(), ember.nn.Linear(8 * 32 * 32, 10))
        x = ember.randn(4, 3, 32, 32)

        def loss_and_grads(x):
            loss = net(x).square().mean()
            grads = ember.autograd.grad(loss, list(net.parameters()))
            return [loss] + list(grads)

        eager = [t.detach().numpy() for t in loss_and_grads(x)]  # the first eager call: NumPy while kernels compile
        jitted = [t.detach().numpy() for t in ember.jit(loss_and_grads)(x)]
        diff = max(float(np.abs(a - b).max() / (np.abs(a).max() + 1e-30)) for a, b in zip(eager, jitted))
        json.dump({"diff": diff}, sys.stdout)
    ''')
    assert _run(script, tmp_path)["diff"] <= 1e-4


def test_training_steps_while_kernels_compile_match_compiled_ones(tmp_path):
    # backward's fast paths and the optimizer's fused pass serve NumPy (or the update's tensor ops) meanwhile
    script = textwrap.dedent('''
        import json, sys
        import numpy as np
        import ember

        ember.manual_seed(0)
        net = ember.nn.Sequential(ember.nn.Conv2d(1, 6, 5, padding=2), ember.nn.ReLU(), ember.nn.MaxPool2d(2),
                                  ember.nn.Flatten(), ember.nn.Linear(6 * 14 * 14, 10))
        opt = ember.optim.Adam(net.parameters(), lr=1e-3)
        rng = np.random.default_rng(0)
        x = ember.tensor(rng.standard_normal((32, 1, 28, 28)).astype(np.float32))
        y = ember.tensor(rng.integers(0, 10, 32))
        losses = []
        for _ in range(3):
            opt.zero_grad()
            loss = ember.nn.functional.cross_entropy(net(x), y)
            loss.backward()
            opt.step()
            losses.append(loss.item())
        json.dump({"losses": losses, "params": [p.detach().numpy().ravel().tolist() for p in net.parameters()]},
                  sys.stdout)
    ''')
    served = _run(script, tmp_path / "a")
    compiled = _run(script, tmp_path / "b", EMBER_COMPILE_IN_BACKGROUND="0")
    assert served["losses"] == pytest.approx(compiled["losses"], rel=1e-5)
    for a, b in zip(served["params"], compiled["params"]):
        assert a == pytest.approx(b, rel=1e-4, abs=1e-6)


def test_jobs_queued_later_run_once_every_other_job_has_run():
    # ahead.py's child queues split kernels' entry points so: its parent needs the kernels first
    from ember.kernels import background

    ran = []
    background.hold()
    try:
        background.submit(("later test", 0), lambda: ran.append("entry 0"), later=True)
        background.submit(("later test", 1), lambda: ran.append("kernel 1"))
        background.submit(("later test", 2), lambda: ran.append("entry 2"), later=True)
        background.submit(("later test", 3), lambda: ran.append("kernel 3"))
        assert background.pending() == 4
    finally:
        background.release(largest_first=True)
    assert background.wait(timeout=60)
    assert ran == ["kernel 3", "kernel 1", "entry 0", "entry 2"]


def test_released_largest_first_the_costliest_compiles_run_first_and_the_newest_among_equals():
    # ahead.py's child: its longest compiles start first, so that the two processes do not meet inside one
    from ember.kernels import background

    ran = []
    background.hold()
    try:
        for n, cost in enumerate([5, 40, 5, 900, 40]):
            background.submit(("cost test", n), lambda n=n, cost=cost: ran.append((n, cost)), cost=cost)
    finally:
        background.release(largest_first=True)
    assert background.wait(timeout=60)
    assert ran == [(3, 900), (4, 40), (1, 40), (2, 5), (0, 5)]


_COSTED = '''
def helper(x):
    return x + 1


def unused(x):
    return [x * i for i in range(x)]


def small(x):
    return x


def kernel(x):
    total = 0
    for i in range(x):
        total += helper(i) * helper(i + 1)
    return total
'''


def test_a_compile_costs_the_bytecode_of_the_function_and_of_what_it_calls_in_its_module():
    from ember.kernels import background

    module = {"__name__": "costed"}
    exec(compile(_COSTED, "costed", "exec"), module)
    own = len(module["kernel"].__code__.co_code)
    assert background.compile_cost(module["kernel"]) == own + len(module["helper"].__code__.co_code)
    assert background.compile_cost(module["small"]) < background.compile_cost(module["kernel"])


def test_jobs_queued_first_run_before_the_others_even_while_the_queue_is_held():
    # GEMM's driver, which every kernel built on it calls: in ahead.py's child, held while its step collects the
    # kernels, it would otherwise come last of all
    from ember.kernels import background

    ran, driver_ran = [], threading.Event()
    background.hold()
    try:
        background.submit(("first test", 0), lambda: ran.append("kernel 0"))
        background.submit(("first test", 1), lambda: (ran.append("driver"), driver_ran.set()), first=True)
        assert driver_ran.wait(timeout=60)  # held, and run all the same
        assert ran == ["driver"]
        background.submit(("first test", 2), lambda: ran.append("kernel 2"))
    finally:
        background.release(largest_first=True)
    assert background.wait(timeout=60)
    assert ran == ["driver", "kernel 2", "kernel 0"]
