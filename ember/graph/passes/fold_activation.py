"""Folding an activation into the batch norm pass before it.

`channel_affine` (eval batch norm's x * scale + shift) read only by a `relu` or by a `clamp` with both
bounds (ReLU6, hardtanh) becomes one `channel_affine` node that applies the activation in the same pass,
so a jitted network reads and writes each such activation once where eager does it twice (MobileNetV2's
35 ReLU6 passes took 1.1 ms of its 15 ms batch-1 forward). The folded kernel applies the activation's own
semantics (relu's select, clip's max then min, NaN kept), so values are the unfolded graph's.

Training batch norm likewise: a `batch_norm` whose output only a `relu` reads computes relu in its output
pass, and a `relu_backward` read only as the output gradient of a `batch_norm_backward` is computed inside
that node's two passes (its eighth input, relu's output, masks the gradient). A ResNet block's BN + ReLU then
costs one pass over the activations each way instead of two: ResNet-20's jitted step did 10 relu and 10
relu_backward passes, about 1 ms of 37. A `batch_norm` whose output only an `add` of a same-shape value reads
(a residual block's second batch norm and its shortcut), that add's output only a `relu` (or anything else), adds
the shortcut (and applies relu) in its output pass: the block's sum is written once instead of three times
(y, y + shortcut, relu of it). Its backward stays as it is: relu_backward's output is both the batch norm's
output gradient and the shortcut's. An eval batch norm's `channel_affine` folds its block's add and relu alike.

A depthwise or float32 pointwise `conv2d` whose output only a `channel_affine` with a scale and a shift reads
(MobileNetV2's eval batch norms) becomes one `conv2d_affine` node (ops/conv_affine.py), the affine and its folded
activation applied as the convolution writes its output.
"""

from __future__ import annotations

import numpy as np

from ember.graph.ir import Graph, Value
from ember.graph.passes.rewrite import Rewriter, control_targets, users_of
from ember.ops._rules import SINGLE_DOUBLE_NP

_NUMBERS = (int, float)


def _activation(node, value):
    """The activation attribute for `node` applied to `value`, or None when it cannot be folded."""
    if node.kind != "op" or node.control_inputs or list(node.inputs[:1]) != [value] or len(node.outputs) != 1:
        return None
    if node.op.name == "relu" and len(node.inputs) == 1 and not node.attrs:
        return ("relu",)
    if node.op.name == "clamp" and len(node.inputs) == 1:
        lo, hi = node.attrs.get("min"), node.attrs.get("max")
        if type(lo) in _NUMBERS and type(hi) in _NUMBERS:
            return ("clamp", lo, hi)
    return None


def _sole_reader(value, users, kept):
    """The one (node, input index) reading `value`, or None (several readers, none, or a graph output)."""
    readers = users.get(value, [])
    return readers[0] if len(readers) == 1 and value not in kept else None


def run(graph: Graph, outputs: list) -> tuple:
    """A copy of `graph` with each foldable batch norm + activation pair (forward or backward) as one node."""
    users = users_of(graph)
    waited = control_targets(graph)
    kept = set(outputs)
    folds: dict = {}  # activation node id -> (channel_affine node, activation attribute)
    bn_relu: dict = {}  # batch_norm node id -> its relu node
    residual: dict = {}  # batch_norm or channel_affine node id -> (its add node, the add's other input, relu or None)
    conv_of = _affine_convs(graph, users, waited, kept)  # channel_affine node id -> the conv2d it takes in
    masked: dict = {}  # batch_norm_backward node id -> the relu_backward node giving its output gradient
    for node in graph.nodes:
        if node.kind != "op" or node.id in waited or node.control_inputs:
            continue
        name = node.op.name
        if name in ("channel_affine", "batch_norm") and node.attrs.get("activation") is None:
            value = node.outputs[0]
            reader = _sole_reader(value, users, kept)
            if reader is None or value.dtype not in SINGLE_DOUBLE_NP:
                continue
            act = reader[0]
            if node.id not in conv_of:  # (a conv2d_affine node takes no residual)
                found = _residual_add(node, reader, users, kept, waited)
                if found is not None:
                    residual[node.id] = found
                    continue
            activation = _activation(act, value)
            if activation is None or act.id in waited or act.outputs[0].dtype != value.dtype:
                continue
            if name == "channel_affine":
                folds[act.id] = (node, activation)
            elif activation == ("relu",):
                bn_relu[node.id] = act
        elif name == "relu_backward" and len(node.inputs) == 2 and not node.attrs:
            reader = _sole_reader(node.outputs[0], users, kept)
            if reader is None:
                continue
            bwd, index = reader
            if (bwd.kind == "op" and bwd.op.name == "batch_norm_backward" and index == 4 and len(bwd.inputs) == 7
                    and bwd.id not in waited and not bwd.control_inputs
                    and node.outputs[0].dtype == node.inputs[0].dtype == node.inputs[1].dtype
                    and node.outputs[0].dtype in SINGLE_DOUBLE_NP):
                masked[bwd.id] = node
    rw = Rewriter(graph)
    fused = {conv.id for conv in conv_of.values()}
    folded = {affine.id for affine, _ in folds.values()}
    dropped = {act.id: bn for bn, act in bn_relu.items()} | {r.id: None for r in masked.values()}
    for add, _, relu in residual.values():
        dropped.update({n.id: None for n in (add, relu) if n is not None})
    for node in graph.nodes:
        if node.id in folded or node.id in dropped or node.id in fused:
            continue  # made with its activation (channel_affine), its batch norm (relu, relu_backward) or its affine
        if node.id in folds:
            affine, activation = folds[node.id]
            rw.alias(node.outputs[0], _affine(rw, affine, activation, conv_of))
        elif node.id in conv_of:
            rw.alias(node.outputs[0], _affine(rw, node, node.attrs.get("activation"), conv_of))
        elif node.id in bn_relu:
            new = rw.add_op(node.op, rw.inputs(node), dict(node.attrs, activation=("relu",)), node.outputs[0].device)
            rw.alias(bn_relu[node.id].outputs[0], new[0])  # the relu's value; y itself had no other reader
            for old, value in zip(node.outputs[1:], new[1:]):
                rw.alias(old, value)
        elif node.id in residual:
            add, other, relu = residual[node.id]
            attrs = dict(node.attrs, activation=None if relu is None else ("relu",))
            new = rw.add_op(node.op, rw.inputs(node) + [rw.value(other)], attrs, node.outputs[0].device)
            new = [new] if isinstance(new, Value) else new  # channel_affine's one output, batch_norm's three
            rw.alias((add if relu is None else relu).outputs[0], new[0])  # y and the sum had no other reader
            for old, value in zip(node.outputs[1:], new[1:]):
                rw.alias(old, value)
        elif node.id in masked:
            relu_bwd = masked[node.id]
            g, relu_out = rw.inputs(relu_bwd)
            inputs = [g if i == 4 else rw.value(v) for i, v in enumerate(node.inputs)] + [relu_out]
            new = rw.add_op(node.op, inputs, dict(node.attrs), node.outputs[0].device)
            for old, value in zip(node.outputs, new):
                rw.alias(old, value)
        else:
            rw.copy(node)
    return rw.graph, rw.outputs(outputs), rw.vmap


def _residual_add(bn, reader, users: dict, kept: set, waited: set):
    """(add node, its other input, the relu reading the sum or None) where batch norm node `bn` (batch_norm, or
    channel_affine with a scale and a shift) can fold the add that alone reads its output, else None: an add of a
    value of the output's shape and dtype, made before `bn` (the folded node takes its place in the graph's order)."""
    add, index = reader
    y_dtype = bn.outputs[0].dtype
    if (add.kind != "op" or add.op.name != "add" or add.attrs or len(add.inputs) != 2 or add.id in waited
            or add.control_inputs or len(bn.inputs) != 3):
        return None
    if bn.op.name == "channel_affine" and not all(isinstance(v, Value) and v.dtype == y_dtype for v in bn.inputs):
        return None
    y, total, other = bn.outputs[0], add.outputs[0], add.inputs[1 - index]
    if (not isinstance(other, Value) or other.dtype != y.dtype or total.dtype != y.dtype or None in y.shape
            or tuple(other.shape) != tuple(y.shape) or other.node.id > bn.id):
        return None
    relu = _sole_reader(total, users, kept)
    if relu is None or relu[0].id in waited or _activation(relu[0], total) != ("relu",) \
            or relu[0].outputs[0].dtype != y.dtype:
        relu = (None,)
    return add, other, relu[0]


def _affine_convs(graph: Graph, users: dict, waited: set, kept: set) -> dict:
    """channel_affine node id -> the conv2d node whose output it alone reads, where the two can be one conv2d_affine
    whose kernel joins them (a scale and a shift, one dtype throughout: a depthwise convolution in float32 or
    float64, or a float32 pointwise one that conv2d runs as a GEMM on its input)."""
    from ember.kernels.conv import pointwise_takes_batch

    found = {}
    for node in graph.nodes:
        if node.kind != "op" or node.op.name != "channel_affine" or node.id in waited or node.control_inputs:
            continue
        x, scale, shift = node.inputs
        conv = getattr(x, "node", None)
        if (conv is None or conv.kind != "op" or conv.op.name != "conv2d" or conv.id in waited or conv.control_inputs
                or _sole_reader(x, users, kept) != (node, 0) or not isinstance(scale, Value)
                or not isinstance(shift, Value)):
            continue
        w = conv.inputs[1]
        dtypes = {conv.inputs[0].dtype, w.dtype, scale.dtype, shift.dtype, x.dtype, node.outputs[0].dtype}
        if len(dtypes) != 1 or x.dtype not in SINGLE_DOUBLE_NP:
            continue
        a = conv.attrs
        depthwise = a["groups"] > 1 and w.shape[1] == 1
        x_in = conv.inputs[0]
        pointwise = (a["groups"] == 1 and x.dtype == np.float32 and None not in x_in.shape
                     and pointwise_takes_batch(x_in, w, a["stride"], a["padding"]))
        if depthwise or pointwise:
            found[node.id] = conv
    return found


def _affine(rw: Rewriter, affine, activation, conv_of: dict):
    """The new graph's value of channel_affine node `affine` with `activation` folded in: one conv2d + affine node
    where conv_of has its convolution, else one channel_affine node."""
    attrs = dict(affine.attrs, activation=activation)
    conv = conv_of.get(affine.id)
    if conv is None:
        return rw.add_op(affine.op, rw.inputs(affine), attrs, affine.outputs[0].device)
    from ember.ops.conv_affine import _conv2d_affine_op

    inputs = rw.inputs(conv) + [rw.value(v) for v in affine.inputs[1:]]  # not its input 0, the conv2d's output
    return rw.add_op(_conv2d_affine_op, inputs, dict(conv.attrs, activation=activation), affine.outputs[0].device)
