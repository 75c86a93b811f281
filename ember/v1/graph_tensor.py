"""`GraphTensor`: the tensors of ember.v1 graphs, an `ember.Tensor` with TF1's interface (name, op, graph, static
shape, consumers, eval).

TF1's methods live here, not on the core Tensor (as ember.numpy's ndarray keeps NumPy's): the graph builder of
ember.v1 graphs (V1Builder) gives its outputs this class, and ember.v1 makes its placeholders, constants and
variable reads with it. A concrete value read out of a session is a plain tensor again.
"""

from __future__ import annotations

from ember.backends.meta import is_symbolic
from ember.tensor import Tensor


class GraphTensor(Tensor):
    """A tensor of an ember.v1 graph: an `ember.Tensor` with TF1's `Tensor` interface."""

    __slots__ = ()

    def _graph_value(self, what: str):
        if not is_symbolic(self):
            raise AttributeError(
                f"{what}: only tensors of an ember.v1 graph have it; this tensor is concrete"
            )
        return self._data

    @property
    def name(self):
        """"op_name:index" for a graph tensor ("scope/MatMul:0"); None for a concrete tensor."""
        if not is_symbolic(self):
            return None
        v = self._data
        node = v.node
        return f"{node.name or f'{node.op_name}_{node.id}'}:{v.index}"

    @property
    def op(self):
        """The operation that produces this graph tensor."""
        from ember.v1.graph_api import Operation

        return Operation(self._graph_value("op").node)

    @property
    def graph(self):
        """The graph this tensor belongs to."""
        return self._graph_value("graph").node.graph

    @property
    def value_index(self) -> int:
        """Which output of its operation this tensor is."""
        return self._graph_value("value_index").index

    def get_shape(self):
        """The static shape as a TensorShape (unknown dimensions are Dimension(None); it may be of unknown rank)."""
        from ember.v1.tensor_shape import TensorShape

        return TensorShape(self.shape)

    def set_shape(self, shape) -> None:
        """Refine this graph tensor's static shape with `shape` (a ValueError if they disagree)."""
        from ember.v1.tensor_shape import as_shape

        value = self._graph_value("set_shape")
        merged = self.get_shape().merge_with(as_shape(shape))
        refine = getattr(value.graph, "refine_shape", None)
        if refine is not None:
            refine(value, merged)
        elif merged.ndims is not None:
            value.shape = tuple(merged.as_list())

    def consumers(self) -> list:
        """The operations that read this graph tensor."""
        from ember.v1.graph_api import Operation

        v = self._graph_value("consumers")
        return [Operation(n) for n in v.node.graph.nodes if any(x is v for x in n.inputs)]

    def eval(self, feed_dict=None, session=None):
        """The value of this graph tensor in a session (TF1's `tensor.eval()`, for ember.v1 graphs)."""
        from ember.v1.session import evaluate

        return evaluate(self, feed_dict, session)
