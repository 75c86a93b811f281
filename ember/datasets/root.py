"""Where data sets live on disk, and the error that says which files are missing."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path


def default_root(name: str) -> Path:
    """`$EMBER_DATA/<name>` when EMBER_DATA is set, else `~/.ember/data/<name>`."""
    base = os.environ.get("EMBER_DATA")
    if base:
        return Path(base).expanduser() / name
    return Path("~/.ember/data").expanduser() / name


def resolve_root(root: str | os.PathLike | None, name: str) -> Path:
    """The folder to read a data set from: `root` itself when given, else the default for `name`."""
    return default_root(name) if root is None else Path(root).expanduser()


def find(folders: Sequence[Path], filename: str, gz: bool) -> Path | None:
    """The first `filename` (or, when gz, `filename.gz`) found in `folders`."""
    for folder in folders:
        for candidate in (filename, filename + ".gz") if gz else (filename,):
            path = folder / candidate
            if path.is_file():
                return path
    return None


def missing_files_error(dataset: str, folder: Path, missing: Sequence[str], hint: str,
                        name: str) -> FileNotFoundError:
    """A FileNotFoundError naming the missing files and where to put them."""
    listed = ", ".join(missing)
    return FileNotFoundError(
        f"{dataset}: missing {listed} in {folder}. Ember never downloads data: {hint} and put the files in "
        f"that folder, pass root=..., or set EMBER_DATA so that $EMBER_DATA/{name} holds them."
    )
