"""Save a grid of grayscale images as a PNG, with only the standard library (zlib) and NumPy."""

from __future__ import annotations

import os
import struct
import zlib

import numpy as np


def grid(images: np.ndarray, nrow: int, pad: int = 2) -> np.ndarray:
    """(N, H, W) images in [0, 1] tiled into one (rows*(H+pad)+pad, nrow*(W+pad)+pad) image on white-ish grey."""
    n, h, w = images.shape
    rows = -(-n // nrow)
    out = np.full((rows * (h + pad) + pad, nrow * (w + pad) + pad), 0.5, dtype=np.float32)
    for k in range(n):
        r, c = divmod(k, nrow)
        out[pad + r * (h + pad): pad + r * (h + pad) + h, pad + c * (w + pad): pad + c * (w + pad) + w] = images[k]
    return out


def save_png(path: str, image: np.ndarray) -> None:
    """Write a 2-D array of values in [0, 1] as an 8-bit grayscale PNG."""
    pixels = (np.clip(image, 0.0, 1.0) * 255 + 0.5).astype(np.uint8)
    h, w = pixels.shape
    raw = b"".join(b"\x00" + pixels[y].tobytes() for y in range(h))  # filter byte 0 (none) per row

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    header = struct.pack(">IIBBBBB", w, h, 8, 0, 0, 0, 0)  # 8-bit grayscale
    with open(path, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(raw, 9))
                + chunk(b"IEND", b""))


def save_grid(path: str, images: np.ndarray, nrow: int = 8) -> None:
    """Tile (N, H, W) or (N, 1, H, W) images in [0, 1] into a grid and save it as a PNG."""
    images = np.asarray(images, dtype=np.float32)
    if images.ndim == 4:
        images = images[:, 0]
    save_png(path, grid(images, nrow))


def save_samples(folder: str, images: np.ndarray, name: str = "samples.png") -> str:
    """save_grid into `folder` (created if missing) as `name`; returns the file's path."""
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, name)
    save_grid(path, images)
    return path
