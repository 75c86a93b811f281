"""PyTorch-style text for tensors."""

from __future__ import annotations

import numpy as np

from ember import dtypes as dt
from ember.backends.meta import MetaArray

_DEFAULT_DTYPES = ("float32", "int64", "bool")


def _suffix(t) -> list:
    parts = []
    if t.device.type != "cpu" or t.device.index:
        parts.append(f"device='{t.device}'")
    name = t.dtype.name
    if name not in _DEFAULT_DTYPES or (name == "float32" and dt.get_default_dtype() is not dt.float32):
        parts.append(f"dtype=ember.{name}")
    if t.grad_fn is not None:
        parts.append(f"grad_fn=<{t.grad_fn.op.name}Backward>")
    elif t.requires_grad:
        parts.append("requires_grad=True")
    return parts


def tensor_repr(t) -> str:
    """tensor([[1., 2.], [3., 4.]], dtype=..., grad_fn=...) or, on meta, tensor(..., size=(...))."""
    data = t._data
    if isinstance(data, MetaArray):
        parts = ["...", f"device='{t.device}'", f"size={tuple(data.shape)}"]
        if t.dtype.name != "float32":
            parts.append(f"dtype=ember.{t.dtype.name}")
        return "tensor(" + ", ".join(parts) + ")"
    if not isinstance(data, np.ndarray) and t.device.type != "cuda":
        return f"tensor(<symbolic {t.dtype.name}{list(t.shape)}>)"
    host = t.device.backend.to_host(data)
    if host.dtype.kind == "V":  # bfloat16 prints through float32
        host = host.astype(np.float32)
    body = np.array2string(
        host, separator=", ", prefix="tensor(", threshold=1000, edgeitems=3, precision=4,
        floatmode="maxprec_equal" if host.dtype.kind == "f" else "maxprec",
    )
    if host.size == 0:
        body = "[]"
        parts = [body, f"size={tuple(host.shape)}"]
    else:
        parts = [body]
    return "tensor(" + ", ".join(parts + _suffix(t)) + ")"
