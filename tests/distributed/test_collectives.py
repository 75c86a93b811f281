"""Every collective against NumPy on every dtype (odd and empty sizes, sync and async), and the errors of bad
input, on 2 and 3 ranks (programs/collectives.py runs the checks inside the job)."""

import pytest

from tests.distributed.launch import check, requires_mpi, run

pytestmark = requires_mpi


@pytest.mark.parametrize("n", [2, 3])
def test_collectives_match_numpy_on_every_rank(n):
    out = check(run(n, "collectives.py"))
    for r in range(n):
        assert f"rank {r}: 832 collective checks passed" in out
