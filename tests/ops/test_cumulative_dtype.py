"""cumsum/cumprod with dtype= give that dtype (integers wrap), and a 0-d integer cumprod is int64, as in PyTorch."""

import numpy as np
import pytest
import torch

import ember as em


@pytest.mark.parametrize("name", ["cumsum", "cumprod"])
@pytest.mark.parametrize("dtype", ["uint8", "int8", "int16", "float32"])
def test_dtype_argument_is_the_result_dtype(name, dtype):
    data = np.array([[200, 100, 3], [7, 9, 250]], dtype=np.int64)
    want = getattr(torch, name)(torch.tensor(data), 1, dtype=getattr(torch, dtype))
    got = getattr(em, name)(em.tensor(data), 1, dtype=getattr(em, dtype))
    assert str(got.dtype).split(".")[-1] == str(want.dtype).split(".")[-1]
    np.testing.assert_array_equal(got.numpy(), want.numpy())


@pytest.mark.parametrize("name", ["cumsum", "cumprod"])
def test_zero_dim_integer_result(name):
    want = getattr(torch, name)(torch.tensor(3, dtype=torch.int32), 0)
    got = getattr(em, name)(em.tensor(3, dtype=em.int32), 0)
    assert got.dtype == em.int64 and want.dtype == torch.int64 and int(got) == int(want)
