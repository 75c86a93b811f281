"""Argument handling shared by ember.scipy: NumPy data in, ember.numpy arrays out."""

from __future__ import annotations

from ember.numpy import _as_tensor, _device_of, _float_input, _public_functions, _returning_ndarrays

__all__ = ["as_float", "as_floats", "numpy_api"]


def as_float(x):
    """x as a floating-point tensor (integers in float64, as SciPy computes them)."""
    return _float_input(x)


def as_floats(*xs):
    """Several arguments as floating-point tensors on one device, in NumPy's common dtype."""
    from ember.numpy import _promoted

    device = _device_of(*xs)
    ts = [_float_input(_as_tensor(x, device)) for x in xs]
    return _promoted(*ts)


def numpy_api(namespace: dict, module: str) -> None:
    """Make every public function of `module` return ember.numpy arrays (done once per module)."""
    for name in _public_functions(namespace, module):
        namespace[name] = _returning_ndarrays(namespace[name])
