"""linear's bias prefilled into the output and added by the GEMM (beta=1, PyTorch's addmm), where it applies:
the same values as matmul-then-add (bit for bit while the GEMM sums K in one block), through the eager kernel
and the planned-buffer kernel that ember.jit calls, and the plain path everywhere else."""

import numpy as np
import pytest

from ember.kernels import blas
from ember.ops.nn_extra import _linear_op

pytestmark = pytest.mark.skipif(blas.sgemm is None, reason="NumPy's BLAS is not a bundled OpenBLAS")


@pytest.mark.parametrize("shape", [(1600, 64), (16, 64, 128), (1024, 96)])
def test_the_prefilled_bias_equals_matmul_then_add(shape):
    rng = np.random.default_rng(0)
    x = rng.standard_normal(shape).astype(np.float32)
    w = rng.standard_normal((384, shape[-1])).astype(np.float32)
    b = rng.standard_normal(384).astype(np.float32)
    assert blas.linear_with_bias(x.reshape(-1, shape[-1]), w, b) is not None  # the GEMM path is taken
    expected = np.matmul(x, w.T)
    expected += b
    got = _linear_op.kernel(np, x, w, b)
    # Equal bit for bit where OpenBLAS rounds a row alike in both calls; its Haswell kernels (forced by
    # OPENBLAS_CORETYPE=Haswell on AVX-512 machines) round some shapes differently in the two orientations.
    np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-6 * np.abs(expected).max())
    out = np.empty(expected.shape, np.float32)
    assert _linear_op.kernel_out(np, x, w, b, out=out) is out
    np.testing.assert_array_equal(out, got)  # eager and planned (jit) buffers: the same path, the same bits


def test_a_long_reduction_stays_within_rounding():
    """K beyond the GEMM's block: the bias joins the first block's sum, so values differ from matmul-then-add only
    in rounding; the eager kernel and the planned-buffer kernel still agree bit for bit."""
    rng = np.random.default_rng(1)
    x, w, b = (rng.standard_normal(s).astype(np.float32) for s in ((512, 2048), (300, 2048), (300,)))
    y = _linear_op.kernel(np, x, w, b)
    np.testing.assert_allclose(y, x.astype(np.float64) @ w.T.astype(np.float64) + b, rtol=1e-4, atol=1e-3)
    out = np.empty_like(y)
    np.testing.assert_array_equal(_linear_op.kernel_out(np, x, w, b, out=out), y)


@pytest.mark.parametrize("case", ["small", "float64", "strided", "no bias"])
def test_other_inputs_take_the_plain_path(case):
    rng = np.random.default_rng(2)
    x = rng.standard_normal((8, 16) if case == "small" else (1024, 256)).astype(np.float32)
    w = rng.standard_normal((512, x.shape[1])).astype(np.float32)
    b = rng.standard_normal(512).astype(np.float32)
    if case == "float64":
        x, w, b = x.astype(np.float64), w.astype(np.float64), b.astype(np.float64)
    if case == "strided":
        x = np.asfortranarray(x)
    if case != "no bias":
        assert blas.linear_with_bias(x, w, b) is None
    y = _linear_op.kernel(np, x, w, None if case == "no bias" else b)
    expected = x.astype(np.float64) @ w.T.astype(np.float64) + (0 if case == "no bias" else b)
    # float32 sums of 256 products (NumPy's BLAS, or Ember's GEMM for the large float32 ones)
    np.testing.assert_allclose(y, expected, rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("shape", [(1024, 0), (4, 256, 0), (0, 5)])
def test_empty_inner_or_batch_dims_match_torch(shape):
    """No input features: the output is the bias (PyTorch's rule); no rows: an empty output."""
    torch = pytest.importorskip("torch")
    import ember as em

    y = em.nn.functional.linear(em.zeros(*shape), em.zeros(512, shape[-1]), em.ones(512))
    expected = torch.nn.functional.linear(torch.zeros(*shape), torch.zeros(512, shape[-1]), torch.ones(512))
    np.testing.assert_array_equal(y.numpy(), expected.numpy())
