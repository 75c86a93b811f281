"""The Python Array API standard (2023.12) over Ember's ops: `import ember.array_api as xp`.

Arrays are `ember.Tensor`s (`x.__array_namespace__()` returns this module); see docs/interop.md.
"""

from __future__ import annotations

import math as _math

from ember.array_api import linalg
from ember.array_api._creation import (
    arange,
    asarray,
    empty,
    empty_like,
    eye,
    from_dlpack,
    full,
    full_like,
    linspace,
    meshgrid,
    ones,
    ones_like,
    tril,
    triu,
    zeros,
    zeros_like,
)
from ember.array_api._dtypes import (
    astype,
    bool,
    can_cast,
    finfo,
    float32,
    float64,
    iinfo,
    int8,
    int16,
    int32,
    int64,
    isdtype,
    result_type,
    uint8,
)
from ember.array_api._elementwise import (
    abs,
    acos,
    acosh,
    add,
    asin,
    asinh,
    atan,
    atan2,
    atanh,
    bitwise_and,
    bitwise_invert,
    bitwise_left_shift,
    bitwise_or,
    bitwise_right_shift,
    bitwise_xor,
    ceil,
    clip,
    conj,
    copysign,
    cos,
    cosh,
    divide,
    equal,
    exp,
    expm1,
    floor,
    floor_divide,
    greater,
    greater_equal,
    hypot,
    imag,
    isfinite,
    isinf,
    isnan,
    less,
    less_equal,
    log,
    log1p,
    log2,
    log10,
    logaddexp,
    logical_and,
    logical_not,
    logical_or,
    logical_xor,
    maximum,
    minimum,
    multiply,
    negative,
    nextafter,
    not_equal,
    positive,
    pow,
    real,
    remainder,
    round,
    sign,
    signbit,
    sin,
    sinh,
    sqrt,
    square,
    subtract,
    tan,
    tanh,
    trunc,
)
from ember.array_api._info import __array_namespace_info__
from ember.array_api._linalg_main import matmul, matrix_transpose, tensordot, vecdot
from ember.array_api._manipulation import (
    broadcast_arrays,
    broadcast_to,
    concat,
    expand_dims,
    flip,
    moveaxis,
    permute_dims,
    repeat,
    reshape,
    roll,
    squeeze,
    stack,
    tile,
    unstack,
)
from ember.array_api._searching import (
    argmax,
    argmin,
    argsort,
    nonzero,
    searchsorted,
    sort,
    take,
    unique_all,
    unique_counts,
    unique_inverse,
    unique_values,
    where,
)
from ember.array_api._statistical import all, any, cumulative_sum, max, mean, min, prod, std, sum, var

__array_api_version__ = "2023.12"

e = _math.e
inf = _math.inf
nan = _math.nan
pi = _math.pi
newaxis = None

__all__ = [
    "__array_api_version__", "__array_namespace_info__", "abs", "acos", "acosh", "add", "all", "any", "arange",
    "argmax", "argmin", "argsort", "asarray", "asin", "asinh", "astype", "atan", "atan2", "atanh",
    "bitwise_and", "bitwise_invert", "bitwise_left_shift", "bitwise_or", "bitwise_right_shift", "bitwise_xor",
    "bool", "broadcast_arrays", "broadcast_to", "can_cast", "ceil", "clip", "concat", "conj", "copysign", "cos",
    "cosh", "cumulative_sum", "divide", "e", "empty", "empty_like", "equal", "exp", "expand_dims", "expm1",
    "eye", "finfo", "flip", "float32", "float64", "floor", "floor_divide", "from_dlpack", "full", "full_like",
    "greater", "greater_equal", "hypot", "iinfo", "imag", "inf", "int16", "int32", "int64", "int8", "isdtype",
    "isfinite", "isinf", "isnan", "less", "less_equal", "linalg", "linspace", "log", "log10", "log1p", "log2",
    "logaddexp", "logical_and", "logical_not", "logical_or", "logical_xor", "matmul", "matrix_transpose", "max",
    "maximum", "mean", "meshgrid", "min", "minimum", "moveaxis", "multiply", "nan", "negative", "newaxis",
    "nextafter", "nonzero", "not_equal", "ones", "ones_like", "permute_dims", "pi", "positive", "pow", "prod",
    "real", "remainder", "repeat", "reshape", "result_type", "roll", "round", "searchsorted", "sign", "signbit",
    "sin", "sinh", "sort", "sqrt", "square", "squeeze", "stack", "std", "subtract", "sum", "take", "tan",
    "tanh", "tensordot", "tile", "tril", "triu", "trunc", "uint8", "unique_all", "unique_counts",
    "unique_inverse", "unique_values", "unstack", "var", "vecdot", "where", "zeros", "zeros_like",
]
