"""`ember.scipy`: HIPS autograd's `autograd.scipy` — scipy.special, scipy.signal.convolve and scipy.stats
distributions, differentiable, taking and returning what `ember.numpy` does.

`import ember.scipy.stats.norm as norm` and `from ember.scipy.special import logsumexp` work as their
autograd counterparts do. The special functions' kernels are SciPy's, so this package needs SciPy.
"""

from ember.scipy import signal, special, stats  # noqa: F401

__all__ = ["signal", "special", "stats"]
