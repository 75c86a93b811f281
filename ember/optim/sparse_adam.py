"""`SparseAdam`: PyTorch's Adam for sparse gradients, which Ember does not have; it says so when made."""

from __future__ import annotations


class SparseAdam:
    """PyTorch's lazy Adam for the sparse gradients of `nn.Embedding(sparse=True)`.

    Ember's gradients are dense (`nn.Embedding(sparse=True)` is refused), so there is nothing for it to
    update lazily; constructing one raises NotImplementedError pointing to `Adam`, which gives the same
    result on dense gradients except that rows with zero gradient also decay their moments.
    """

    def __init__(self, params, lr: float = 1e-3, betas=(0.9, 0.999), eps: float = 1e-8, maximize: bool = False):
        raise NotImplementedError("SparseAdam needs sparse gradients, which Ember does not have "
                                  "(nn.Embedding(sparse=True) is refused); use ember.optim.Adam")
