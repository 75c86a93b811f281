"""`cond` and `while_loop`: PyTorch's control-flow operators (torch.cond, torch.while_loop), run eagerly.

In eager mode both are the Python branch and loop they stand for, with PyTorch's checks of the predicate and of
the carried values; gradients flow through the branch taken and the iterations run. Ember's traces do not hold a
branch whose side depends on a tensor's value: under `ember.jit` a symbolic predicate is a `ConcretizationError`
naming the operator (`ember.compile` then runs the call eagerly, as PyTorch's graph breaks would).
"""

from __future__ import annotations

from ember.backends.meta import MetaArray
from ember.errors import ConcretizationError, ShapeError
from ember.tensor import Tensor


def _truth(op: str, pred) -> bool:
    """The Python truth of a predicate: a bool or number, or a tensor of one element."""
    if isinstance(pred, Tensor):
        if pred.numel() != 1:
            raise RuntimeError(f"{op}: expected pred to be bool or single-element tensor, but got a tensor of shape "
                               f"{tuple(pred.shape)}")
        data = pred._data
        if isinstance(data, MetaArray) and data.symbolic:
            raise ConcretizationError(f"{op}: the predicate is symbolic while ember.jit traces, and Ember's graphs "
                                      "do not hold a branch taken by a tensor's value; call it outside the jitted "
                                      "function (ember.compile runs such a call eagerly)")
        return bool(pred.item())
    if isinstance(pred, (bool, int, float)):
        return bool(pred)
    raise RuntimeError(f"{op}: expected pred to be bool or single-element tensor, but got {type(pred).__name__}")


def cond(pred, true_fn, false_fn, operands=()):
    """true_fn(*operands) if pred else false_fn(*operands) (torch.cond): pred a bool or a one-element tensor."""
    if not isinstance(operands, (tuple, list)):
        raise RuntimeError(f"cond: expected operands to be a tuple or list, got {type(operands).__name__}")
    if not (callable(true_fn) and callable(false_fn)):
        raise RuntimeError("cond: expected true_fn and false_fn to be callable")
    return (true_fn if _truth("cond", pred) else false_fn)(*operands)


def while_loop(cond_fn, body_fn, carried_inputs):
    """Run body_fn on the carried values while cond_fn(*carried) holds (torch.while_loop): the final values, as a
    tuple. body_fn must return as many values as it is given, each of the same shape and dtype."""
    if not isinstance(carried_inputs, (tuple, list)):
        raise RuntimeError(f"while_loop: expected carried_inputs to be a tuple or list, got "
                           f"{type(carried_inputs).__name__}")
    carried = tuple(carried_inputs)
    while _truth("while_loop", cond_fn(*carried)):
        out = body_fn(*carried)
        out = tuple(out) if isinstance(out, (tuple, list)) else (out,)
        if len(out) != len(carried):
            raise ShapeError(f"while_loop: body_fn returned {len(out)} values for {len(carried)} carried inputs")
        for i, (new, old) in enumerate(zip(out, carried)):
            if isinstance(old, Tensor) and (not isinstance(new, Tensor) or tuple(new.shape) != tuple(old.shape)
                                            or new.dtype != old.dtype):
                got = f"{tuple(new.shape)} {new.dtype.name}" if isinstance(new, Tensor) else type(new).__name__
                raise ShapeError(f"while_loop: body_fn's output {i} is {got}; the carried input is "
                                 f"{tuple(old.shape)} {old.dtype.name}")
        carried = out
    return carried


__all__ = ["cond", "while_loop"]
