"""`ember.numpy.random`: NumPy's random module under HIPS autograd's name (`import autograd.numpy.random as npr`).

Draws are NumPy arrays, as in autograd: initial values that `ember.numpy` and `ember.grad` accept as they are.
"""

from numpy.random import *  # noqa: F403
from numpy.random import __all__  # noqa: F401
