"""What values a distribution's parameters and samples may take (torch.distributions.constraints)."""

from __future__ import annotations

from ember import creation, dtypes, ops


class Constraint:
    """A set of valid values: `check(value)` is a bool tensor, True where the value is valid."""

    is_discrete = False
    event_dim = 0  # how many rightmost dimensions one checked value spans

    def check(self, value):
        """Elementwise validity (over event_dim trailing dims, reduced)."""
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"{type(self).__name__[1:]}()"


class _Dependent(Constraint):
    """A placeholder for a constraint that depends on other parameters: never checked by the base class."""

    def __init__(self, *, is_discrete=NotImplemented, event_dim=NotImplemented) -> None:
        self._is_discrete, self._event_dim = is_discrete, event_dim

    @property
    def is_discrete(self) -> bool:
        if self._is_discrete is NotImplemented:
            raise NotImplementedError(".is_discrete cannot be determined statically")
        return self._is_discrete

    @property
    def event_dim(self) -> int:
        if self._event_dim is NotImplemented:
            raise NotImplementedError(".event_dim cannot be determined statically")
        return self._event_dim

    def __call__(self, *, is_discrete=NotImplemented, event_dim=NotImplemented):
        return _Dependent(is_discrete=self._is_discrete if is_discrete is NotImplemented else is_discrete,
                          event_dim=self._event_dim if event_dim is NotImplemented else event_dim)

    def check(self, x):
        raise ValueError("Cannot determine validity of dependent constraint")


def is_dependent(constraint) -> bool:
    """Whether `constraint` is dependent (a placeholder that cannot be checked on its own)."""
    return isinstance(constraint, _Dependent)


class _DependentProperty(property, _Dependent):
    """A property whose value is a constraint built from the instance (Uniform's support is interval(low, high))."""

    def __init__(self, fn=None, *, is_discrete=NotImplemented, event_dim=NotImplemented) -> None:
        property.__init__(self, fn)
        self._is_discrete, self._event_dim = is_discrete, event_dim

    def __call__(self, fn):
        return _DependentProperty(fn, is_discrete=self._is_discrete, event_dim=self._event_dim)


class _IndependentConstraint(Constraint):
    """base_constraint checked over reinterpreted_batch_ndims more trailing dimensions (all must hold)."""

    def __init__(self, base_constraint: Constraint, reinterpreted_batch_ndims: int) -> None:
        if not isinstance(base_constraint, Constraint):
            raise TypeError(f"independent: base_constraint must be a Constraint, got {type(base_constraint).__name__}")
        if not isinstance(reinterpreted_batch_ndims, int) or reinterpreted_batch_ndims < 0:
            raise ValueError(f"independent: reinterpreted_batch_ndims must be an int >= 0, got "
                             f"{reinterpreted_batch_ndims!r}")
        self.base_constraint, self.reinterpreted_batch_ndims = base_constraint, reinterpreted_batch_ndims

    @property
    def is_discrete(self) -> bool:
        return self.base_constraint.is_discrete

    @property
    def event_dim(self) -> int:
        return self.base_constraint.event_dim + self.reinterpreted_batch_ndims

    def check(self, value):
        result = self.base_constraint.check(value)
        n = self.reinterpreted_batch_ndims
        if result.ndim < n:
            raise ValueError(f"Expected value.dim() >= {self.base_constraint.event_dim + n} but got {value.ndim}")
        return result.reshape(*result.shape[: result.ndim - n], -1).all(-1)

    def __repr__(self) -> str:
        return f"IndependentConstraint({self.base_constraint!r}, {self.reinterpreted_batch_ndims})"


class MixtureSameFamilyConstraint(Constraint):
    """A mixture's support: the components' constraint, checked on the value broadcast against every component."""

    def __init__(self, base_constraint: Constraint) -> None:
        if not isinstance(base_constraint, Constraint):
            raise TypeError(f"MixtureSameFamilyConstraint: expected a Constraint, got {type(base_constraint).__name__}")
        self.base_constraint = base_constraint

    @property
    def is_discrete(self) -> bool:
        return self.base_constraint.is_discrete

    @property
    def event_dim(self) -> int:
        return self.base_constraint.event_dim

    def check(self, value):
        if value.ndim < self.event_dim:
            raise ValueError(f"Expected value.dim() >= {self.event_dim} but got {value.ndim}")
        result = self.base_constraint.check(value.unsqueeze(-1 - self.event_dim))
        keep = value.ndim - self.event_dim
        return result.reshape(*result.shape[:keep], -1).all(-1)

    def __repr__(self) -> str:
        return f"MixtureSameFamilyConstraint({self.base_constraint!r})"


class _Boolean(Constraint):
    is_discrete = True

    def check(self, value):
        return (value == 0) | (value == 1)


class _OneHot(Constraint):
    is_discrete = True
    event_dim = 1

    def check(self, value):
        return ((value == 0) | (value == 1)).all(-1) & (value.sum(-1) == 1)


class _IntegerInterval(Constraint):
    is_discrete = True

    def __init__(self, lower_bound, upper_bound) -> None:
        self.lower_bound, self.upper_bound = lower_bound, upper_bound

    def check(self, value):
        return (value % 1 == 0) & (value >= self.lower_bound) & (value <= self.upper_bound)

    def __repr__(self) -> str:
        return f"IntegerInterval(lower_bound={self.lower_bound}, upper_bound={self.upper_bound})"


class _IntegerLessThan(Constraint):
    is_discrete = True

    def __init__(self, upper_bound) -> None:
        self.upper_bound = upper_bound

    def check(self, value):
        return (value % 1 == 0) & (value <= self.upper_bound)

    def __repr__(self) -> str:
        return f"IntegerLessThan(upper_bound={self.upper_bound})"


class _IntegerGreaterThan(Constraint):
    is_discrete = True

    def __init__(self, lower_bound) -> None:
        self.lower_bound = lower_bound

    def check(self, value):
        return (value % 1 == 0) & (value >= self.lower_bound)

    def __repr__(self) -> str:
        return f"IntegerGreaterThan(lower_bound={self.lower_bound})"


class _Real(Constraint):
    def check(self, value):
        return value == value  # not NaN


class _GreaterThan(Constraint):
    def __init__(self, lower_bound) -> None:
        self.lower_bound = lower_bound

    def check(self, value):
        return value > self.lower_bound

    def __repr__(self) -> str:
        return f"GreaterThan(lower_bound={self.lower_bound})"


class _GreaterThanEq(Constraint):
    def __init__(self, lower_bound) -> None:
        self.lower_bound = lower_bound

    def check(self, value):
        return value >= self.lower_bound

    def __repr__(self) -> str:
        return f"GreaterThanEq(lower_bound={self.lower_bound})"


class _LessThan(Constraint):
    def __init__(self, upper_bound) -> None:
        self.upper_bound = upper_bound

    def check(self, value):
        return value < self.upper_bound

    def __repr__(self) -> str:
        return f"LessThan(upper_bound={self.upper_bound})"


class _Interval(Constraint):
    def __init__(self, lower_bound, upper_bound) -> None:
        self.lower_bound, self.upper_bound = lower_bound, upper_bound

    def check(self, value):
        return (value >= self.lower_bound) & (value <= self.upper_bound)

    def __repr__(self) -> str:
        return f"Interval(lower_bound={self.lower_bound}, upper_bound={self.upper_bound})"


class _HalfOpenInterval(Constraint):
    def __init__(self, lower_bound, upper_bound) -> None:
        self.lower_bound, self.upper_bound = lower_bound, upper_bound

    def check(self, value):
        return (value >= self.lower_bound) & (value < self.upper_bound)

    def __repr__(self) -> str:
        return f"HalfOpenInterval(lower_bound={self.lower_bound}, upper_bound={self.upper_bound})"


class _Simplex(Constraint):
    event_dim = 1

    def check(self, value):
        return (value >= 0).all(-1) & ((value.sum(-1) - 1).abs() < 1e-6)


class _Multinomial(Constraint):
    is_discrete = True
    event_dim = 1

    def __init__(self, upper_bound) -> None:
        self.upper_bound = upper_bound

    def check(self, x):
        return (x >= 0).all(-1) & (x.sum(-1) <= self.upper_bound)


def _is_lower_triangular(value):
    return (value.tril() == value).reshape(*value.shape[:-2], -1).all(-1)


class _LowerTriangular(Constraint):
    event_dim = 2

    def check(self, value):
        return _is_lower_triangular(value)


class _LowerCholesky(Constraint):
    event_dim = 2

    def check(self, value):
        return _is_lower_triangular(value) & (value.diagonal(dim1=-2, dim2=-1) > 0).all(-1)


class _CorrCholesky(Constraint):
    event_dim = 2

    def check(self, value):
        from ember import linalg
        from ember.distributions.distribution import finfo

        tol = float(finfo(value.dtype).eps) * value.shape[-1] * 10
        unit_rows = ((linalg.norm(value.detach(), dim=-1) - 1.0).abs() <= tol).all(-1)
        return _LowerCholesky().check(value) & unit_rows


class _Square(Constraint):
    event_dim = 2

    def check(self, value):
        return creation.full(tuple(value.shape[:-2]), value.shape[-2] == value.shape[-1], dtype=dtypes.bool_,
                             device=value.device)


class _Symmetric(_Square):
    def check(self, value):
        square = super().check(value)
        if not bool(square.all().item()):
            return square

        return ops.isclose(value, value.mT, atol=1e-6).all(-2).all(-1)


class _PositiveSemidefinite(_Symmetric):
    def check(self, value):
        symmetric = super().check(value)
        if not bool(symmetric.all().item()):
            return symmetric
        from ember import linalg

        return (linalg.eigvalsh(value.detach()) >= 0).all(-1)


class _PositiveDefinite(_Symmetric):
    def check(self, value):
        symmetric = super().check(value)
        if not bool(symmetric.all().item()):
            return symmetric
        from ember import linalg

        return linalg.cholesky_ex(value.detach()).info == 0


class _Joined(Constraint):
    """Constraints `cseq` on parts of a value joined along `dim` (by torch.cat or torch.stack)."""

    def __init__(self, cseq, dim: int = 0) -> None:
        if not all(isinstance(c, Constraint) for c in cseq):
            raise AssertionError("All elements of cseq must be Constraint instances")
        self.cseq = list(cseq)
        self.dim = dim

    @property
    def is_discrete(self) -> bool:
        return any(c.is_discrete for c in self.cseq)


class _Cat(_Joined):
    """cseq[i] checked on the i-th block of lengths[i] entries along dim (the blocks torch.cat would join)."""

    def __init__(self, cseq, dim: int = 0, lengths=None) -> None:
        super().__init__(cseq, dim)
        self.lengths = [1] * len(self.cseq) if lengths is None else list(lengths)
        if len(self.lengths) != len(self.cseq):
            raise AssertionError(f"lengths ({len(self.lengths)}) must match cseq ({len(self.cseq)})")

    @property
    def event_dim(self) -> int:
        return max(c.event_dim for c in self.cseq)

    def check(self, value):
        if not -value.ndim <= self.dim < value.ndim:
            raise AssertionError(f"dim {self.dim} out of range for value with {value.ndim} dimensions")
        checks, start = [], 0
        for constraint, length in zip(self.cseq, self.lengths):
            checks.append(constraint.check(value.narrow(self.dim, start, length)))
            start = start + length
        return ops.cat(checks, self.dim)


class _Stack(_Joined):
    """cseq[i] checked on the i-th slice along dim (the slices torch.stack would join)."""

    @property
    def event_dim(self) -> int:
        dim = max(c.event_dim for c in self.cseq)
        if self.dim + dim < 0:  # a negative dim inside the parts' events makes the stacked dim an event dim too
            dim += 1
        return dim

    def check(self, value):
        if not -value.ndim <= self.dim < value.ndim:
            raise AssertionError(f"dim {self.dim} out of range for value with {value.ndim} dimensions")
        parts = [value.select(self.dim, i) for i in range(value.shape[self.dim])]
        return ops.stack([c.check(v) for v, c in zip(parts, self.cseq)], self.dim)


dependent = _Dependent()
dependent_property = _DependentProperty
independent = _IndependentConstraint
boolean = _Boolean()
one_hot = _OneHot()
nonnegative_integer = _IntegerGreaterThan(0)
positive_integer = _IntegerGreaterThan(1)
integer_interval = _IntegerInterval
real = _Real()
real_vector = independent(real, 1)
positive = _GreaterThan(0.0)
nonnegative = _GreaterThanEq(0.0)
greater_than = _GreaterThan
greater_than_eq = _GreaterThanEq
less_than = _LessThan
multinomial = _Multinomial
unit_interval = _Interval(0.0, 1.0)
interval = _Interval
half_open_interval = _HalfOpenInterval
simplex = _Simplex()
lower_triangular = _LowerTriangular()
lower_cholesky = _LowerCholesky()
corr_cholesky = _CorrCholesky()
square = _Square()
symmetric = _Symmetric()
positive_semidefinite = _PositiveSemidefinite()
positive_definite = _PositiveDefinite()
cat = _Cat
stack = _Stack

__all__ = ["Constraint", "MixtureSameFamilyConstraint", "boolean", "cat", "corr_cholesky", "dependent",
           "dependent_property", "greater_than", "greater_than_eq", "half_open_interval", "independent",
           "integer_interval", "interval", "is_dependent", "less_than", "lower_cholesky", "lower_triangular",
           "multinomial", "nonnegative", "nonnegative_integer", "one_hot", "positive", "positive_definite",
           "positive_integer", "positive_semidefinite", "real", "real_vector", "simplex", "square", "stack",
           "symmetric", "unit_interval"]
