"""`ember.scipy.signal`: `convolve` as HIPS autograd has it (scipy.signal's modes, plus axes and dot_axes)."""

from __future__ import annotations

from ember.ops.convolve_nd import convolve as _convolve
from ember.scipy._args import as_floats, numpy_api


def convolve(A, B, axes=None, dot_axes=((), ()), mode: str = "full"):
    """The convolution of A and B over `axes` (a pair of axis lists; every axis of A by default), also summing
    over the paired `dot_axes`. mode is 'full', 'valid' or 'same' (the size of A, centred), as scipy.signal's.
    The result has A's other axes, then B's, then the convolved ones; it is differentiable in both."""
    a, b = as_floats(A, B)
    return _convolve(a, b, axes, dot_axes, mode)


numpy_api(globals(), __name__)
