"""Shared checks for the ONNX tests: export, onnx's full checker, and onnxruntime against Ember."""

from __future__ import annotations

import numpy as np

import ember as em


def ort_session(path):
    """An onnxruntime CPU session for a saved model."""
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1  # the test machines are small and shared
    return ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])


def close(got, want, rtol=1e-4) -> float:
    """Assert onnxruntime's output equals Ember's (rtol, with an atol scaled to the output); returns max abs diff."""
    want = np.asarray(want)
    got = np.asarray(got)
    assert got.shape == want.shape, (got.shape, want.shape)
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    if want.dtype.kind in "biu":
        np.testing.assert_array_equal(got, want)
        return 0.0
    atol = rtol * max(float(np.abs(want).max()) if want.size else 0.0, 1e-3)
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)
    return float(np.abs(got.astype(np.float64) - want).max()) if want.size else 0.0


def export_and_check(model, args, path, batches=(2, 3), make_args=None, **kw) -> float:
    """Export with a dynamic batch axis on every input, run onnx's full check, and compare onnxruntime with
    Ember at each batch size (`make_args(b)` builds the inputs); returns the largest abs difference."""
    import onnx

    args = args if isinstance(args, tuple) else (args,)
    names = kw.pop("input_names", [f"input_{i}" for i in range(len(args))])
    dyn = kw.pop("dynamic_axes", {n: {0: "batch"} for n in names})
    proto = em.onnx.export(model, args, path, input_names=names, dynamic_axes=dyn, **kw)
    onnx.checker.check_model(onnx.load(str(path)), full_check=True)
    sess = ort_session(path)
    worst = 0.0
    for b in batches:
        inputs = make_args(b) if make_args is not None else args
        inputs = inputs if isinstance(inputs, tuple) else (inputs,)
        with em.no_grad():
            want = model(*inputs)
        want = want if isinstance(want, (tuple, list)) else (want,)
        got = sess.run(None, {n: x.numpy() for n, x in zip(names, inputs)})
        assert len(got) == len(want)
        for g, w in zip(got, want):
            worst = max(worst, close(g, w.numpy()))
    assert proto.opset_import[0].version == kw.get("opset_version", 18)
    return worst
