"""Every op row against PyTorch: output shapes, dtypes and values, and gradients for a random upstream gradient."""

from __future__ import annotations

import pytest

import ember as em

from .helpers import check_row
from .inputs import seed_for
from .op_table import ROWS

SEEDS = (0, 1)  # two random draws of shapes and values per row and dtype

CASES = [
    pytest.param(row, dtype, k, id=f"{row.name}-{dtype}-{k}") for row in ROWS for dtype in row.dtypes for k in SEEDS
]
# float16 and bfloat16 against PyTorch in the same dtype: one draw each keeps the suite quick.
LOW_CASES = [
    pytest.param(row, dtype, id=f"{row.name}-{dtype}",
                 marks=[pytest.mark.skip(reason=row.skip_low[dtype])] if dtype in row.skip_low else [])
    for row in ROWS for dtype in row.low_dtypes()
]


@pytest.mark.parametrize(("row", "dtype", "k"), CASES)
def test_op_matches_torch(row, dtype: str, k: int) -> None:
    """Forward values and input gradients agree with PyTorch's."""
    check_row(row, dtype, seed_for(row.name, k))


@pytest.mark.parametrize(("row", "dtype"), LOW_CASES)
def test_op_matches_torch_low_precision(row, dtype: str) -> None:
    """float16/bfloat16 values, result dtypes and gradients agree with PyTorch's in the same dtype."""
    check_row(row, dtype, seed_for(row.name, 0))


@pytest.mark.parametrize("row", [pytest.param(row, id=row.name) for row in ROWS])
def test_op_on_other_cpu_device(row) -> None:
    """The same results on the logical device cpu:1 (outputs and gradients stay there)."""
    check_row(row, row.dtypes[0], seed_for(row.name, 5), device="cpu:1")


# Collected only where CUDA works (otherwise one empty-parameter skip instead of one per row).
CUDA_CASES = [pytest.param(row, d, id=f"{row.name}-{d}") for row in ROWS for d in row.dtypes] if em.cuda.is_available() else []


@pytest.mark.cuda
@pytest.mark.parametrize(("row", "dtype"), CUDA_CASES)
def test_op_on_cuda(row, dtype: str) -> None:
    """The same table on cuda:0 against PyTorch on the CPU."""
    check_row(row, dtype, seed_for(row.name, 6), device="cuda")
