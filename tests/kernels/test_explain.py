"""`ember.kernels.explain` and the profiler name the same algorithm for an op; the printed table and the Chrome
trace carry it."""

import json

import numpy as np

import ember as em
from ember import kernels


def _conv_inputs():
    rng = np.random.default_rng(0)
    x = em.tensor(rng.standard_normal((4, 8, 12, 12)).astype(np.float32))
    w = em.tensor(rng.standard_normal((8, 8, 3, 3)).astype(np.float32))
    return x, w


def _conv_relu(x, w):
    return em.nn.functional.conv2d(x, w, padding=1).relu()


def test_explain_lists_each_op_with_its_algorithm_and_prints_a_table():
    found = kernels.explain(_conv_relu, *_conv_inputs())
    ops = [row[0] for row in found.rows]
    assert ops[:2] == ["conv2d", "relu"]
    (conv_algorithm,) = found.algorithms("conv2d")
    assert found.algorithms("relu") == ["numpy"]  # one kernel: named as such, with that reason
    text = str(found).splitlines()
    assert text[0].split()[:4] == ["op", "inputs", "algorithm", "why"]
    assert set(text[1]) <= {"-", " "}
    conv_line = next(line for line in text if line.startswith("conv2d"))
    assert conv_algorithm in conv_line and "float32[4, 8, 12, 12]" in conv_line
    assert "its one kernel" in next(line for line in text if line.startswith("relu"))


def test_profiler_events_and_chrome_trace_carry_the_algorithm_explain_names(tmp_path):
    x, w = _conv_inputs()
    (conv_algorithm,) = kernels.explain(_conv_relu, x, w).algorithms("conv2d")
    with em.profiler.profile() as prof:
        _conv_relu(x, w)
    conv = next(e for e in prof.events if e.name == "conv2d")
    assert conv.algorithm == conv_algorithm
    trace = json.loads(open(prof.export_chrome_trace(str(tmp_path / "trace.json"))).read())
    event = next(e for e in trace["traceEvents"] if e.get("name") == "conv2d" and e["ph"] == "X")
    assert event["args"]["algorithm"] == conv_algorithm
