"""Checkpoints: em.save / em.load round trips, safetensors layout, atomic writes and corrupt files."""

import io
import json
import math
import os
import pickle
import stat
import subprocess
import sys
import textwrap
from collections import OrderedDict

import numpy as np
import pytest

import ember as em
from ember.serialization import CheckpointError

safetensors = pytest.importorskip("safetensors")
from safetensors import safe_open  # noqa: E402
from safetensors.numpy import save_file  # noqa: E402


def _same(a, b):
    """Deep equality with tensors compared by dtype, shape, values and requires_grad."""
    if isinstance(a, em.Tensor):
        assert isinstance(b, em.Tensor) and a.dtype == b.dtype and tuple(a.shape) == tuple(b.shape)
        assert a.requires_grad == b.requires_grad and b.device == em.device("cpu")
        np.testing.assert_array_equal(np.asarray(a.detach()).astype(np.float64), np.asarray(b.detach()).astype(np.float64))
    elif isinstance(a, np.ndarray):
        assert isinstance(b, np.ndarray) and a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b)
    elif isinstance(a, dict):
        assert type(a) is type(b) and list(a) == list(b)
        for k in a:
            _same(a[k], b[k])
    elif isinstance(a, (list, tuple)):
        assert type(a) is type(b) and len(a) == len(b)
        for x, y in zip(a, b):
            _same(x, y)
    elif isinstance(a, float) and math.isnan(a):
        assert isinstance(b, float) and math.isnan(b)
    else:
        assert type(a) is type(b) and a == b


def _dtypes():
    out = [em.float32, em.float64, em.float16, em.int8, em.int16, em.int32, em.int64, em.uint8, em.bool]
    return out + ([em.bfloat16] if em.bfloat16 is not None else [])


def test_round_trip_of_nested_state(tmp_path):
    em.manual_seed(0)
    weight = em.randn(4, 3, requires_grad=True)
    model = OrderedDict([("fc.weight", weight), ("fc.bias", em.zeros(4)), ("bn.num_batches_tracked", em.tensor(7))])
    for dt in _dtypes():
        model[f"t.{dt}"] = (em.arange(6).reshape(2, 3) % 2).to(dt)
    optim = {
        "state": {0: {"step": em.tensor(3.0), "exp_avg": em.randn(4, 3)}, 1: {"step": 3, "momentum_buffer": None}},
        "param_groups": [{"lr": 1e-3, "betas": (0.9, 0.999), "eps": 1e-8, "weight_decay": 0, "amsgrad": False,
                          "foreach": None, "params": [0, 1], "name": "default"}],
    }
    obj = {
        "model": model, "optimizer": optim, "epoch": 12, "big": 2**70, "losses": [0.5, float("inf"), float("nan")],
        "empty": em.zeros(0, 5), "scalar": em.tensor(2.5), "view": em.arange(12).reshape(3, 4).T,
        "array": np.arange(6, dtype=np.int16).reshape(2, 3), "np_scalar": np.float32(1.25), "blob": b"\x00\x01",
        (1, "a"): "tuple key", None: "none key", 2.5: [], "nested": [[{"deep": (em.ones(1),)}]],
    }
    path = tmp_path / "ckpt.safetensors"
    em.save(obj, path)
    back = em.load(path)
    _same(obj, back)
    assert isinstance(back["np_scalar"], np.float32)


def test_tied_tensors_load_as_one(tmp_path):
    w = em.randn(3)
    em.save({"encoder.weight": w, "decoder.weight": w}, tmp_path / "tied")
    back = em.load(tmp_path / "tied")
    assert back["encoder.weight"] is back["decoder.weight"]


def test_pytorch_state_dict_layout_round_trips(tmp_path):
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.BatchNorm1d(4))
    opt = torch.optim.Adam(net.parameters(), lr=0.01)
    net(torch.randn(5, 3)).sum().backward()
    opt.step()

    def to_ember(x):
        if isinstance(x, torch.Tensor):
            return em.from_numpy(x.detach().numpy().copy())
        if isinstance(x, dict):
            return type(x)((k, to_ember(v)) for k, v in x.items())
        if isinstance(x, (list, tuple)):
            return type(x)(to_ember(v) for v in x)
        return x

    state = {"model": to_ember(net.state_dict()), "optimizer": to_ember(opt.state_dict())}
    em.save(state, tmp_path / "torch_layout")
    back = em.load(tmp_path / "torch_layout")
    _same(state, back)
    assert sorted(back["optimizer"]["state"]) == [0, 1, 2, 3]
    assert back["optimizer"]["param_groups"][0]["betas"] == (0.9, 0.999)


def test_flat_state_dict_keeps_its_names_in_the_file(tmp_path):
    sd = {"layer1.weight": em.ones(2, 2), "layer1.bias": em.zeros(2)}
    em.save(sd, tmp_path / "flat")
    with safe_open(tmp_path / "flat", framework="np") as f:
        assert sorted(f.keys()) == sorted(sd)
        assert f.metadata()["format"] == "ember"


def test_plain_safetensors_file_loads_as_a_dict(tmp_path):
    save_file({"a": np.arange(3, dtype=np.int32), "b": np.ones((2, 2), np.float16)}, tmp_path / "plain")
    back = em.load(tmp_path / "plain")
    assert back["a"].dtype == em.int32 and back["a"].tolist() == [0, 1, 2] and back["b"].dtype == em.float16


def test_map_location(tmp_path):
    em.save({"w": em.ones(2)}, tmp_path / "m")
    for loc in ("cpu", em.device("cpu"), {"cpu": "cpu"}, {"cuda:0": "cpu"}):
        assert em.load(tmp_path / "m", map_location=loc)["w"].device == em.device("cpu")
    with pytest.raises(TypeError, match="map_location"):
        em.load(tmp_path / "m", map_location=3)


def test_loaded_tensors_are_writable_and_independent(tmp_path):
    em.save({"w": em.zeros(3)}, tmp_path / "w")
    w = em.load(tmp_path / "w")["w"]
    w.add_(1)
    assert w.tolist() == [1.0, 1.0, 1.0]


def test_loading_never_unpickles(tmp_path, monkeypatch):
    em.save({"w": em.ones(2), "meta": {"k": [1, "x", None]}}, tmp_path / "p")

    def refuse(*args, **kwargs):
        raise AssertionError("pickle used")

    monkeypatch.setattr(pickle, "loads", refuse)
    monkeypatch.setattr(pickle, "load", refuse)
    monkeypatch.setattr(pickle, "Unpickler", refuse)
    assert em.load(tmp_path / "p")["meta"] == {"k": [1, "x", None]}


def test_unsupported_values_are_named(tmp_path):
    with pytest.raises(TypeError, match=r"obj\['a'\]\[1\] is a object"):
        em.save({"a": [1, object()]}, tmp_path / "x")
    with pytest.raises(TypeError, match="meta device"):
        em.save({"a": em.empty(2, device="meta")}, tmp_path / "x")
    with pytest.raises(TypeError, match="dict key"):
        em.save({frozenset(): 1}, tmp_path / "x")
    with pytest.raises(TypeError, match="file path or a binary file object, got object"):
        em.save({}, object())
    assert not list(tmp_path.iterdir())


def test_new_file_permissions_follow_the_umask(tmp_path):
    umask = os.umask(0)
    os.umask(umask)
    em.save({"w": em.ones(1)}, tmp_path / "perm")
    assert stat.S_IMODE(os.stat(tmp_path / "perm").st_mode) == 0o666 & ~umask


# --- atomic writes -----------------------------------------------------------------------------------
def test_failed_save_leaves_the_old_file_and_no_temp(tmp_path, monkeypatch):
    path = tmp_path / "ckpt"
    em.save({"w": em.zeros(3)}, path)
    before = path.read_bytes()

    def broken_replace(src, dst):
        raise OSError("disk gone")

    monkeypatch.setattr(os, "replace", broken_replace)
    with pytest.raises(OSError, match="disk gone"):
        em.save({"w": em.ones(1000)}, path)
    assert path.read_bytes() == before and os.listdir(tmp_path) == ["ckpt"]


_CRASH = textwrap.dedent("""
    import os, signal, sys
    import ember as em
    path, where = sys.argv[1], sys.argv[2]
    em.save({"w": em.zeros(3)}, path)
    real_fdopen = os.fdopen

    class HalfWriter:
        def __init__(self, f):
            self.f = f
        def __enter__(self):
            return self
        def __exit__(self, *exc):
            return False
        def write(self, data):
            self.f.write(data[: len(data) // 2])
            self.f.flush()
            os.kill(os.getpid(), signal.SIGKILL)

    if where == "mid-write":
        os.fdopen = lambda fd, mode: HalfWriter(real_fdopen(fd, mode))
    else:  # after the data is written, before the rename
        os.fsync = lambda fd: os.kill(os.getpid(), signal.SIGKILL)
    em.save({"w": em.ones(100000)}, path)
    print("not reached")
""")


@pytest.mark.parametrize("where", ["mid-write", "before-rename"])
def test_crash_during_save_keeps_the_old_checkpoint(tmp_path, where):
    path = tmp_path / "ckpt.safetensors"
    proc = subprocess.run([sys.executable, "-c", _CRASH, str(path), where], capture_output=True, text=True, timeout=120)
    assert proc.returncode == -9, proc.stderr
    assert em.load(path)["w"].tolist() == [0.0, 0.0, 0.0]
    leftovers = [n for n in os.listdir(tmp_path) if n != "ckpt.safetensors"]
    assert all(n.startswith(".ckpt.safetensors.") and n.endswith(".tmp") for n in leftovers)


# --- corrupt, truncated and mismatched files ------------------------------------------------------------
@pytest.fixture
def good(tmp_path):
    path = tmp_path / "good"
    em.save({"w": em.arange(100, dtype=em.float32), "step": 3}, path)
    return path.read_bytes()


def _load_bytes(tmp_path, data):
    path = tmp_path / "bad.safetensors"
    path.write_bytes(data)
    with pytest.raises(CheckpointError) as info:
        em.load(path)
    assert str(path) in str(info.value) and isinstance(info.value, RuntimeError)
    return str(info.value)


def test_truncated_file(tmp_path, good):
    assert "truncated" in _load_bytes(tmp_path, good[:-17])
    _load_bytes(tmp_path, good[:5])
    _load_bytes(tmp_path, b"")


def test_garbage_file(tmp_path):
    _load_bytes(tmp_path, b"this is not a checkpoint at all" * 4)


def test_flipped_data_byte_fails_the_checksum(tmp_path, good):
    data = bytearray(good)
    data[-7] ^= 0x40
    assert "checksum" in _load_bytes(tmp_path, bytes(data))


def _with_structure(tmp_path, edit):
    arrays = {"w": np.arange(4, dtype=np.float32)}
    with safe_open(tmp_path / "good", framework="np") as f:
        meta = f.metadata()
    structure = json.loads(meta["ember.structure"])
    edit(structure, meta)
    meta["ember.structure"] = json.dumps(structure)
    save_file(arrays, tmp_path / "edited", metadata=meta)
    with pytest.raises(CheckpointError) as info:
        em.load(tmp_path / "edited")
    return str(info.value)


def test_structure_that_does_not_match_the_tensors(tmp_path, good):
    (tmp_path / "good").write_bytes(good)
    msg = _with_structure(tmp_path, lambda s, m: None)  # 'w' has 4 elements, the structure says 100
    assert "'w'" in msg and "[100]" in msg
    msg = _with_structure(tmp_path, lambda s, m: s["dict"][0].__setitem__(1, {"tensor": None, "key": "gone"}))
    assert "not in the file" in msg
    msg = _with_structure(tmp_path, lambda s, m: s["dict"][0].__setitem__(1, {"__reduce__": "os.system"}))
    assert "does not know" in msg
    msg = _with_structure(tmp_path, lambda s, m: m.__setitem__("ember.format_version", "99"))
    assert "newer" in msg


def test_corrupt_structure_json(tmp_path):
    save_file({"w": np.zeros(1, np.float32)}, tmp_path / "j", metadata={"ember.structure": "{not json"})
    with pytest.raises(CheckpointError, match="structure is corrupt"):
        em.load(tmp_path / "j")


def test_missing_file():
    with pytest.raises(FileNotFoundError, match="no-such-file"):
        em.load("/nonexistent/no-such-file.safetensors")


def test_module_and_optimizer_state_round_trip(tmp_path):
    nn = pytest.importorskip("ember.nn")
    optim = pytest.importorskip("ember.optim")
    if not (hasattr(nn, "Linear") and hasattr(optim, "Adam")):
        pytest.skip("needs ember.nn.Linear and ember.optim.Adam")
    em.manual_seed(0)
    model = nn.Linear(3, 2)
    opt = optim.Adam(model.parameters(), lr=0.1)
    model(em.randn(4, 3)).sum().backward()
    opt.step()
    em.save({"model": model.state_dict(), "optimizer": opt.state_dict()}, tmp_path / "train.ckpt")
    ckpt = em.load(tmp_path / "train.ckpt")
    _same(model.state_dict(), ckpt["model"])
    _same(opt.state_dict(), ckpt["optimizer"])
    fresh = nn.Linear(3, 2)
    fresh_opt = optim.Adam(fresh.parameters(), lr=0.1)
    fresh.load_state_dict(ckpt["model"])
    fresh_opt.load_state_dict(ckpt["optimizer"])
    _same(opt.state_dict(), fresh_opt.state_dict())


def test_parameters_load_as_parameters(tmp_path):
    nn = pytest.importorskip("ember.nn")
    if not hasattr(nn, "Parameter"):
        pytest.skip("needs ember.nn.Parameter")
    em.save({"p": nn.Parameter(em.ones(2))}, tmp_path / "param")
    p = em.load(tmp_path / "param")["p"]
    assert isinstance(p, nn.Parameter) and p.requires_grad


# --- the file format, written and read without the safetensors package ----------------------------------
def test_files_load_in_safetensors_with_every_dtype_and_layout(tmp_path):
    arrays = {f"t.{dt}": (em.arange(24).reshape(2, 3, 4) % 5).to(dt) for dt in _dtypes()}
    arrays["strided"] = em.arange(40, dtype=em.float32).reshape(5, 8)[:, ::3]
    arrays["scalar"] = em.tensor(1.5, dtype=em.float64)
    arrays["empty"] = em.zeros(0, 3, dtype=em.int16)
    em.save(arrays, tmp_path / "all")
    torch = pytest.importorskip("torch")
    from safetensors.torch import load as torch_load

    loaded = torch_load((tmp_path / "all").read_bytes())  # checks the header as strictly as the Rust reader does
    assert sorted(loaded) == sorted(arrays)
    for k, t in arrays.items():
        want = np.asarray(t.float() if t.dtype == em.bfloat16 else t)
        got = loaded[k].float().numpy() if loaded[k].dtype == torch.bfloat16 else loaded[k].numpy()
        assert loaded[k].dtype == getattr(torch, t.dtype.name), k
        assert got.shape == want.shape and np.array_equal(got, want), k
    _same(arrays, em.load(tmp_path / "all"))


def test_big_endian_and_strided_arrays_round_trip(tmp_path):
    big = np.arange(12, dtype=">f4").reshape(3, 4)
    obj = {"big": big, "cols": np.arange(30, dtype=np.int64).reshape(5, 6)[:, 1::2]}
    em.save(obj, tmp_path / "bs")
    back = em.load(tmp_path / "bs")
    assert back["big"].dtype == np.float32 and np.array_equal(back["big"], big)
    assert np.array_equal(back["cols"], obj["cols"])


def test_many_small_and_some_large_tensors_load_aligned_and_independent(tmp_path):
    rng = np.random.default_rng(0)
    arrays = {}
    for i in range(300):  # mixed item sizes, so tensors of one dtype share blocks with others
        dtype = [np.float64, np.float32, np.int16, np.uint8, np.bool_][i % 5]
        arrays[f"k{i:03d}"] = (rng.integers(0, 2, 3 + i % 7) if dtype is np.bool_
                               else rng.standard_normal(3 + i % 7) * 50).astype(dtype)
    arrays["large"] = rng.standard_normal(40_000).astype(np.float32)  # read into an array of its own
    save_file(arrays, tmp_path / "mixed")
    back = em.load(tmp_path / "mixed")
    assert list(back) == sorted(arrays)
    for k, a in arrays.items():
        got = np.asarray(back[k])
        assert got.dtype == a.dtype and np.array_equal(got, a) and got.flags.aligned and got.flags.writeable
    back["k000"].add_(1.0)
    assert np.array_equal(np.asarray(back["k001"]), arrays["k001"])


def _raw_file(path, header, data=b""):
    text = json.dumps(header).encode()
    path.write_bytes(len(text).to_bytes(8, "little") + text + data)


@pytest.mark.parametrize("header, data, message", [
    ({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}, b"\0" * 4, "truncated"),
    ({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}, b"\0" * 12, "follow the last tensor"),
    ({"a": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}}, b"\0" * 8, "offsets span 8 bytes"),
    ({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
      "b": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}}, b"\0" * 8, "overlaps"),
    ({"a": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}}, b"\0" * 8, "gap of 4 bytes"),
    ({"a": {"dtype": "F32", "shape": [-1], "data_offsets": [0, 4]}}, b"\0" * 4, "invalid shape"),
    ({"a": {"dtype": "F32", "shape": [1.0], "data_offsets": [0, 4]}}, b"\0" * 4, "invalid shape"),
    ({"a": {"dtype": "U16", "shape": [1], "data_offsets": [0, 2]}}, b"\0" * 2, "dtype U16, which Ember can't hold"),
    ({"a": {"dtype": "Q9", "shape": [1], "data_offsets": [0, 2]}}, b"\0" * 2, "does not know"),
    ({"a": {"dtype": "F32", "shape": [1]}}, b"\0" * 4, "malformed header entry"),
    ({"__metadata__": {"k": 1}}, b"", "metadata is not a map of strings"),
    ([1, 2], b"", r"not an Ember \(safetensors\) checkpoint"),  # a safetensors header starts with "{"
])
def test_malformed_headers_are_named(tmp_path, header, data, message):
    path = tmp_path / "bad.safetensors"
    _raw_file(path, header, data)
    with pytest.raises(CheckpointError, match=message) as info:
        em.load(path)
    assert str(path) in str(info.value)


def test_a_header_longer_than_safetensors_allows_is_refused(tmp_path, monkeypatch):
    from ember import safetensors_io

    path = tmp_path / "huge.safetensors"
    path.write_bytes((safetensors_io.MAX_HEADER + 8).to_bytes(8, "little") + b"{}")
    with pytest.raises(CheckpointError, match="header claims"):
        em.load(path)
    monkeypatch.setattr(safetensors_io, "MAX_HEADER", 200)
    with pytest.raises(ValueError, match="more than the 200 bytes safetensors readers accept"):
        em.save({f"w{i}": em.ones(1) for i in range(20)}, tmp_path / "many")
    assert not list(tmp_path.glob(".many*"))


def test_a_key_named_like_the_metadata_entry_is_stored_under_another_key(tmp_path):
    em.save({"__metadata__": em.ones(2), "x": 1}, tmp_path / "m")
    with safe_open(tmp_path / "m", framework="np") as f:
        assert f.metadata()["format"] == "ember"
    assert em.load(tmp_path / "m")["__metadata__"].tolist() == [1.0, 1.0]


_PEAK = textwrap.dedent("""
    import resource, sys
    import ember as em
    state = {f"w{i}": em.ones(1024, 1024) for i in range(64)}  # 256 MiB
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    if sys.argv[2] == "path":
        em.save(state, sys.argv[1])
    else:
        with open(sys.argv[1], "wb") as f:
            em.save(state, f)
    print((resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024)
""")


@pytest.mark.skipif(sys.platform != "linux", reason="ru_maxrss is in KiB on Linux")
@pytest.mark.parametrize("to", ["path", "file object"])
def test_save_streams_tensors_instead_of_building_the_file_in_memory(tmp_path, to):
    proc = subprocess.run([sys.executable, "-c", _PEAK, str(tmp_path / "big"), to], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    extra_mib = float(proc.stdout.split()[-1])
    assert extra_mib < 64, f"saving 256 MiB raised the peak RSS by {extra_mib:.0f} MiB"


# --- what load accepts -----------------------------------------------------------------------------------
def test_loading_a_folder_is_a_checkpoint_error(tmp_path):
    with pytest.raises(em.CheckpointError, match=rf"{tmp_path}: is a folder, not a checkpoint file"):
        em.load(tmp_path)


_FIFO = textwrap.dedent("""
    import sys
    import ember as em
    from ember.serialization import CheckpointError
    try:
        em.load(sys.argv[1])
    except CheckpointError as e:
        print(e)
""")


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs named pipes")
def test_loading_a_fifo_is_a_checkpoint_error_not_a_hang(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    try:
        proc = subprocess.run([sys.executable, "-c", _FIFO, str(fifo)], capture_output=True, text=True, timeout=60)
    except subprocess.TimeoutExpired:
        pytest.fail("em.load of a FIFO waits for a writer")
    assert proc.returncode == 0, proc.stderr
    assert f"{fifo}: is a named pipe (FIFO), not a checkpoint file" in proc.stdout


def test_saving_to_a_folder_names_it(tmp_path):
    with pytest.raises(IsADirectoryError, match=rf"save: {tmp_path} is a folder"):
        em.save({"w": em.ones(1)}, tmp_path)
    assert not list(tmp_path.iterdir())


# --- temporary files of killed saves ------------------------------------------------------------------------
def _temps(folder, target):
    return sorted(n for n in os.listdir(folder) if n.startswith(f".{target}.") and n.endswith(".tmp"))


def test_the_next_save_removes_temporary_files_of_killed_saves(tmp_path):
    path = tmp_path / "ckpt.safetensors"
    for _ in range(3):  # each run saves once, then is killed in its second save
        proc = subprocess.run([sys.executable, "-c", _CRASH, str(path), "before-rename"], capture_output=True,
                              text=True, timeout=120)
        assert proc.returncode == -9, proc.stderr
        assert len(_temps(tmp_path, path.name)) == 1  # the earlier run's was removed by this run's first save
    other = tmp_path / ".other.safetensors.x.tmp"  # another target's, and a name Ember did not make
    other.write_bytes(b"x")
    em.save({"w": em.ones(2)}, path)
    assert _temps(tmp_path, path.name) == [] and other.exists()
    assert em.load(path)["w"].tolist() == [1.0, 1.0]


def test_a_temporary_file_with_this_pid_from_before_this_process_is_stale(tmp_path):
    path = tmp_path / "ckpt"
    proc = subprocess.run([sys.executable, "-c", _CRASH, str(path), "before-rename"], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == -9, proc.stderr
    (left,) = _temps(tmp_path, "ckpt")
    host, pid, token = left[len(".ckpt."):-len(".tmp")].split("-")
    mine_old = tmp_path / f".ckpt.{host}-{os.getpid()}-{token}.tmp"
    mine_new = tmp_path / f".ckpt.{host}-{os.getpid()}-{'0' * 12}.tmp"  # as if another thread were saving now
    os.rename(tmp_path / left, mine_old)
    os.utime(mine_old, (1, 1))
    mine_new.write_bytes(b"in progress")
    em.save({"w": em.ones(1)}, path)
    assert not mine_old.exists() and mine_new.exists()


_SLOW_SAVE = textwrap.dedent("""
    import os, sys
    import ember as em
    real_fsync, waited = os.fsync, []

    def fsync(fd):  # hold the temporary file until the parent says go
        if not waited:
            waited.append(True)
            print("writing", flush=True)
            sys.stdin.readline()
        real_fsync(fd)

    os.fsync = fsync
    em.save({"w": em.full((1000,), 7.0)}, sys.argv[1])
    print("done", flush=True)
""")


def test_a_concurrent_save_by_a_live_process_is_left_alone(tmp_path):
    path = tmp_path / "ckpt"
    child = subprocess.Popen([sys.executable, "-c", _SLOW_SAVE, str(path)], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "writing"
        (theirs,) = _temps(tmp_path, "ckpt")
        em.save({"w": em.ones(1)}, path)
        assert _temps(tmp_path, "ckpt") == [theirs]
        child.stdin.write("go\n")
        child.stdin.flush()
        assert child.stdout.readline().strip() == "done"
    finally:
        child.stdin.close()
        child.wait(timeout=60)
    assert child.returncode == 0 and _temps(tmp_path, "ckpt") == []
    assert em.load(path)["w"].tolist() == [7.0] * 1000


# --- file objects ---------------------------------------------------------------------------------------
def test_round_trip_through_bytes_io_and_open_files(tmp_path):
    em.manual_seed(0)
    obj = {"w": em.randn(3, 2, requires_grad=True), "step": 7, "nested": [em.arange(4), {"x": np.ones(2)}]}
    buf = io.BytesIO()
    em.save(obj, buf)
    buf.seek(0)
    _same(obj, em.load(buf))
    assert buf.tell() == len(buf.getvalue())  # read to the end, as torch.load reads
    with open(tmp_path / "ckpt", "wb") as f:
        f.write(b"prefix")  # written at the file's current position
        em.save(obj, f)
    with open(tmp_path / "ckpt", "rb") as f:
        assert f.read(6) == b"prefix"
        _same(obj, em.load(f))
    assert em.load(io.BytesIO(buf.getvalue()), map_location="cpu:1")["w"].device == "cpu:1"


def test_loading_from_a_stream_that_cannot_seek():
    buf = io.BytesIO()
    em.save({"a": em.ones(70000)}, buf)  # large enough to be read into an array of its own

    class Pipe(io.RawIOBase):
        def __init__(self, data):
            self._data = io.BytesIO(data)

        def readable(self):
            return True

        def readinto(self, b):
            return self._data.readinto(b)

    assert em.load(Pipe(buf.getvalue()))["a"].sum().item() == 70000


def test_a_checkpoint_from_bytes_io_is_checked_like_a_file():
    buf = io.BytesIO()
    em.save({"a": em.ones(3)}, buf)
    data = bytearray(buf.getvalue())
    data[-1] ^= 0xFF
    with pytest.raises(CheckpointError, match="<BytesIO>: tensor 'a' is corrupt"):
        em.load(io.BytesIO(bytes(data)))
    with pytest.raises(CheckpointError, match="<BytesIO>: truncated"):
        em.load(io.BytesIO(bytes(data[:-4])))


def test_text_files_are_refused(tmp_path):
    with open(tmp_path / "t", "w") as f, pytest.raises(TypeError, match="save: .* is open in text mode; open it in "
                                                                      r"binary mode \('wb'\)"):
        em.save({"a": em.ones(1)}, f)
    with open(tmp_path / "t") as f, pytest.raises(TypeError, match=r"binary mode \('rb'\)"):
        em.load(f)


def test_whole_modules_and_optimizers_are_refused_with_a_pointer_to_state_dict(tmp_path):
    model = em.nn.Linear(2, 3)
    with pytest.raises(TypeError, match=r"save: obj is a whole Linear; Ember never pickles objects .*: save its "
                                        r"state, ember.save\(obj.state_dict\(\), f\), and load that into a new "
                                        r"Linear with \.load_state_dict\(\.\.\.\)"):
        em.save(model, tmp_path / "m")
    opt = em.optim.SGD(model.parameters(), lr=0.1)
    with pytest.raises(TypeError, match=r"obj\['opt'\] is a whole SGD; .* store obj\['opt'\].state_dict\(\) in"):
        em.save({"opt": opt}, io.BytesIO())
    assert not list(tmp_path.iterdir())
