"""Stateful graph ops: assign / assign_add / assign_sub, variable reads, no_op, group, identity, stop_gradient.

The assign ops write a Variable's storage when they run and return its new value. They and the
other ops here are `stateful`: later graph passes must never prune, merge or fold them.
"""

from __future__ import annotations

from ember.dispatch import apply
from ember.errors import ShapeError, fmt_shape
from ember.op import Op, register
from ember.ops._rules import spec
from ember.ops.transfer_ops import transfer
from ember.tensor import Tensor
from ember.v1.convert import convert_to_tensor, graph_for, in_default_graph
from ember.v1.graph_api import Operation, as_node, get_default_graph
from ember.v1.graph_tensor import GraphTensor
from ember.v1.naming import tf_op


def _compatible(a: tuple, b: tuple) -> bool:
    return len(a) == len(b) and all(x is None or y is None or x == y for x, y in zip(a, b))


class _AssignBase(Op):
    """value -> the variable's storage; the output is the variable's new value."""

    stateful = True
    differentiable = False
    mode = "set"

    def infer(self, value, variable):
        if not _compatible(tuple(value.shape), tuple(variable.spec_shape)):
            raise ShapeError(
                f"{self.name}: value of shape {fmt_shape(value.shape)} does not fit variable {variable.op_name!r} "
                f"of shape {fmt_shape(variable.spec_shape)}"
            )
        return spec(variable.spec_shape, variable.spec_dtype)

    def kernel(self, xp, value, variable):
        return variable.write(xp, value, self.mode)


class AssignOp(_AssignBase):
    name = "assign"


assign_op = register(AssignOp())


class AssignAddOp(_AssignBase):
    name = "assign_add"
    mode = "add"


assign_add_op = register(AssignAddOp())


class AssignSubOp(_AssignBase):
    name = "assign_sub"
    mode = "sub"


assign_sub_op = register(AssignSubOp())


class ReadVariableOp(Op):
    """The variable's value when this op runs (after its control inputs), not when the run started.

    The node has no data input, so a run may initialise the variable first; autograd still links
    the result to the variable (see `read_variable`), whose gradient is the incoming one.
    """

    name = "read_variable"
    stateful = True

    def infer(self, variable, linked):
        return spec(variable.spec_shape, variable.spec_dtype)

    def kernel(self, xp, variable, linked):
        return variable.read_storage()

    def vjp(self, ctx, g):
        return (g,)

    def autograd_inputs(self, attrs) -> list:
        """Graph values autograd treats as this node's inputs (the variable, or its capture in a control-flow
        function)."""
        return [attrs["linked"]]


read_variable_op = register(ReadVariableOp())


def link_gradient(op, out: Tensor, sources: tuple) -> Tensor:
    """Record `out` as computed by `op` from `sources` for autograd (for nodes without those data inputs)."""
    from ember.autograd import record
    from ember.autograd.grad_mode import is_grad_enabled

    if is_grad_enabled() and any(s._requires_grad for s in sources):
        record(op, out._data.node.attrs, sources, (out,))
    return out


def read_variable(var) -> Tensor:
    """A read of the variable's storage when the node runs; gradients flow to the variable."""
    graph = graph_for(var)
    source = in_default_graph(var) if graph is not var._data.graph else var
    value = graph.add_op(read_variable_op, [], {"variable": var, "linked": source._data}, var._device)
    return link_gradient(read_variable_op, GraphTensor._make(value, var._device), (source,))


class NoOp(Op):
    """Does nothing; its control inputs are what running it means (group, train ops)."""

    name = "no_op"
    n_outputs = 0
    stateful = True  # it stands for its control inputs: never prune or merge it

    def infer(self):
        return ()

    def kernel(self, xp):
        return ()


noop_op = register(NoOp())


class StopGradientOp(Op):
    """The input unchanged, seen by autograd as a constant."""

    name = "stop_gradient"
    differentiable = False

    def infer(self, x):
        return spec(x.shape, x.dtype)

    def kernel(self, xp, x):
        return x


stop_gradient_op = register(StopGradientOp())


# --- functions ------------------------------------------------------------------------------
def _variable(ref):
    from ember.v1.variables import Variable

    if not isinstance(ref, Variable):
        raise TypeError(f"assign: the target must be a Variable, got {type(ref).__name__}")
    return ref


def assign_value(ref, value) -> Tensor:
    """An assign op without a name of its own (what a Variable's initializer is built from)."""
    return _assign(assign_op, ref, value)


def _assign(op, ref, value) -> Tensor:
    var = _variable(ref)
    value = convert_to_tensor(value, dtype_hint=var.dtype)
    if value.dtype is not var.dtype:
        value = value.to(var.dtype)
    if value._device is not var._device:  # an assign runs with its variable: the value crosses over
        value = transfer(value, var._device)
    graph = graph_for(var)
    out = graph.add_op(op, [value._data], {"variable": var}, var._device)
    return GraphTensor._make(out, var._device)


@tf_op("Assign")
def assign(ref, value, validate_shape: bool = True, use_locking: bool = True, name: str | None = None) -> Tensor:
    """Write `value` into the variable `ref` when run; the result is its new value."""
    return _assign(assign_op, ref, value)


@tf_op("AssignAdd")
def assign_add(ref, value, use_locking: bool = True, name: str | None = None) -> Tensor:
    """Add `value` to the variable `ref` when run; the result is its new value."""
    return _assign(assign_add_op, ref, value)


@tf_op("AssignSub")
def assign_sub(ref, value, use_locking: bool = True, name: str | None = None) -> Tensor:
    """Subtract `value` from the variable `ref` when run; the result is its new value."""
    return _assign(assign_sub_op, ref, value)


def _flatten_ops(items) -> list:
    out = []
    for x in items:
        if isinstance(x, (list, tuple)):
            out.extend(_flatten_ops(x))
        elif x is not None:
            out.append(x)
    return out


def no_op(name: str | None = None) -> Operation:
    """An operation that does nothing (a place to hang control dependencies)."""
    graph = get_default_graph()
    graph.add_op(noop_op, [], {}, graph.device)
    node = graph.nodes[-1]
    graph.name_node(node, name or "NoOp")
    return Operation(node)


def group(*inputs, name: str | None = None) -> Operation:
    """An operation that runs all `inputs` (operations or tensors)."""
    nodes = [as_node(x) for x in _flatten_ops(inputs)]
    graph = nodes[0].graph if nodes else get_default_graph()
    with graph.control_dependencies(nodes):
        graph.add_op(noop_op, [], {}, graph.device)
    node = graph.nodes[-1]
    graph.name_node(node, name or "group_deps")
    return Operation(node)


@tf_op("Identity")
def identity(input, name: str | None = None) -> Tensor:
    """The same value as a new node (after any control dependencies); a variable is read when it runs."""
    from ember.v1.variables import Variable

    if isinstance(input, Variable):
        return read_variable(input)
    from ember import ops as _ops

    return _ops.identity(convert_to_tensor(input))


@tf_op("StopGradient")
def stop_gradient(input, name: str | None = None) -> Tensor:
    """The same value, but gradients() treats it as a constant."""
    return apply(stop_gradient_op, convert_to_tensor(input))
