"""Layer norm's rows split over the threads as compiled chunks give the one-thread pass's values: y, mean, rstd and
the input's gradient bit for bit, the weight's and bias's (float64 sums of each chunk's float64 column sums) to
float32 rounding."""

import numpy as np
import pytest

import ember as em
from ember.kernels import layer_norm, parallel


@pytest.mark.parametrize("shape", [(1024, 128), (16, 64, 512), (4099, 33)])
def test_split_rows_equal_one_pass(thresholds, shape):
    before = parallel.get_num_threads()
    em.set_num_threads(2)
    try:
        rng = np.random.default_rng(0)
        x = (rng.standard_normal(shape) * 3 + 1).astype(np.float32)
        gy = rng.standard_normal(shape).astype(np.float32)
        w = rng.standard_normal(shape[-1]).astype(np.float32)
        b = rng.standard_normal(shape[-1]).astype(np.float32)
        got = {}
        for mode, least in (("one", 1 << 40), ("split", 1)):
            thresholds(layer_norm.LAYER_NORM, native_split_min=least)
            y, mean, rstd = layer_norm.forward(np, x, w, b, 1, 1e-5)
            got[mode] = (y, mean, rstd) + layer_norm.backward(np, x, w, mean, rstd, gy, 1)
        for k in range(4):  # y, mean, rstd, gx
            np.testing.assert_array_equal(got["split"][k], got["one"][k])
        for k in (4, 5):  # gw, gb
            np.testing.assert_allclose(got["split"][k], got["one"][k], rtol=1e-6, atol=1e-6)
    finally:
        em.set_num_threads(before)
