"""Gather/scatter and masked selection methods (x.gather(...) is ember.gather(x, ...))."""

from __future__ import annotations

from ember.mixins.op_method import op_method


class IndexingMixin:
    """Gather/scatter and masked selection methods of `ember.Tensor`."""

    __slots__ = ()

    gather = op_method()
    scatter = op_method()
    scatter_add = op_method()
    scatter_reduce = op_method()
    index_reduce = op_method()
    index_select = op_method()
    index_add = op_method()
    index_put = op_method()
    masked_fill = op_method()
    masked_select = op_method()
    nonzero = op_method()
    argwhere = op_method()
    take_along_dim = op_method()
