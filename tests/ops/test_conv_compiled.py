"""The compiled im2col (Numba) gives exactly the NumPy path's patches, for every layout and convolution setting."""

import numpy as np
import pytest

from ember.graph import codegen
from ember.ops import conv

pytest.importorskip("numba")


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("stride,pad,dil,groups", [
    ((1, 1), (0, 0, 0, 0), (1, 1), 1), ((2, 1), (1, 1, 1, 1), (1, 1), 1), ((1, 2), (2, 0, 1, 3), (2, 1), 1),
    ((3, 3), (1, 2, 0, 1), (1, 2), 2), ((1, 1), (2, 2, 2, 2), (2, 2), 4),
])
@pytest.mark.parametrize("per_sample", [True, False])
def test_compiled_im2col_equals_numpy(dtype, stride, pad, dil, groups, per_sample):
    x = np.random.default_rng(0).standard_normal((3, 8, 17, 13)).astype(dtype)
    build = conv.im2col_per_sample if per_sample else conv.im2col
    try:
        codegen.set_backend("numpy")
        want, oh, ow = build(np, x, 3, 4, stride, pad, dil, groups)
        codegen.set_backend("numba")
        got, oh2, ow2 = build(np, x, 3, 4, stride, pad, dil, groups)
    finally:
        codegen.set_backend(None)
    assert (oh, ow) == (oh2, ow2) and got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)
