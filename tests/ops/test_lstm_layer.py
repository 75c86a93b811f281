"""lstm_layer's bad inputs get one-line errors naming the op and the shapes or dtypes."""

import numpy as np
import pytest

import ember as em
from ember.errors import ShapeError
from ember.ops.recurrent_layer import lstm_layer


def _inputs(t=3, n=2, h=4, dtype=np.float32):
    rng = np.random.default_rng(0)
    return [em.tensor(rng.standard_normal(s).astype(dtype)) for s in ((t, n, 4 * h), (n, h), (n, h), (4 * h, h))]


def test_shapes_that_do_not_agree_are_named():
    xw, h0, c0, w = _inputs()
    with pytest.raises(ShapeError, match=r"lstm_layer: shapes do not agree: .*\(3, 2, 16\).*\(2, 5\)"):
        lstm_layer(xw, em.zeros(2, 5), c0, w)
    with pytest.raises(ShapeError, match=r"lstm_layer: expected input projections \(T, N, 4\*H\)"):
        lstm_layer(xw[0], h0, c0, w)


def test_mixed_or_integer_dtypes_are_named():
    xw, h0, c0, w = _inputs()
    with pytest.raises(TypeError, match="lstm_layer: expected floating-point tensors of one dtype, got float32, "
                                        "float64"):
        lstm_layer(xw, h0.double(), c0, w)
    with pytest.raises(TypeError, match="lstm_layer"):
        lstm_layer(xw, h0.long(), c0.long(), w)
