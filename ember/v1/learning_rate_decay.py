"""TF1's learning-rate schedules (`tf.train.exponential_decay`, `piecewise_constant`, ...) as graph tensors.

Each is a tensor computed from the global step when the graph runs, so an optimizer built with it
uses the decayed rate at every step. The step is cast to the rate's dtype (float32 for numbers).
"""

from __future__ import annotations

from ember.tensor import Tensor
from ember.v1.array_ops import where
from ember.v1.convert import convert_to_tensor
from ember.v1.math_ops import cast, ceil, floor, minimum, pow
from ember.v1.naming import tf_op


def _rate_and_step(learning_rate, global_step, what: str):
    if global_step is None:
        raise ValueError(f"global_step is required for {what}.")
    lr = convert_to_tensor(learning_rate)
    return lr, cast(global_step, lr.dtype)


@tf_op("ExponentialDecay")
def exponential_decay(learning_rate, global_step, decay_steps, decay_rate, staircase: bool = False,
                      name: str | None = None) -> Tensor:
    """learning_rate * decay_rate ^ (global_step / decay_steps) (the exponent floored when `staircase`)."""
    lr, step = _rate_and_step(learning_rate, global_step, "exponential_decay")
    p = step / convert_to_tensor(decay_steps, dtype=lr.dtype)
    if staircase:
        p = floor(p)
    return lr * pow(convert_to_tensor(decay_rate, dtype=lr.dtype), p)


@tf_op("InverseTimeDecay")
def inverse_time_decay(learning_rate, global_step, decay_steps, decay_rate, staircase: bool = False,
                       name: str | None = None) -> Tensor:
    """learning_rate / (1 + decay_rate * global_step / decay_steps)."""
    lr, step = _rate_and_step(learning_rate, global_step, "inverse_time_decay")
    p = step / convert_to_tensor(decay_steps, dtype=lr.dtype)
    if staircase:
        p = floor(p)
    return lr / (1.0 + convert_to_tensor(decay_rate, dtype=lr.dtype) * p)


@tf_op("PolynomialDecay")
def polynomial_decay(learning_rate, global_step, decay_steps, end_learning_rate=0.0001, power=1.0,
                     cycle: bool = False, name: str | None = None) -> Tensor:
    """(lr - end) * (1 - min(step, decay_steps) / decay_steps) ^ power + end (with `cycle`, decay_steps grows)."""
    lr, step = _rate_and_step(learning_rate, global_step, "polynomial_decay")
    steps = convert_to_tensor(decay_steps, dtype=lr.dtype)
    if cycle:
        multiplier = where(step > 0.0, ceil(step / steps), convert_to_tensor(1.0, dtype=lr.dtype))
        steps = steps * multiplier
    else:
        step = minimum(step, steps)
    end = convert_to_tensor(end_learning_rate, dtype=lr.dtype)
    return (lr - end) * pow(1.0 - step / steps, convert_to_tensor(power, dtype=lr.dtype)) + end


@tf_op("PiecewiseConstant")
def piecewise_constant(x, boundaries, values, name: str | None = None) -> Tensor:
    """values[0] for x <= boundaries[0], values[i] for boundaries[i-1] < x <= boundaries[i], values[-1] after."""
    if len(values) != len(boundaries) + 1:
        raise ValueError("The length of boundaries should be 1 less than the length of values")
    x = convert_to_tensor(x)
    vals = [convert_to_tensor(v) for v in values]
    dtype = vals[0].dtype
    if any(v.dtype is not dtype for v in vals):
        raise ValueError(f"piecewise_constant: values must all have one dtype, got {[v.dtype.name for v in vals]}")
    result = vals[0]
    for b, v in zip(boundaries, vals[1:]):
        result = where(x > convert_to_tensor(b, dtype=x.dtype), v, result)
    return result
