"""`ember.load` on hostile and mistaken input: shared arrays, huge tensor counts, malformed headers and
structures, files that are not checkpoints, streams; every refusal is a CheckpointError naming the file."""

import io
import json
import os
import threading
import tracemalloc

import numpy as np
import pytest

import ember as em
from ember import safetensors_io, serialization
from ember.serialization import CheckpointError


def _structured(path, structure, arrays=None, version="1"):
    """A checkpoint file with this structure (a JSON value or its text) over these arrays."""
    arrays = {"w": np.arange(4, dtype=np.float32)} if arrays is None else arrays
    text = structure if isinstance(structure, str) else json.dumps(structure)
    meta = {"format": "ember", "ember.format_version": version, "ember.structure": text}
    with open(path, "wb") as f:
        safetensors_io.write(f, arrays, meta, str(path))
    return path


def _raw(path, header, data=b""):
    """A file of an 8-byte length, this header (a JSON value or its text) and these data bytes."""
    text = (header if isinstance(header, str) else json.dumps(header)).encode()
    path.write_bytes(len(text).to_bytes(8, "little") + text + data)
    return path


def _refused(path, match):
    with pytest.raises(CheckpointError, match=match) as info:
        em.load(path)
    assert str(path) in str(info.value)
    return str(info.value)


# --- one array, many references ----------------------------------------------------------------------------
def test_an_array_referenced_many_times_is_checked_once_and_loads_as_one_array(tmp_path, monkeypatch):
    arr = np.arange(1024, dtype=np.float32)
    node = {"ndarray": None, "key": "a", "dtype": "float32", "shape": [1024], "crc": safetensors_io.crc32(arr)}
    path = _structured(tmp_path / "shared", {"list": [node] * 5000}, {"a": arr})
    checksums = []
    real_crc = serialization._crc
    monkeypatch.setattr(serialization, "_crc", lambda a: checksums.append(a.nbytes) or real_crc(a))
    out = em.load(path)
    assert len(out) == 5000 and all(x is out[0] for x in out) and np.array_equal(out[0], arr)
    assert checksums == [arr.nbytes]  # one checksum, not one per reference


def test_a_reference_that_claims_another_checksum_is_still_refused(tmp_path):
    arr = np.arange(4, dtype=np.float32)
    node = {"ndarray": None, "key": "a", "dtype": "float32", "shape": [4], "crc": safetensors_io.crc32(arr)}
    path = _structured(tmp_path / "shared", {"list": [node, dict(node, crc=node["crc"] ^ 1)]}, {"a": arr})
    _refused(path, "tensor 'a' is corrupt")


def test_an_array_saved_under_two_names_is_stored_once_and_loads_as_one():
    arr = np.arange(1000, dtype=np.float64)
    buf = io.BytesIO()
    em.save({"a": arr, "b": [arr, arr]}, buf)
    assert len(buf.getvalue()) < 2 * arr.nbytes  # stored once
    out = em.load(io.BytesIO(buf.getvalue()))
    assert out["a"] is out["b"][0] is out["b"][1] and np.array_equal(out["a"], arr)


# --- many tensors ----------------------------------------------------------------------------------------
def test_many_tiny_tensors_load_in_little_more_memory_than_the_result(tmp_path):
    # A safetensors file of 50,000 one-element tensors (as a million would, in proportion): parsing the
    # header into dicts of lists once took ~550 bytes a tensor, beside the ~420 of the loaded result.
    path = tmp_path / "tiny.safetensors"
    with open(path, "wb") as f:
        safetensors_io.write(f, {f"layer{i}.weight": np.array([i], np.float32) for i in range(50_000)}, {}, "tiny")
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        out = em.load(path)
        after, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(out) == 50_000 and out["layer49999.weight"].item() == 49999
    result, extra = after - before, peak - after
    assert extra < 0.4 * result, f"loading peaked {extra / 50_000:.0f} bytes a tensor above the result's " \
                                 f"{result / 50_000:.0f}"


# --- malformed headers and structures ------------------------------------------------------------------
_HUGE_INT = "1" * 4301  # more digits than Python turns into an int by default


@pytest.mark.parametrize("header, data, match", [
    ({"a": {"dtype": "F32", "shape": [1] * 100, "data_offsets": [0, 4]}}, b"\0" * 4, "100 dimensions"),
    ({"a": {"dtype": "F32", "shape": [0, 2**62, 2**62], "data_offsets": [0, 0]}}, b"", "more than an array can hold"),
    ({"a": {"dtype": "U8", "shape": [0, 2**63], "data_offsets": [0, 0]}}, b"", "more than an array can hold"),
    ('{"a": {"dtype": "F32", "shape": [' + _HUGE_INT + '], "data_offsets": [0, 4]}}', b"\0" * 4, "bad header"),
    ({"a": {"dtype": ["F32"], "shape": [1], "data_offsets": [0, 4]}}, b"\0" * 4, "dtype"),
    ({"a": {"dtype": "F32", "shape": {"0": 1}, "data_offsets": [0, 4]}}, b"\0" * 4, "invalid shape"),
    ({"a": {"dtype": "F32", "shape": [1]}, "b": {"shape": [1], "data_offsets": [0, 4]}}, b"\0" * 4, "malformed"),
    ({"a": {"dtype": "F32", "shape": [True], "data_offsets": [0, 4]}}, b"\0" * 4, "invalid shape"),
    ({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]},
      "b": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}, b"\0" * 4, "overlaps"),
])
def test_malformed_headers_are_checkpoint_errors(tmp_path, header, data, match):
    _refused(_raw(tmp_path / "bad.safetensors", header, data), match)


def test_entries_in_another_field_order_or_with_other_fields_load_as_the_safetensors_package_loads_them(tmp_path):
    header = {"b": {"data_offsets": [0, 8], "shape": [2], "dtype": "F32"},
              "a": {"dtype": "I16", "shape": [1], "data_offsets": [8, 10], "note": "ignored"}}
    path = _raw(tmp_path / "other.safetensors", header, np.array([1.5, 2.5], np.float32).tobytes() + b"\x07\x00")
    out = em.load(path)
    assert out["b"].tolist() == [1.5, 2.5] and out["a"].tolist() == [7]


_W = {"key": "w", "dtype": "float32", "shape": [4], "crc": safetensors_io.crc32(np.arange(4, dtype=np.float32))}


@pytest.mark.parametrize("structure, match", [
    ('{"list": [' + _HUGE_INT + "]}", "malformed"),
    ("[" * 100_000 + "]" * 100_000, "nested too deeply"),
    ({"bytes": "not base64!"}, "malformed"),
    ({"float": 1.5}, "does not know"),
    ({"list": [[1, 2]]}, "bare JSON array"),
    ([1, 2], "bare JSON array"),
    ({"dict": [[[1], 2]]}, "dict key that is not a scalar"),
    ({"dict": [{"list": ["k", 2]}]}, r"not a \[key, value\] pair"),
    ({"dict": [["k", 1, 2]]}, r"not a \[key, value\] pair"),
    ({"list": [dict(_W, tensor=None, key=["w"])]}, "not in the file"),
    ({"list": [dict(_W, ndarray=None, shape=[2, 2])]}, r"float32 \[4\] in the file"),
])
def test_malformed_structures_are_checkpoint_errors(tmp_path, structure, match):
    _refused(_structured(tmp_path / "bad", structure), match)


def test_an_integer_tensor_marked_as_requiring_gradients_is_refused(tmp_path):
    arr = np.arange(4, dtype=np.int32)
    node = {"tensor": None, "requires_grad": True, "key": "w", "dtype": "int32", "shape": [4],
            "crc": safetensors_io.crc32(arr)}
    _refused(_structured(tmp_path / "bad", node, {"w": arr}), "only floating-point tensors")


def test_a_format_version_too_long_to_read_is_refused(tmp_path):
    _refused(_structured(tmp_path / "bad", 1, version="9" * 5000), "unreadable format version")


def test_saving_an_int_too_long_to_write_names_it():
    with pytest.raises(ValueError, match=r"save: obj\['n'\] is an int of \d+ bits"):
        em.save({"n": 10**5000}, io.BytesIO())


@pytest.mark.skipif(not hasattr(os, "symlink"), reason="needs symbolic links")
def test_a_loop_of_symbolic_links_is_a_checkpoint_error(tmp_path):
    loop = tmp_path / "loop"
    os.symlink(loop, loop)
    _refused(loop, "can't be opened: Too many levels of symbolic links")


@pytest.mark.skipif(not os.path.exists("/dev/zero"), reason="needs /dev/zero")
def test_a_link_to_a_device_is_refused_before_reading(tmp_path):
    zero = tmp_path / "zero.safetensors"
    os.symlink("/dev/zero", zero)
    _refused(zero, "is a device, not a checkpoint file")


# --- files that are not checkpoints -------------------------------------------------------------------------
@pytest.mark.parametrize("name, data, match", [
    ("picture.png", b"\x89PNG\r\n\x1a\n" + bytes(range(64)), "it is a PNG image"),
    ("notes.txt", b"the weights are in the other folder\n" * 3, "it is text"),
    ("model.onnx", b"\x08\x08\x12\x05ember\x3a\x10\x0a\x0e", r"looks like an ONNX model \(load those with "),
    ("random.bin", bytes(np.random.default_rng(0).integers(0, 256, 1000, dtype=np.uint8)), "its first bytes are"),
    ("model.pt", b"PK\x03\x04" + bytes(60), "a zip archive .*never unpickles"),
    ("model.pkl", b"\x80\x04\x95" + bytes(60), "a pickle .*never unpickles"),
    ("empty", b"", r"is empty \(0 bytes\)"),
    ("short", b"\x01\x02", "its first bytes are"),
])
def test_a_file_that_is_not_a_checkpoint_says_so(tmp_path, name, data, match):
    path = tmp_path / name
    path.write_bytes(data)
    msg = _refused(path, match)
    assert r"not an Ember (safetensors) checkpoint" in msg or "is empty" in msg
    assert "header claims" not in msg


def test_a_real_onnx_file_is_not_a_checkpoint(tmp_path):
    pytest.importorskip("onnx")
    path = tmp_path / "m.onnx"
    em.onnx.export(em.nn.Linear(2, 3), em.randn(1, 2), path)
    _refused(path, "not an Ember .* looks like an ONNX model")


# --- streams -----------------------------------------------------------------------------------------------
def _pipe_of(data: bytes):
    """The read end of a pipe (not seekable) that a thread fills with `data`, then closes."""
    r, w = os.pipe()

    def feed():
        with os.fdopen(w, "wb") as f:
            try:
                f.write(data)
            except BrokenPipeError:
                pass

    threading.Thread(target=feed, daemon=True).start()
    return os.fdopen(r, "rb")


def test_a_pipe_is_read_only_as_far_as_the_checkpoint_goes():
    buf = io.BytesIO()
    em.save({"a": em.arange(5.0), "big": em.ones(40_000)}, buf)
    with _pipe_of(buf.getvalue()) as f:
        out = em.load(f)
    assert out["a"].tolist() == [0.0, 1.0, 2.0, 3.0, 4.0] and out["big"].sum().item() == 40_000
    with _pipe_of(buf.getvalue() + b"more") as f, pytest.raises(CheckpointError, match="more bytes follow"):
        em.load(f)


def test_an_endless_stream_is_refused_without_reading_it_all():
    r, w = os.pipe()
    written = []

    def feed():  # lines of text, up to 64 MiB, for as long as the pipe is open
        chunk = b"y\n" * 32768
        with os.fdopen(w, "wb") as f:
            try:
                for _ in range(1024):
                    f.write(chunk)
                    written.append(len(chunk))
            except BrokenPipeError:
                pass

    writer = threading.Thread(target=feed, daemon=True)
    writer.start()
    with os.fdopen(r, "rb") as f, pytest.raises(CheckpointError, match="not an Ember .* it is text"):
        em.load(f)
    writer.join(timeout=60)
    assert sum(written) < 1 << 20  # the pipe's buffer and a chunk or two, not the whole stream


# --- fuzzing ---------------------------------------------------------------------------------------------
hypothesis = pytest.importorskip("hypothesis")
st = hypothesis.strategies


def _good_file() -> bytes:
    buf = io.BytesIO()
    em.save({"w": em.arange(6, dtype=em.float32).reshape(2, 3), "n": [1, 2.5, None, "s", b"b", (3,)],
             "i": em.tensor([1, 2]), "d": {1: em.ones(2), (1, "a"): np.zeros(3, np.int16)}}, buf)
    return buf.getvalue()


_GOOD = _good_file()
_JSON = st.recursive(st.none() | st.booleans() | st.integers(-2**70, 2**70) | st.floats(allow_nan=False)
                     | st.text(max_size=8),
                     lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
                     max_leaves=12)


def _loads_or_refuses(data: bytes) -> None:
    try:
        em.load(io.BytesIO(data))
    except CheckpointError as e:
        assert str(e).startswith("<BytesIO>: ")


def _replace_somewhere(draw, value):
    """`value` with one part (or the whole) replaced by an arbitrary JSON value."""
    if isinstance(value, (dict, list)) and value and draw(st.booleans()):
        key = draw(st.sampled_from(sorted(value))) if isinstance(value, dict) else draw(
            st.integers(0, len(value) - 1))
        value[key] = _replace_somewhere(draw, value[key])
        return value
    return draw(_JSON)


@hypothesis.settings(max_examples=150, deadline=None, suppress_health_check=list(hypothesis.HealthCheck))
@hypothesis.given(st.data())
def test_fuzzed_headers_load_or_raise_checkpoint_errors(data):
    n = int.from_bytes(_GOOD[:8], "little")
    header = json.loads(_GOOD[8:8 + n])
    meta = header["__metadata__"]
    if data.draw(st.booleans()):
        meta["ember.structure"] = json.dumps(_replace_somewhere(data.draw, json.loads(meta["ember.structure"])))
    else:
        header = _replace_somewhere(data.draw, header)
    text = json.dumps(header).encode()
    _loads_or_refuses(len(text).to_bytes(8, "little") + text + _GOOD[8 + n:])


@hypothesis.settings(max_examples=150, deadline=None)
@hypothesis.given(st.lists(st.tuples(st.integers(0, len(_GOOD) - 1), st.integers(0, 255)), min_size=1, max_size=4),
                  st.integers(0, len(_GOOD)))
def test_fuzzed_bytes_load_or_raise_checkpoint_errors(edits, cut):
    data = bytearray(_GOOD)
    for i, v in edits:
        data[i] = v
    _loads_or_refuses(bytes(data[:cut]))
