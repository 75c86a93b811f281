"""`affine_grid` and `grid_sample`: an affine map's sampling grid, and an image read at a grid's points (spatial
transformer networks, image warping), composed of gathers and arithmetic so the gradients with respect to the image
and the grid come from those ops' rules. The coordinate rules (unnormalising, border clipping, reflection) are
PyTorch's grid sampler's."""

from __future__ import annotations

import numpy as np

from ember import creation, ops
from ember.errors import DtypeError, ShapeError
from ember.ops.elementwise_composed import with_zero_gradient_to
from ember.tensor import Tensor

_MODES = ("bilinear", "nearest", "bicubic")
_PADDINGS = ("zeros", "border", "reflection")


def _steps(n: int, dtype, align_corners: bool) -> np.ndarray:
    """n sampling positions across [-1, 1]: the extreme pixels' centres (align_corners) or their outer edges."""
    if n <= 1:
        return np.zeros(n, dtype)
    steps = np.linspace(-1, 1, n, dtype=dtype)
    return steps if align_corners else steps * dtype.type((n - 1) / n)


def affine_grid(theta: Tensor, size, align_corners: bool = False) -> Tensor:
    """The (N, H, W, 2) grid of (x, y) points that `theta` (N, 2, 3) maps the output's pixels to, for size
    (N, C, H, W); or (N, D, H, W, 3) from (N, 3, 4) for size (N, C, D, H, W)."""
    size = tuple(int(s) for s in size)
    if len(size) not in (4, 5):
        raise ValueError(f"affine_grid: size must be (N, C, H, W) or (N, C, D, H, W), got {size}")
    if not theta.is_floating_point():
        raise DtypeError(f"affine_grid: theta must be a float tensor, got {theta.dtype.name}")
    dims = len(size) - 2
    if tuple(theta.shape) != (size[0], dims, dims + 1):
        raise ShapeError(f"affine_grid: theta must have shape ({size[0]}, {dims}, {dims + 1}) for size {size}, got "
                         f"{tuple(theta.shape)}")
    dtype = theta.dtype.np
    axes = [_steps(n, dtype, align_corners) for n in reversed(size[2:])]  # x (width) first, as the grid holds it
    mesh = np.meshgrid(*reversed(axes), indexing="ij")[::-1]  # over (D,) H, W; x, y(, z) in that order
    base = np.stack(list(mesh) + [np.ones_like(mesh[0])], -1).reshape(1, -1, dims + 1)
    base = creation.tensor(np.broadcast_to(base, (size[0],) + base.shape[1:]).copy(), device=theta.device)
    return ops.bmm(base, theta.transpose(1, 2)).reshape((size[0],) + size[2:] + (dims,))


def _unnormalize(coord: Tensor, size: int, align_corners: bool) -> Tensor:
    # [-1, 1] to pixel positions: the extreme pixels' centres (align_corners) or their outer edges at -1 and 1
    return (coord + 1) * ((size - 1) / 2) if align_corners else ((coord + 1) * size - 1) / 2


def _reflect(coord: Tensor, twice_low: int, twice_high: int) -> Tensor:
    # coord reflected into [twice_low / 2, twice_high / 2] as often as it takes
    if twice_low == twice_high:
        return ops.zeros_like(coord)
    low, span = twice_low / 2, (twice_high - twice_low) / 2
    coord = ops.abs(coord - low)
    extra = ops.fmod(coord, span)
    flips = ops.floor(coord / span)
    return ops.where(ops.fmod(flips, 2) == 0, extra + low, span - extra + low)


def _padded(coord: Tensor, size: int, padding_mode: str, align_corners: bool) -> Tensor:
    """A pixel position moved inside the image for the border and reflection paddings (zeros: as it is)."""
    if padding_mode == "border":
        return ops.clamp(coord, 0, size - 1)
    if padding_mode == "reflection":
        coord = _reflect(coord, 0, 2 * (size - 1)) if align_corners else _reflect(coord, -1, 2 * size - 1)
        return ops.clamp(coord, 0, size - 1)
    return coord


def _cubic_weights(t: Tensor) -> list:
    """The four taps' weights at fraction t of cubic convolution (Keys, A = -0.75: PyTorch's and OpenCV's)."""
    a = -0.75

    def near(d):  # |d| <= 1
        return ((a + 2) * d - (a + 3)) * d * d + 1

    def far(d):  # 1 < |d| < 2
        return ((a * d - 5 * a) * d + 8 * a) * d - 4 * a

    return [far(t + 1), near(t), near(1 - t), far(2 - t)]


def _read(flat: Tensor, ys: Tensor, xs: Tensor, h: int, w: int) -> Tensor:
    """flat (N, C, H * W) at integer positions (ys, xs), each (N, Ho, Wo): (N, C, Ho, Wo), 0 outside the image (and
    at a NaN position)."""
    inside = (ys >= 0) & (ys <= h - 1) & (xs >= 0) & (xs <= w - 1)
    zero = ops.zeros_like(ys)
    index = (ops.where(inside, ys, zero) * w + ops.where(inside, xs, zero)).long()
    n, c = flat.shape[:2]
    picked = ops.gather(flat, 2, index.reshape(n, 1, -1).expand(n, c, index[0].numel()))
    picked = picked.reshape((n, c) + tuple(index.shape[1:]))
    return ops.where(inside.unsqueeze(1), picked, ops.zeros_like(picked))


def grid_sample(input: Tensor, grid: Tensor, mode: str = "bilinear", padding_mode: str = "zeros",
                align_corners: bool | None = None) -> Tensor:
    """input (N, C, H, W) read at grid (N, Ho, Wo, 2)'s (x, y) points, -1 and 1 being the image's edges (or, with
    align_corners, its extreme pixels' centres): (N, C, Ho, Wo), interpolated bilinearly, bicubically or from the
    nearest pixel, points outside reading zeros, the border's values, or the image reflected."""
    if mode not in _MODES:
        raise ValueError(f"grid_sample: mode must be one of {', '.join(_MODES)}, got {mode!r}")
    if padding_mode not in _PADDINGS:
        raise ValueError(f"grid_sample: padding_mode must be one of {', '.join(_PADDINGS)}, got {padding_mode!r}")
    if input.ndim != 4 or grid.ndim != 4 or grid.shape[-1] != 2 or grid.shape[0] != input.shape[0]:
        raise ShapeError(f"grid_sample: expected input (N, C, H, W) and grid (N, Ho, Wo, 2) of one N, got input "
                         f"{tuple(input.shape)} and grid {tuple(grid.shape)} (volumetric 5-D sampling is not "
                         "supported)")
    if not input.is_floating_point() or input.dtype != grid.dtype:
        raise DtypeError(f"grid_sample: expected float input and grid of one dtype, got {input.dtype.name} and "
                         f"{grid.dtype.name}")
    align_corners = bool(align_corners)
    h, w = input.shape[2], input.shape[3]
    flat = input.reshape(input.shape[0], input.shape[1], h * w)
    x, y = _unnormalize(grid[..., 0], w, align_corners), _unnormalize(grid[..., 1], h, align_corners)
    if mode == "bicubic":  # the 4 x 4 pixels around each point, each tap's position padded on its own
        x0, y0 = ops.floor(x.detach()), ops.floor(y.detach())
        wxs, wys = _cubic_weights(x - x0), _cubic_weights(y - y0)
        out = None
        for i, wy in enumerate(wys):
            ys = _padded(y0 + (i - 1), h, padding_mode, align_corners)
            row = None
            for j, wx in enumerate(wxs):
                term = _read(flat, ys, _padded(x0 + (j - 1), w, padding_mode, align_corners), h, w) * wx.unsqueeze(1)
                row = term if row is None else row + term
            out = row * wy.unsqueeze(1) if out is None else out + row * wy.unsqueeze(1)
        return out
    x, y = _padded(x, w, padding_mode, align_corners), _padded(y, h, padding_mode, align_corners)
    if mode == "nearest":
        out = _read(flat, ops.round(y.detach()), ops.round(x.detach()), h, w)  # half to even, as nearbyint
        return with_zero_gradient_to(out, ops.sum(grid, (1, 2, 3), keepdim=True))  # zeros, as PyTorch gives
    x0, y0 = ops.floor(x.detach()), ops.floor(y.detach())
    x1, y1 = x0 + 1, y0 + 1
    # each corner's weight the area of the opposite rectangle, as PyTorch's kernel forms them; they carry the
    # gradient with respect to the grid
    corners = ((y0, x0, (x1 - x) * (y1 - y)), (y0, x1, (x - x0) * (y1 - y)), (y1, x0, (x1 - x) * (y - y0)),
               (y1, x1, (x - x0) * (y - y0)))
    out = None
    for ys, xs, weight in corners:
        term = _read(flat, ys, xs, h, w) * weight.unsqueeze(1)
        out = term if out is None else out + term
    return out
