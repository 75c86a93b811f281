"""The methods of `ember.Tensor` that delegate to ops, grouped by kind (tinygrad's mixin layout).

Each method is named in its mixin, so a reader finds `Tensor.exp` by searching. A method that is
exactly an op with the tensor first is written `exp = op_method()`: the op function itself becomes
the method on first use (see `op_method`). The others reach the ops through the `ember` package at
call time: the mixins are imported before the ops, which are built on `Tensor`.
"""

from ember.mixins.array_api import ArrayAPIMixin
from ember.mixins.creation import CreationMixin
from ember.mixins.graph import GraphMixin
from ember.mixins.indexing import IndexingMixin
from ember.mixins.inplace import InplaceMixin
from ember.mixins.linalg import LinalgMixin
from ember.mixins.math import MathMixin
from ember.mixins.reduction import ReductionMixin
from ember.mixins.shape import ShapeMixin

__all__ = [
    "ArrayAPIMixin", "CreationMixin", "GraphMixin", "IndexingMixin", "InplaceMixin", "LinalgMixin", "MathMixin", "ReductionMixin",
    "ShapeMixin",
]
