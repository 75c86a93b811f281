"""`ember.misc`: HIPS autograd's `autograd.misc` — `flatten` and the `optimizers` module (sgd, rmsprop, adam)."""

from ember.misc import optimizers  # noqa: F401
from ember.misc.flatten import flatten

__all__ = ["flatten", "optimizers"]
