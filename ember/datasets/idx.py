"""Reading and writing IDX files, the format of MNIST and Fashion-MNIST (optionally gzipped).

A file is read as a stream: the 4-byte magic and the dimensions first, checked before anything else,
then exactly the bytes they declare, straight into the result, so a gzipped file is never inflated
past its declared size and a bad header is reported after decompressing a few bytes.
"""

from __future__ import annotations

import gzip
import math
import os
import stat
import zlib

import numpy as np

# IDX type codes -> big-endian NumPy dtypes.
_TYPES = {0x08: ">u1", 0x09: ">i1", 0x0B: ">i2", 0x0C: ">i4", 0x0D: ">f4", 0x0E: ">f8"}
_CODES = {np.dtype(v).newbyteorder("="): k for k, v in _TYPES.items()}
_GZIP_MAGIC = b"\x1f\x8b"
_MAX_GZIP_RATIO = 1032  # DEFLATE never inflates data more than this (zlib's technical notes)


def _read_into(stream, buf: np.ndarray) -> int:
    """Fill `buf` from `stream`; the number of bytes read (fewer only at the end of the stream)."""
    view = memoryview(buf).cast("B")
    got = 0
    while got < len(view):
        n = stream.readinto(view[got:])
        if not n:
            break
        got += n
    return got


def _read_exact(stream, n: int) -> bytes:
    data = b""
    while len(data) < n:
        part = stream.read(n - len(data))
        if not part:
            break
        data += part
    return data


def _read(stream, name: str, size: int | None, gz: bool) -> np.ndarray:
    """The array from an IDX stream: the header is checked first, then exactly the bytes it declares are read."""
    head = _read_exact(stream, 4)
    if len(head) < 4 or head[0] != 0 or head[1] != 0:
        raise ValueError(f"{name}: not an IDX file (the first two bytes must be zero)")
    code, ndim = head[2], head[3]
    if code not in _TYPES:
        raise ValueError(f"{name}: not an IDX file (unknown type code 0x{code:02x})")
    dims = _read_exact(stream, 4 * ndim)
    header = 4 + 4 * ndim
    if len(dims) < 4 * ndim:
        raise ValueError(f"{name}: truncated IDX header ({4 + len(dims)} bytes for {ndim} dimensions)")
    shape = tuple(int.from_bytes(dims[i:i + 4], "big") for i in range(0, 4 * ndim, 4))
    dtype = np.dtype(_TYPES[code])
    expected = header + math.prod(shape) * dtype.itemsize

    def wrong_size(what: str, have: str) -> ValueError:
        return ValueError(f"{name}: IDX file {what}: shape {shape} of {dtype.name} needs {expected} bytes, {have}")

    # Checked before allocating, so a small file can't make us reserve what it declares.
    if size is not None and not gz and size != expected:
        raise wrong_size("truncated" if size < expected else "has trailing bytes", f"the file has {size}")
    if size is not None and gz and expected > size * _MAX_GZIP_RATIO:
        raise wrong_size("truncated", f"more than {size} bytes of gzip data can hold")
    arr = np.empty(shape, dtype.newbyteorder("="))
    got = header + _read_into(stream, arr)
    content = "the decompressed data" if gz else "the file"
    if got < expected:
        raise wrong_size("truncated", f"{content} has {got}")
    if stream.read(1):
        raise wrong_size("has trailing bytes", f"{content} is longer")
    if not dtype.isnative:
        arr.byteswap(inplace=True)  # big-endian on disk
    return arr


def read_idx(path: str | os.PathLike) -> np.ndarray:
    """The array stored in an IDX file (gzipped or not), in native byte order."""
    name = os.fspath(path)
    with open(path, "rb") as f:
        st = os.fstat(f.fileno())
        size = st.st_size if stat.S_ISREG(st.st_mode) else None  # a pipe has no size to check against
        gz = f.peek(2)[:2] == _GZIP_MAGIC
        if not gz:
            return _read(f, name, size, gz)
        try:  # decompressed as it is read, so no more than the header declares is ever inflated
            with gzip.GzipFile(fileobj=f, mode="rb") as stream:
                return _read(stream, name, size, gz)
        except (OSError, EOFError, zlib.error) as e:
            raise ValueError(f"{name}: corrupt or truncated gzip data ({e})") from None


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
