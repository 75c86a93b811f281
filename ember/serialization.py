"""Checkpoints: `save` and `load` nested state (state dicts, optimizer state) as safetensors, never pickle.

Tensors are stored as safetensors entries under unique dotted keys (a flat model state dict keeps its
own names, so other safetensors tools can read it); everything else -- the nesting, dict keys of any
scalar type, numbers, strings, None, bools -- is a small JSON document in the file's metadata, with
each tensor's dtype, shape and CRC-32 so corruption is caught on load. Loading parses JSON and raw
arrays only, so an untrusted file cannot run code. The bytes (`ember/safetensors_io.py`) are streamed
to a temporary file in the same folder that is fsynced and then renamed over the target, so a crash
never leaves a half-written checkpoint; the next save to that target removes temporary files whose
writer has died. File objects (`io.BytesIO`, open binary files) are written and read in place, with
the same streaming. Whole modules and optimizers are refused: their `state_dict()` is what is saved.
"""

from __future__ import annotations

import base64
import contextlib
import gc
import hashlib
import io
import json
import math
import os
import secrets
import socket
import time
from collections import OrderedDict
from pathlib import Path
from typing import Any

import numpy as np

from ember import regular_file, safetensors_io
from ember.device import Device, as_device
from ember.errors import CheckpointError
from ember.tensor import Tensor

__all__ = ["save", "load", "CheckpointError", "FORMAT_VERSION"]

FORMAT_VERSION = 1
_STRUCTURE = "ember.structure"
_VERSION = "ember.format_version"
# Temporary files are named .<target>.<host>-<pid>-<random>.tmp, so a later save can tell which writers
# are gone. Process ids only mean something on the host that made them.
_HOST = hashlib.sha1(socket.gethostname().encode()).hexdigest()[:8]
_STARTED = time.time() - 2.0  # before any file this process writes (file clocks are coarse)


def _crc(arr: np.ndarray) -> int:
    return safetensors_io.crc32(arr)


def _where(path: list) -> str:
    return "obj" + "".join(f"[{p!r}]" for p in path)


class _Encoder:
    """Walks a nested object, collecting arrays under unique keys and returning the JSON structure."""

    def __init__(self) -> None:
        self.arrays: dict[str, np.ndarray] = {}
        self._seen: dict[int, dict] = {}  # id(tensor or array) -> node: one referenced twice is stored once
        self._keep: list = []  # keep encoded objects alive so their ids stay unique during the walk

    def _key(self, path: list) -> str:
        base = ".".join(str(p) for p in path) or "tensor"
        key, n = base, 1
        while key in self.arrays or key == "__metadata__":  # the safetensors header's reserved name
            n += 1
            key = f"{base}#{n}"
        return key

    def _array(self, arr: np.ndarray, path: list, node: dict) -> dict:
        try:
            from ember.dtypes import from_numpy_dtype

            from_numpy_dtype(arr.dtype.newbyteorder("="))
        except (TypeError, ValueError, KeyError):
            raise TypeError(f"save: {_where(path)} has dtype {arr.dtype}, which a checkpoint can't hold") from None
        # Strided or byte-swapped arrays are copied a chunk at a time while writing, never whole.
        key = self._key(path)
        self.arrays[key] = arr
        node.update({"key": key, "dtype": arr.dtype.name, "shape": list(arr.shape), "crc": _crc(arr)})
        return node

    def encode(self, obj: Any, path: list) -> Any:
        if obj is None or isinstance(obj, (bool, str)):
            return obj
        if isinstance(obj, int):
            if obj.bit_length() > 14_000:  # near Python's default limit of 4300 digits on int <-> str
                try:
                    str(obj)
                except ValueError:
                    raise ValueError(f"save: {_where(path)} is an int of {obj.bit_length()} bits, more digits than "
                                     f"Python writes as text (sys.get_int_max_str_digits()); save it as bytes "
                                     f"or a str") from None
            return obj
        if isinstance(obj, float):
            return obj if math.isfinite(obj) else {"float": repr(obj)}
        if isinstance(obj, Tensor):
            if id(obj) in self._seen:
                return self._seen[id(obj)]
            if obj.device.type == "meta":
                raise TypeError(f"save: {_where(path)} is a tensor on the meta device, which has no data to save")
            node = {"tensor": None, "device": str(obj.device)}
            if obj.requires_grad:
                node["requires_grad"] = True
            if type(obj).__name__ == "Parameter":
                node["parameter"] = True
            self._array(np.asarray(obj.detach()), path, node)
            self._seen[id(obj)] = node
            self._keep.append(obj)
            return node
        if isinstance(obj, np.ndarray):  # one array referenced twice is stored once, and loads as one array
            if id(obj) in self._seen:
                return self._seen[id(obj)]
            node = self._seen[id(obj)] = self._array(obj, path, {"ndarray": None})
            self._keep.append(obj)
            return node
        if isinstance(obj, np.generic):
            return self._array(np.asarray(obj), path, {"ndarray": None, "scalar": True})
        if isinstance(obj, bytes):
            return {"bytes": base64.b64encode(obj).decode("ascii")}
        if isinstance(obj, dict):
            items = [[self._encode_key(k, path), self.encode(v, [*path, k])] for k, v in obj.items()]
            node = {"dict": items}
            if isinstance(obj, OrderedDict):
                node["ordered"] = True
            return node
        if isinstance(obj, list):
            return {"list": [self.encode(v, [*path, i]) for i, v in enumerate(obj)]}
        if isinstance(obj, tuple):
            return {"tuple": [self.encode(v, [*path, i]) for i, v in enumerate(obj)]}
        if callable(getattr(obj, "state_dict", None)):  # a whole module or optimizer: PyTorch would pickle it
            how = "ember.save(obj.state_dict(), f)" if not path else f"store {_where(path)}.state_dict() in its place"
            raise TypeError(
                f"save: {_where(path)} is a whole {type(obj).__name__}; Ember never pickles objects (loading a pickle "
                f"can run any code): save its state, {how}, and load that into a new {type(obj).__name__} with "
                f".load_state_dict(...)"
            )
        raise TypeError(
            f"save: {_where(path)} is a {type(obj).__name__}; checkpoints hold tensors, NumPy arrays, dicts, lists, "
            f"tuples, str, bytes, int, float, bool and None"
        )

    def _encode_key(self, key: Any, path: list) -> Any:
        if key is None or isinstance(key, (bool, int, float, str, bytes)):
            return self.encode(key, path)
        if isinstance(key, tuple):
            return {"tuple": [self._encode_key(k, path) for k in key]}
        raise TypeError(f"save: a dict key at {_where(path)} is a {type(key).__name__}; keys must be str, int, float, "
                        f"bool, None, bytes or tuples of those")


def _default_device(map_location) -> Any:
    if map_location is None:
        return lambda saved: as_device("cpu")
    if isinstance(map_location, (str, Device)):
        target = as_device(map_location)
        return lambda saved: target
    if isinstance(map_location, dict):
        table = {str(as_device(k)): as_device(v) for k, v in map_location.items()}
        return lambda saved: table.get(saved, as_device(saved))
    raise TypeError(f"load: map_location must be None, a device, a device name or a dict, got {map_location!r}")


class _Decoder:
    """Rebuilds the saved object from the JSON structure and the arrays, one JSON object at a time as it is parsed.

    `node` is the parser's `object_hook`: each node becomes its value as soon as it is read, so the parsed
    structure never exists whole beside the result. JSON arrays are the values of `list` nodes (and
    the items of `dict` nodes) and nothing else: a bare array where a value belongs is an error, told
    apart from a decoded list by the lists this decoder made (`_lists`).
    """

    def __init__(self, name: str, arrays: dict[str, np.ndarray], device_for) -> None:
        self.name = name
        self.arrays = arrays
        self.device_for = device_for
        self._tensors: dict[str, Tensor] = {}
        self._checked: dict[str, tuple] = {}  # key -> (array, dtype name, shape, crc): each array checked once
        self._lists: dict[int, list] = {}  # id -> a list this decoder made (kept, so that its id stays its own)
        self._devices: dict[str, Device] = {}  # saved device name -> target, resolved once
        self._cpu = as_device("cpu")

    def fail(self, problem: str) -> CheckpointError:
        return CheckpointError(f"{self.name}: {problem}")

    def result(self, value: Any) -> Any:
        """The decoded top-level value."""
        return self._value(value)

    def _value(self, v: Any) -> Any:
        if type(v) is list and id(v) not in self._lists:
            raise self.fail(f"the checkpoint structure has a bare JSON array where a value belongs: {str(v)[:80]}")
        return v

    def node(self, node: dict) -> Any:
        """The value of one JSON object of the structure (whose own values are decoded already)."""
        if "dict" in node:
            cls = OrderedDict if node.get("ordered") else dict
            return cls(self._item(item) for item in node["dict"])
        if "list" in node:
            items = node["list"]
            if type(items) is not list:
                raise self.fail(f"the checkpoint structure has a list that is not an array: {str(node)[:80]}")
            for v in items:
                self._value(v)
            self._lists[id(items)] = items
            return items
        if "tuple" in node:
            return tuple(self._value(v) for v in node["tuple"])
        if "tensor" in node:
            return self._tensor(node)
        if "ndarray" in node:
            arr = self._array(node)
            return arr[()] if node.get("scalar") else arr
        if "float" in node and type(node["float"]) is str:
            return float(node["float"])
        if "bytes" in node:
            return base64.b64decode(node["bytes"], validate=True)
        raise self.fail(f"the checkpoint structure has an entry Ember does not know: {str(node)[:80]}")

    def _item(self, item: Any) -> tuple:
        if type(item) is not list or id(item) in self._lists or len(item) != 2:
            raise self.fail(f"the checkpoint structure has a dict item that is not a [key, value] pair: {str(item)[:80]}")
        key, value = item
        if isinstance(key, (list, dict, np.ndarray, Tensor)):
            raise self.fail("the checkpoint structure has a dict key that is not a scalar")
        return key, self._value(value)

    def _array(self, node: dict) -> np.ndarray:
        key = node.get("key")
        checked = self._checked.get(key) if type(key) is str else None
        if checked is not None and checked[1:] == (node.get("dtype"), node.get("shape"), node.get("crc")):
            return checked[0]  # another reference to an array already checked: the same array
        if type(key) is not str or key not in self.arrays:
            raise self.fail(f"the structure names a tensor {str(key)[:80]!r} that is not in the file")
        arr = self.arrays[key]
        name, shape = _dtype_name(arr.dtype), list(arr.shape)
        if name != node.get("dtype") or shape != node.get("shape"):
            raise self.fail(f"tensor {key!r} is {name} {shape} in the file but the structure "
                            f"says {str(node.get('dtype'))[:20]} {str(node.get('shape'))[:80]}")
        crc = _crc(arr)
        if crc != node.get("crc"):
            raise self.fail(f"tensor {key!r} is corrupt: its checksum does not match")
        self._checked[key] = (arr, name, shape, crc)
        return arr

    def _tensor(self, node: dict) -> Tensor:
        key = node.get("key")
        if type(key) is str and key in self._tensors:  # the same tensor saved under two names stays one tensor
            return self._tensors[key]
        t = self.make_tensor(self._array(node), node)
        self._tensors[key] = t
        return t

    def plain(self) -> dict:
        """A file without Ember's structure: a dict of tensors by key, in key order."""
        make, cpu, device = Tensor._make, self._cpu, self.device_for("cpu")
        out = {k: make(self.arrays.pop(k), cpu) for k in sorted(self.arrays)}  # the reader's dtypes only
        return out if device is cpu else {k: t.to(device) for k, t in out.items()}

    def make_tensor(self, arr: np.ndarray, node: dict) -> Tensor:
        """A tensor on its target device from a checked array and its structure entry."""
        saved = node.get("device", "cpu")
        device = self._devices.get(saved)
        if device is None:
            device = self._devices[saved] = self.device_for(saved)
        t = Tensor._make(arr, self._cpu)  # the reader only makes arrays of Ember's dtypes
        if device is not self._cpu:
            t = t.to(device)
        if node.get("requires_grad"):
            if not t.is_floating_point():
                raise self.fail(f"tensor {node.get('key')!r} is {_dtype_name(arr.dtype)} but marked as requiring "
                                f"gradients, which only floating-point tensors can")
            t.requires_grad_(True)
        if node.get("parameter"):
            t = _as_parameter(t)
        return t


_NAMES = {dtype: dtype.name for dtype in safetensors_io.DTYPE_OF.values()}  # NumPy's `.name` is slow to compute


def _dtype_name(dtype: np.dtype) -> str:
    name = _NAMES.get(dtype)
    return name if name is not None else dtype.name


def _as_parameter(t: Tensor) -> Tensor:
    try:
        from ember.nn import Parameter
    except ImportError:
        return t
    return Parameter(t, requires_grad=t.requires_grad)


def _fsync_dir(directory: Path) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:  # not possible on every platform; the rename itself is still atomic
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _tmp_name(target: str) -> str:
    return f".{target}.{_HOST}-{os.getpid()}-{secrets.token_hex(6)}.tmp"


def _alive(pid: int) -> bool:
    """Whether process `pid` may still exist on this host (True when that can't be told)."""
    if os.name != "posix" or pid <= 0:
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # e.g. another user's process
        return True
    return True


def _remove_stale_temps(path: Path) -> None:
    """Delete temporary files of earlier saves to `path` whose writer provably died (killed mid-save)."""
    prefix, suffix = f".{path.name}.", ".tmp"
    try:
        names = os.listdir(path.parent)
    except OSError:
        return
    for name in names:
        if not (name.startswith(prefix) and name.endswith(suffix)):
            continue
        host, _, rest = name[len(prefix):-len(suffix)].partition("-")
        pid, _, token = rest.partition("-")
        if host != _HOST or not pid.isdigit() or not token:
            continue  # another target, another host, or an older naming: not provably stale
        tmp = path.parent / name
        try:
            if int(pid) == os.getpid():  # the same pid: stale only if written before this process began
                stale = os.lstat(tmp).st_mtime < _STARTED
            else:
                stale = not _alive(int(pid))
            if stale:
                os.unlink(tmp)
        except OSError:  # gone already, or not ours to remove
            pass


def _file_object(f, mode: str, op: str):
    """f if it is a binary file object open for `mode` ('read' or 'write'), else None; text files are refused."""
    if isinstance(f, (str, os.PathLike)) or not callable(getattr(f, mode, None)):
        return None
    if isinstance(f, io.TextIOBase) or "b" not in getattr(f, "mode", "b"):
        raise TypeError(f"{op}: {_file_name(f)} is open in text mode; open it in binary mode ('{mode[0]}b')")
    return f


def _file_name(f) -> str:
    name = getattr(f, "name", None)
    return str(name) if isinstance(name, (str, os.PathLike)) else f"<{type(f).__name__}>"


def save(obj: Any, f: str | os.PathLike | io.IOBase) -> None:
    """Write obj (nested dicts/lists/tuples of tensors, arrays and plain values) to f.

    `f` is a path (written atomically: a temporary file renamed over it) or a binary file object
    (`io.BytesIO`, `open(path, "wb")`), into which the checkpoint is streamed at its current position.
    """
    fh = _file_object(f, "write", "save")
    if fh is None and not isinstance(f, (str, os.PathLike)):
        raise TypeError(f"save: f must be a file path or a binary file object, got {type(f).__name__}")
    if fh is None and Path(f).is_dir():
        raise IsADirectoryError(f"save: {Path(f)} is a folder; give the path of a checkpoint file")
    enc = _Encoder()
    structure = enc.encode(obj, [])
    metadata = {
        "format": "ember",
        _VERSION: str(FORMAT_VERSION),
        _STRUCTURE: json.dumps(structure, allow_nan=False, separators=(",", ":")),
    }
    if fh is not None:
        safetensors_io.write(fh, enc.arrays, metadata, _file_name(fh))  # tensor by tensor, as for a path
        return
    _save_atomically(Path(f), enc, metadata)


def _save_atomically(path: Path, enc: _Encoder, metadata: dict) -> None:
    directory = path.parent
    _remove_stale_temps(path)
    tmp = directory / _tmp_name(path.name)
    # O_EXCL: the name is ours alone; mode 0o666 lets the umask apply as for any new file.
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        with os.fdopen(fd, "wb") as fh:
            safetensors_io.write(fh, enc.arrays, metadata, str(path))
            fh.flush()
            os.fsync(fh.fileno())
        if path.exists():  # replacing a file keeps its permissions, as writing into it would
            os.chmod(tmp, path.stat().st_mode & 0o7777)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    _fsync_dir(directory)


@contextlib.contextmanager
def _collector_paused():
    """Loading makes millions of small acyclic objects; collector passes over them would cost more than the load."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _read(name: str) -> tuple[dict, dict[str, np.ndarray]]:
    """The metadata and arrays of the checkpoint file `name`, refusing anything but a regular file."""
    fh, size = regular_file.open_regular(name, "checkpoint file", CheckpointError, "load")
    with fh:
        try:
            return safetensors_io.read(fh, size, name)
        except OSError as e:  # an I/O error while reading, or the file shrinking under us
            raise CheckpointError(f"{name}: can't be read: {e.strerror or e}") from None


def _read_stream(fh) -> tuple[dict, dict[str, np.ndarray]]:
    """The metadata and arrays of the checkpoint that fills the rest of the binary file object `fh`."""
    name = _file_name(fh)
    seekable = getattr(fh, "seekable", None)
    if seekable is not None and seekable():
        start = fh.tell()
        size = fh.seek(0, io.SEEK_END) - start
        fh.seek(start)
    else:  # a pipe or socket: read as far as the header says, then checked to end there
        size = None
    if not hasattr(fh, "readinto"):
        fh = _ReadInto(fh)
    return safetensors_io.read(fh, size, name)


class _ReadInto:
    """`read` and `readinto` for a file object that has only `read`."""

    def __init__(self, fh) -> None:
        self.read = fh.read

    def readinto(self, buf) -> int:
        """Fill the start of the writable buffer `buf` with the next bytes; how many (0 at the end)."""
        data = self.read(len(buf))
        memoryview(buf).cast("B")[:len(data)] = data
        return len(data)


def load(f: str | os.PathLike | io.IOBase, map_location=None, *, weights_only: bool = True) -> Any:
    """Read a checkpoint written by save(); tensors go to map_location (a device, or a dict of saved -> new; default cpu).

    `f` is a path or a binary file object (`io.BytesIO`, `open(path, "rb")`) read from its current
    position to its end. A plain safetensors file (from another library) loads as a dict of tensors.
    Loading never runs code from the file (`weights_only` is accepted for PyTorch compatibility; it is
    always true).
    """
    fh = _file_object(f, "read", "load")
    if fh is None and not isinstance(f, (str, os.PathLike)):
        raise TypeError(f"load: f must be a file path or a binary file object, got {type(f).__name__}")
    device_for = _default_device(map_location)
    with _collector_paused():
        if fh is not None:
            return _decode(_file_name(fh), device_for, _read_stream(fh))
        name = os.fspath(f)
        return _decode(name, device_for, _read(name))


def _decode(name: str, device_for, contents: tuple) -> Any:
    meta, arrays = contents
    dec = _Decoder(name, arrays, device_for)
    raw = meta.pop(_STRUCTURE, None)
    if raw is None:
        return dec.plain()
    try:
        version = int(meta.get(_VERSION, "0"))
    except ValueError:
        raise dec.fail(f"unreadable format version {meta.get(_VERSION)[:40]!r}") from None
    if version > FORMAT_VERSION:
        raise dec.fail(f"written in checkpoint format {version}, newer than this Ember reads ({FORMAT_VERSION}); "
                       f"upgrade Ember")
    try:
        return dec.result(json.loads(raw, object_hook=dec.node))
    except CheckpointError:
        raise
    except RecursionError:
        raise dec.fail("the checkpoint structure is nested too deeply") from None
    except json.JSONDecodeError as e:
        raise dec.fail(f"the checkpoint structure is corrupt: {e}") from None
    except (TypeError, ValueError, AttributeError) as e:  # ValueError: also JSON numbers too long to read
        raise dec.fail(f"the checkpoint structure is malformed: {str(e)[:200]}") from None
