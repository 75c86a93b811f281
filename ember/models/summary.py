"""`em.summary`: a model's layers, output shapes, parameters, multiply-adds and training-memory estimate.

By default the forward pass runs on a shape-only copy of the model on the meta device, so even large
networks are summarised without allocating activations or a second set of weights. Multiply-adds and
saved activations are read from the autograd graph that forward records, so functional code inside a
module (attention's matmuls, a residual add) is counted too, and attributed to the module that ran it.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ember import autograd, creation
from ember.autograd import Node, grad_mode, walk
from ember.backends.meta import MetaArray
from ember.device import as_device
from ember.dtypes import float32
from ember.nn import Module, Parameter
from ember.ops.linalg import parse_einsum
from ember.tensor import Tensor

# Optimizer state kept per parameter element, in parameter-sized copies (Adam: two moments).
OPTIMIZER_STATE = {"none": 0, "sgd": 0, "momentum": 1, "sgd_momentum": 1, "rmsprop": 1, "adagrad": 1, "adam": 2,
                   "adamw": 2}
_MB = 1024 * 1024


@dataclass
class SummaryRow:
    """One module call: its dotted name, class, nesting depth, output shape(s), parameters and mult-adds."""

    name: str
    type: str
    depth: int
    output_shape: list = field(default_factory=list)
    params: int = 0
    mult_adds: int = 0


@dataclass
class ModelSummary:
    """What em.summary returns; str() is the table."""

    model_name: str
    rows: list[SummaryRow]
    input_shapes: list
    total_params: int
    trainable_params: int
    total_mult_adds: int
    input_bytes: int
    param_bytes: int
    buffer_bytes: int
    gradient_bytes: int
    optimizer_bytes: int
    activation_bytes: int
    optimizer: str

    @property
    def non_trainable_params(self) -> int:
        """Parameters with requires_grad=False."""
        return self.total_params - self.trainable_params

    @property
    def estimated_memory_bytes(self) -> int:
        """Training footprint: parameters, buffers, gradients, optimizer state and saved activations."""
        return self.param_bytes + self.buffer_bytes + self.gradient_bytes + self.optimizer_bytes + self.activation_bytes

    def __str__(self) -> str:
        headers = ("Layer (type)", "Output shape", "Param #", "Mult-adds")
        body = [("  " * r.depth + (r.name or self.model_name) + (f" ({r.type})" if r.name else ""),
                 _fmt_shapes(r.output_shape), _fmt_count(r.params), _fmt_count(r.mult_adds)) for r in self.rows]
        widths = [max(len(h), *(len(row[i]) for row in body)) for i, h in enumerate(headers)]

        def line(cells: Sequence[str]) -> str:
            return "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths)))

        rule = "=" * len(line(headers))
        out = [rule, line(headers), rule, *(line(row) for row in body), rule]
        out += [
            f"Total params: {self.total_params:,}",
            f"Trainable params: {self.trainable_params:,}",
            f"Non-trainable params: {self.non_trainable_params:,}",
            f"Total mult-adds: {_fmt_big(self.total_mult_adds)} ({self.total_mult_adds:,})",
            rule,
            f"Input size (MB): {self.input_bytes / _MB:,.2f}",
            f"Params size (MB): {self.param_bytes / _MB:,.2f}",
            f"Buffers size (MB): {self.buffer_bytes / _MB:,.2f}",
            f"Gradients (MB): {self.gradient_bytes / _MB:,.2f}",
            f"Optimizer state (MB, {self.optimizer}): {self.optimizer_bytes / _MB:,.2f}",
            f"Activations saved for backward (MB): {self.activation_bytes / _MB:,.2f}",
            f"Estimated training memory (MB): {self.estimated_memory_bytes / _MB:,.2f}",
            rule,
        ]
        return "\n".join(out)

    __repr__ = __str__


def summary(model: Module, input_size: Any = None, dtypes: Sequence | None = None, device: Any = "meta", *,
            depth: int = 3, optimizer: str = "adam") -> ModelSummary:
    """Summarise model on an example input: a shape such as (1, 3, 224, 224), a tuple of shapes, or tensor(s).

    dtypes gives each input's dtype (default: the model's `input_dtypes` attribute, else float32; one
    shape then serves every input). On device="meta" (the default) a meta copy of the model runs,
    without the model's own forward hooks; any other device runs the model itself on zero/random
    inputs there, restoring its buffers and train/eval modes afterwards. The forward runs in training
    mode, as in a training step. Rows deeper than `depth` are folded into their parent's row.
    `optimizer` (adam, adamw, sgd, momentum, rmsprop, adagrad, none) sets the optimizer-state estimate.
    """
    if optimizer not in OPTIMIZER_STATE:
        raise ValueError(f"summary: unknown optimizer {optimizer!r}; expected one of {sorted(OPTIMIZER_STATE)}")
    if input_size is None:
        raise ValueError("summary: give an input size such as (1, 3, 224, 224) or an example input tensor")
    device = as_device(device)
    inputs = _example_inputs(model, input_size, dtypes, device)
    work = _meta_copy(model) if device.type == "meta" else model
    modes = [(m, m.training) for m in work.modules()]
    # A training-mode forward updates batch-norm statistics: keep the real model's as they were.
    kept = [] if work is not model else [(b, b.detach().clone()) for b in work.buffers()]
    tracer = _Tracer(work, depth)
    work.train()
    try:
        with grad_mode.enable_grad():
            output = tracer.run(inputs)
    finally:
        tracer.remove()
        for m, mode in modes:
            m.training = mode
        with grad_mode.no_grad():
            for b, value in kept:
                b.copy_(value)

    params = list(model.parameters())
    buffers = list(model.buffers())
    trainable = [p for p in params if p.requires_grad]
    trainable_bytes = sum(_nbytes(p) for p in trainable)
    rows = tracer.rows()
    return ModelSummary(
        model_name=type(model).__name__,
        rows=rows,
        input_shapes=[tuple(x.shape) for x in inputs],
        total_params=sum(p.numel() for p in params),
        trainable_params=sum(p.numel() for p in trainable),
        total_mult_adds=sum(r.mult_adds for r in rows),
        input_bytes=sum(_nbytes(x) for x in inputs),
        param_bytes=sum(_nbytes(p) for p in params),
        buffer_bytes=sum(_nbytes(b) for b in buffers),
        gradient_bytes=trainable_bytes,
        optimizer_bytes=OPTIMIZER_STATE[optimizer] * trainable_bytes,
        activation_bytes=_saved_activation_bytes(output, work),
        optimizer=optimizer,
    )


# --- inputs and the meta copy -------------------------------------------------------------------
def _is_shape(x: Any) -> bool:
    return isinstance(x, (tuple, list)) and all(isinstance(d, int) and not isinstance(d, bool) for d in x)


def _example_inputs(model: Module, input_size: Any, dtypes: Sequence | None, device) -> list[Tensor]:
    """One tensor per forward argument, on device."""
    if isinstance(input_size, Tensor) or _is_shape(input_size):
        specs = [input_size]
    elif isinstance(input_size, (tuple, list)) and all(isinstance(s, Tensor) or _is_shape(s) for s in input_size):
        specs = list(input_size)
    else:
        raise TypeError(f"summary: input_size must be a shape, a tuple of shapes, or tensor(s); got {input_size!r}")
    if dtypes is None:
        dtypes = getattr(model, "input_dtypes", None)
        if dtypes is not None and len(dtypes) > 1 and len(specs) == 1 and not isinstance(specs[0], Tensor):
            specs = specs * len(dtypes)  # one shape for a model with several inputs (ncf's user and item ids)
    if dtypes is not None and not isinstance(dtypes, (tuple, list)):
        dtypes = [dtypes]
    if dtypes is not None and len(dtypes) != len(specs):
        raise ValueError(f"summary: {len(specs)} input(s) but {len(dtypes)} dtype(s)")
    out = []
    for i, s in enumerate(specs):
        if isinstance(s, Tensor):
            out.append(creation.empty(tuple(s.shape), dtype=s.dtype, device=device) if device.type == "meta"
                       else s.to(device))
            continue
        dtype = dtypes[i] if dtypes is not None else float32
        if device.type == "meta":
            out.append(creation.empty(tuple(s), dtype=dtype, device=device))
        elif dtype.is_floating_point:
            out.append(creation.randn(tuple(s), dtype=dtype, device=device))
        else:
            out.append(creation.zeros(tuple(s), dtype=dtype, device=device))  # ids: 0 is valid for any table size
    return out


def _meta_copy(model: Module) -> Module:
    """A deep copy of model whose parameters and buffers are meta tensors (nothing real is allocated).

    Every floating-point parameter requires grad in the copy, so each op that uses one is recorded
    (and counted) even where the original is frozen.
    """
    memo: dict[int, Any] = {}
    for p in model.parameters():
        memo[id(p)] = Parameter(creation.empty(tuple(p.shape), dtype=p.dtype, device="meta"),
                                requires_grad=p.dtype.is_floating_point)
    for b in model.buffers():
        memo[id(b)] = creation.empty(tuple(b.shape), dtype=b.dtype, device="meta")
    for m in model.modules():  # plain tensor attributes (cached masks, tables) would be copied for real
        for v in vars(m).values():
            if isinstance(v, Tensor) and id(v) not in memo:
                memo[id(v)] = creation.empty(tuple(v.shape), dtype=v.dtype, device="meta")
    twin = copy.deepcopy(model, memo)
    for m in twin.modules():  # the user's hooks stay on the real model; they may not expect meta tensors
        for store in ("_forward_hooks", "_forward_hooks_with_kwargs", "_forward_hooks_always_called",
                      "_forward_pre_hooks", "_forward_pre_hooks_with_kwargs"):
            getattr(m, store).clear()
    return twin


# --- tracing module calls -----------------------------------------------------------------------
class _Call:
    __slots__ = ("module", "name", "depth", "parent", "boundary", "start_seq", "nodes", "output_shape", "params")

    def __init__(self, module: Module, name: str, depth: int, parent: _Call | None, boundary: set,
                 start_seq: int) -> None:
        self.module = module
        self.name = name
        self.depth = depth
        self.parent = parent
        self.boundary = boundary  # ids of the nodes that made this call's inputs: where its own ops end
        self.start_seq = start_seq  # nodes numbered up to this were recorded before the call began
        self.nodes: list[Node] = []
        self.output_shape: list = []
        self.params = 0


def _node_count() -> int:
    """A number below every autograd node recorded from now on (Node.seq numbers them in creation order)."""
    return autograd.seq_mark()


class _Tracer:
    """Forward hooks that record each module call and claim the graph nodes created inside it."""

    def __init__(self, model: Module, depth: int) -> None:
        self.model = model
        self.max_depth = depth
        self.calls: list[_Call] = []
        self.stack: list[_Call] = []
        self.claimed: set[int] = set()
        self.seen_params: set[int] = set()
        self.names = {id(m): n for n, m in model.named_modules()}
        self.handles = []
        for m in model.modules():
            self.handles.append(m.register_forward_pre_hook(self._pre, with_kwargs=True))
            self.handles.append(m.register_forward_hook(self._post, always_call=True))

    def run(self, inputs: list[Tensor]) -> Any:
        return self.model(*inputs)

    def remove(self) -> None:
        for h in self.handles:
            h.remove()

    def _pre(self, module: Module, args: tuple, kwargs: dict) -> None:
        parent = self.stack[-1] if self.stack else None
        boundary = {id(t.grad_fn) for t in _tensors((args, kwargs)) if t.grad_fn is not None}
        call = _Call(module, self.names.get(id(module), type(module).__name__), len(self.stack), parent, boundary,
                     _node_count())
        own = [p for p in module.parameters(recurse=False) if id(p) not in self.seen_params]
        self.seen_params.update(id(p) for p in own)
        call.params = sum(p.numel() for p in own)
        self.calls.append(call)
        self.stack.append(call)

    def _post(self, module: Module, args: tuple, output: Any) -> None:
        call = self.stack.pop()
        if output is None:  # forward raised; the error propagates on its own
            return
        outs = _tensors(output)
        call.output_shape = [tuple(t.shape) for t in outs]
        # Walk back from the outputs to the inputs; nodes not claimed by a submodule's call are this call's.
        def inside(node) -> bool:
            return id(node) not in call.boundary and node.seq > call.start_seq

        roots = [t.grad_fn for t in outs if t.grad_fn is not None and inside(t.grad_fn)]
        for node in walk(roots, follow=inside):
            if id(node) not in self.claimed:
                self.claimed.add(id(node))
                call.nodes.append(node)

    def rows(self) -> list[SummaryRow]:
        """One row per call up to max_depth; deeper calls add their parameters and mult-adds to the nearest shown one."""
        out: dict[int, SummaryRow] = {}
        for call in self.calls:
            shown = call
            while shown.depth > self.max_depth:
                shown = shown.parent
            if shown is call:
                out[id(call)] = SummaryRow(call.name, type(call.module).__name__, call.depth, call.output_shape)
            row = out[id(shown)]
            row.params += call.params
            row.mult_adds += sum(_mult_adds(n) for n in call.nodes)
        return list(out.values())


def _tensors(obj: Any) -> list[Tensor]:
    """The tensors in a nested structure of tuples, lists and dicts, in order."""
    if isinstance(obj, Tensor):
        return [obj]
    if isinstance(obj, dict):
        obj = list(obj.values())
    if isinstance(obj, (tuple, list)):
        return [t for x in obj for t in _tensors(x)]
    return []


# --- counting ----------------------------------------------------------------------------------
def _specs(node: Node) -> list:
    return [None if m is None else MetaArray(*m) for m in node.in_meta]


def _mult_adds(node: Node) -> int:
    """Multiply-adds of one recorded op: matmuls, linear layers, convolutions, einsums and attention; 0 for the rest."""
    name = node.op.name
    meta = node.in_meta
    if name == "linear":
        (x, _), (w, _) = meta[0], meta[1]
        return math.prod(x[:-1]) * w[0] * w[1]
    if name == "matmul":
        out = node.op.infer(*_specs(node), **node.attrs).shape
        return math.prod(out) * meta[0][0][-1]
    if name == "conv2d":
        out = node.op.infer(*_specs(node), **node.attrs).shape
        return math.prod(out) * math.prod(meta[1][0][1:])
    if name == "conv_transpose2d":
        return math.prod(meta[0][0]) * math.prod(meta[1][0][1:])
    if name == "scaled_dot_product_attention":  # Q K^T and P V
        q, k, v = meta[0][0], meta[1][0], meta[2][0]
        return math.prod(q[:-1]) * k[-2] * (q[-1] + v[-1])
    if name == "einsum" and len(meta) > 1:
        shapes = [m[0] for m in meta]
        subs, _ = parse_einsum(node.attrs["equation"], shapes)
        sizes: dict[str, int] = {}
        for sub, shape in zip(subs, shapes):
            for c, n in zip(sub, shape):
                sizes[c] = max(sizes.get(c, 1), n)
        return math.prod(sizes.values())
    return 0


def _nbytes(t: Tensor) -> int:
    return t.numel() * t.dtype.itemsize


def _saved_activation_bytes(output: Any, model: Module) -> int:
    """Bytes of the distinct tensors the recorded graph keeps for backward, parameters and buffers excluded."""
    state = {id(t._data) for t in list(model.parameters()) + list(model.buffers())}
    seen_storage: set[int] = set()
    total = 0

    def add(data: Any) -> None:
        nonlocal total
        if id(data) in state or id(data) in seen_storage:
            return
        seen_storage.add(id(data))
        total += int(getattr(data, "nbytes", 0))

    for node in walk([t.grad_fn for t in _tensors(output)]):
        # The autograd node's saved-tensor slots: inputs as (tensor, version), outputs as (array, ...).
        for x, _ in (getattr(node, "_saved", None) or {}).values():
            if isinstance(x, Tensor):
                add((x._base if x._base is not None else x)._data)
        for entry in (getattr(node, "_out_saved", None) or {}).values():
            add(entry[0])
    return total


def _fmt_count(n: int) -> str:
    return f"{n:,}" if n else "--"


def _fmt_big(n: int) -> str:
    for unit, scale in (("T", 1e12), ("G", 1e9), ("M", 1e6), ("K", 1e3)):
        if n >= scale:
            return f"{n / scale:.2f} {unit}"
    return str(n)


def _fmt_shapes(shapes: list) -> str:
    return ", ".join(str(list(s)) for s in shapes) if shapes else "--"
