"""TF1's static shapes: `TensorShape` (what `tensor.get_shape()` returns) and `Dimension`, unknowns included.

As in TF1, indexing a shape gives a `Dimension` (`.value` is an int or None; `int(d)` works for a
known one), `as_list()` gives plain ints and Nones, and comparisons involving an unknown dimension
are None rather than True or False.
"""

from __future__ import annotations

import operator


class Dimension:
    """One dimension of a static shape: a known size or unknown (value None)."""

    __slots__ = ("_value",)

    def __init__(self, value) -> None:
        if isinstance(value, Dimension):
            value = value.value
        if value is None:
            self._value = None
            return
        if isinstance(value, bool) or not hasattr(value, "__index__"):
            raise TypeError(f"Dimension value must be an integer or None, got {value!r} of type {type(value).__name__}")
        value = operator.index(value)
        if value < 0:
            raise ValueError(f"Dimension {value} must be >= 0")
        self._value = value

    @property
    def value(self):
        """The size, or None when unknown."""
        return self._value

    def __repr__(self) -> str:
        return f"Dimension({self._value!r})"

    def __str__(self) -> str:
        return "?" if self._value is None else str(self._value)

    def __int__(self) -> int:
        if self._value is None:
            raise TypeError("int() of an unknown Dimension")
        return self._value

    def __index__(self) -> int:
        return self.__int__()

    def __hash__(self) -> int:
        return hash(self._value)

    def __bool__(self) -> bool:
        return bool(self._value)

    # Comparisons and arithmetic: unknown in, unknown (None) out, as in TF1.
    def _other(self, other):
        try:
            return as_dimension(other).value
        except (TypeError, ValueError):
            return NotImplemented

    def __eq__(self, other):
        o = self._other(other)
        if o is NotImplemented:
            return NotImplemented
        return None if self._value is None or o is None else self._value == o

    def __ne__(self, other):
        o = self._other(other)
        if o is NotImplemented:
            return NotImplemented
        return None if self._value is None or o is None else self._value != o

    def _cmp(self, other, fn):
        o = self._other(other)
        if o is NotImplemented:
            return NotImplemented
        return None if self._value is None or o is None else fn(self._value, o)

    def __lt__(self, other):
        return self._cmp(other, operator.lt)

    def __le__(self, other):
        return self._cmp(other, operator.le)

    def __gt__(self, other):
        return self._cmp(other, operator.gt)

    def __ge__(self, other):
        return self._cmp(other, operator.ge)

    def _arith(self, other, fn, reflected: bool = False):
        o = self._other(other)
        if o is NotImplemented:
            return NotImplemented
        if self._value is None or o is None:
            return Dimension(None)
        return Dimension(fn(o, self._value) if reflected else fn(self._value, o))

    def __add__(self, other):
        return self._arith(other, operator.add)

    def __radd__(self, other):
        return self._arith(other, operator.add, True)

    def __sub__(self, other):
        return self._arith(other, operator.sub)

    def __rsub__(self, other):
        return self._arith(other, operator.sub, True)

    def __mul__(self, other):
        return self._arith(other, operator.mul)

    def __rmul__(self, other):
        return self._arith(other, operator.mul, True)

    def __floordiv__(self, other):
        return self._arith(other, operator.floordiv)

    def __rfloordiv__(self, other):
        return self._arith(other, operator.floordiv, True)

    def __mod__(self, other):
        return self._arith(other, operator.mod)

    def __rmod__(self, other):
        return self._arith(other, operator.mod, True)

    def is_compatible_with(self, other) -> bool:
        """Whether the two could be the same size (an unknown is compatible with anything)."""
        o = as_dimension(other).value
        return self._value is None or o is None or self._value == o

    def assert_is_compatible_with(self, other) -> None:
        """A ValueError unless `is_compatible_with(other)`."""
        if not self.is_compatible_with(other):
            raise ValueError(f"Dimensions {self} and {as_dimension(other)} are not compatible")

    def merge_with(self, other) -> Dimension:
        """The more specific of two compatible dimensions."""
        other = as_dimension(other)
        self.assert_is_compatible_with(other)
        return Dimension(self._value if self._value is not None else other.value)


def as_dimension(value) -> Dimension:
    """`value` as a Dimension."""
    return value if isinstance(value, Dimension) else Dimension(value)


def dimension_value(dimension):
    """The size of a Dimension or an int (None when unknown)."""
    return dimension.value if isinstance(dimension, Dimension) else dimension


class TensorShape:
    """A static shape: a list of Dimensions, or unknown rank (`dims` is None)."""

    __slots__ = ("_dims",)

    def __init__(self, dims) -> None:
        if isinstance(dims, TensorShape):
            dims = dims.dims
        if dims is None:
            self._dims = None
        elif isinstance(dims, (int, Dimension)) and not isinstance(dims, bool):
            self._dims = [as_dimension(dims)]  # TensorShape(3) is the 1-D shape [3], as in TF
        else:
            self._dims = [as_dimension(d) for d in dims]

    @property
    def dims(self):
        """The Dimensions (None when the rank is unknown)."""
        return None if self._dims is None else list(self._dims)

    @property
    def ndims(self):
        """The rank, or None when unknown."""
        return None if self._dims is None else len(self._dims)

    rank = ndims

    def __len__(self) -> int:
        if self._dims is None:
            raise ValueError("Cannot take the length of a shape with unknown rank.")
        return len(self._dims)

    def __iter__(self):
        if self._dims is None:
            raise ValueError("Cannot iterate over a shape with unknown rank.")
        return iter(self._dims)

    def __getitem__(self, key):
        if self._dims is None:
            return TensorShape(None) if isinstance(key, slice) else Dimension(None)
        if isinstance(key, slice):
            return TensorShape(self._dims[key])
        return self._dims[key]

    def __bool__(self) -> bool:
        return self._dims is not None

    def as_list(self) -> list:
        """The sizes as ints (None for unknown dimensions)."""
        if self._dims is None:
            raise ValueError("as_list() is not defined on an unknown TensorShape.")
        return [d.value for d in self._dims]

    def is_fully_defined(self) -> bool:
        """Whether the rank and every dimension are known."""
        return self._dims is not None and all(d.value is not None for d in self._dims)

    def assert_is_fully_defined(self) -> None:
        """A ValueError unless the shape is fully defined."""
        if not self.is_fully_defined():
            raise ValueError(f"Shape {self} is not fully defined")

    def num_elements(self):
        """The number of elements, or None unless fully defined."""
        if not self.is_fully_defined():
            return None
        n = 1
        for d in self._dims:
            n *= d.value
        return n

    def is_compatible_with(self, other) -> bool:
        """Whether some shape could match both."""
        other = as_shape(other)
        if self._dims is None or other.dims is None:
            return True
        return len(self._dims) == len(other.dims) and all(
            a.is_compatible_with(b) for a, b in zip(self._dims, other.dims))

    def assert_is_compatible_with(self, other) -> None:
        """A ValueError unless `is_compatible_with(other)`."""
        if not self.is_compatible_with(other):
            raise ValueError(f"Shapes {self} and {as_shape(other)} are incompatible")

    def merge_with(self, other) -> TensorShape:
        """The most specific shape compatible with both."""
        other = as_shape(other)
        if self._dims is None:
            return other
        if other.dims is None:
            return TensorShape(self._dims)
        self.assert_is_compatible_with(other)
        return TensorShape([a.merge_with(b) for a, b in zip(self._dims, other.dims)])

    def concatenate(self, other) -> TensorShape:
        """This shape followed by `other`."""
        other = as_shape(other)
        if self._dims is None or other.dims is None:
            return TensorShape(None)
        return TensorShape(self._dims + other.dims)

    def with_rank(self, rank: int) -> TensorShape:
        """This shape, checked (and, if unknown, made) to have `rank` dimensions."""
        if self._dims is None:
            return TensorShape([None] * rank)
        if len(self._dims) != rank:
            raise ValueError(f"Shape {self} must have rank {rank}")
        return self

    def __eq__(self, other):
        try:
            other = as_shape(other)
        except (TypeError, ValueError):
            return NotImplemented
        if self._dims is None or other.dims is None:
            return self._dims is None and other.dims is None
        return [d.value for d in self._dims] == [d.value for d in other.dims]

    def __ne__(self, other):
        eq = self.__eq__(other)
        return eq if eq is NotImplemented else not eq

    def __hash__(self) -> int:
        return hash(None if self._dims is None else tuple(d.value for d in self._dims))

    def __repr__(self) -> str:
        return "TensorShape(None)" if self._dims is None else f"TensorShape({self._dims!r})"

    def __str__(self) -> str:
        if self._dims is None:
            return "<unknown>"
        if len(self._dims) == 1:
            return f"({self._dims[0]},)"
        return "(" + ", ".join(str(d) for d in self._dims) + ")"


def as_shape(shape) -> TensorShape:
    """`shape` (a TensorShape, a list or tuple of sizes, or None) as a TensorShape."""
    return shape if isinstance(shape, TensorShape) else TensorShape(shape)


def unknown_shape(rank=None) -> TensorShape:
    """A shape of unknown dimensions (and unknown rank when `rank` is None)."""
    return TensorShape(None if rank is None else [None] * rank)
