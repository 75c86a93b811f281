"""Which ops autocast runs in the lower precision, which in float32, and which at their inputs' widest type.

The lists follow PyTorch's CPU autocast (aten/src/ATen/autocast_mode.cpp), mapped to Ember's op names;
composite functions (losses, attention) carry their policy with `ember.amp.state.autocast_function`.
Ops on neither list run in whatever dtype their inputs have.
"""

from __future__ import annotations

# matmul-like ops: the work that gains from bfloat16/float16
LOWER = frozenset({"matmul", "linear", "conv2d", "conv_transpose2d", "einsum"})

# ops whose results lose too much in low precision
FP32 = frozenset({
    "nll_loss", "cross_entropy", "prod",
    "linalg.cholesky", "linalg.det", "linalg.eigh", "linalg.inv", "linalg.lstsq", "linalg.pinv", "linalg.qr",
    "linalg.slogdet", "linalg.solve", "linalg.svd",
})

# ops that take several tensors and must see one dtype
PROMOTE = frozenset({"cat"})


def policy_of(op_name: str) -> str | None:
    """'lower', 'fp32', 'promote' or None for an op name."""
    if op_name in LOWER:
        return "lower"
    if op_name in FP32:
        return "fp32"
    if op_name in PROMOTE:
        return "promote"
    return None
