"""Where data sets live on disk, and the error that says which files are missing."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from ember import config


def default_root(name: str) -> Path:
    """`$EMBER_DATA/<name>` when EMBER_DATA is set, else `~/.ember/data/<name>` (config.DATA)."""
    return Path(config.DATA.get()) / name


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


class MissingDataError(FileNotFoundError):
    """A data set's files are not in the folder it read; `explain(how)` words the advice for another caller."""

    def __init__(self, dataset: str, folder: Path, missing: Sequence[str], hint: str, name: str) -> None:
        self.dataset, self.folder, self.missing, self.hint, self.name = dataset, folder, list(missing), hint, name
        super().__init__(self.explain(f"pass root=..., or set EMBER_DATA so that $EMBER_DATA/{name} holds them"))

    def explain(self, how: str) -> str:
        """The message, ending with `how` to point the reader at the files (root=... for the Python API)."""
        return (f"{self.dataset}: missing {', '.join(self.missing)} in {self.folder}. Ember never downloads data: "
                f"{self.hint} and put the files in that folder, {how}.")


def missing_files_error(dataset: str, folder: Path, missing: Sequence[str], hint: str,
                        name: str) -> MissingDataError:
    """A FileNotFoundError naming the missing files and where to put them."""
    return MissingDataError(dataset, folder, missing, hint, name)
