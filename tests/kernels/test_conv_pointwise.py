"""A pointwise (1x1, stride 1, unpadded) convolution is a GEMM on the input as it lies: on Ember's GEMM where it
takes float32 products (ops/gemm.py), one product per sample with the weight read in place, and PyTorch's values."""

import numpy as np
import pytest

from ember.kernels import gemm, sgemm
from ember.ops import conv as conv_ops

torch = pytest.importorskip("torch")


@pytest.mark.parametrize("n,c,o,size,groups", [
    (1, 16, 96, 56, 1),    # MobileNetV2's expansions at batch 1
    (1, 576, 96, 14, 1),   # and its projections
    (4, 64, 64, 32, 1),    # a batch: the weight broadcast over it
    (2, 64, 32, 16, 2),    # grouped: NumPy's broadcast product
])
def test_pointwise_convolution_matches_torch(monkeypatch, n, c, o, size, groups):
    products = []
    real = sgemm.sgemm
    monkeypatch.setattr(sgemm, "sgemm", lambda a, b, out, **kw: products.append(a.shape) or real(a, b, out, **kw))
    rng = np.random.default_rng(0)
    x = rng.standard_normal((n, c, size, size)).astype(np.float32)
    w = (rng.standard_normal((o, c // groups, 1, 1)) / np.sqrt(c)).astype(np.float32)
    got = conv_ops._conv2d_op.kernel(np, x, w, (1, 1), (0, 0, 0, 0), (1, 1), groups)
    want = torch.nn.functional.conv2d(torch.tensor(x, dtype=torch.float64), torch.tensor(w, dtype=torch.float64),
                                      groups=groups).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    if gemm.enabled() and groups == 1:
        assert products == [(n, o, c)]
