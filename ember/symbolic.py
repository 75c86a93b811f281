"""Symbolic sizes for dynamic ember.jit programs: `SymInt`, an int that remembers how it was computed.

A dynamic trace gives the varying dimension of its arguments (the batch) a `SymInt`: it behaves as
its trace-time value, so every shape rule runs unchanged, but arithmetic on it builds an expression
(`B * 784`, `B // 2 + 1`), so the sizes, shape attributes and scalars derived from it can be
evaluated again for another batch size. What Python code decides about it (a comparison, an
`int()`) is recorded as a guard: the program is reused for a new size only when every guard still
holds, and `validate` re-runs the shape rules to catch a size that was read in a way no guard saw.
"""

from __future__ import annotations

import operator
import threading

_OPS = {
    "add": operator.add, "sub": operator.sub, "mul": operator.mul, "floordiv": operator.floordiv,
    "truediv": operator.truediv, "mod": operator.mod, "pow": operator.pow, "neg": operator.neg,
}
_CMP = {"eq": operator.eq, "ne": operator.ne, "lt": operator.lt, "le": operator.le, "gt": operator.gt,
        "ge": operator.ge}


class _Guards(threading.local):
    sink = None  # a list collecting (expr, cmp, other, result) while a dynamic program is compiled


_guards = _Guards()


def evaluate(expr, env: dict) -> int:
    """The value of an expression (an int, a variable name, or (op, *args)) for the sizes in `env`."""
    if type(expr) is int or type(expr) is float:
        return expr
    if type(expr) is str:
        return env[expr]
    op, *args = expr
    return _OPS[op](*(evaluate(a, env) for a in args))


def _expr(x):
    t = type(x)
    if t is SymInt or t is SymFloat:
        return x.expr
    return float(x) if isinstance(x, float) else int(x)


def _value(x):
    t = type(x)
    if t is SymInt or t is SymFloat:
        return x.value
    return float(x) if isinstance(x, float) else int(x)


def _number(x) -> bool:
    return type(x) is not bool and isinstance(x, (int, float))


class _Symbolic:
    """What SymInt and SymFloat share: arithmetic keeps the expression, comparisons are guards."""

    def _arith(self, other, op: str, reverse: bool = False):
        if not _number(other):
            return NotImplemented
        return _symbolic(self, other, op, reverse)

    def __add__(self, other):
        return self._arith(other, "add")

    def __radd__(self, other):
        return self._arith(other, "add", True)

    def __sub__(self, other):
        return self._arith(other, "sub")

    def __rsub__(self, other):
        return self._arith(other, "sub", True)

    def __mul__(self, other):
        return self._arith(other, "mul")

    def __rmul__(self, other):
        return self._arith(other, "mul", True)

    def __truediv__(self, other):
        return self._arith(other, "truediv")

    def __rtruediv__(self, other):
        return self._arith(other, "truediv", True)

    def __pow__(self, other):
        return self._arith(other, "pow")

    def __neg__(self):
        return type(self)(-self.value, ("neg", self.expr))

    def __pos__(self):
        return self

    # --- anything that fixes the value is recorded as a guard ------------------------------
    def _concrete(self):
        _record(self.expr, "eq", self.value, True)
        return self.value

    def __eq__(self, other):
        return _compare(self, other, "eq")

    def __ne__(self, other):
        return _compare(self, other, "ne")

    def __lt__(self, other):
        return _compare(self, other, "lt")

    def __le__(self, other):
        return _compare(self, other, "le")

    def __gt__(self, other):
        return _compare(self, other, "gt")

    def __ge__(self, other):
        return _compare(self, other, "ge")

    def __bool__(self) -> bool:
        return _compare(self, 0, "ne")

    def __int__(self) -> int:
        return int(self._concrete())

    def __float__(self) -> float:
        return float(self._concrete())

    def __trunc__(self):
        return int(self._concrete())

    def __repr__(self) -> str:
        return repr(self.value)

    __str__ = __repr__

    def __format__(self, spec: str) -> str:
        return format(self.value, spec)

    def __reduce__(self):  # copies and pickles keep the value only
        return (type(self.value), (self.value,))


class SymInt(_Symbolic, int):
    """An int computed from symbolic sizes: `value` now, `expr` to recompute it for other sizes."""

    def __new__(cls, value: int, expr):
        obj = int.__new__(cls, value)
        obj.value = int(value)
        obj.expr = expr
        return obj

    __hash__ = int.__hash__  # equal sizes are equal ints; equality itself is guarded

    def __floordiv__(self, other):
        return self._arith(other, "floordiv")

    def __rfloordiv__(self, other):
        return self._arith(other, "floordiv", True)

    def __mod__(self, other):
        return self._arith(other, "mod")

    def __rmod__(self, other):
        return self._arith(other, "mod", True)

    def __index__(self) -> int:
        return self._concrete()

    def __round__(self, ndigits=None):
        return self._concrete()


class SymFloat(_Symbolic, float):
    """A float computed from symbolic sizes (`n / (n - 1)`): `value` now, `expr` to recompute it."""

    def __new__(cls, value: float, expr):
        obj = float.__new__(cls, value)
        obj.value = float(value)
        obj.expr = expr
        return obj

    __hash__ = float.__hash__

    def __round__(self, ndigits=None):
        return round(self._concrete(), ndigits)


def _symbolic(a, b, op: str, reverse: bool):
    """a op b (b op a when reversed) on their values, with the expression that recomputes it."""
    x, y = (b, a) if reverse else (a, b)
    if type(y) in (int, float) and ((y == 0 and op in ("add", "sub")) or (y == 1 and op in ("mul", "floordiv"))):
        return x  # x + 0, x * 1: the same quantity, so comparisons with x need no guard
    if type(x) in (int, float) and ((x == 0 and op == "add") or (x == 1 and op == "mul")):
        return y
    value = _OPS[op](_value(x), _value(y))
    expr = (op, _expr(x), _expr(y))
    return SymInt(value, expr) if type(value) is int else SymFloat(value, expr)


def _compare(a, other, cmp: str):
    """A comparison of a symbolic number, recorded as a guard (unless both sides are one expression)."""
    if type(other) in (SymInt, SymFloat) and other.expr == a.expr:
        return _CMP[cmp](0, 0)  # the same quantity: decided without looking at values
    if not _number(other):
        return NotImplemented
    result = _CMP[cmp](a.value, _value(other))
    _record(a.expr, cmp, _expr(other), result)
    return result


def _record(expr, cmp: str, other, result: bool) -> None:
    sink = _guards.sink
    if sink is not None:
        sink.append((expr, cmp, other, result))


class collecting_guards:
    """`with collecting_guards() as guards:` — the decisions made on symbolic sizes inside, as a list."""

    def __enter__(self) -> list:
        self._prev = _guards.sink
        self.guards = _guards.sink = [] if self._prev is None else self._prev
        return self.guards

    def __exit__(self, *exc) -> None:
        _guards.sink = self._prev


def guards_hold(guards: list, env: dict) -> bool:
    """Whether every recorded decision comes out the same for the sizes in `env`."""
    for expr, cmp, other, result in guards:
        try:
            if _CMP[cmp](evaluate(expr, env), evaluate(other, env)) != result:
                return False
        except (ZeroDivisionError, ValueError):
            return False
    return True


def bind(value, env: dict):
    """`value` with every SymInt in it (nested in tuples, lists and dicts) replaced by its value for `env`."""
    t = type(value)
    if t is SymInt or t is SymFloat:
        return evaluate(value.expr, env)
    if t is tuple or t is list:
        return t(bind(v, env) for v in value)
    if t is dict:
        return {k: bind(v, env) for k, v in value.items()}
    if t is slice:
        return slice(bind(value.start, env), bind(value.stop, env), bind(value.step, env))
    return value


def has_symbols(value) -> bool:
    """Whether a (nested) value holds a SymInt."""
    t = type(value)
    if t is SymInt or t is SymFloat:
        return True
    if t is tuple or t is list:
        return any(has_symbols(v) for v in value)
    if t is dict:
        return any(has_symbols(v) for v in value.values())
    if t is slice:
        return has_symbols(value.start) or has_symbols(value.stop) or has_symbols(value.step)
    return False


def values_of(shape: tuple) -> tuple:
    """`shape` with each symbolic size replaced by its current value, recording no guard (for
    shape rules that hand sizes to NumPy; `carry_symbols` puts the symbols back in the result)."""
    return tuple(d.value if type(d) is SymInt else d for d in shape)


def carry_symbols(shapes: list, result: tuple, rule) -> tuple:
    """`result` (= rule(values_of(each shape))) with a symbolic input size put back wherever it
    passes through unchanged: a size is carried to the output dimension that alone grows with it.

    Sizes that are transformed (a strided slice of the batch) stay plain ints; the dynamic program's
    validation then finds that they do not follow the batch size and traces statically instead.
    """
    result = list(result)
    for k, shape in enumerate(shapes):
        for i, d in enumerate(shape):
            if type(d) is not SymInt:
                continue
            bumped = [values_of(s) for s in shapes]
            bumped[k] = bumped[k][:i] + (d.value + 7,) + bumped[k][i + 1:]
            try:
                grown = rule(*bumped)
            except (IndexError, ValueError, TypeError):
                continue
            changed = [j for j, (a, b) in enumerate(zip(result, grown)) if a != b]
            if len(grown) == len(result) and len(changed) == 1 and grown[changed[0]] - result[changed[0]] == 7 \
                    and result[changed[0]] == d.value:
                result[changed[0]] = d
    return tuple(result)
