"""The kernel cache only trusts folders this user alone can write, and never imports bytecode it did not write."""

import importlib.util
import json
import marshal
import os
import pickle
import shutil
import stat
import subprocess
import sys
import tempfile
import textwrap
import uuid
import warnings

import pytest

from ember.graph.codegen import NumbaRenderer
from ember.kernels import cache

needs_numba = pytest.mark.skipif(not NumbaRenderer().available(), reason="numba is not installed")
needs_root = pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0,
                                reason="giving a folder to another uid needs root")
OTHER_UID = 54321

_SCRIPT = textwrap.dedent("""
    import json, warnings, numpy as np, ember as em
    from ember.graph import Graph, codegen
    from ember.graph.executor import Plan
    from ember.graph.passes import optimize
    warnings.simplefilter("always")
    g = Graph()
    x = em.Tensor._make(g.placeholder((8,), np.float32, em.device("cpu"), "x"), em.device("cpu"))
    y = ((x * 3 - 1).abs() + 0.125).sqrt()
    opt = optimize(g, [y._data], ["fusion"])
    out = Plan(opt.graph, opt.outputs).run({opt.map(x._data): np.arange(8, dtype=np.float32)})[0]
    print(json.dumps({"stats": dict(codegen.stats), "value": out.tolist()}))
""")


def _child(env):
    done = subprocess.run([sys.executable, "-c", _SCRIPT], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1]), done.stderr


def _env(cache_root, tmpdir):
    return dict(os.environ, EMBER_CACHE=str(cache_root), TMPDIR=str(tmpdir), EMBER_FUSION_BACKEND="numba")


def _evil_pyc(source_path, marker):
    """Bytecode that would pass the import system's check against `source_path` and create `marker`."""
    code = compile(f"open({str(marker)!r}, 'w').write('pwned')", str(source_path), "exec")
    st = os.stat(source_path)
    header = importlib.util.MAGIC_NUMBER + (0).to_bytes(4, "little")
    header += (int(st.st_mtime) & 0xFFFFFFFF).to_bytes(4, "little") + (st.st_size & 0xFFFFFFFF).to_bytes(4, "little")
    return header + marshal.dumps(code)


class _Payload:
    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return exec, (f"open({self.marker!r}, 'w').write('pwned')",)


def _evil_index(marker):
    """A Numba cache index whose unpickling creates `marker`."""
    import numba
    return pickle.dumps(numba.__version__) + pickle.dumps(_Payload(marker))


def _plant(good_kernels, folder, marker, bytecode=True):
    """Copy the sources of a real cache into `folder`, with planted Numba indexes (and bytecode) beside them."""
    (folder / "__pycache__").mkdir(parents=True)
    for src in good_kernels.glob("ember_k_*.py"):
        shutil.copy2(src, folder / src.name)
        if not bytecode:
            continue
        pyc = importlib.util.cache_from_source(str(folder / src.name))
        with open(pyc, "wb") as f:
            f.write(_evil_pyc(folder / src.name, marker))
    indexes = list((good_kernels / "__pycache__").glob("*.nbi"))
    assert indexes
    for nbi in indexes:
        (folder / "__pycache__" / nbi.name).write_bytes(_evil_index(marker))


@needs_root
@needs_numba
def test_a_fallback_folder_planted_by_another_user_is_refused(tmp_path):
    good, marker = tmp_path / "good", tmp_path / "pwned"
    _child(_env(good, tmp_path))  # a real cache, to learn the file names Numba uses
    tmpdir = tmp_path / "tmp"
    planted = tmpdir / f"ember-kernels-{os.getuid()}"
    _plant(good / "kernels", planted, marker)
    for p in [planted, *planted.rglob("*")]:
        os.chown(p, OTHER_UID, OTHER_UID)
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("")  # $EMBER_CACHE/kernels cannot be made: the fallback in $TMPDIR is tried
    result, err = _child(_env(blocker, tmpdir))
    assert not marker.exists()
    assert str(planted) in err and f"owned by uid {OTHER_UID}" in err
    assert result["stats"].get("numba_compiled") == 1 and not result["stats"].get("numba_cache_hits")
    assert result["stats"].get("sources_written", 0) == 0
    assert result["value"] == _child(_env(good, tmp_path))[0]["value"]


@needs_root
@needs_numba
def test_a_primary_folder_owned_by_another_user_is_refused(tmp_path):
    good, marker = tmp_path / "good", tmp_path / "pwned"
    _child(_env(good, tmp_path))
    theirs = tmp_path / "theirs"
    _plant(good / "kernels", theirs / "kernels", marker, bytecode=False)
    for p in [theirs, *theirs.rglob("*")]:
        os.chown(p, OTHER_UID, OTHER_UID)
    result, err = _child(_env(theirs, tmp_path))
    assert not marker.exists()
    assert f"owned by uid {OTHER_UID}" in err
    assert result["stats"].get("numba_compiled") == 1 and not result["stats"].get("numba_cache_hits")


@needs_numba
def test_a_folder_writable_by_others_is_refused(tmp_path):
    good, marker = tmp_path / "good", tmp_path / "pwned"
    _child(_env(good, tmp_path))
    open_root = tmp_path / "open"
    _plant(good / "kernels", open_root / "kernels", marker, bytecode=False)
    os.chmod(open_root / "kernels", 0o777)
    result, err = _child(_env(open_root, tmp_path))
    assert not marker.exists()
    assert "writable by other users" in err
    assert not result["stats"].get("numba_cache_hits")


@needs_numba
def test_numba_cache_is_not_used_outside_the_checked_folder(tmp_path):
    numba_dir = tmp_path / "numba-cache"
    env = dict(_env(tmp_path / "mine", tmp_path), NUMBA_CACHE_DIR=str(numba_dir))
    first, _ = _child(env)
    second, _ = _child(env)
    assert not numba_dir.exists() or not list(numba_dir.rglob("*.nbi"))
    assert second["stats"].get("numba_compiled") == 1 and not second["stats"].get("numba_cache_hits")
    assert first["value"] == second["value"]


def _unique_source():
    return f"# {uuid.uuid4().hex}\nVALUE = 42\n"


def test_bytecode_beside_a_cached_source_is_never_imported(tmp_path, monkeypatch):
    monkeypatch.setenv("EMBER_CACHE", str(tmp_path / "c"))
    text, marker = _unique_source(), tmp_path / "pwned"
    path = cache.write_source(text)
    pyc = importlib.util.cache_from_source(str(path))
    os.makedirs(os.path.dirname(pyc), exist_ok=True)
    with open(pyc, "wb") as f:
        f.write(_evil_pyc(path, marker))
    module = cache.load_source(text)
    assert module.VALUE == 42 and not marker.exists()
    assert [p.name for p in path.parent.rglob("*.pyc")] == [os.path.basename(pyc)]  # and none is written


def test_cache_folders_are_created_private(tmp_path, monkeypatch):
    monkeypatch.setenv("EMBER_CACHE", str(tmp_path / "a" / "b"))
    old = os.umask(0)
    try:
        path = cache.write_source(_unique_source())
    finally:
        os.umask(old)
    for folder in (tmp_path / "a", tmp_path / "a" / "b", path.parent, path.parent / "__pycache__"):
        assert stat.S_IMODE(os.stat(folder).st_mode) == 0o700, folder


def test_an_unsafe_folder_means_no_disk_cache_with_a_warning(tmp_path, monkeypatch):
    kernels = tmp_path / "kernels"
    kernels.mkdir(mode=0o700)
    os.chmod(kernels, 0o757)
    monkeypatch.setenv("EMBER_CACHE", str(tmp_path))
    text = _unique_source()
    with pytest.warns(RuntimeWarning, match=r"kernels.*writable by other users.*without a disk cache"):
        module = cache.load_source(text)
    assert module.VALUE == 42
    assert not list(kernels.iterdir())


def test_an_unusable_primary_folder_falls_back_to_a_private_temp_folder(tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv("EMBER_CACHE", str(blocker))
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        path = cache.write_source(_unique_source())
    assert path.parent == tmp_path / f"ember-kernels-{os.getuid()}"
    assert stat.S_IMODE(os.stat(path.parent).st_mode) == 0o700
