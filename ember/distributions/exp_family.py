"""The exponential-family base class (torch.distributions.ExponentialFamily): a density exp(<t(x), theta> -
F(theta) + k(x)) given by its natural parameters theta, log normalizer F and mean carrier measure E[k(x)], from
which the entropy and, between two members of one family, the KL divergence follow as Bregman divergences of F
(Nielsen and Nock, "Entropies and cross-entropies of exponential families"), F's gradient taken by autograd."""

from __future__ import annotations

from ember.autograd import enable_grad
from ember.autograd import grad as autograd_grad
from ember.distributions.distribution import Distribution


class ExponentialFamily(Distribution):
    """A distribution of an exponential family: subclasses give `_natural_params`, `_log_normalizer` and
    `_mean_carrier_measure`, and get `entropy()` (unless they have a closed form) and same-family KL divergences."""

    @property
    def _natural_params(self) -> tuple:
        """The natural parameters theta, a tuple of tensors."""
        raise NotImplementedError(f"{type(self).__name__}: _natural_params is not implemented")

    def _log_normalizer(self, *natural_params):
        """The log normalizer F(theta) at the given natural parameters."""
        raise NotImplementedError(f"{type(self).__name__}: _log_normalizer is not implemented")

    @property
    def _mean_carrier_measure(self) -> float:
        """E[k(x)], the expected carrier measure."""
        raise NotImplementedError(f"{type(self).__name__}: _mean_carrier_measure is not implemented")

    def entropy(self):
        """The entropy F(theta) - <theta, grad F(theta)> - E[k(x)], F's gradient by autograd."""
        result = -self._mean_carrier_measure
        with enable_grad():  # F's gradient, also where the caller turned gradients off
            params, log_normalizer, gradients = self._log_normalizer_and_gradient()
            result = result + log_normalizer
            for theta, g in zip(params, gradients):
                result = result - (theta * g).reshape(self._batch_shape + (-1,)).sum(-1)
        return result

    def _log_normalizer_and_gradient(self) -> tuple:
        """(theta detached, F(theta), grad F(theta) with its graph): call under enable_grad."""
        params = [p.detach().requires_grad_() for p in self._natural_params]
        log_normalizer = self._log_normalizer(*params)
        return params, log_normalizer, autograd_grad(log_normalizer.sum(), params, create_graph=True)
