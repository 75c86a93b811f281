"""Replaying nodes into another graph: every shape rule runs again and autograd records as `dispatch.apply` would.

Shape specialisation (ember.v1.specialize) and the rebuilding of control-flow subgraphs for known
input shapes (ember.graph.control_flow) both copy nodes this way. An op may rebuild its own
attributes for the new inputs (`op.specialize_node(attrs, inputs)`: control-flow ops rebuild their
subgraphs); attributes that refer to values of the old graph are mapped to the new ones.
"""

from __future__ import annotations

from ember.autograd import record
from ember.device import as_device
from ember.errors import ShapeError
from ember.graph.ir import CAPTURE, CONSTANT, PLACEHOLDER, VARIABLE, GNode, Value
from ember.ops._rules import FLOAT_NP
from ember.tensor import Tensor


def leaf(value: Value, requires_grad: bool) -> Tensor:
    """A tensor for a graph input (a leaf for autograd)."""
    t = Tensor._make(value, value.device)
    if requires_grad:
        t._requires_grad = True
    return t


class Replay:
    """Copies nodes of one graph into `graph`, remembering which new tensor stands for each old value."""

    def __init__(self, graph, fed=()) -> None:
        self.graph = graph
        self.tensors: dict = {}  # old Value -> new Tensor
        self.nodes: dict = {}  # old GNode -> new GNode
        self.fed = set(fed)  # old values given from outside: their producers' outputs are not remapped

    def _input(self, x, n: GNode):
        if not isinstance(x, Value):
            return x
        try:
            return self.tensors[x]
        except KeyError:
            raise RuntimeError(
                f"cannot replay {n!r}: it uses {x!r}, an intermediate of a gradients() computation that is "
                "rebuilt as a whole"
            ) from None

    def _attrs(self, attrs: dict) -> dict:
        if not any(isinstance(v, Value) for v in attrs.values()):
            return attrs
        return {k: self.tensors[v]._data if isinstance(v, Value) and v in self.tensors else v
                for k, v in attrs.items()}

    def node(self, n: GNode) -> GNode:
        """Copy node n (its inputs must have been copied), recording autograd for it; returns the new node."""
        new = self.graph
        if n.kind != "op":
            v = n.outputs[0]
            if n.kind == PLACEHOLDER:
                value, grad = new.placeholder(n.attrs["shape"], v.dtype, v.device, name=n.name), v.dtype in FLOAT_NP
            elif n.kind == VARIABLE:
                value, grad = new.variable(n.attrs["variable"], name=n.name), v.dtype in FLOAT_NP
            elif n.kind == CAPTURE:
                value, grad = new.capture(n.attrs["tensor"]), n.attrs["tensor"].requires_grad
            elif n.kind == CONSTANT:
                value, grad = new.constant(n.attrs["value"], v.device, name=n.name), False
            else:
                raise ValueError(f"cannot replay a node of kind {n.kind!r}")
            if tuple(value.shape) != tuple(v.shape) and n.kind == PLACEHOLDER:
                value.shape = tuple(v.shape)  # a placeholder whose static shape was refined (set_shape)
            self.tensors[v] = leaf(value, grad)
            self.nodes[n] = value.node
            return value.node
        ins = [self._input(x, n) for x in n.inputs]
        arrays = [x._data if isinstance(x, Tensor) else x for x in ins]
        op, attrs = n.op, n.attrs
        if hasattr(op, "specialize_node"):
            op, attrs = op.specialize_node(attrs, arrays)
        attrs = self._attrs(attrs)
        device = n.outputs[0].device if n.outputs else next((x._device for x in ins if isinstance(x, Tensor)), None)
        try:
            res = new.add_op(op, arrays, attrs, device or as_device("cpu"), name=n.name)
        except ShapeError as e:  # the node's shape rule refuses the new shapes: say which node it was
            e.node = n
            raise
        new_node = new.nodes[-1]
        outs = [Tensor._make(v, v.device) for v in (res if isinstance(res, tuple) else (res,))]
        linked = getattr(op, "autograd_inputs", None)
        if linked is not None:  # a node autograd links to values it does not read as data (variable reads)
            ins = [self.tensors[v] for v in linked(n.attrs) if v in self.tensors]
        if op.differentiable and any(isinstance(x, Tensor) and x._requires_grad for x in ins):
            if any(t._data.dtype in FLOAT_NP for t in outs):
                record(op, attrs, tuple(ins), tuple(outs))
        for old, t in zip(n.outputs, outs):
            if old not in self.fed:
                self.tensors[old] = t
        try:
            new_node.control_inputs = [self.nodes[c] for c in n.control_inputs]
        except KeyError as e:
            raise RuntimeError(f"cannot replay {n!r}: its control input {e.args[0]!r} was not rebuilt") from None
        self.nodes[n] = new_node
        return new_node
