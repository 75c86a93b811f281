"""Static shapes of unknown rank in ember.v1 graphs, reported as TF reports them.

A placeholder made without a shape has unknown rank: TF's `get_shape()` says so, and so does the
shape of every op built on it, except where the result's shape does not depend on the input's
(`tf.shape` is a vector of unknown length, `tf.size`, `tf.rank` and full reductions are scalars,
`tf.reshape` has the shape it was asked for). Ember's shape rules need a rank, so such a value is
built with a stand-in shape (the placeholder's is ()); the graph records which values stand in,
their static shape reads as unknown, and a run specialises the graph to the fed shapes first
(see specialize.py), where every shape is real again.
"""

from __future__ import annotations

from ember.errors import ShapeError
from ember.graph import ir
from ember.ops._rules import spec

# Reductions whose result is a scalar when they reduce every dimension (no `dim`) without keeping them.
_REDUCTIONS = frozenset({"sum", "mean", "amax", "amin", "prod", "all", "any", "logsumexp", "max", "min"})
_RESHAPES = frozenset({"reshape", "view"})


def _known_spec(op, inputs, attrs):
    """The output spec of `op` on an input of unknown rank where TF knows it anyway (None where it does not)."""
    name = op.name
    x = inputs[0] if inputs else None
    if name == "dynamic_shape":
        return spec((None,), attrs["dtype"])
    if name in ("element_count", "rank_of"):
        return spec((), attrs["dtype"])
    if name in _RESHAPES:
        return spec(tuple(None if d == -1 else d for d in attrs["shape"]), x.dtype)
    return None


def _is_full_reduction(op, attrs) -> bool:
    return op.name in _REDUCTIONS and attrs.get("dim") is None and not attrs.get("keepdim", False)


def add_op_on_unknown_rank(graph, op, inputs: list, attrs: dict, device, name, add):
    """Build `op` (whose inputs include a value of unknown rank) with `add` (the graph's own add_op): with TF's
    static shape where the op fixes it, else on the stand-in shapes with the result marked of unknown rank."""
    known = _known_spec(op, inputs, attrs)
    if known is not None:
        node = graph._new_node("op", op, inputs, attrs, name)
        return graph._outputs(node, (known,), device)[0]
    try:
        out = add(op, inputs, attrs, device, name)
    except (ShapeError, IndexError) as e:
        unknown = next(x for x in inputs if isinstance(x, ir.Value) and x in graph.unknown_rank)
        raise unknown_rank_error(op.name, unknown) from e
    if not _is_full_reduction(op, attrs):
        for v in out if isinstance(out, tuple) else (out,):
            graph.unknown_rank.add(v)
    return out


def has_unknown_rank(t) -> bool:
    """Whether a tensor's static rank is unknown (as TF's `t.get_shape().ndims is None`)."""
    return getattr(t.shape, "ndims", 0) is None


def mark_unknown_rank(t) -> None:
    """Record that graph tensor `t`'s rank is unknown until the graph runs (its shape is a stand-in)."""
    t._data.graph.unknown_rank.add(t._data)


def unknown_rank_error(what: str, value) -> NotImplementedError:
    """The error for an op Ember cannot build on a value of unknown rank (TF would build it)."""
    value = getattr(value, "_data", value)
    name = f"{value.node.name}:{value.index}" if value.node.name else repr(value)
    return NotImplementedError(
        f"{what}: '{name}' has unknown rank (a placeholder made without a shape, or a value computed from one), "
        "and Ember builds this op only on tensors of known rank; give the placeholder a shape (None for the "
        "sizes that vary) or call set_shape on the tensor"
    )
