"""Control flow in graphs: `If` and `While`, ops whose attributes hold subgraphs (ember.graph.func_graph).

`build_cond(pred, true_fn, false_fn)` builds both branches into function graphs and appends one
`If` node: its inputs are the predicate and every value the branches capture, its outputs a
*record* (output 0) and the branch results. `build_while(cond_fn, body_fn, loop_vars)` builds the
condition and the body and appends one `While` node: inputs are the loop variables and the
captures, outputs a record and the final loop variables. When the graph runs, the If kernel runs
the chosen branch's plan; the While kernel runs the condition and the body plans until the
condition fails (or `maximum_iterations` is reached).

The record holds what gradients need: the exports (see func_graph.py) of the branch taken, or of
every iteration of the body. A plan passes `record=False` to the kernel when nothing reads the
record, so a graph without gradients keeps no intermediates.

Gradients are built by the same machinery. The gradient of an If is another If on the same
predicate whose branches run autograd on the forward branches' outputs back to their inputs,
reading the forward intermediates out of the record. The gradient of a While is another While that
counts the iterations down, running the body's gradient on each iteration's recorded values and
accumulating the gradients of the captured values. Gradients of these gradients are not supported
(they raise). Each node carries its own op instance, since its number of outputs is its own.

Ops that hold subgraphs are never fused or folded into their surroundings: a stateless If/While
with constant inputs may be folded as a whole, a stateful one (assignments, random draws inside)
is never pruned, merged or folded, as for any stateful op.
"""

from __future__ import annotations

import numpy as np

from ember import autograd
from ember.device import scope_device
from ember.dispatch import apply
from ember.errors import ShapeError, fmt_shape
from ember.graph.func_graph import FuncGraphMixin, Subgraph, copy_constant, current_graph
from ember.op import Op, register
from ember.ops import transfer_ops
from ember.ops._rules import FLOAT_NP, spec
from ember.tensor import Tensor

RECORD = np.dtype(object)


def _record(payload) -> np.ndarray:
    rec = np.empty((), dtype=RECORD)
    rec[()] = payload
    return rec


def _pack(specs: list):
    return specs[0] if len(specs) == 1 else tuple(specs)


def _merge_shapes(what: str, a: tuple, b: tuple) -> tuple:
    if len(a) != len(b):
        raise ShapeError(f"{what}: the branches return tensors of ranks {len(a)} and {len(b)} ({fmt_shape(a)} and "
                         f"{fmt_shape(b)}); they must agree")
    return tuple(x if x == y else None for x, y in zip(a, b))


# --- the ops ------------------------------------------------------------------------------------------
class IfOp(Op):
    """Run one of two subgraphs on the inputs, as the boolean scalar `pred` says."""

    differentiable = True
    save_inputs = slice(None)
    records = True  # output 0 is a record the plan may ask the kernel not to fill

    def __init__(self, n_results: int, stateful: bool) -> None:
        self.name = "if" if stateful else "stateless_if"
        self.stateful = stateful
        self.n_outputs = n_results + 1
        self.save_outputs = tuple(range(self.n_outputs))

    def infer(self, pred, *inputs, branches):
        if tuple(pred.shape) not in ((), (1,)) or pred.dtype != np.bool_:
            raise ShapeError(f"cond: the predicate must be a bool scalar, got {pred.dtype.name}{fmt_shape(pred.shape)}")
        t, f = branches
        specs = [spec((), RECORD)]
        for a, b in zip(t.outputs, f.outputs):
            specs.append(spec(_merge_shapes("cond", tuple(a.shape), tuple(b.shape)), a.dtype))
        return _pack(specs)

    def kernel(self, xp, pred, *inputs, branches, record=True):
        k = 0 if bool(np.asarray(pred).reshape(())) else 1
        outs, exports = branches[k].run(inputs, record)
        return _pack([_record((k, exports) if record else None)] + outs)

    def vjp(self, ctx, g_record, *grads):
        return _if_gradient(ctx, grads)

    def specialize_node(self, attrs: dict, inputs: list):
        """(op, attrs) with the branches rebuilt for the inputs' (now known) shapes."""
        specs = [_spec_of(x) for x in inputs[1:]]
        branches = tuple(replay_subgraph(b, specs) for b in attrs["branches"])
        return IfOp(self.n_outputs - 1, self.stateful), dict(attrs, branches=branches)


class WhileOp(Op):
    """Run `body` on the loop variables while `cond` holds (at most `maximum_iterations` times)."""

    differentiable = True
    save_inputs = slice(None)
    records = True

    def __init__(self, n_vars: int, stateful: bool) -> None:
        self.name = "while" if stateful else "stateless_while"
        self.stateful = stateful
        self.n_outputs = n_vars + 1
        self.save_outputs = tuple(range(self.n_outputs))

    def infer(self, *inputs, cond, body, n_vars, maximum_iterations, max_input, invariants):
        return _pack([spec((), RECORD)] + [spec(v.shape, v.dtype) for v in body.inputs[:n_vars]])

    def kernel(self, xp, *inputs, cond, body, n_vars, maximum_iterations, max_input, invariants, record=True):
        if max_input:
            maximum_iterations, inputs = int(np.asarray(inputs[-1])), inputs[:-1]
        values, captured = list(inputs[:n_vars]), list(inputs[n_vars:])
        trace = [] if record else None
        i = 0
        while maximum_iterations is None or i < maximum_iterations:
            (go,), _ = cond.run(values + captured, False)
            if not bool(np.asarray(go).reshape(())):
                break
            values, exports = body.run(values + captured, record)
            if record:
                trace.append(exports)
            i += 1
        return _pack([_record(trace)] + values)

    def vjp(self, ctx, g_record, *grads):
        return _while_gradient(ctx, grads)

    def specialize_node(self, attrs: dict, inputs: list):
        """(op, attrs) with the condition and body rebuilt for the inputs' shapes (loop variables whose shape
        may change keep their invariant)."""
        n = attrs["n_vars"]
        body = attrs["body"]
        specs = [_spec_of(x) for x in inputs[:len(body.inputs)]]
        for j, inv in enumerate(attrs["invariants"]):
            if inv is not None:  # the variable's shape may change from one iteration to the next
                specs[j] = (inv, specs[j][1])
        new_body = replay_subgraph(body, specs)
        new_cond = replay_subgraph(attrs["cond"], specs)
        return WhileOp(n, self.stateful), dict(attrs, cond=new_cond, body=new_body)


class BranchSavedOp(Op):
    """An exported value of the branch an If took, read out of its record (for the If's gradient)."""

    name = "branch_saved"
    differentiable = False

    def infer(self, rec, index, shape, dtype):
        return spec(shape, dtype)

    def kernel(self, xp, rec, index, shape, dtype):
        return rec[()][1][index]


branch_saved_op = register(BranchSavedOp())


class IterationSavedOp(Op):
    """An exported value of iteration k of a While's body, read out of its record (for the While's gradient)."""

    name = "iteration_saved"
    differentiable = False

    def infer(self, rec, k, index, shape, dtype):
        return spec(shape, dtype)

    def kernel(self, xp, rec, k, index, shape, dtype):
        return rec[()][int(k)][index]


iteration_saved_op = register(IterationSavedOp())


class IterationCountOp(Op):
    """How many iterations a While's record holds (an int64 scalar)."""

    name = "iteration_count"
    differentiable = False

    def infer(self, rec):
        return spec((), np.dtype(np.int64))

    def kernel(self, xp, rec):
        return xp.asarray(len(rec[()]), dtype=np.int64)


iteration_count_op = register(IterationCountOp())


def _spec_of(x) -> tuple:
    return (tuple(x.shape), np.dtype(x.dtype))


# --- building -----------------------------------------------------------------------------------------
def _outer_of(tensors: list, graph_cls):
    """The graph a control-flow node is built in: the one being built now, else that of its inputs."""
    symbolic = [t for t in tensors if isinstance(t, Tensor) and getattr(t._data, "symbolic", False)]
    default = symbolic[0]._data.node.graph if symbolic else None
    outer = current_graph(default)
    if outer is None:
        raise TypeError("control flow needs graph tensors: build it in a graph (ember.v1)")
    return outer


def _into(outer, t: Tensor) -> Tensor:
    if t._data.node.graph is outer:
        return t
    if not isinstance(outer, FuncGraphMixin):
        raise ValueError(f"a tensor of graph {t._data.node.graph.name} cannot be used in graph {outer.name}")
    return outer.capture_tensor(t)


def _finish_output(fg, x, device) -> Tensor:
    """A function's result as a tensor of `fg` on the node's device (built while fg is being built)."""
    if not isinstance(x, Tensor):
        raise TypeError(f"control flow: a function returned {type(x).__name__}, expected a tensor")
    if not getattr(x._data, "symbolic", False):
        x = Tensor._make(fg.capture(x), x._device)  # a concrete tensor: read at every run
    elif x._data.node.graph is not fg:
        x = fg.capture_tensor(x)
    if x._device is not device:
        x = transfer_ops.transfer(x, device)
    return x


def _unify(graphs: list, heads: list) -> tuple:
    """Give every graph a placeholder for every value any of them captured, in one order.

    Returns (outer tensors, per graph: its input tensors = heads[i] + one per outer tensor).
    """
    order, seen = [], set()
    for g in graphs:
        for outer_t, _ in g.captures:
            if id(outer_t._data) not in seen:
                seen.add(id(outer_t._data))
                order.append(outer_t)
    per_graph = []
    for g, head in zip(graphs, heads):
        inner = {id(o._data): t for o, t in g.captures}
        ins = list(head)
        for o in order:
            t = inner.get(id(o._data))
            if t is None:  # this graph does not read it: an unused input
                t = g.new_input(o._data.shape, o._data.dtype, o._requires_grad and o._data.dtype in FLOAT_NP)
            ins.append(t)
        per_graph.append(ins)
    return order, per_graph


def _node_inputs(outer, tensors: list, device) -> list:
    """The node's inputs on its device (values from elsewhere cross through send/recv pairs)."""
    return [t if t._device is device else transfer_ops.transfer(t, device) for t in tensors]


def _lifted(graphs: list) -> list:
    out = []
    for g in graphs:
        out.extend(n for n in g.lifted_control if n not in out)
    return out


def build_cond(pred: Tensor, true_fn, false_fn, graph_cls, *, name: str = "cond", is_gradient: bool = False) -> list:
    """The outputs of an If node choosing between `true_fn` and `false_fn`.

    Each function takes no arguments and returns (tensors, control nodes): the results, and nodes
    that must run when the branch is taken (operations it returns).
    """
    outer = _outer_of([pred], graph_cls)
    pred = _into(outer, pred)
    device = scope_device() or pred._device
    graphs, results, controls = [], [], []
    for fn, label in ((true_fn, "true"), (false_fn, "false")):
        fg = graph_cls(outer, device, f"{outer.name}/{name}_{label}")
        with fg.building():
            outs, ctrl = fn()
            outs = [_finish_output(fg, x, device) for x in outs]
        graphs.append(fg)
        results.append(outs)
        controls.append(list(ctrl))
    if len(results[0]) != len(results[1]):
        raise ValueError(f"{name}: the branches return {len(results[0])} and {len(results[1])} values; they must "
                         "return the same number, type and structure of values")
    for a, b in zip(*results):
        if a._data.dtype != b._data.dtype:
            raise TypeError(f"{name}: the branches return {a._data.dtype.name} and {b._data.dtype.name} for the same "
                            "output; they must agree")
    order, ins = _unify(graphs, [[], []])
    branches = tuple(Subgraph(g, i, o, c, is_gradient=is_gradient) for g, i, o, c in zip(graphs, ins, results, controls))
    op = IfOp(len(results[0]), any(b.stateful for b in branches))
    with outer.control_dependencies(_lifted(graphs)):
        outs = apply(op, *_node_inputs(outer, [pred] + order, device), branches=branches)
    return list(outs[1:]) if isinstance(outs, tuple) else []


def build_while(cond_fn, body_fn, loop_vars: list, graph_cls, *, shape_invariants=None, maximum_iterations=None,
                name: str = "while", is_gradient: bool = False) -> list:
    """The final loop variables of a While node: `body_fn(*vars)` (a list as long as `loop_vars`) repeated
    while `cond_fn(*vars)` (a bool scalar) holds, at most `maximum_iterations` times (an int or a tensor)."""
    outer = _outer_of(list(loop_vars) + [maximum_iterations], graph_cls)
    loop_vars = [_into(outer, v) for v in loop_vars]
    device = scope_device() or loop_vars[0]._device
    n = len(loop_vars)
    invariants = list(shape_invariants) if shape_invariants is not None else [None] * n
    shapes = []
    for v, inv in zip(loop_vars, invariants):
        shape = tuple(v._data.shape) if inv is None else tuple(inv)
        if inv is not None and (len(shape) != len(v.shape) or any(
                d is not None and d != s for d, s in zip(shape, v._data.shape) if s is not None)):
            raise ValueError(f"{name}: the shape invariant {fmt_shape(shape)} does not fit loop variable of shape "
                             f"{fmt_shape(v.shape)}")
        shapes.append(shape)

    def placeholders(fg) -> list:
        return [fg.new_input(s, v._data.dtype, v._data.dtype in FLOAT_NP) for s, v in zip(shapes, loop_vars)]

    body_g = graph_cls(outer, device, f"{outer.name}/{name}_body")
    with body_g.building():
        body_in = placeholders(body_g)
        outs = body_fn(*body_in)
        if len(outs) != n:
            raise ValueError(f"{name}: the body returns {len(outs)} values for {n} loop variables")
        outs = [_finish_output(body_g, x, device) for x in outs]
    for j, (v, out, shape) in enumerate(zip(loop_vars, outs, shapes)):
        if out._data.dtype != v._data.dtype:
            raise TypeError(f"{name}: loop variable {j} ({v.name}) enters the loop as {v._data.dtype.name} but the body returns "
                            f"{out._data.dtype.name}")
        got = tuple(out._data.shape)
        if len(got) != len(shape) or any(d is not None and g != d for g, d in zip(got, shape)):
            what = f"Input tensor {v.name!r}" if v.name else f"Loop variable {j}"
            raise ValueError(
                f"{name}: {what} enters the loop with shape {fmt_shape(shape)}, but has shape "
                f"{fmt_shape(got)} after one iteration. To allow the shape to vary across iterations, use the "
                "`shape_invariants` argument of tf.while_loop to specify a less-specific shape."
            )
    cond_g = graph_cls(outer, device, f"{outer.name}/{name}_cond")
    with cond_g.building():
        cond_in = placeholders(cond_g)
        go = _finish_output(cond_g, cond_fn(*cond_in), device)
    if tuple(go._data.shape) not in ((), (1,)) or go._data.dtype != np.bool_:
        raise TypeError(f"{name}: the condition must return a bool scalar, got "
                        f"{go._data.dtype.name}{fmt_shape(go._data.shape)}")
    order, (cond_ins, body_ins) = _unify([cond_g, body_g], [cond_in, body_in])
    cond = Subgraph(cond_g, cond_ins, [go], varying=n, is_gradient=is_gradient)
    body = Subgraph(body_g, body_ins, outs, varying=n, is_gradient=is_gradient)
    extra, max_attr = [], maximum_iterations
    if isinstance(maximum_iterations, Tensor):
        extra, max_attr = [_into(outer, maximum_iterations)], None
    elif maximum_iterations is not None:
        max_attr = int(maximum_iterations)
    op = WhileOp(n, cond.stateful or body.stateful)
    with outer.control_dependencies(_lifted([cond_g, body_g])):
        res = apply(op, *_node_inputs(outer, loop_vars + order + extra, device), cond=cond, body=body, n_vars=n,
                    maximum_iterations=max_attr, max_input=bool(extra),
                    invariants=tuple(None if inv is None else tuple(inv) for inv in invariants))
    return list(res[1:])


# --- gradients ----------------------------------------------------------------------------------------
def _no_second_order(subgraphs, what: str) -> None:
    if any(s.is_gradient for s in subgraphs):
        raise NotImplementedError(
            f"the gradient of a gradient through {what} is not supported (second-order derivatives through "
            "control flow); take first-order gradients only"
        )


def _resolver(fg, sub: Subgraph, outside: list, saved):
    """How the gradient graph `fg` reads a value of the forward subgraph `sub`: an input that stays the same
    is its outside value, a constant is copied, an export comes from `saved(index, value)`."""

    def resolve(t: Tensor) -> Tensor:
        v = t._data
        i = sub.input_index.get(v)
        if i is not None and i >= sub.varying:
            return fg.capture_tensor(outside[i - sub.varying])
        if v.node.kind == "constant":
            return copy_constant(fg, t)
        k = sub.export_index.get(v)
        if k is None:
            raise RuntimeError(f"control-flow gradient: a gradient rule read {v!r} ({v.node.op_name}) of "
                               f"{sub.graph.name}, which the forward pass did not save")
        out = saved(k, v)  # read out of the record, on the node's device
        return out if out._device is v.device else transfer_ops.transfer(out, v.device)

    return resolve


def _subgraph_grads(sub: Subgraph, out_grads: list, wrt: list) -> list:
    """Autograd through `sub` (in the graph being built now): d(outputs)/d(inputs[wrt]) given out_grads."""
    pairs = [(t, g) for t, g in zip(sub.out_tensors, out_grads) if g is not None and t._requires_grad]
    targets = [sub.in_tensors[i] for i in wrt]
    live = [t for t in targets if t._requires_grad]
    grads = {}
    if pairs and live:
        got = autograd.grad([t for t, _ in pairs], live, grad_outputs=[g for _, g in pairs], create_graph=True,
                            retain_graph=True, allow_unused=True)
        grads = {id(t): g for t, g in zip(live, got)}
    return [grads.get(id(t)) for t in targets]


def _zeros(t: Tensor) -> Tensor:
    from ember import ops

    return ops.zeros_like(t)


def _if_gradient(ctx, grads) -> tuple:
    t_branch, f_branch = ctx.attrs["branches"]
    _no_second_order((t_branch, f_branch), "tf.cond")
    n_in = len(ctx.edges) - 1
    pred = ctx.input(0)
    inputs = [ctx.input(1 + i) for i in range(n_in)]
    rec = ctx.output_at(0)
    outs = [ctx.output_at(1 + j) for j in range(len(grads))]
    gs = [None if outs[j]._data.dtype not in FLOAT_NP else (g if g is not None else _zeros(outs[j]))
          for j, g in enumerate(grads)]
    wrt = [i for i in range(n_in) if ctx.needs_grad(1 + i)]
    if not wrt:
        return (None,) * (n_in + 1)
    graph_cls = type(t_branch.graph)

    def branch(sub: Subgraph):
        def fn():
            from ember.graph.func_graph import current_graph

            fg = current_graph()
            r = fg.capture_tensor(rec)
            fg.resolvers[sub.graph] = _resolver(
                fg, sub, inputs, lambda k, v: apply(branch_saved_op, r, index=k, shape=tuple(v.shape), dtype=v.dtype))
            got = _subgraph_grads(sub, gs, wrt)
            return [g if g is not None else _zeros(fg.capture_tensor(inputs[i])) for g, i in zip(got, wrt)], []

        return fn

    res = build_cond(pred, branch(t_branch), branch(f_branch), graph_cls, name="cond_grad", is_gradient=True)
    out = [None] * (n_in + 1)
    for i, g in zip(wrt, res):
        out[1 + i] = g
    return tuple(out)


def _while_gradient(ctx, grads) -> tuple:
    attrs = ctx.attrs
    body: Subgraph = attrs["body"]
    _no_second_order((attrs["cond"], body), "tf.while_loop")
    n = attrs["n_vars"]
    n_in = len(ctx.edges)
    n_cap = len(body.inputs) - n
    inputs = [ctx.input(i) for i in range(n_in)]
    captured = inputs[n:n + n_cap]
    rec = ctx.output_at(0)
    finals = [ctx.output_at(1 + j) for j in range(n)]
    float_vars = [j for j in range(n) if body.inputs[j].dtype in FLOAT_NP]
    caps = [c for c in range(n_cap) if ctx.needs_grad(n + c)]
    if not caps and not any(ctx.needs_grad(j) for j in float_vars):
        return (None,) * n_in
    g0 = [grads[j] if grads[j] is not None else _zeros(finals[j]) for j in float_vars]
    acc0 = [_zeros(captured[c]) for c in caps]
    count = apply(iteration_count_op, rec)
    nv = len(float_vars)

    def cond_fn(k, *rest):
        return k > 0

    def body_fn(k, *rest):
        from ember.graph.func_graph import current_graph

        fg = current_graph()
        gv, acc = list(rest[:nv]), list(rest[nv:])
        k1 = k - 1
        r = fg.capture_tensor(rec)
        fg.resolvers[body.graph] = _resolver(
            fg, body, captured,
            lambda i, v: apply(iteration_saved_op, r, k1, index=i, shape=tuple(v.shape), dtype=v.dtype))
        out_grads = [None] * n
        for j, g in zip(float_vars, gv):
            out_grads[j] = g
        got = _subgraph_grads(body, out_grads, float_vars + [n + c for c in caps])
        new_gv = [g if g is not None else _zeros(x) for g, x in zip(got[:nv], gv)]
        new_acc = [a + g if g is not None else a for a, g in zip(acc, got[nv:])]
        return [k1] + new_gv + new_acc

    given = attrs["invariants"]
    invariants = [None] + [given[j] for j in float_vars] + [None] * len(caps)
    res = build_while(cond_fn, body_fn, [count] + g0 + acc0, type(body.graph), shape_invariants=invariants,
                      name="while_grad", is_gradient=True)
    out = [None] * n_in
    for j, g in zip(float_vars, res[1:1 + nv]):
        out[j] = g if ctx.needs_grad(j) else None
    for c, g in zip(caps, res[1 + nv:]):
        out[n + c] = g
    return tuple(out)


# --- shape specialisation -------------------------------------------------------------------------------
def replay_subgraph(sub: Subgraph, specs: list) -> Subgraph:
    """The subgraph rebuilt with inputs of the given (shape, dtype) specs: every shape rule runs again, so
    values of now-known shapes are known inside too (and nested control flow is rebuilt the same way)."""
    from ember.graph.replay import Replay

    old = sub.graph
    fg = type(old)(old.outer, old.func_device, old.name)
    replay = Replay(fg)
    ins = []
    for t, (shape, dtype) in zip(sub.in_tensors, specs):
        new = fg.new_input(shape, dtype, t._requires_grad)
        replay.tensors[t._data] = new
        ins.append(new)
    for node in old.nodes:
        if node.kind == "placeholder" and node.outputs[0] in replay.tensors:
            continue
        replay.node(node)
    outs = [replay.tensors[v] for v in sub.outputs]
    control = [replay.nodes[c] for c in sub.control]
    return Subgraph(fg, ins, outs, control, varying=sub.varying, is_gradient=sub.is_gradient)
