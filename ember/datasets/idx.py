"""Reading and writing IDX files, the format of MNIST and Fashion-MNIST (optionally gzipped)."""

from __future__ import annotations

import gzip
import os
import zlib

import numpy as np

# IDX type codes -> big-endian NumPy dtypes.
_TYPES = {0x08: ">u1", 0x09: ">i1", 0x0B: ">i2", 0x0C: ">i4", 0x0D: ">f4", 0x0E: ">f8"}
_CODES = {np.dtype(v).newbyteorder("="): k for k, v in _TYPES.items()}
_GZIP_MAGIC = b"\x1f\x8b"


def _read_bytes(path: str | os.PathLike) -> bytes:
    with open(path, "rb") as f:
        raw = f.read()
    if raw[:2] != _GZIP_MAGIC:
        return raw
    try:
        return gzip.decompress(raw)
    except (OSError, EOFError, zlib.error) as e:
        raise ValueError(f"{os.fspath(path)}: corrupt or truncated gzip data ({e})") from None


def read_idx(path: str | os.PathLike) -> np.ndarray:
    """The array stored in an IDX file (gzipped or not), in native byte order."""
    raw = _read_bytes(path)
    name = os.fspath(path)
    if len(raw) < 4 or raw[0] != 0 or raw[1] != 0:
        raise ValueError(f"{name}: not an IDX file (the first two bytes must be zero)")
    code, ndim = raw[2], raw[3]
    if code not in _TYPES:
        raise ValueError(f"{name}: not an IDX file (unknown type code 0x{code:02x})")
    header = 4 + 4 * ndim
    if len(raw) < header:
        raise ValueError(f"{name}: truncated IDX header ({len(raw)} bytes for {ndim} dimensions)")
    shape = tuple(int(d) for d in np.frombuffer(raw, ">u4", count=ndim, offset=4))
    dtype = np.dtype(_TYPES[code])
    expected = header + int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    if len(raw) != expected:
        what = "truncated" if len(raw) < expected else "has trailing bytes"
        raise ValueError(f"{name}: IDX file {what}: shape {shape} of {dtype.name} needs {expected} bytes, "
                         f"the file has {len(raw)}")
    arr = np.frombuffer(raw, dtype, offset=header).reshape(shape)
    return arr.astype(dtype.newbyteorder("="))


def write_idx(path: str | os.PathLike, array: np.ndarray) -> None:
    """Write an array as an IDX file; gzipped when the path ends in .gz."""
    arr = np.asarray(array)
    code = _CODES.get(arr.dtype.newbyteorder("="))
    if code is None:
        raise TypeError(f"write_idx: IDX has no type for {arr.dtype}; use uint8, int8, int16, int32, float32 or float64")
    if arr.ndim > 255:
        raise ValueError("write_idx: at most 255 dimensions")
    header = bytes([0, 0, code, arr.ndim]) + np.asarray(arr.shape, ">u4").tobytes()
    data = header + arr.astype(_TYPES[code]).tobytes()
    if os.fspath(path).endswith(".gz"):
        data = gzip.compress(data, mtime=0)
    with open(path, "wb") as f:
        f.write(data)
