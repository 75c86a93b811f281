"""PyTorch-style text for tensors."""

from __future__ import annotations

import numpy as np

from ember import dtypes as dt
from ember.backends.meta import MetaArray

_DEFAULT_DTYPES = ("float32", "int64", "bool")
# PyTorch's print options: decimals, the element count from which a print is summarised, the elements shown at each
# end of a summarised axis, the line width, and scientific notation forced on or off (None: chosen by the values)
_DEFAULTS = {"precision": 4, "threshold": 1000, "edgeitems": 3, "linewidth": 80, "sci_mode": None}
_PROFILES = {"default": _DEFAULTS, "short": dict(_DEFAULTS, precision=2, edgeitems=2),
             "full": dict(_DEFAULTS, threshold=float("inf"))}
_OPTIONS = dict(_DEFAULTS)


def set_printoptions(precision=None, threshold=None, edgeitems=None, linewidth=None, profile=None,
                     sci_mode=None) -> None:
    """Set how tensors print, as torch.set_printoptions: a profile ('default', 'short', 'full') first, then each
    option given; sci_mode None lets the values choose."""
    if profile is not None:
        if profile not in _PROFILES:
            raise ValueError(f"set_printoptions: profile must be one of {', '.join(_PROFILES)}, got {profile!r}")
        _OPTIONS.update(_PROFILES[profile])
    for name, value in (("precision", precision), ("threshold", threshold), ("edgeitems", edgeitems),
                        ("linewidth", linewidth)):
        if value is not None:
            _OPTIONS[name] = value
    _OPTIONS["sci_mode"] = sci_mode


def get_printoptions() -> dict:
    """The current print options (set_printoptions' names)."""
    return dict(_OPTIONS)


def _suffix(t) -> list:
    parts = []
    if t.device.type != "cpu" or t.device.index:
        parts.append(f"device='{t.device}'")
    name = t.dtype.name
    if name not in _DEFAULT_DTYPES or (name == "float32" and dt.get_default_dtype() is not dt.float32):
        parts.append(f"dtype=ember.{name}")
    grad_fn = t.grad_fn
    if grad_fn is not None:
        parts.append(f"grad_fn=<{grad_fn.op.name}Backward>")
    elif t.requires_grad:
        parts.append("requires_grad=True")
    return parts


def _summarized(host: np.ndarray) -> np.ndarray:
    """The elements a summarised print shows (the first and last edge items along every axis)."""
    edge = _OPTIONS["edgeitems"]
    if host.size <= _OPTIONS["threshold"]:
        return host
    for axis, n in enumerate(host.shape):
        if n > 2 * edge:
            host = np.concatenate([np.take(host, range(edge), axis), np.take(host, range(n - edge, n), axis)], axis)
    return host


def _float_style(vals: np.ndarray):
    """PyTorch's float style: `1.` for whole numbers, else `precision` decimals, or scientific for wide ranges (or
    as sci_mode forces)."""
    finite = vals[np.isfinite(vals)]
    nonzero = np.abs(finite[finite != 0])
    digits, forced = _OPTIONS["precision"], _OPTIONS["sci_mode"]
    whole = bool(np.all(finite == np.ceil(finite)))
    sci = False
    if nonzero.size:
        lo, hi = nonzero.min(), nonzero.max()
        sci = bool(hi / lo > 1000.0 or hi > 1.0e8) or (not whole and lo < 1.0e-4)
    sci = sci if forced is None else forced
    fmt = "{:.DIGITSe}" if sci else ("{:.0f}." if whole else "{:.DIGITSf}")
    fmt = fmt.replace("DIGITS", str(digits))

    def one(v) -> str:
        if np.isnan(v):
            return "nan"
        if np.isinf(v):
            return "inf" if v > 0 else "-inf"
        return fmt.format(v)

    return one


def _formatter(host: np.ndarray):
    """A function giving every element's text at one common width (as PyTorch's _Formatter)."""
    vals = _summarized(host).ravel()
    if host.dtype.kind == "f":
        vals = vals.astype(np.float64)
        one = _float_style(vals)
    else:
        one = str
    width = max((len(one(v)) for v in vals.tolist()), default=0)
    return lambda v: one(v).rjust(width), width


def _vector_str(vec: np.ndarray, indent: int, fmt, width: int, summarize: bool) -> str:
    per_line = max(1, (_OPTIONS["linewidth"] - indent) // (width + 2))
    edge = _OPTIONS["edgeitems"]
    if summarize and vec.shape[0] > 2 * edge:
        items = [fmt(v) for v in vec[:edge].tolist()] + [" ..."] + [fmt(v) for v in vec[-edge:].tolist()]
    else:
        items = [fmt(v) for v in vec.tolist()]
    lines = [", ".join(items[i : i + per_line]) for i in range(0, len(items), per_line)]
    return "[" + (",\n" + " " * (indent + 1)).join(lines) + "]"


def _body(arr: np.ndarray, indent: int, fmt, width: int, summarize: bool) -> str:
    if arr.ndim == 0:
        return fmt(arr.item())
    if arr.ndim == 1:
        return _vector_str(arr, indent, fmt, width, summarize)
    edge = _OPTIONS["edgeitems"]
    if summarize and arr.shape[0] > 2 * edge:
        rows = [_body(arr[i], indent + 1, fmt, width, summarize) for i in range(edge)]
        rows += ["..."] + [_body(arr[i], indent + 1, fmt, width, summarize) for i in range(len(arr) - edge, len(arr))]
    else:
        rows = [_body(row, indent + 1, fmt, width, summarize) for row in arr]
    return "[" + ("," + "\n" * (arr.ndim - 1) + " " * (indent + 1)).join(rows) + "]"


def tensor_repr(t, as_str: bool = False) -> str:
    """tensor([[1., 2.], [3., 4.]], dtype=..., grad_fn=...) or, on meta, tensor(..., size=(...))."""
    data = t._data
    if getattr(type(data), "pending", False):  # async eager: printing waits for the value
        t._require_data("print")
        data = t._data
    if isinstance(data, MetaArray):
        describe = getattr(getattr(data, "graph", None), "describe_tensor", None)
        if describe is not None:  # a graph that says how its tensors print (ember.v1: as TF1 does)
            return describe(t, as_str)
        parts = ["...", f"device='{t.device}'", f"size={tuple(data.shape)}"]
        if t.dtype.name != "float32":
            parts.append(f"dtype=ember.{t.dtype.name}")
        return "tensor(" + ", ".join(parts) + ")"
    if not isinstance(data, np.ndarray) and t.device.type != "cuda":
        return f"tensor(<symbolic {t.dtype.name}{list(t.shape)}>)"
    host = t.device.backend.to_host(data)
    if host.dtype.kind == "V" or host.dtype == np.float16:  # bfloat16 and half print through float32
        host = host.astype(np.float32)
    if host.size == 0:
        parts = ["[]"] if host.shape == (0,) else ["[]", f"size={tuple(host.shape)}"]
        return "tensor(" + ", ".join(parts + _suffix(t)) + ")"
    fmt, width = _formatter(host)
    body = _body(host, len("tensor("), fmt, width, host.size > _OPTIONS["threshold"])
    return "tensor(" + ", ".join([body] + _suffix(t)) + ")"
