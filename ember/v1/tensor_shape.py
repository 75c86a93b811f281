"""TF1's static shapes: `TensorShape` (what `tensor.get_shape()` returns) and `Dimension`, unknowns included.

As in TF1, indexing a shape gives a `Dimension` (`.value` is an int or None; `int(d)` works for a
known one), `as_list()` gives plain ints and Nones, and comparisons involving an unknown dimension
are None rather than True or False.

`tensor.shape` of a graph tensor is a `StaticShape`: the same shape as a tuple of ints and Nones
(what TF 2's `TensorShape` gives when indexed), with every `TensorShape` method besides, so Ember's
own code, which reads shapes as tuples, and TF programs, which call `shape.as_list()`, both work.
"""

from __future__ import annotations

import operator

from ember.size import Size


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

    def __truediv__(self, other):
        raise TypeError(f"unsupported operand type(s) for /: 'Dimension' and '{type(other).__name__}', please use // "
                        "instead")

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
        elif isinstance(dims, StaticShape):
            dims = None if dims.ndims is None else tuple(dims)
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
            raise ValueError("Cannot take the length of shape with unknown rank.")
        return len(self._dims)

    def __iter__(self):
        if self._dims is None:
            raise ValueError("Cannot iterate over a shape with unknown rank.")
        return iter(self._dims)

    def __getitem__(self, key):
        if self._dims is None:
            return _unknown_slice(key) if isinstance(key, slice) else Dimension(None)
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
        """The most specific shape compatible with both (a ValueError if they are not compatible)."""
        other = as_shape(other)
        if self._dims is None:
            return other
        if other.dims is None:
            return TensorShape(self._dims)
        if not self.is_compatible_with(other):
            raise ValueError(f"Shapes {self} and {other} are not compatible")
        return TensorShape([a.merge_with(b) for a, b in zip(self._dims, other.dims)])

    def most_specific_compatible_shape(self, other) -> TensorShape:
        """The most specific shape both this one and `other` are compatible with (dims that differ are unknown)."""
        other = as_shape(other)
        if self._dims is None or other.dims is None or len(self._dims) != len(other.dims):
            return TensorShape(None)
        return TensorShape([a.value if a.value == b.value else None for a, b in zip(self._dims, other.dims)])

    def concatenate(self, other) -> TensorShape:
        """This shape followed by `other`."""
        other = as_shape(other)
        if self._dims is None or other.dims is None:
            return TensorShape(None)
        return TensorShape(self._dims + other.dims)

    def __add__(self, other) -> TensorShape:
        return self.concatenate(other)

    def __radd__(self, other) -> TensorShape:
        return as_shape(other).concatenate(self)

    def assert_same_rank(self, other) -> None:
        """A ValueError if both ranks are known and differ."""
        other = as_shape(other)
        if self.ndims is not None and other.ndims is not None and self.ndims != other.ndims:
            raise ValueError(f"Shapes {self} and {other} must have the same rank")

    def assert_has_rank(self, rank: int) -> None:
        """A ValueError if the rank is known and is not `rank`."""
        if self.ndims not in (None, rank):
            raise ValueError(f"Shape {self} must have rank {rank}")

    def with_rank(self, rank: int) -> TensorShape:
        """This shape, checked (and, if unknown, made) to have `rank` dimensions."""
        if self._dims is None:
            return TensorShape([None] * rank)
        if len(self._dims) != rank:
            raise ValueError(f"Shape {self} must have rank {rank}")
        return self

    def with_rank_at_least(self, rank: int) -> TensorShape:
        """This shape, checked to have at least `rank` dimensions (an unknown rank passes)."""
        if self._dims is not None and len(self._dims) < rank:
            raise ValueError(f"Shape {self} must have rank at least {rank}")
        return self

    def with_rank_at_most(self, rank: int) -> TensorShape:
        """This shape, checked to have at most `rank` dimensions (an unknown rank passes)."""
        if self._dims is not None and len(self._dims) > rank:
            raise ValueError(f"Shape {self} must have rank at most {rank}")
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


def _unknown_slice(key: slice) -> TensorShape:
    """A slice of a shape of unknown rank, as TF gives it: of known rank only for a slice of non-negative bounds."""
    if key.step is not None:
        raise ValueError("Steps are not yet handled")
    start = 0 if key.start is None else key.start
    if key.stop is None or start < 0 or key.stop < 0:
        return TensorShape(None)
    return TensorShape([None] * max(key.stop - start, 0))


def as_shape(shape) -> TensorShape:
    """`shape` (a TensorShape, a list or tuple of sizes, or None) as a TensorShape."""
    return shape if isinstance(shape, TensorShape) else TensorShape(shape)


def unknown_shape(rank=None) -> TensorShape:
    """A shape of unknown dimensions (and unknown rank when `rank` is None)."""
    return TensorShape(None if rank is None else [None] * rank)


class StaticShape(Size):
    """`tensor.shape` of a graph tensor: the static shape as a tuple of ints and Nones, with TensorShape's methods.

    Indexing gives ints and None (as TF 2's TensorShape does; `tensor.get_shape()` gives TF1's
    Dimensions). Of unknown rank (`UnknownRankShape`), `ndims` is None and `as_list()` raises, as
    in TF; its items are then the placeholder shape graph building works with, not a real rank.
    """

    __slots__ = ()
    ndims_known = True

    def __new__(cls, dims=()):
        return tuple.__new__(cls, dims)

    def as_tensor_shape(self) -> TensorShape:
        """The same shape as a TensorShape (TF1's Dimensions when indexed)."""
        return TensorShape(tuple(self) if self.ndims_known else None)

    @property
    def dims(self):
        """The Dimensions (None when the rank is unknown)."""
        return self.as_tensor_shape().dims

    @property
    def ndims(self):
        """The rank, or None when unknown."""
        return len(self) if self.ndims_known else None

    rank = ndims

    def as_list(self) -> list:
        """The sizes as ints (None for unknown dimensions); a ValueError for an unknown rank."""
        return self.as_tensor_shape().as_list()

    def is_fully_defined(self) -> bool:
        """Whether the rank and every dimension are known."""
        return self.ndims_known and None not in self

    def assert_is_fully_defined(self) -> None:
        """A ValueError unless the shape is fully defined."""
        self.as_tensor_shape().assert_is_fully_defined()

    def num_elements(self):
        """The number of elements, or None unless fully defined."""
        return self.as_tensor_shape().num_elements()

    def is_compatible_with(self, other) -> bool:
        """Whether some shape could match both."""
        return self.as_tensor_shape().is_compatible_with(other)

    def assert_is_compatible_with(self, other) -> None:
        """A ValueError unless `is_compatible_with(other)`."""
        self.as_tensor_shape().assert_is_compatible_with(other)

    def merge_with(self, other) -> TensorShape:
        """The most specific shape compatible with both (a ValueError if they are not compatible)."""
        return self.as_tensor_shape().merge_with(other)

    def most_specific_compatible_shape(self, other) -> TensorShape:
        """The most specific shape both this one and `other` are compatible with."""
        return self.as_tensor_shape().most_specific_compatible_shape(other)

    def concatenate(self, other) -> TensorShape:
        """This shape followed by `other`."""
        return self.as_tensor_shape().concatenate(other)

    def assert_same_rank(self, other) -> None:
        """A ValueError if both ranks are known and differ."""
        self.as_tensor_shape().assert_same_rank(other)

    def assert_has_rank(self, rank: int) -> None:
        """A ValueError if the rank is known and is not `rank`."""
        self.as_tensor_shape().assert_has_rank(rank)

    def with_rank(self, rank: int) -> TensorShape:
        """This shape, checked (and, if unknown, made) to have `rank` dimensions."""
        return self.as_tensor_shape().with_rank(rank)

    def with_rank_at_least(self, rank: int) -> TensorShape:
        """This shape, checked to have at least `rank` dimensions."""
        return self.as_tensor_shape().with_rank_at_least(rank)

    def with_rank_at_most(self, rank: int) -> TensorShape:
        """This shape, checked to have at most `rank` dimensions."""
        return self.as_tensor_shape().with_rank_at_most(rank)

    def __repr__(self) -> str:
        return repr(self.as_tensor_shape())

    def __str__(self) -> str:
        return str(self.as_tensor_shape())


class UnknownRankShape(StaticShape):
    """`tensor.shape` of a graph tensor whose rank is unknown (e.g. a placeholder made without a shape)."""

    __slots__ = ()
    ndims_known = False


def dimension_at_index(shape, index: int) -> Dimension:
    """Dimension `index` of a shape (unknown for a shape of unknown rank), as TF1's `tf.dimension_at_index`."""
    shape = as_shape(shape)
    if shape.ndims is None:
        return Dimension(None)
    return shape.dims[index]
