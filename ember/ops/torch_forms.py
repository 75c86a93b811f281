"""PyTorch's top-level forms that Ember has as Tensor methods or other ops: the in-place functions (`torch.relu_(x)`
is `x.relu_()`), the `*_copy` functions (a view op's result, copied), the real-number forms of the complex API
(`torch.real`, `torch.conj`, ...), and `unravel_index`, `asarray`, `scalar_tensor`, `fill`."""

from __future__ import annotations

import numpy as np

from ember import creation
from ember import dtypes as dt
from ember.errors import DtypeError
from ember.tensor import Tensor

# torch.<name>(input, ...) is input.<name>(...) for these
METHOD_FORMS = (
    "abs_", "acos_", "acosh_", "addmv_", "arccos_", "arccosh_", "arcsin_", "arcsinh_", "arctan_", "arctanh_", "asin_",
    "asinh_", "atan_", "atanh_", "ceil_", "clamp_", "clamp_max_", "clamp_min_", "clip_", "cos_", "cosh_", "deg2rad_",
    "detach_", "erf_", "erfc_", "exp2_", "exp_", "expm1_", "fill_", "fix_", "floor_", "frac_", "gcd_", "i0_", "index_put_",
    "lcm_", "ldexp_", "log10_", "log1p_", "log2_", "log_", "logit_", "nan_to_num_", "neg_", "negative_", "rad2deg_",
    "reciprocal_", "relu_", "round_", "rsqrt_", "sigmoid_", "sin_", "sinc_", "sinh_", "sqrt_", "square_", "tan_",
    "tanh_", "trunc_", "xlogy_", "zero_", "angle", "conj", "conj_physical", "detach", "is_conj", "is_neg", "isreal",
    "resolve_conj", "resolve_neg", "split_with_sizes", "unsafe_chunk", "unsafe_split",
)
# torch.<view>_copy(input, ...) is input.<view>(...), copied
COPY_FORMS = (
    "detach", "diagonal", "expand", "narrow", "permute", "select", "split", "split_with_sizes", "squeeze", "t",
    "transpose", "unbind", "unfold", "unsqueeze", "view",
)


def _method_form(name: str):
    def function(input, *args, **kwargs):
        return getattr(input, name)(*args, **kwargs)

    function.__name__ = function.__qualname__ = name
    function.__doc__ = f"`input.{name}(...)`, PyTorch's top-level form."
    return function


def _copy_form(name: str):
    def function(input, *args, **kwargs):
        result = getattr(input, name)(*args, **kwargs)
        return tuple(t.clone() for t in result) if isinstance(result, tuple) else result.clone()

    function.__name__ = function.__qualname__ = name + "_copy"
    function.__doc__ = f"`input.{name}(...)` copied: a tensor of its own, not a view."
    return function


def real(input):
    """The real part: the tensor itself (Ember's dtypes are real)."""
    return input.real


def imag(input):
    """Refused, as PyTorch refuses it for real tensors."""
    return input.imag


def unravel_index(indices, shape):
    """The coordinates in `shape` of flat indices (a tuple of int64 tensors, one per dim), PyTorch's wrap-around
    for indices outside [0, numel)."""
    if isinstance(shape, int):
        shape = (shape,)
    shape = tuple(int(s) for s in shape)
    if any(s < 0 for s in shape):
        raise ValueError(f"unravel_index: 'shape' cannot have negative values, but got {shape}")
    if not isinstance(indices, Tensor):
        indices = creation.tensor(indices)
    if indices.dtype.is_floating_point or indices.dtype == dt.bool_:
        raise DtypeError(f"unravel_index: expected 'indices' to be an integer tensor, but got {indices.dtype}")
    flat = indices.detach().numpy().astype(np.int64)
    out = []
    for size in reversed(shape):
        out.append(np.mod(flat, size) if size else np.zeros_like(flat))
        flat = np.floor_divide(flat, size) if size else flat
    return tuple(creation.tensor(c, dtype=dt.int64, device=indices.device) for c in reversed(out))


def asarray(obj, *, dtype=None, device=None, copy=None, requires_grad: bool = False):
    """A tensor of obj, sharing its memory where it can (a tensor, or a NumPy array of the asked dtype on the CPU)
    unless copy=True; copy=False refuses a copy that would be needed."""
    if isinstance(obj, Tensor):
        t = obj if dtype is None and device is None else obj.to(device=device, dtype=dtype)
        if copy:
            t = t.clone()
        elif copy is False and t is not obj and t._data is not obj._data:
            raise ValueError("asarray: copy=False, but a copy is needed for the dtype or device asked for")
        return t.requires_grad_(True) if requires_grad else t
    if isinstance(obj, np.ndarray) and not copy and (device is None or str(device).startswith("cpu")):
        np_dtype = dt.as_dtype(dtype).np if dtype is not None else obj.dtype
        if obj.dtype == np_dtype and obj.dtype.kind in "biuf":
            t = creation.from_numpy(obj)
            return t.requires_grad_(True) if requires_grad else t
    if copy is False:
        raise ValueError(f"asarray: copy=False, but a {type(obj).__name__} cannot be shared as a tensor")
    return creation.tensor(obj, dtype=dtype, device=device, requires_grad=requires_grad)


def scalar_tensor(s, *, dtype=None, device=None, requires_grad: bool = False):
    """A 0-d tensor of the number s (the default float dtype unless dtype is given)."""
    return creation.tensor(float(s) if dtype is None else s, dtype=dtype or dt.get_default_dtype(), device=device,
                           requires_grad=requires_grad)


def fill(input, value):
    """A new tensor of input's shape, dtype and device, every value `value` (torch.fill)."""
    return input.clone().fill_(value)


for _name in METHOD_FORMS:
    globals()[_name] = _method_form(_name)
for _name in COPY_FORMS:
    globals()[_name + "_copy"] = _copy_form(_name)

__all__ = ["real", "imag", "unravel_index", "asarray", "scalar_tensor", "fill", *METHOD_FORMS,
           *(name + "_copy" for name in COPY_FORMS)]
