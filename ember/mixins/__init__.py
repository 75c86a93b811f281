"""The methods of `ember.Tensor` that run ops, grouped by kind (tinygrad's mixin layout), and `install`, which
puts them on the class.

Each method is named in its mixin, so a reader finds `Tensor.exp` by searching. A method that is exactly an op
with the tensor first is written `exp = op_method()`: installing puts the op function itself on the class, so
`x.exp()` calls `ember.exp` with no forwarding function between. Tensor is defined below the ops (they build on
it), so the ops layer installs these methods when it is imported (ember/ops/__init__.py), as JAX sets its Array's
methods from the layer that defines the operations.
"""

from ember.mixins.array_api import ArrayAPIMixin
from ember.mixins.creation import CreationMixin
from ember.mixins.indexing import IndexingMixin
from ember.mixins.inplace import InplaceMixin
from ember.mixins.linalg import LinalgMixin
from ember.mixins.math import MathMixin
from ember.mixins.op_method import op_method
from ember.mixins.operators import OperatorsMixin
from ember.mixins.queries import QueriesMixin
from ember.mixins.reduction import ReductionMixin
from ember.mixins.shape import ShapeMixin

MIXINS = (OperatorsMixin, MathMixin, ReductionMixin, ShapeMixin, IndexingMixin, LinalgMixin, InplaceMixin,
          CreationMixin, ArrayAPIMixin, QueriesMixin)
_CLASS_ONLY = {"__module__", "__qualname__", "__doc__", "__slots__", "__dict__", "__weakref__"}


def install(cls) -> None:
    """Put every mixin's methods on `cls` (ember.Tensor), the op functions themselves for `op_method`s; a name
    `cls` defines itself keeps its own."""
    from ember import ops

    own = set(vars(cls))
    for mixin in MIXINS:
        for name, value in vars(mixin).items():
            if name in _CLASS_ONLY or name in own:
                continue
            setattr(cls, name, getattr(ops, name) if isinstance(value, op_method) else value)
