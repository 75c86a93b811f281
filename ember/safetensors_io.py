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
CODE_OF: dict = {}  # NumPy dtype -> code, for the dtypes Ember holds (bfloat16's once ml_dtypes is imported)
DTYPE_OF: dict = {}  # code -> NumPy dtype: the format is little-endian
dt.when_loaded(lambda d: (CODE_OF.__setitem__(d.np, _CODES[d.name]),
                          DTYPE_OF.__setitem__(_CODES[d.name], d.np.newbyteorder("<"))))


def dtype_of(code):
    """The NumPy dtype of a safetensors dtype code, or None for one Ember does not hold."""
    if code == "BF16" and dt.bfloat16 is not None:
        dt.bfloat16.np  # noqa: B018 - imports ml_dtypes, which adds BF16 to DTYPE_OF
    return DTYPE_OF.get(code)
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
    if arr.flags.c_contiguous and arr.dtype.isnative:  # most arrays: no generator, no views
        return zlib.crc32(arr.reshape(-1).view(np.uint8))
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


# NumPy's limits on an array: its number of dimensions, and the bytes its non-zero dimensions span
# (even when another dimension is 0, so the file holds nothing).
MAX_DIMS = 32 if np.lib.NumpyVersion(np.__version__) < "2.0.0" else 64
_MAX_NBYTES = 2**63 - 1


def _nbytes(itemsize: int, shape: list) -> int | None:
    """The bytes of an array of this item size and shape (a list of non-negative ints), or None if NumPy can't make it."""
    if len(shape) > MAX_DIMS:
        return None
    n = span = itemsize
    for d in shape:
        n *= d
        if d:
            span *= d
    return n if span <= _MAX_NBYTES else None


def _entry_compactor():
    """A JSON `object_pairs_hook` that turns valid tensor entries into small tuples as the header is parsed, and
    a function saying what it saw: (entries, where the last ended, whether each began where the one before ended).

    A million-tensor header parsed into dicts of lists takes ~550 bytes per tensor, and a second pass
    to check it; (begin, end, dtype, shape), shapes shared, takes ~150. Any other object stays a dict,
    so `_entries` can name the tensor whose entry is wrong. Files list their tensors in file order
    (Ember's writer) or by name (the safetensors package): for the first, no sort or second pass is needed.
    """
    shapes: dict = {}
    count = pos = 0
    in_order = True

    def compact(pairs: list):
        if len(pairs) == 3:
            (k1, code), (k2, shape), (k3, offsets) = pairs
            if k1 == "dtype" and k2 == "shape" and k3 == "data_offsets":
                entry = tensor(code, shape, offsets)
                return dict(pairs) if entry is None else entry
        obj = dict(pairs)
        if "dtype" in obj and "shape" in obj and "data_offsets" in obj:  # another writer's order, or other
            entry = tensor(obj["dtype"], obj["shape"], obj["data_offsets"])  # fields (ignored, as safetensors does)
            if entry is not None:
                return entry
        return obj

    def tensor(code, shape, offsets) -> tuple | None:
        nonlocal count, pos, in_order
        if type(code) is not str or type(shape) is not list or type(offsets) is not list or len(offsets) != 2:
            return None
        dtype = dtype_of(code)
        begin, end = offsets
        if dtype is None or type(begin) is not int or type(end) is not int or begin < 0 or len(shape) > MAX_DIMS:
            return None
        n = dtype.itemsize
        for d in shape:
            if type(d) is not int or d < 0:
                return None
            n *= d
        # n > 0 bytes that the offsets span are bytes in the file: NumPy can hold them
        if n != end - begin or (n == 0 and _nbytes(dtype.itemsize, shape) is None):
            return None
        if begin != pos:
            in_order = False
        pos = end
        count += 1
        shape = tuple(shape)
        return begin, end, dtype, shapes.setdefault(shape, shape)

    def seen() -> tuple[int, int, bool]:
        return count, pos, in_order

    return compact, seen


def _invalid_entry(key: str, e, name: str) -> CheckpointError:
    """Why a header entry that `_entry_compactor` left as a dict is not a valid tensor entry."""
    try:
        code, shape, (begin, end) = e["dtype"], e["shape"], e["data_offsets"]
    except (TypeError, KeyError, ValueError):
        return _fail(name, f"tensor {key!r} has a malformed header entry: {str(e)[:80]}")
    dtype = dtype_of(code) if isinstance(code, str) else None
    if dtype is None:
        return _fail(name, f"tensor {key!r} has dtype {str(code)[:20]}, which Ember " +
                     ("can't hold" if code in _OTHER_CODES else "does not know"))
    if type(shape) is not list or not all(type(d) is int and d >= 0 for d in shape):
        return _fail(name, f"tensor {key!r} has an invalid shape {str(shape)[:80]}")
    n = _nbytes(dtype.itemsize, shape)
    if n is None:
        what = f"{len(shape)} dimensions (at most {MAX_DIMS})" if len(shape) > MAX_DIMS else "more than 2**63 bytes"
        return _fail(name, f"tensor {key!r} has shape {str(shape)[:80]}: {what}, more than an array can hold")
    if type(begin) is not int or type(end) is not int or not 0 <= begin <= end:
        return _fail(name, f"tensor {key!r} has invalid data offsets {str(e['data_offsets'])[:80]}")
    return _fail(name, f"tensor {key!r} is {code} {shape} ({n} bytes) but its offsets span {end - begin} bytes")


def _entries(header: dict, name: str, data_size: int | None, seen: tuple[int, int, bool]) -> list:
    """The keys of `header` (key -> compact entry) in file order, after checking them as safetensors does.

    `data_size` is the number of bytes after the header (None for a stream of unknown length); `seen` is
    what the parser saw (`_entry_compactor`).
    """
    for key, e in header.items():
        if type(e) is not tuple:
            raise _invalid_entry(key, e, name)
    order = list(header)
    count, pos, in_order = seen
    if not in_order or count != len(order):  # a repeated key: JSON keeps the last, the parser saw both
        pos = _tiling_end(header, order)
    if pos is None:  # not listed in file order (the safetensors package lists keys sorted)
        # By begin, then end (an empty tensor before the one that starts where it is): two stable sorts on
        # the ints the entries hold, rather than one on a new (begin, end) tuple per tensor.
        order.sort(key=lambda k: header[k][1])
        order.sort(key=lambda k: header[k][0])
        pos = _tiling_end(header, order, name)
    if data_size is not None and pos > data_size:
        raise _fail(name, f"truncated: the header describes {pos} bytes of tensor data but the file holds {data_size}")
    if data_size is not None and pos < data_size:
        raise _fail(name, f"{data_size - pos} bytes follow the last tensor's data (corrupt?)")
    return order


def _tiling_end(header: dict, order: list, name: str | None = None) -> int | None:
    """Where the data ends if the entries, in this order, follow each other with no gap or overlap; else None.

    With a file name, the first gap or overlap is an error naming the tensor.
    """
    pos = 0
    for key in order:
        begin, end, _, _ = header[key]
        if begin != pos:
            if name is None:
                return None
            what = "overlaps the tensor before it" if begin < pos else f"leaves a gap of {begin - pos} bytes before it"
            raise _fail(name, f"tensor {key!r} {what}")
        pos = end
    return pos


def _read_into(fh, buf: np.ndarray, name: str) -> None:
    view = memoryview(buf).cast("B")
    got = 0
    while got < len(view):
        n = fh.readinto(view[got:])
        if not n:
            raise _fail(name, "truncated while reading tensor data")
        got += n


# The first bytes of files people mistake for checkpoints, to say what a file is instead.
_UNPICKLE = ("a PyTorch checkpoint? Ember never unpickles, since unpickling can run any code: save the state "
             "dict with safetensors.torch.save_file and load that")
_MAGIC = [(b"\x89PNG", "a PNG image"), (b"\xff\xd8\xff", "a JPEG image"), (b"\x1f\x8b", "a gzip file"),
          (b"\x89HDF", "an HDF5 file (a Keras checkpoint?)"), (b"\x93NUMPY", "a NumPy .npy file"),
          (b"PK\x03\x04", f"a zip archive ({_UNPICKLE})"),
          *((bytes([0x80, protocol]), f"a pickle ({_UNPICKLE})") for protocol in range(2, 6))]


def _not_safetensors(name: str, size: int | None, head: bytes) -> CheckpointError:
    """The error for a file that is not a safetensors file at all, saying what it seems to be."""
    if not head:
        return _fail(name, "is empty (0 bytes), not an Ember (safetensors) checkpoint")
    what = next((f"it is {kind}" for magic, kind in _MAGIC if head.startswith(magic)), None)
    if what is None and name.lower().endswith(".onnx"):
        what = "it looks like an ONNX model (load those with ember.onnx.load)"
    if what is None and all(32 <= b < 127 or b in b"\t\n\r" for b in head):
        what = "it is text"
    if what is None:
        what = f"its first bytes are {head!r}" + (f" ({size} bytes in all)" if size is not None else "")
    return _fail(name, f"not an Ember (safetensors) checkpoint: {what}")


def read(fh, size: int | None, name: str) -> tuple[dict, dict[str, np.ndarray]]:
    """The metadata and the arrays (in file order) of the safetensors file open as `fh`.

    `size` is its length in bytes from the current position; None for a stream (a pipe), which is read
    only as far as its header describes, and then checked to end there.
    """
    head = fh.read(9)  # the header's length, and the header's first byte: "{" in every safetensors file
    if len(head) < 9 or head[8:9] != b"{":
        raise _not_safetensors(name, size, head)
    n = int.from_bytes(head[:8], "little")
    if n > MAX_HEADER:
        raise _fail(name, f"not a readable checkpoint: its header claims {n} bytes, more than the {MAX_HEADER} allowed")
    if size is not None and 8 + n > size:
        raise _fail(name, f"not a readable checkpoint ({size} bytes; corrupt or truncated?): the header needs {n} bytes")
    raw = head[8:] + fh.read(n - 1)
    if len(raw) < n:
        raise _fail(name, f"not a readable checkpoint (truncated): the header needs {n} bytes, the stream ends after "
                          f"{len(raw)}")
    try:
        text = raw.decode("utf-8")
        del raw  # the text alone, while the header is parsed
        compact, seen = _entry_compactor()
        header = json.loads(text, object_pairs_hook=compact)
    except (UnicodeDecodeError, ValueError, RecursionError) as e:
        raise _fail(name, f"not a readable checkpoint (corrupt or truncated?): bad header: {e}") from None
    del text
    if not isinstance(header, dict):
        raise _fail(name, "not a readable checkpoint: the header is not a JSON object")
    meta = header.pop("__metadata__", None) or {}
    if not isinstance(meta, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in meta.items()):
        raise _fail(name, "not a readable checkpoint: its metadata is not a map of strings")
    order = _entries(header, name, None if size is None else size - 8 - n, seen())
    arrays: dict[str, np.ndarray] = {}
    i, count = 0, len(order)
    while i < count:
        begin, end, dtype, shape = header[order[i]]
        if end - begin >= SMALL:
            arr = np.empty(shape, dtype)
            _read_into(fh, arr, name)
            arrays[order[i]] = arr
            del header[order[i]]  # each entry is let go of as its array is made
            i += 1
            continue
        j = i + 1  # the small tensors that follow, up to BLOCK bytes from `begin`, share one buffer
        while j < count:
            e = header[order[j]]
            if e[1] - e[0] >= SMALL or e[1] - begin > BLOCK:
                break
            end = e[1]
            j += 1
        _read_block(fh, header, order[i:j], begin, end, arrays, name)
        i = j
    if size is None and fh.read(1):
        raise _fail(name, "more bytes follow the last tensor's data (corrupt?)")
    return meta, arrays


def _read_block(fh, header: dict, keys: list, begin: int, end: int, arrays: dict, name: str) -> None:
    """Read the consecutive small tensors `keys` (bytes begin..end) into one buffer; add views of it to `arrays`."""
    # The buffer holds the bytes at the file's data offsets modulo 8, so aligned tensors stay aligned.
    pad = begin % 8
    block = np.empty(end - begin + pad, np.uint8)
    _read_into(fh, block[pad:], name)
    shift = pad - begin  # file offset + shift = position in the buffer
    typed: dict = {}  # dtype -> the whole buffer viewed as that dtype: one slice per tensor
    for key in keys:
        b, e, dtype, shape = header.pop(key)  # each entry is let go of as its array is made
        size = dtype.itemsize
        at = b + shift
        if at % size:  # a misaligned tensor from another writer: copied into aligned memory
            arr = block[at:e + shift].copy().view(dtype).reshape(shape)
        else:
            whole = typed.get(dtype)
            if whole is None:
                whole = typed[dtype] = block[:block.size // size * size].view(dtype)
            arr = whole[at // size:(e + shift) // size]
            if len(shape) != 1:
                arr = arr.reshape(shape)
        arrays[key] = arr
