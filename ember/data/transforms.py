"""Image transforms for datasets: Compose, ToTensor, Normalize, RandomCrop, RandomHorizontalFlip.

Layouts follow torchvision: a NumPy array is an image as PIL holds it, (H, W) or (H, W, C); an Ember
tensor is (..., C, H, W). `ToTensor` turns the first into the second. Random transforms draw from
`generator` if given, else from Ember's default generator, so `ember.manual_seed` (and the per-worker
seeding of a DataLoader) makes them reproducible. Leave `generator` unset when loading with worker
processes: each worker would otherwise get an identical copy of it.
"""

from __future__ import annotations

import numbers
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ember import dtypes as dt
from ember.creation import from_numpy, tensor
from ember.ops import flip, pad
from ember.random import Generator, host_rng
from ember.tensor import Tensor

Image = np.ndarray | Tensor


class Compose:
    """Apply transforms one after another."""

    def __init__(self, transforms: Sequence[Callable]) -> None:
        self.transforms = list(transforms)

    def __call__(self, img: Any) -> Any:
        for t in self.transforms:
            img = t(img)
        return img

    def __repr__(self) -> str:
        inner = "".join(f"\n    {t!r}," for t in self.transforms)
        return f"Compose({inner}\n)"


class Lambda:
    """Wrap a function as a transform."""

    def __init__(self, fn: Callable) -> None:
        if not callable(fn):
            raise TypeError(f"Lambda needs a callable, got {type(fn).__name__}")
        self.fn = fn

    def __call__(self, img: Any) -> Any:
        return self.fn(img)


class ToTensor:
    """An (H, W, C) or (H, W) array (or anything np.asarray accepts, e.g. a PIL image) -> (C, H, W) tensor.

    uint8 images are scaled to float32 in [0, 1]; other dtypes keep their values and dtype (as in
    torchvision). A tensor is taken to be (C, H, W) already; only a uint8 tensor is rescaled.
    """

    def __call__(self, pic: Any) -> Tensor:
        if isinstance(pic, Tensor):
            return pic.to(dt.get_default_dtype()) / 255 if pic.dtype == dt.uint8 else pic
        arr = np.asarray(pic)
        if arr.ndim == 2:
            arr = arr[:, :, None]
        if arr.ndim != 3:
            raise ValueError(f"ToTensor: expected an (H, W) or (H, W, C) image, got shape {arr.shape}")
        arr = arr.transpose(2, 0, 1)
        if arr.dtype == np.uint8:
            out = arr.astype(dt.get_default_dtype().np)
            out /= 255
            return from_numpy(out)
        if arr.dtype == np.bool_:
            arr = arr.astype(np.uint8)
        return from_numpy(np.ascontiguousarray(arr))

    def __repr__(self) -> str:
        return "ToTensor()"


class Normalize:
    """(x - mean) / std per channel: dim -3 of a tensor, the last axis of an (H, W, C) array."""

    def __init__(self, mean: Sequence[float] | float, std: Sequence[float] | float, inplace: bool = False) -> None:
        self.mean = [float(m) for m in np.atleast_1d(mean)]
        self.std = [float(s) for s in np.atleast_1d(std)]
        if len(self.mean) != len(self.std):
            raise ValueError(f"Normalize: mean has {len(self.mean)} values but std has {len(self.std)}")
        if any(s == 0 for s in self.std):
            raise ValueError(f"Normalize: std must not contain zeros, got {self.std}")
        self.inplace = inplace

    def __call__(self, img: Image) -> Image:
        if isinstance(img, Tensor):
            if not img.is_floating_point():
                raise TypeError(f"Normalize: expected a floating-point tensor, got {img.dtype}; apply ToTensor first")
            if img.ndim < 3:
                raise ValueError(f"Normalize: expected a (..., C, H, W) tensor, got shape {tuple(img.shape)}")
            self._check_channels(img.shape[-3])
            mean = tensor(self.mean, dtype=img.dtype, device=img.device).reshape(-1, 1, 1)
            std = tensor(self.std, dtype=img.dtype, device=img.device).reshape(-1, 1, 1)
            if self.inplace:
                return img.sub_(mean).div_(std)
            return (img - mean) / std
        arr = np.asarray(img)
        if arr.dtype.kind != "f":
            raise TypeError(f"Normalize: expected a floating-point array, got {arr.dtype}")
        self._check_channels(arr.shape[-1] if arr.ndim == 3 else 1)
        mean, std = np.asarray(self.mean, arr.dtype), np.asarray(self.std, arr.dtype)
        if self.inplace:
            arr -= mean
            arr /= std
            return arr
        return (arr - mean) / std

    def _check_channels(self, c: int) -> None:
        if len(self.mean) not in (1, c):
            raise ValueError(f"Normalize: {len(self.mean)} means/stds for an image with {c} channels")

    def __repr__(self) -> str:
        return f"Normalize(mean={self.mean}, std={self.std})"


def _pair(size, name: str) -> tuple[int, int]:
    if isinstance(size, numbers.Integral):
        return int(size), int(size)
    size = tuple(int(s) for s in size)
    if len(size) == 1:
        return size[0], size[0]
    if len(size) != 2:
        raise ValueError(f"{name}: size must be an int or (height, width), got {size}")
    return size


def _padding(padding) -> tuple[int, int, int, int]:
    """(left, top, right, bottom) from torchvision's int / (lr, tb) / (l, t, r, b) forms."""
    if isinstance(padding, numbers.Integral):
        p = int(padding)
        return p, p, p, p
    padding = tuple(int(p) for p in padding)
    if len(padding) == 1:
        return padding * 4
    if len(padding) == 2:
        return padding[0], padding[1], padding[0], padding[1]
    if len(padding) == 4:
        return padding
    raise ValueError(f"padding must be an int or a sequence of 1, 2 or 4 ints, got {padding}")


_TENSOR_MODES = {"constant": "constant", "edge": "replicate", "reflect": "reflect"}


def _pad(img: Image, left: int, top: int, right: int, bottom: int, fill: float, mode: str) -> Image:
    if not (left or top or right or bottom):
        return img
    if isinstance(img, Tensor):
        if mode not in _TENSOR_MODES:
            raise ValueError(f"padding_mode {mode!r} is not supported for tensors; use constant, edge or reflect")
        return pad(img, (left, right, top, bottom), mode=_TENSOR_MODES[mode], value=fill if mode == "constant" else None)
    widths = [(top, bottom), (left, right)] + [(0, 0)] * (img.ndim - 2)
    if mode == "constant":
        return np.pad(img, widths, mode="constant", constant_values=fill)
    return np.pad(img, widths, mode=mode)


def _hw(img: Image) -> tuple[int, int]:
    if isinstance(img, Tensor):
        if img.ndim < 2:
            raise ValueError(f"expected an image tensor (..., H, W), got shape {tuple(img.shape)}")
        return img.shape[-2], img.shape[-1]
    if img.ndim not in (2, 3):
        raise ValueError(f"expected an (H, W) or (H, W, C) image array, got shape {img.shape}")
    return img.shape[0], img.shape[1]


def _crop(img: Image, top: int, left: int, h: int, w: int) -> Image:
    if isinstance(img, Tensor):
        return img[..., top:top + h, left:left + w]
    return img[top:top + h, left:left + w]


class RandomCrop:
    """Crop a random `size` window, after optional padding (torchvision's arguments and padding order)."""

    def __init__(self, size: int | Sequence[int], padding: int | Sequence[int] | None = None,
                 pad_if_needed: bool = False, fill: float = 0, padding_mode: str = "constant",
                 generator: Generator | None = None) -> None:
        if padding_mode not in ("constant", "edge", "reflect", "symmetric"):
            raise ValueError(f"RandomCrop: padding_mode must be constant, edge, reflect or symmetric, got {padding_mode!r}")
        self.size = _pair(size, "RandomCrop")
        self.padding = None if padding is None else _padding(padding)
        self.pad_if_needed = pad_if_needed
        self.fill = fill
        self.padding_mode = padding_mode
        self.generator = generator

    def __call__(self, img: Image) -> Image:
        if not isinstance(img, Tensor):
            img = np.asarray(img)
        if self.padding is not None:
            img = _pad(img, *self.padding, self.fill, self.padding_mode)
        th, tw = self.size
        h, w = _hw(img)
        if self.pad_if_needed and w < tw:
            img = _pad(img, tw - w, 0, tw - w, 0, self.fill, self.padding_mode)
        if self.pad_if_needed and h < th:
            img = _pad(img, 0, th - h, 0, th - h, self.fill, self.padding_mode)
        h, w = _hw(img)
        if h < th or w < tw:
            raise ValueError(f"RandomCrop: crop size {(th, tw)} is larger than the (padded) image size {(h, w)}")
        if h == th and w == tw:  # torchvision draws nothing for a crop of the whole image
            return img
        rng = host_rng(self.generator)  # torch.randint(0, h - th + 1, size=(1,)), then the same for the left edge
        top = int(rng.integers(0, h - th + 1, 1)[0])
        left = int(rng.integers(0, w - tw + 1, 1)[0])
        return _crop(img, top, left, th, tw)

    def __repr__(self) -> str:
        return f"RandomCrop(size={self.size}, padding={self.padding})"


class RandomHorizontalFlip:
    """Mirror the image left-right with probability p."""

    def __init__(self, p: float = 0.5, generator: Generator | None = None) -> None:
        if not 0 <= p <= 1:
            raise ValueError(f"RandomHorizontalFlip: p must be in [0, 1], got {p}")
        self.p = p
        self.generator = generator

    def __call__(self, img: Image) -> Image:
        if not host_rng(self.generator).uniform(1)[0] < self.p:  # torch.rand(1) < p, as torchvision
            return img
        if isinstance(img, Tensor):
            return flip(img, (-1,))
        img = np.asarray(img)
        _hw(img)
        return np.ascontiguousarray(img[:, ::-1])

    def __repr__(self) -> str:
        return f"RandomHorizontalFlip(p={self.p})"
