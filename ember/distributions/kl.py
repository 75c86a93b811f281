"""KL divergences between two distributions of the same family, in closed form (torch.distributions.kl)."""

from __future__ import annotations

from ember.distributions.bernoulli import Bernoulli
from ember.distributions.categorical import Categorical
from ember.distributions.normal import Normal


def _kl_normal(p: Normal, q: Normal):
    var_ratio = (p.scale / q.scale).pow(2)
    t1 = ((p.loc - q.loc) / q.scale).pow(2)
    return 0.5 * (var_ratio + t1 - 1 - var_ratio.log())


def _kl_categorical(p: Categorical, q: Categorical):
    t = p.probs * (p.logits - q.logits)
    t = t.masked_fill(q.probs == 0, float("inf"))
    return t.masked_fill(p.probs == 0, 0.0).sum(-1)


def _kl_bernoulli(p: Bernoulli, q: Bernoulli):
    from ember.nn import functional as F

    t1 = p.probs * (F.softplus(-q.logits) - F.softplus(-p.logits))
    t1 = t1.masked_fill(q.probs == 0, float("inf")).masked_fill(p.probs == 0, 0.0)
    t2 = (1 - p.probs) * (F.softplus(q.logits) - F.softplus(p.logits))
    t2 = t2.masked_fill(q.probs == 1, float("inf")).masked_fill(p.probs == 1, 0.0)
    return t1 + t2


_KL = {(Normal, Normal): _kl_normal, (Categorical, Categorical): _kl_categorical, (Bernoulli, Bernoulli): _kl_bernoulli}


def kl_divergence(p, q):
    """KL(p || q) for each distribution in the batch (Normal, Categorical and Bernoulli pairs)."""
    fn = _KL.get((type(p), type(q)))
    if fn is None:
        raise NotImplementedError(f"kl_divergence: no formula for {type(p).__name__} and {type(q).__name__}")
    return fn(p, q)


__all__ = ["kl_divergence"]
