"""Checkpoints: `save` and `load` nested state (state dicts, optimizer state) as safetensors, never pickle.

Tensors are stored as safetensors entries under unique dotted keys (a flat model state dict keeps its
own names, so other safetensors tools can read it); everything else -- the nesting, dict keys of any
scalar type, numbers, strings, None, bools -- is a small JSON document in the file's metadata, with
each tensor's dtype, shape and CRC-32 so corruption is caught on load. Loading parses JSON and raw
arrays only, so an untrusted file cannot run code. Writes go to a temporary file in the same folder
that is fsynced and then renamed over the target, so a crash never leaves a half-written checkpoint.
"""

from __future__ import annotations

import base64
import json
import math
import os
import secrets
import zlib
from collections import OrderedDict
from pathlib import Path
from typing import Any

import numpy as np

from ember.creation import from_numpy
from ember.device import Device, as_device
from ember.tensor import Tensor

FORMAT_VERSION = 1
_STRUCTURE = "ember.structure"
_VERSION = "ember.format_version"


class CheckpointError(RuntimeError):
    """A checkpoint that can't be read: corrupt, truncated, or not matching its own description."""


def _safetensors():
    try:
        import safetensors.numpy
    except ImportError as e:
        raise ImportError("ember.save/ember.load need the safetensors package: pip install ember[train] "
                          "(or pip install safetensors)") from e
    return safetensors


def _crc(arr: np.ndarray) -> int:
    return zlib.crc32(arr.reshape(-1).view(np.uint8))


def _where(path: list) -> str:
    return "obj" + "".join(f"[{p!r}]" for p in path)


class _Encoder:
    """Walks a nested object, collecting arrays under unique keys and returning the JSON structure."""

    def __init__(self) -> None:
        self.arrays: dict[str, np.ndarray] = {}
        self._seen: dict[int, dict] = {}  # id(tensor) -> node: a tensor referenced twice is stored once
        self._keep: list = []  # keep encoded objects alive so their ids stay unique during the walk

    def _key(self, path: list) -> str:
        base = ".".join(str(p) for p in path) or "tensor"
        key, n = base, 1
        while key in self.arrays:
            n += 1
            key = f"{base}#{n}"
        return key

    def _array(self, arr: np.ndarray, path: list, node: dict) -> dict:
        try:
            from ember.dtypes import from_numpy_dtype

            from_numpy_dtype(arr.dtype)
        except (TypeError, ValueError, KeyError):
            raise TypeError(f"save: {_where(path)} has dtype {arr.dtype}, which a checkpoint can't hold") from None
        if not arr.flags.c_contiguous:  # (np.ascontiguousarray would turn 0-d arrays into 1-d ones)
            arr = arr.copy(order="C")
        if not arr.dtype.isnative:
            arr = arr.astype(arr.dtype.newbyteorder("="))
        key = self._key(path)
        self.arrays[key] = arr
        node.update({"key": key, "dtype": arr.dtype.name, "shape": list(arr.shape), "crc": _crc(arr)})
        return node

    def encode(self, obj: Any, path: list) -> Any:
        if obj is None or isinstance(obj, (bool, str)):
            return obj
        if isinstance(obj, int):
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
        if isinstance(obj, np.ndarray):
            return self._array(obj, path, {"ndarray": None})
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
    """Rebuilds the saved object from the JSON structure and the arrays."""

    def __init__(self, name: str, arrays: dict[str, np.ndarray], device_for) -> None:
        self.name = name
        self.arrays = arrays
        self.device_for = device_for
        self._tensors: dict[str, Tensor] = {}

    def fail(self, problem: str) -> CheckpointError:
        return CheckpointError(f"{self.name}: {problem}")

    def decode(self, node: Any) -> Any:
        if node is None or isinstance(node, (bool, int, float, str)):
            return node
        if isinstance(node, dict):
            if "dict" in node:
                cls = OrderedDict if node.get("ordered") else dict
                return cls((self._key(k), self.decode(v)) for k, v in node["dict"])
            if "list" in node:
                return [self.decode(v) for v in node["list"]]
            if "tuple" in node:
                return tuple(self.decode(v) for v in node["tuple"])
            if "tensor" in node:
                return self._tensor(node)
            if "ndarray" in node:
                arr = self._array(node)
                return arr[()] if node.get("scalar") else arr
            if "float" in node:
                return float(node["float"])
            if "bytes" in node:
                return base64.b64decode(node["bytes"])
        raise self.fail(f"the checkpoint structure has an entry Ember does not know: {str(node)[:80]}")

    def _key(self, node: Any) -> Any:
        key = self.decode(node)
        if isinstance(key, (list, dict)) or isinstance(key, np.ndarray):
            raise self.fail("the checkpoint structure has a dict key that is not a scalar")
        return key

    def _array(self, node: dict) -> np.ndarray:
        key = node.get("key")
        if key not in self.arrays:
            raise self.fail(f"the structure names a tensor {key!r} that is not in the file")
        arr = self.arrays[key]
        if arr.dtype.name != node.get("dtype") or list(arr.shape) != node.get("shape"):
            raise self.fail(f"tensor {key!r} is {arr.dtype.name} {list(arr.shape)} in the file but the structure "
                            f"says {node.get('dtype')} {node.get('shape')}")
        if _crc(arr) != node.get("crc"):
            raise self.fail(f"tensor {key!r} is corrupt: its checksum does not match")
        return arr

    def _tensor(self, node: dict) -> Tensor:
        key = node.get("key")
        if key in self._tensors:  # the same tensor saved under two names stays one tensor
            return self._tensors[key]
        t = self.make_tensor(self._array(node), node)
        self._tensors[key] = t
        return t

    def make_tensor(self, arr: np.ndarray, node: dict) -> Tensor:
        """A tensor on its target device from a checked array and its structure entry."""
        t = from_numpy(arr)
        device = self.device_for(node.get("device", "cpu"))
        if device is not t.device:
            t = t.to(device)
        if node.get("requires_grad"):
            t.requires_grad_(True)
        if node.get("parameter"):
            t = _as_parameter(t)
        return t


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


def save(obj: Any, f: str | os.PathLike) -> None:
    """Write obj (nested dicts/lists/tuples of tensors, arrays and plain values) to the path f, atomically."""
    if not isinstance(f, (str, os.PathLike)):
        raise TypeError(f"save: f must be a file path, got {type(f).__name__}")
    st = _safetensors()
    enc = _Encoder()
    structure = enc.encode(obj, [])
    metadata = {
        "format": "ember",
        _VERSION: str(FORMAT_VERSION),
        _STRUCTURE: json.dumps(structure, allow_nan=False, separators=(",", ":")),
    }
    data = st.numpy.save(enc.arrays, metadata=metadata)
    path = Path(f)
    directory = path.parent
    tmp = directory / f".{path.name}.{secrets.token_hex(6)}.tmp"
    # O_EXCL: the name is ours alone; mode 0o666 lets the umask apply as for any new file.
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
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


def load(f: str | os.PathLike, map_location=None, *, weights_only: bool = True) -> Any:
    """Read a checkpoint written by save(); tensors go to map_location (a device, or a dict of saved -> new; default cpu).

    A plain safetensors file (from another library) loads as a dict of tensors. Loading never runs
    code from the file (`weights_only` is accepted for PyTorch compatibility; it is always true).
    """
    if not isinstance(f, (str, os.PathLike)):
        raise TypeError(f"load: f must be a file path, got {type(f).__name__}")
    st = _safetensors()
    name = os.fspath(f)
    if not os.path.exists(name):
        raise FileNotFoundError(f"load: no such checkpoint file: {name}")
    size = os.path.getsize(name)
    try:
        with st.safe_open(name, framework="np") as sf:
            meta = sf.metadata() or {}
            arrays = {k: sf.get_tensor(k) for k in sf.keys()}
    except st.SafetensorError as e:
        raise CheckpointError(f"{name}: not a readable checkpoint ({size} bytes; corrupt or truncated?): {e}") from None
    device_for = _default_device(map_location)
    dec = _Decoder(name, arrays, device_for)
    raw = meta.get(_STRUCTURE)
    if raw is None:
        return {k: dec.make_tensor(a, {}) for k, a in arrays.items()}
    try:
        version = int(meta.get(_VERSION, "0"))
    except ValueError:
        raise dec.fail(f"unreadable format version {meta.get(_VERSION)!r}") from None
    if version > FORMAT_VERSION:
        raise dec.fail(f"written in checkpoint format {version}, newer than this Ember reads ({FORMAT_VERSION}); "
                       f"upgrade Ember")
    try:
        structure = json.loads(raw)
    except (json.JSONDecodeError, RecursionError) as e:
        raise dec.fail(f"the checkpoint structure is corrupt: {e}") from None
    try:
        return dec.decode(structure)
    except RecursionError:
        raise dec.fail("the checkpoint structure is nested too deeply") from None
    except (TypeError, ValueError, AttributeError) as e:
        raise dec.fail(f"the checkpoint structure is malformed: {e}") from None
