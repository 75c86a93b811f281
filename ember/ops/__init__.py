"""Every primitive op, defined once (see registry.Op), and the functions that call them."""

import warnings as _warnings

from ember.ops.activation import log_softmax, softmax
from ember.ops.closeness import allclose, isclose
from ember.ops.conv import conv2d, conv_transpose2d
from ember.ops.creation_ops import arange_like, empty_like, full_like, ones_like, zeros_like, zeros_like_shape
from ember.ops.device_ops import to_device
from ember.dispatch import apply
from ember.ops.elementwise import (
    abs, add, atan2, bitwise_and, bitwise_not, bitwise_or, bitwise_xor, ceil, clamp, clamp_max, clamp_min, clip,
    cos, div, divide, elu, eq, erf, exp, exp2, expm1, floor, floor_divide, fmod, frac, ge, gelu, greater,
    greater_equal, gt, hardtanh, isfinite, isinf, isnan, le, leaky_relu, less, less_equal, log, log1p,
    log2, log10, logical_and, logical_not, logical_or, logical_xor, lt, maximum, minimum, mul, multiply, ne, neg,
    negative, not_equal, pow, reciprocal, relu, relu6, remainder, round, rsqrt, sigmoid, sign, silu, sin,
    softplus, sqrt, square, sub, subtract, tan, tanh, true_divide, trunc, where, gcd, lcm,
)
from ember.ops.elementwise import abs as absolute  # noqa: E402  (PyTorch's other names)
from ember.ops.elementwise import atan2 as arctan2  # noqa: E402
from ember.ops.elementwise import trunc as fix  # noqa: E402
from ember.ops.elementwise_composed import (
    deg2rad, float_power, fmax, fmin, heaviside, isneginf, isposinf, ldexp, logaddexp2, nan_to_num, positive,
    rad2deg, renorm, rsub, sgn, sinc,
)
from ember.ops.elementwise_extra import (
    acos, acosh, arccos, arccosh, arcsin, arcsinh, arctan, arctanh, asin, asinh, atan, atanh, bitwise_left_shift,
    bitwise_right_shift, copysign, cosh, frexp, hypot, logaddexp, nextafter, signbit, sinh,
)
from ember.ops.indexing import (
    argwhere, gather, getitem, index_add, index_put, index_select, masked_fill, masked_select, nonzero, one_hot,
    scatter, scatter_add, setitem, take_along_dim,
)
from ember.ops.finite_differences import gradient
from ember.ops.linalg import (
    addbmm, addmm, addmv, addr, baddbmm, bmm, cdist, cross, dist, dot, einsum, ger, inner, matmul, mm, mv, outer,
    tensordot, trace, vdot,
)
from ember.ops.linalg_decomp import det, inverse, logdet, pinverse, slogdet
from ember.ops.linalg_extra import matrix_exp
from ember.ops.linalg_legacy import (
    chain_matmul, cholesky, cholesky_inverse, cholesky_solve, lu, lu_solve, lu_unpack, matrix_power, qr, svd,
    triangular_solve,
)
from ember.ops.pointwise import addcdiv, addcmul, lerp
from ember.ops.queries import (
    broadcast_shapes, can_cast, is_complex, is_floating_point, is_nonzero, is_same_size, is_signed, result_type,
)
from ember.ops.pool import adaptive_avg_pool2d, avg_pool2d, max_pool2d
from ember.ops.reduction import (
    all, amax, amin, any, argmax, argmin, count_nonzero, equal, logsumexp, max, mean, min, norm, prod, std, std_mean,
    sum, var, var_mean,
)
from ember.op import OPS, Op
from ember.ops.scatter_reduce import index_reduce, scatter_reduce, segment_reduce
from ember.ops.shape import (
    broadcast_tensors, broadcast_to, cast, cat, clone, concat, concatenate, contiguous, diagonal, expand,
    expand_as, flatten, flip, fliplr, flipud, hstack, identity, movedim, moveaxis, narrow, pad, permute, repeat,
    reshape, roll, select, squeeze, stack, sum_to_size, swapaxes, swapdims, t, tile, transpose, tril, triu,
    unflatten, unsqueeze, view, vstack,
)
from ember.ops.search import (
    bincount, bucketize, histc, histogram, isin, mode, searchsorted, unique, unique_consecutive,
)
from ember.ops.shape_composed import (
    adjoint, atleast_1d, atleast_2d, atleast_3d, block_diag, cartesian_prod, column_stack, combinations,
    cumulative_trapezoid, diag, diag_embed, diagflat, diagonal_scatter, diff, dsplit, dstack, hsplit, index_copy,
    index_fill, kron, masked_scatter, meshgrid, ravel, repeat_interleave, rot90, row_stack, select_scatter,
    slice_scatter, take, trapezoid, trapz, tril_indices, triu_indices, vander, vsplit,
)
from ember.ops.split import chunk, split, tensor_split, unbind
from ember.ops.sorting import (
    argsort, cummax, cummin, cumprod, cumsum, kthvalue, logcumsumexp, msort, sort, topk,
)
from ember.ops.special import digamma, erfc, erfinv, lgamma, logit, polygamma, xlogy
from ember.ops.special_bessel import i0
from ember.ops.as_strided import as_strided
from ember.ops.control_flow import cond, while_loop
from ember.ops.windows import bartlett_window, blackman_window, hamming_window, hann_window, kaiser_window
from ember.ops.torch_forms import *  # noqa: F403  (torch.relu_, torch.t_copy, torch.real, ...: see its __all__)
from ember.ops.statistics import (
    aminmax, corrcoef, cov, median, nanmean, nanmedian, nanquantile, nansum, quantile,
)

__all__ = [name for name in dir() if not name.startswith("_")]

# Tensor's methods run these ops: they are put on the class now that the ops exist (ember/mixins)
from ember.mixins import install as _install_methods  # noqa: E402
from ember.tensor import Tensor as _Tensor  # noqa: E402

_install_methods(_Tensor)

# PyTorch gives IEEE results quietly (log(0) = -inf, 0/0 = nan, inf * 0 = nan); NumPy warns. Only the
# floating-point warnings NumPy raises inside Ember's own kernels (modules named ember..., and the
# generated kernel modules) are ignored: a user's own NumPy code still warns. The filter costs
# nothing unless a warning is raised.
_warnings.filterwarnings(
    "ignore", message=r"(divide by zero|invalid value|overflow|underflow) encountered", category=RuntimeWarning,
    module=r"ember(\.|_kernels_|$)",
)
