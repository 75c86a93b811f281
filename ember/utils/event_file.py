"""TensorBoard event files, written and read without TensorFlow or protobuf: records, events and summaries.

An event file is a sequence of TFRecords (length, masked CRC-32C of the length, data, masked
CRC-32C of the data); each record is a serialized `Event` protocol buffer (wall time, step, and a
`Summary` of tagged values). The few messages TensorBoard reads for scalars and histograms are
encoded here by hand, field by field, so nothing beyond NumPy is needed:

    Event   { double wall_time = 1; int64 step = 2; string file_version = 3; bytes graph_def = 4;
              Summary summary = 5; }
    Summary { repeated Value value = 1; }
    Value   { string tag = 1; float simple_value = 2; HistogramProto histo = 5; }
    HistogramProto { double min = 1; max = 2; num = 3; sum = 4; sum_squares = 5;
                     repeated double bucket_limit = 6 [packed]; repeated double bucket = 7 [packed]; }

Serialized Summaries concatenate into one Summary holding all their values (protobuf's rule for
repeated fields), which is how summaries are merged.
"""

from __future__ import annotations

import os
import socket
import struct
import threading
import time

import numpy as np

# --- CRC-32C (Castagnoli), as TFRecord frames use it -------------------------------------------------
_POLY = 0x82F63B78


def _crc_table() -> list:
    table = []
    for n in range(256):
        c = n
        for _ in range(8):
            c = (c >> 1) ^ _POLY if c & 1 else c >> 1
        table.append(c)
    return table


_TABLE = _crc_table()


def crc32c(data: bytes) -> int:
    """The CRC-32C of `data`."""
    crc = 0xFFFFFFFF
    table = _TABLE
    for b in data:
        crc = table[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def masked_crc(data: bytes) -> int:
    """TFRecord's masked CRC-32C."""
    crc = crc32c(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def record(data: bytes) -> bytes:
    """One TFRecord frame around `data`."""
    header = struct.pack("<Q", len(data))
    return header + struct.pack("<I", masked_crc(header)) + data + struct.pack("<I", masked_crc(data))


# --- protobuf wire format ------------------------------------------------------------------------------
def _varint(n: int) -> bytes:
    if n < 0:
        n += 1 << 64
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        if n:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _key(field: int, wire: int) -> bytes:
    return _varint((field << 3) | wire)


def _bytes_field(field: int, data: bytes) -> bytes:
    return _key(field, 2) + _varint(len(data)) + data


def _double_field(field: int, v: float) -> bytes:
    return _key(field, 1) + struct.pack("<d", float(v))


def _float_field(field: int, v: float) -> bytes:
    return _key(field, 5) + struct.pack("<f", float(v))


def _packed_doubles(field: int, values) -> bytes:
    return _bytes_field(field, np.asarray(values, dtype="<f8").tobytes())


def scalar_summary(tag: str, value: float) -> bytes:
    """A serialized Summary with one scalar."""
    return _bytes_field(1, _bytes_field(1, tag.encode()) + _float_field(2, value))


def _default_buckets() -> np.ndarray:
    """TensorFlow's default histogram bucket limits: +-1e-12 growing by 10% up to +-1e20, +-DBL_MAX and 0."""
    pos = []
    v = 1e-12
    while v < 1e20:
        pos.append(v)
        v *= 1.1
    pos.append(np.finfo(np.float64).max)
    pos = np.array(pos)
    return np.concatenate([-pos[::-1], [0.0], pos])


_BUCKETS = _default_buckets()


def histogram_summary(tag: str, values) -> bytes:
    """A serialized Summary with the histogram of `values` in TensorFlow's default buckets (runs of empty
    buckets collapsed into one, as TensorFlow encodes them)."""
    v = np.asarray(values, dtype=np.float64).reshape(-1)
    counts = np.bincount(np.searchsorted(_BUCKETS, v, side="right"), minlength=len(_BUCKETS))[:len(_BUCKETS)]
    limits, kept = [], []
    i = 0
    while i < len(_BUCKETS):
        end, count = _BUCKETS[i], counts[i]
        i += 1
        if count <= 0:
            while i < len(_BUCKETS) and counts[i] <= 0:
                end, count = _BUCKETS[i], counts[i]
                i += 1
        limits.append(end)
        kept.append(float(count))
    lo, hi = (float(v.min()), float(v.max())) if v.size else (0.0, 0.0)
    histo = (_double_field(1, lo) + _double_field(2, hi) + _double_field(3, v.size) + _double_field(4, v.sum())
             + _double_field(5, float(np.dot(v, v))) + _packed_doubles(6, limits) + _packed_doubles(7, kept))
    return _bytes_field(1, _bytes_field(1, tag.encode()) + _bytes_field(5, histo))


def event(wall_time: float, step: int = 0, summary: bytes | None = None, file_version: str | None = None,
          graph_def: bytes | None = None) -> bytes:
    """A serialized Event (`graph_def`: a serialized GraphDef, for TensorBoard's graph tab)."""
    out = _double_field(1, wall_time)
    if step:
        out += _key(2, 0) + _varint(int(step))
    if file_version is not None:
        out += _bytes_field(3, file_version.encode())
    if graph_def is not None:
        out += _bytes_field(4, graph_def)
    if summary is not None:
        out += _bytes_field(5, summary)
    return out


# --- writing ---------------------------------------------------------------------------------------------
class EventFileWriter:
    """Appends events to a new file `events.out.tfevents.<time>.<host><suffix>` in `logdir`."""

    def __init__(self, logdir, filename_suffix: str = "") -> None:
        self.logdir = os.fspath(logdir)
        os.makedirs(self.logdir, exist_ok=True)
        name = f"events.out.tfevents.{int(time.time()):010d}.{socket.gethostname()}{filename_suffix or ''}"
        self.path = os.path.join(self.logdir, name)
        self._fh = open(self.path, "ab")
        self._lock = threading.Lock()
        self.add_event(event(time.time(), file_version="brain.Event:2"))
        self.flush()

    def add_event(self, serialized_event: bytes) -> None:
        """Append one serialized Event."""
        with self._lock:
            if self._fh is None:
                raise ValueError(f"the event file {self.path} is closed")
            self._fh.write(record(serialized_event))

    def add_summary(self, summary: bytes, step: int = 0, wall_time: float | None = None) -> None:
        """Append an event holding a serialized Summary at `step`."""
        self.add_event(event(time.time() if wall_time is None else wall_time, step, summary))

    def flush(self) -> None:
        """Write what is buffered to the file."""
        with self._lock:
            if self._fh is not None:
                self._fh.flush()

    def close(self) -> None:
        """Flush and close the file."""
        with self._lock:
            if self._fh is not None:
                self._fh.close()
                self._fh = None

    @property
    def closed(self) -> bool:
        return self._fh is None


# --- reading (for tests and tools) -------------------------------------------------------------------
def read_records(path) -> list:
    """The data of every record in a TFRecord file, checking both CRCs."""
    out = []
    with open(path, "rb") as fh:
        while True:
            header = fh.read(8)
            if not header:
                return out
            (length,) = struct.unpack("<Q", header)
            (hcrc,) = struct.unpack("<I", fh.read(4))
            if hcrc != masked_crc(header):
                raise ValueError(f"{path}: corrupt record header")
            data = fh.read(length)
            (dcrc,) = struct.unpack("<I", fh.read(4))
            if dcrc != masked_crc(data):
                raise ValueError(f"{path}: corrupt record data")
            out.append(data)


def _fields(data: bytes) -> list:
    """(field number, wire type, value) of each field of a serialized message."""
    out, i = [], 0
    while i < len(data):
        key, i = _read_varint(data, i)
        field, wire = key >> 3, key & 7
        if wire == 0:
            value, i = _read_varint(data, i)
        elif wire == 1:
            value, i = struct.unpack("<d", data[i:i + 8])[0], i + 8
        elif wire == 5:
            value, i = struct.unpack("<f", data[i:i + 4])[0], i + 4
        elif wire == 2:
            n, i = _read_varint(data, i)
            value, i = data[i:i + n], i + n
        else:
            raise ValueError(f"unsupported protobuf wire type {wire}")
        out.append((field, wire, value))
    return out


def _read_varint(data: bytes, i: int) -> tuple:
    shift = result = 0
    while True:
        b = data[i]
        i += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, i
        shift += 7


def parse_summary(data: bytes) -> list:
    """[(tag, simple_value or a histogram dict)] of a serialized Summary."""
    values = []
    for field, _, raw in _fields(data):
        if field != 1:
            continue
        tag, value = "", None
        for f, _, v in _fields(raw):
            if f == 1:
                tag = v.decode()
            elif f == 2:
                value = v
            elif f == 5:
                h = {}
                for hf, _, hv in _fields(v):
                    name = {1: "min", 2: "max", 3: "num", 4: "sum", 5: "sum_squares", 6: "bucket_limit", 7: "bucket"}
                    h[name[hf]] = np.frombuffer(hv, "<f8").tolist() if hf in (6, 7) else hv
                value = h
        values.append((tag, value))
    return values


def read_events(path) -> list:
    """[{"wall_time", "step", "file_version"?, "graph_def"?, "summary"?}] of an event file."""
    events = []
    for data in read_records(path):
        ev = {"step": 0}
        for field, _, value in _fields(data):
            if field == 1:
                ev["wall_time"] = value
            elif field == 2:
                ev["step"] = value
            elif field == 3:
                ev["file_version"] = value.decode()
            elif field == 4:
                ev["graph_def"] = value
            elif field == 5:
                ev["summary"] = parse_summary(value)
        events.append(ev)
    return events
