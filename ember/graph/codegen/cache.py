"""The on-disk kernel cache: generated sources written once under a content hash, then imported.

Sources live in `$EMBER_CACHE/kernels` (default `~/.cache/ember/kernels`). A file is never
rewritten once it exists with the same text, so Numba's own cache (`cache=True`, stored in the
`__pycache__` beside the source and keyed by the file's timestamp) stays valid, and a second
process imports the compiled machine code instead of compiling again. `stats` counts what happened.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import sys
import tempfile
import threading
import types
from collections import Counter
from pathlib import Path

stats: Counter = Counter()  # sources_written, sources_reused, numba_compiled, numba_cache_hits
_lock = threading.Lock()


def cache_dir() -> Path:
    """Where generated kernel sources (and Numba's cache files beside them) are kept."""
    root = os.environ.get("EMBER_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "ember")
    return Path(root) / "kernels"


def source_hash(text: str) -> str:
    """The content key of a generated source."""
    return hashlib.sha256(text.encode()).hexdigest()[:24]


def _writable_dir() -> Path:
    path = cache_dir()
    try:
        path.mkdir(parents=True, exist_ok=True)
        if os.access(path, os.W_OK):
            return path
    except OSError:
        pass
    fallback = Path(tempfile.gettempdir()) / f"ember-kernels-{os.getuid() if hasattr(os, 'getuid') else 0}"
    fallback.mkdir(parents=True, exist_ok=True)
    return fallback


def write_source(text: str) -> Path:
    """The path of a file holding `text`, written now only if no identical file exists."""
    h = source_hash(text)
    path = _writable_dir() / f"ember_k_{h}.py"
    try:
        if path.read_text() == text:
            stats["sources_reused"] += 1
            return path
    except OSError:
        pass
    fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.replace(tmp, path)  # atomic: a concurrent reader sees the old file or the whole new one
    stats["sources_written"] += 1
    return path


def load_source(text: str) -> types.ModuleType:
    """Import generated source as a module (from the cache directory), once per process."""
    name = f"ember_kernels_{source_hash(text)}"
    with _lock:
        module = sys.modules.get(name)
        if module is not None:
            return module
        path = write_source(text)
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        try:
            spec.loader.exec_module(module)
        except BaseException:
            del sys.modules[name]
            raise
        return module
