"""The on-disk kernel cache: generated sources written once under a content hash, compiled from their text.

Sources live in `$EMBER_CACHE/kernels` (config.CACHE; default `~/.cache/ember/kernels`), or in
`$TMPDIR/ember-kernels-<uid>` when that cannot be created or written. Numba's own cache
(`__pycache__` beside the sources) is unpickled when read, so whoever can write into the folder can
run code as this user: a folder is used only when it (and its `__pycache__`) belongs to this user and
no one else can write it or replace it, and new folders are made with mode 0700. Otherwise Ember
warns and keeps kernels in memory. A module is compiled from the text Ember generated, never
imported, so no `.pyc` is read or written. `stats` counts what happened.
"""

from __future__ import annotations

import hashlib
import linecache
import os
import stat
import sys
import tempfile
import threading
import types
import warnings
from collections import Counter
from pathlib import Path

from ember import config

stats: Counter = Counter()  # sources_written, sources_reused, numba_compiled, numba_cache_hits
_lock = threading.Lock()


def cache_dir() -> Path:
    """Where generated kernel sources (and Numba's cache files beside them) are kept."""
    return Path(config.CACHE.get()) / "kernels"


def fallback_dir() -> Path:
    """The per-user folder used when `cache_dir()` cannot be created or written."""
    uid = os.getuid() if hasattr(os, "getuid") else 0
    return Path(tempfile.gettempdir()) / f"ember-kernels-{uid}"


def source_hash(text: str) -> str:
    """The content key of a generated source."""
    return hashlib.sha256(text.encode()).hexdigest()[:24]


def _make_private(path: Path) -> None:
    """Create `path` and any missing parents with mode 0700 (os.makedirs gives parents the umask's mode)."""
    missing = []
    p = path.absolute()
    while not os.path.lexists(p):
        missing.append(p)
        p = p.parent
    for p in reversed(missing):
        try:
            os.mkdir(p, 0o700)
        except FileExistsError:  # made by a concurrent process: checked like any other folder
            pass


def _folder_problem(path: Path) -> str | None:
    """Why another user could write into the folder `path`, or None when only this user (or root) can."""
    if not hasattr(os, "getuid"):
        return None  # no POSIX owners: per-user folders are the platform's business
    uid = os.getuid()
    try:
        st = os.lstat(path)
    except OSError as e:
        return f"cannot be inspected ({e.strerror})"
    if stat.S_ISLNK(st.st_mode):
        return "is a symbolic link"
    if not stat.S_ISDIR(st.st_mode):
        return "is not a folder"
    if st.st_uid != uid:
        return f"is owned by uid {st.st_uid}, not by this user (uid {uid})"
    if st.st_mode & 0o022:
        return f"is writable by other users (mode {stat.S_IMODE(st.st_mode):o})"
    # Whoever can rename an entry of a parent folder can swap this folder for their own.
    for parent in path.absolute().parents:
        try:
            link, st = os.lstat(parent), os.stat(parent)
        except OSError as e:
            return f"is inside {parent}, which cannot be inspected ({e.strerror})"
        owners = (uid, 0)
        if link.st_uid not in owners or st.st_uid not in owners:
            return f"is inside {parent}, owned by uid {st.st_uid if st.st_uid not in owners else link.st_uid}"
        if st.st_mode & 0o022 and not st.st_mode & stat.S_ISVTX:
            return f"is inside {parent}, which other users can write (mode {stat.S_IMODE(st.st_mode):o})"
    return None


def _check(path: Path) -> str | None:
    """Make `path` and its `__pycache__` (0700 when new) and say why they are unsafe, or None when safe."""
    problem = _folder_problem(path)
    if problem is not None:
        return f"{path} {problem}"
    pycache = path / "__pycache__"
    try:
        _make_private(pycache)
    except OSError as e:
        return f"{pycache} cannot be created ({e.strerror})"
    problem = _folder_problem(pycache)
    return None if problem is None else f"{pycache} {problem}"


def cache_folder() -> Path | None:
    """The checked folder for kernel sources and Numba's cache, or None (with a warning) to keep them in memory."""
    for path in (cache_dir(), fallback_dir()):
        try:
            _make_private(path)
        except OSError:
            continue
        if not os.path.isdir(path) or not os.access(path, os.W_OK | os.X_OK):
            continue
        problem = _check(path)
        if problem is not None:
            warnings.warn(f"kernel cache: {problem}; compiling kernels without a disk cache", RuntimeWarning,
                          stacklevel=2)
            return None
        return path
    warnings.warn(f"kernel cache: neither {cache_dir()} nor {fallback_dir()} can be created and written; "
                  "compiling kernels without a disk cache", RuntimeWarning, stacklevel=2)
    return None


def write_source(text: str) -> Path | None:
    """The path of a file holding `text` in the cache folder (written now unless identical), or None without one."""
    folder = cache_folder()
    if folder is None:
        return None
    path = folder / f"ember_k_{source_hash(text)}.py"
    try:
        if path.read_text() == text:
            stats["sources_reused"] += 1
            return path
    except OSError:
        pass
    fd, tmp = tempfile.mkstemp(dir=folder, suffix=".tmp")
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.replace(tmp, path)  # atomic: a concurrent reader sees the old file or the whole new one
    stats["sources_written"] += 1
    return path


def load_source(text: str) -> types.ModuleType:
    """A module made from generated source, once per process; `__file__` is set only when it is on disk."""
    h = source_hash(text)
    name = f"ember_kernels_{h}"
    with _lock:
        module = sys.modules.get(name)
        if module is not None:
            return module
        path = write_source(text)
        filename = str(path) if path is not None else f"<ember kernel {h}>"
        # Compiled from our own text, so no bytecode file is ever read; the file name lets Numba find
        # its cache beside the source, and tracebacks show the generated lines.
        code = compile(text, filename, "exec")
        module = types.ModuleType(name)
        if path is not None:
            module.__file__ = filename
        else:
            linecache.cache[filename] = (len(text), None, text.splitlines(True), filename)
        sys.modules[name] = module
        try:
            exec(code, module.__dict__)
        except BaseException:
            del sys.modules[name]
            raise
        return module
