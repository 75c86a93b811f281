"""Opening a file that is to be read whole: a regular file only, never a pipe, device or folder, and its size.

A named pipe would block the reader until someone writes to it, and a device such as /dev/zero (or a
symbolic link to one) would be read until memory runs out; both are refused by name before anything
is read, and the file's size, taken from the open file itself, bounds every read after that.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from typing import BinaryIO


def kind(mode: int) -> str:
    """What a file of this `st_mode` is, in words, for an error message."""
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISFIFO(mode):
        return "a named pipe (FIFO)"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "not a regular file"


def _a(noun: str) -> str:
    return f"{'an' if noun[:1].lower() in 'aeiou' else 'a'} {noun}"


def open_regular(name: str, what: str, error: Callable[[str], Exception], op: str) -> tuple[BinaryIO, int]:
    """The regular file `name` (symbolic links followed) open for binary reading, and its size in bytes.

    `what` names the file's kind in messages ("checkpoint file"), `op` the caller ("load"); `error(problem)`
    makes the exception for anything that is not a readable regular file, except a missing file
    (FileNotFoundError) and one this process may not read (PermissionError), which keep the built-in
    types users catch.
    """
    try:
        st = os.stat(name)
        if not stat.S_ISREG(st.st_mode):
            raise error(f"{name}: is {kind(st.st_mode)}, not {_a(what)}")
        # O_NONBLOCK: should the path become a FIFO after the check, opening it must not wait for a writer.
        fd = os.open(name, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0))
    except (FileNotFoundError, NotADirectoryError):
        raise FileNotFoundError(f"{op}: no such {what}: {name}") from None
    except PermissionError:
        raise PermissionError(f"{op}: permission denied: can't read the {what} {name}") from None
    except OSError as e:  # a loop of symbolic links, a name too long, an I/O error...
        raise error(f"{name}: can't be opened: {e.strerror or e}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise error(f"{name}: is {kind(st.st_mode)}, not {_a(what)}")
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
        return os.fdopen(fd, "rb"), st.st_size
    except BaseException:
        os.close(fd)
        raise
