"""`gradient`: PyTorch's (and NumPy's) estimate of a sampled function's derivatives by finite differences, second-order
accurate inside and of order `edge_order` at the ends, on uniform spacings or given coordinates. Composed of slices and
arithmetic, so it is differentiable itself."""

from __future__ import annotations

import numbers

from ember import dtypes as dt
from ember.tensor import Tensor


def gradient(input, *, spacing=1, dim=None, edge_order: int = 1) -> tuple:
    """The derivative estimate along each of `dim` (every dim by default), one tensor per dim."""
    if edge_order not in (1, 2):
        raise RuntimeError(f"torch.gradient only supports edge_order=1 and edge_order=2, got {edge_order}")
    dims = list(range(input.ndim)) if dim is None else [dim] if isinstance(dim, int) else list(dim)
    dims = [d + input.ndim if d < 0 else d for d in dims]
    if any(not 0 <= d < input.ndim for d in dims) or len(set(dims)) != len(dims):
        raise IndexError(f"gradient: dim {dim} is out of range (or repeated) for a tensor of {input.ndim} dims")
    spacings = _spacings(spacing, dims, input, dim)
    for d in dims:
        if input.shape[d] < edge_order + 1:
            raise RuntimeError("torch.gradient expected each dimension size to be at least edge_order+1 (dim "
                               f"{d} of shape {tuple(input.shape)} has {input.shape[d]})")
    x = input if input.dtype.is_floating_point else input.to(dt.get_default_dtype())
    return tuple(_along(x, d, h, edge_order) for d, h in zip(dims, spacings))


def _spacings(spacing, dims: list, input, dim) -> list:
    """One spacing per dim: a number, or a 1-D tensor of coordinates as long as the dim."""
    if isinstance(spacing, numbers.Number) or (isinstance(spacing, Tensor) and spacing.ndim == 0):
        return [spacing] * len(dims)
    spacing = list(spacing)
    if len(spacing) != len(dims):
        given = f"'self.dim() = {input.ndim}', since dim argument was not given" if dim is None else \
            f"'len(dim) = {len(dims)}'"
        raise RuntimeError(f"torch.gradient expected spacing to be unspecified, a scalar, or a list of length equal "
                           f"to {given}, but got a list of length {len(spacing)}")
    for d, h in zip(dims, spacing):
        if isinstance(h, Tensor) and h.ndim == 1 and h.shape[0] != input.shape[d]:
            raise RuntimeError(f"torch.gradient expected each tensor to be on the same device and of the same length "
                               f"as its dim: coordinates of length {h.shape[0]} for dim {d} of size {input.shape[d]}")
    return spacing


def _along(x, d: int, h, edge_order: int):
    n = x.shape[d]

    def part(start, length=None):  # x's slices along d
        return x.narrow(d, start if start >= 0 else n + start, 1 if length is None else length)

    if isinstance(h, Tensor) and h.ndim == 1:
        return _along_coordinates(x, d, h.to(x.dtype), edge_order, part, n)
    inside = (part(2, n - 2) - part(0, n - 2)) / (2 * h)
    if edge_order == 1:
        first, last = (part(1) - part(0)) / h, (part(-1) - part(-2)) / h
    else:
        first = (part(0) * -1.5 + part(1) * 2.0 - part(2) * 0.5) / h
        last = (part(-3) * 0.5 - part(-2) * 2.0 + part(-1) * 1.5) / h
    from ember.ops.shape import cat

    return cat([first, inside, last], d)


def _along_coordinates(x, d: int, c, edge_order: int, part, n: int):
    """NumPy's non-uniform formulas, the coefficients broadcast along dim d."""
    from ember.ops.shape import cat

    shape = [1] * x.ndim

    def along(v):  # a 1-D coefficient vector laid along dim d
        shape[d] = v.shape[0]
        return v.reshape(tuple(shape))

    dx = c[1:] - c[:-1]
    hl, hr = dx[:-1], dx[1:]
    inside = (along(-hr / (hl * (hl + hr))) * part(0, n - 2) + along((hr - hl) / (hl * hr)) * part(1, n - 2)
              + along(hl / (hr * (hl + hr))) * part(2, n - 2))
    if edge_order == 1:
        first, last = (part(1) - part(0)) / dx[0], (part(-1) - part(-2)) / dx[-1]
    else:
        a, b = dx[0], dx[1]
        first = (part(0) * (-(2 * a + b) / (a * (a + b))) + part(1) * ((a + b) / (a * b))
                 + part(2) * (-a / (b * (a + b))))
        a, b = dx[-2], dx[-1]
        last = (part(-3) * (b / (a * (a + b))) + part(-2) * (-(a + b) / (a * b))
                + part(-1) * ((2 * b + a) / (b * (a + b))))
    return cat([first, inside, last], d)
