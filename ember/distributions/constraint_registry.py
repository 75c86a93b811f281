"""From unconstrained space to a constraint's set (torch.distributions.constraint_registry).

`biject_to(c)` is a bijection from the reals onto c (for samplers such as HMC, which need log-Jacobians both ways);
`transform_to(c)` is any map onto c (for optimisation, where fewer coordinates mixed together is better): the simplex
gets StickBreakingTransform from one and SoftmaxTransform from the other. Both look a constraint up by its class,
so one registration covers every instance (`positive` and `greater_than(3.0)` alike).
"""

from __future__ import annotations

import numbers

from ember.distributions import constraints, transforms


class ConstraintRegistry:
    """A table from Constraint subclasses to factories making a Transform onto a given constraint."""

    def __init__(self) -> None:
        self._registry: dict = {}

    def register(self, constraint, factory=None):
        """Register factory(constraint) -> Transform for constraint's class (a decorator when factory is None)."""
        if factory is None:
            return lambda factory: self.register(constraint, factory)
        if isinstance(constraint, constraints.Constraint):  # a singleton such as constraints.simplex stands for its class
            constraint = type(constraint)
        if not isinstance(constraint, type) or not issubclass(constraint, constraints.Constraint):
            raise TypeError(f"Expected constraint to be either a Constraint subclass or instance, but got {constraint}")
        self._registry[constraint] = factory
        return factory

    def __call__(self, constraint):
        """The Transform from unconstrained space onto `constraint`."""
        try:
            factory = self._registry[type(constraint)]
        except KeyError:
            raise NotImplementedError(f"Cannot transform {type(constraint).__name__} constraints") from None
        return factory(constraint)


biject_to = ConstraintRegistry()
transform_to = ConstraintRegistry()


# PyTorch's table, in PyTorch's order: a later registration for the same class replaces an earlier one, so positive
# and nonnegative (instances of greater_than and greater_than_eq) end up with exp then a shift by the bound

@biject_to.register(constraints.real)
@transform_to.register(constraints.real)
def _transform_to_real(constraint):
    return transforms.identity_transform


@biject_to.register(constraints.independent)
def _biject_to_independent(constraint):
    return transforms.IndependentTransform(biject_to(constraint.base_constraint), constraint.reinterpreted_batch_ndims)


@transform_to.register(constraints.independent)
def _transform_to_independent(constraint):
    return transforms.IndependentTransform(transform_to(constraint.base_constraint),
                                           constraint.reinterpreted_batch_ndims)


@biject_to.register(constraints.positive)
@biject_to.register(constraints.nonnegative)
@transform_to.register(constraints.positive)
@transform_to.register(constraints.nonnegative)
def _transform_to_positive(constraint):
    return transforms.ExpTransform()


@biject_to.register(constraints.greater_than)
@biject_to.register(constraints.greater_than_eq)
@transform_to.register(constraints.greater_than)
@transform_to.register(constraints.greater_than_eq)
def _transform_to_greater_than(constraint):
    return transforms.ComposeTransform([transforms.ExpTransform(),
                                        transforms.AffineTransform(constraint.lower_bound, 1)])


@biject_to.register(constraints.less_than)
@transform_to.register(constraints.less_than)
def _transform_to_less_than(constraint):
    return transforms.ComposeTransform([transforms.ExpTransform(),
                                        transforms.AffineTransform(constraint.upper_bound, -1)])


@biject_to.register(constraints.interval)
@biject_to.register(constraints.half_open_interval)
@transform_to.register(constraints.interval)
@transform_to.register(constraints.half_open_interval)
def _transform_to_interval(constraint):
    lower_is_0 = isinstance(constraint.lower_bound, numbers.Number) and constraint.lower_bound == 0
    upper_is_1 = isinstance(constraint.upper_bound, numbers.Number) and constraint.upper_bound == 1
    if lower_is_0 and upper_is_1:
        return transforms.SigmoidTransform()
    scale = constraint.upper_bound - constraint.lower_bound
    return transforms.ComposeTransform([transforms.SigmoidTransform(),
                                        transforms.AffineTransform(constraint.lower_bound, scale)])


@biject_to.register(constraints.simplex)
def _biject_to_simplex(constraint):
    return transforms.StickBreakingTransform()


@transform_to.register(constraints.simplex)
def _transform_to_simplex(constraint):
    return transforms.SoftmaxTransform()


# transform_to only: these maps ignore the strict upper triangle of their n x n input (onto, not one-to-one)
@transform_to.register(constraints.lower_cholesky)
def _transform_to_lower_cholesky(constraint):
    return transforms.LowerCholeskyTransform()


@transform_to.register(constraints.positive_definite)
@transform_to.register(constraints.positive_semidefinite)
def _transform_to_positive_definite(constraint):
    return transforms.PositiveDefiniteTransform()


@biject_to.register(constraints.corr_cholesky)
@transform_to.register(constraints.corr_cholesky)
def _transform_to_corr_cholesky(constraint):
    return transforms.CorrCholeskyTransform()


@biject_to.register(constraints.cat)
def _biject_to_cat(constraint):
    return transforms.CatTransform([biject_to(c) for c in constraint.cseq], constraint.dim, constraint.lengths)


@transform_to.register(constraints.cat)
def _transform_to_cat(constraint):
    return transforms.CatTransform([transform_to(c) for c in constraint.cseq], constraint.dim, constraint.lengths)


@biject_to.register(constraints.stack)
def _biject_to_stack(constraint):
    return transforms.StackTransform([biject_to(c) for c in constraint.cseq], constraint.dim)


@transform_to.register(constraints.stack)
def _transform_to_stack(constraint):
    return transforms.StackTransform([transform_to(c) for c in constraint.cseq], constraint.dim)


__all__ = ["ConstraintRegistry", "biject_to", "transform_to"]
