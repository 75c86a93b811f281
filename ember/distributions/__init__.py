"""Probability distributions with torch.distributions' interface: Categorical, Normal, Bernoulli.

`sample` draws from Ember's generator (seeded by ember.manual_seed); `rsample` (Normal) is
differentiable in the parameters; `log_prob` and `entropy` are differentiable, so policy gradients
and VAEs are written as in PyTorch. Parameters and log_prob's values are validated as PyTorch does
(`validate_args`, on by default; `set_default_validate_args(False)` turns it off).
"""

from ember.distributions import constraints
from ember.distributions.bernoulli import Bernoulli
from ember.distributions.categorical import Categorical
from ember.distributions.distribution import Distribution, set_default_validate_args
from ember.distributions.kl import kl_divergence
from ember.distributions.normal import Normal

__all__ = ["Bernoulli", "Categorical", "Distribution", "Normal", "constraints", "kl_divergence",
           "set_default_validate_args"]
