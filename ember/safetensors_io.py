"""The safetensors file format with NumPy only: a streamed writer and a checking, chunked reader.

A file is an 8-byte little-endian header length, a JSON header (`__metadata__`: str -> str, and per
tensor its dtype code, shape and `[begin, end)` offsets into the data), then the tensors' bytes back
to back. The writer sends each array's bytes straight to the file, so saving needs no second copy
of the checkpoint in memory. The reader checks the header as the `safetensors` package does (known
dtypes, sizes that match shapes, offsets that tile the data exactly) before reading anything else,
reads large tensors into arrays of their own and small ones in shared blocks of at most `BLOCK` bytes.
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Iterator

import numpy as np

from ember import dtypes as dt
from ember.errors import CheckpointError

MAX_HEADER = 100_000_000  # bytes: the safetensors package refuses larger headers
CHUNK = 1 << 24  # bytes per write (and per CRC step) of arrays that need a contiguous copy
SMALL = 1 << 16  # tensors under this many bytes are read in shared blocks ...
BLOCK = 1 << 20  # ... of at most this many bytes, so one kept tensor pins at most a block

_CODES = {"bool": "BOOL", "uint8": "U8", "int8": "I8", "int16": "I16", "int32": "I32", "int64": "I64",
          "float16": "F16", "bfloat16": "BF16", "float32": "F32", "float64": "F64"}
CODE_OF = {d.np: _CODES[d.np.name] for d in dt.ALL_DTYPES}  # the dtypes Ember holds
DTYPE_OF = {code: d.newbyteorder("<") for d, code in CODE_OF.items()}  # the format is little-endian
_OTHER_CODES = ("U16", "U32", "U64", "F8_E4M3", "F8_E5M2", "C64", "C128")  # valid safetensors, not Ember dtypes


def chunks(arr: np.ndarray) -> Iterator[np.ndarray]:
    """The bytes of `arr` in C order and native byte order, as uint8 arrays of at most CHUNK bytes (views when possible)."""
    if arr.flags.c_contiguous and arr.dtype.isnative:
        flat = arr.reshape(-1).view(np.uint8)
        for i in range(0, flat.size, CHUNK):
            yield flat[i:i + CHUNK]
    elif arr.ndim == 0 or arr.nbytes <= CHUNK:
        part = np.ascontiguousarray(arr) if arr.dtype.isnative else arr.astype(arr.dtype.newbyteorder("="))
        yield part.reshape(-1).view(np.uint8)
    else:  # copy a few rows at a time, never the whole array
        step = CHUNK // max(1, arr[0].nbytes)
        if step == 0:
            for i in range(arr.shape[0]):
                yield from chunks(arr[i])
        else:
            for i in range(0, arr.shape[0], step):
                yield from chunks(arr[i:i + step])


def crc32(arr: np.ndarray) -> int:
    """CRC-32 of the array's bytes in C order."""
    crc = 0
    for c in chunks(arr):
        crc = zlib.crc32(c, crc)
    return crc


def write(fh, arrays: dict[str, np.ndarray], metadata: dict[str, str], name: str) -> None:
    """Write `arrays` (of Ember's dtypes, any layout) and `metadata` to the binary file `fh`, tensor by tensor."""
    # Widest items first, so every tensor starts at a multiple of its item size (as safetensors' writer does).
    order = sorted(arrays, key=lambda k: -arrays[k].dtype.itemsize)
    header: dict = {"__metadata__": metadata} if metadata else {}
    offset = 0
    for key in order:
        arr = arrays[key]
        header[key] = {"dtype": CODE_OF[arr.dtype.newbyteorder("=")], "shape": list(arr.shape),
                       "data_offsets": [offset, offset + arr.nbytes]}
        offset += arr.nbytes
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)  # the data starts 8-byte aligned
    if len(text) > MAX_HEADER:
        raise ValueError(f"save: {name}: the header describing {len(arrays)} tensors is {len(text)} bytes, more than "
                         f"the {MAX_HEADER} bytes safetensors readers accept; save fewer, larger tensors")
    fh.write(len(text).to_bytes(8, "little"))
    fh.write(text)
    for key in order:
        for c in chunks(arrays[key]):
            fh.write(c)


def _fail(name: str, problem: str) -> CheckpointError:
    return CheckpointError(f"{name}: {problem}")


def _entries(header: dict, name: str, data_size: int) -> list:
    """(begin, end, key, dtype, shape) of every tensor, in file order, after checking them as safetensors does.

    Entries are taken out of `header` one by one, so the parsed JSON is freed as the list grows.
    """
    entries = []
    while header:
        key, e = header.popitem()
        try:
            code, shape, (begin, end) = e["dtype"], e["shape"], e["data_offsets"]
        except (TypeError, KeyError, ValueError):
            raise _fail(name, f"tensor {key!r} has a malformed header entry: {str(e)[:80]}") from None
        dtype = DTYPE_OF.get(code)
        if dtype is None:
            raise _fail(name, f"tensor {key!r} has dtype {code}, which Ember " +
                        ("can't hold" if code in _OTHER_CODES else "does not know"))
        if type(shape) is not list:
            raise _fail(name, f"tensor {key!r} has an invalid shape {str(shape)[:80]}")
        n = dtype.itemsize
        for d in shape:
            if type(d) is not int or d < 0:
                raise _fail(name, f"tensor {key!r} has an invalid shape {str(shape)[:80]}")
            n *= d
        if type(begin) is not int or type(end) is not int or not 0 <= begin <= end:
            raise _fail(name, f"tensor {key!r} has invalid data offsets {e['data_offsets']}")
        if end - begin != n:
            raise _fail(name, f"tensor {key!r} is {code} {shape} ({n} bytes) but its offsets span {end - begin} bytes")
        entries.append((begin, end, key, dtype, tuple(shape)))
    entries.sort()  # by begin, then end, then key (keys are unique, so dtypes are never compared)
    pos = 0
    for begin, end, key, _, _ in entries:
        if begin != pos:
            what = "overlaps the tensor before it" if begin < pos else f"leaves a gap of {begin - pos} bytes before it"
            raise _fail(name, f"tensor {key!r} {what}")
        pos = end
    if pos > data_size:
        raise _fail(name, f"truncated: the header describes {pos} bytes of tensor data but the file holds {data_size}")
    if pos < data_size:
        raise _fail(name, f"{data_size - pos} bytes follow the last tensor's data (corrupt?)")
    return entries


def _read_into(fh, buf: np.ndarray, name: str) -> None:
    view = memoryview(buf).cast("B")
    got = 0
    while got < len(view):
        n = fh.readinto(view[got:])
        if not n:
            raise _fail(name, "truncated while reading tensor data")
        got += n


def read(fh, size: int, name: str) -> tuple[dict, dict[str, np.ndarray]]:
    """The metadata and the arrays (in file order) of the safetensors file open as `fh`, `size` bytes long."""
    head = fh.read(8)
    if len(head) < 8:
        raise _fail(name, f"not a readable checkpoint ({size} bytes; corrupt or truncated?): no header")
    n = int.from_bytes(head, "little")
    if n > MAX_HEADER:
        raise _fail(name, f"not a readable checkpoint: its header claims {n} bytes, more than the {MAX_HEADER} allowed")
    if 8 + n > size:
        raise _fail(name, f"not a readable checkpoint ({size} bytes; corrupt or truncated?): the header needs {n} bytes")
    raw = fh.read(n)
    try:
        header = json.loads(raw)
    except (UnicodeDecodeError, ValueError, RecursionError) as e:
        raise _fail(name, f"not a readable checkpoint ({size} bytes; corrupt or truncated?): bad header: {e}") from None
    if not isinstance(header, dict):
        raise _fail(name, "not a readable checkpoint: the header is not a JSON object")
    meta = header.pop("__metadata__", None) or {}
    if not isinstance(meta, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in meta.items()):
        raise _fail(name, "not a readable checkpoint: its metadata is not a map of strings")
    del raw
    entries = _entries(header, name, size - 8 - n)
    arrays: dict[str, np.ndarray] = {}
    i = 0
    while i < len(entries):
        begin, end, key, dtype, shape = entries[i]
        if end - begin >= SMALL:
            arr = np.empty(shape, dtype)
            _read_into(fh, arr, name)
            arrays[key] = arr
            i += 1
            continue
        j = i + 1
        while j < len(entries) and entries[j][1] - entries[j][0] < SMALL and entries[j][1] - begin <= BLOCK:
            j += 1
        _read_block(fh, entries[i:j], arrays, name)
        i = j
    return meta, arrays


def _read_block(fh, entries: list, arrays: dict, name: str) -> None:
    """Read consecutive small tensors into one buffer and add views of it to `arrays`."""
    begin = entries[0][0]
    # The buffer holds the bytes at the file's data offsets modulo 8, so aligned tensors stay aligned.
    pad = begin % 8
    block = np.empty(entries[-1][1] - begin + pad, np.uint8)
    _read_into(fh, block[pad:], name)
    typed: dict = {}  # dtype -> the whole buffer viewed as that dtype: one slice per tensor
    for b, e, key, dtype, shape in entries:
        size = dtype.itemsize
        at = b - begin + pad
        if at % size:  # a misaligned tensor from another writer: copied into aligned memory
            arr = block[at:e - begin + pad].copy().view(dtype).reshape(shape)
        else:
            whole = typed.get(dtype)
            if whole is None:
                whole = typed[dtype] = block[:block.size // size * size].view(dtype)
            arr = whole[at // size:(e - begin + pad) // size]
            if len(shape) != 1:
                arr = arr.reshape(shape)
        arrays[key] = arr
