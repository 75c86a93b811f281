"""What values a distribution's parameters and samples may take (torch.distributions.constraints, the few needed)."""

from __future__ import annotations


class Constraint:
    """A set of valid values: `check(value)` is a bool tensor, True where the value is valid."""

    event_dim = 0  # how many rightmost dimensions one checked value spans

    def check(self, value):
        """Elementwise validity (over event_dim trailing dims, reduced)."""
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"{type(self).__name__[1:]}()"


class _Real(Constraint):
    def check(self, value):
        return value == value  # not NaN


class _Boolean(Constraint):
    def check(self, value):
        return (value == 0) | (value == 1)


class _GreaterThan(Constraint):
    def __init__(self, lower_bound) -> None:
        self.lower_bound = lower_bound

    def check(self, value):
        return value > self.lower_bound

    def __repr__(self) -> str:
        return f"GreaterThan(lower_bound={self.lower_bound})"


class _Interval(Constraint):
    def __init__(self, lower_bound, upper_bound) -> None:
        self.lower_bound, self.upper_bound = lower_bound, upper_bound

    def check(self, value):
        return (value >= self.lower_bound) & (value <= self.upper_bound)

    def __repr__(self) -> str:
        return f"Interval(lower_bound={self.lower_bound}, upper_bound={self.upper_bound})"


class _IntegerInterval(_Interval):
    def check(self, value):
        return (value % 1 == 0) & (value >= self.lower_bound) & (value <= self.upper_bound)

    def __repr__(self) -> str:
        return f"IntegerInterval(lower_bound={self.lower_bound}, upper_bound={self.upper_bound})"


class _Simplex(Constraint):
    event_dim = 1

    def check(self, value):
        return (value >= 0).all(-1) & ((value.sum(-1) - 1).abs() < 1e-6)


class _IndependentReal(Constraint):
    """Real values, checked over one trailing dimension (Categorical's logits)."""

    event_dim = 1

    def check(self, value):
        return (value == value).all(-1)

    def __repr__(self) -> str:
        return "IndependentConstraint(Real(), 1)"


real = _Real()
boolean = _Boolean()
positive = _GreaterThan(0.0)
unit_interval = _Interval(0.0, 1.0)
simplex = _Simplex()
real_vector = _IndependentReal()


def integer_interval(lower_bound: int, upper_bound: int) -> Constraint:
    """Integers in [lower_bound, upper_bound]."""
    return _IntegerInterval(lower_bound, upper_bound)


__all__ = ["Constraint", "boolean", "integer_interval", "positive", "real", "real_vector", "simplex", "unit_interval"]
