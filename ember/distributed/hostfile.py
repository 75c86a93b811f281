"""MPI hostfiles: read both spellings of a host's slots and write the one the launcher's mpiexec takes.

MPICH's Hydra reads `host:4`, Open MPI reads `host slots=4`; each rejects the other's. `ember run
--hostfile` accepts either (and comments, blank lines, Open MPI's `max_slots=`) and hands mpiexec a
copy in its own spelling.
"""

from __future__ import annotations

import contextlib
import os
import tempfile


def parse(path: str) -> list:
    """[(host, slots)] of a hostfile, in order; a ValueError naming the file and line for anything else."""
    hosts = []
    with open(path) as f:
        for number, raw in enumerate(f, 1):
            line = raw.split("#", 1)[0].strip()
            if not line:
                continue
            hosts.append(_entry(line, path, number))
    if not hosts:
        raise ValueError(f"ember run: hostfile {path!r} names no host")
    return hosts


def _entry(line: str, path: str, number: int) -> tuple:
    words = line.split()
    host, slots = words[0], 1
    if ":" in host:
        host, _, count = host.rpartition(":")
        if not count.isdigit():
            raise ValueError(f"ember run: hostfile {path!r} line {number}: {line!r}: expected host:SLOTS")
        slots = int(count)
    for word in words[1:]:
        key, _, value = word.partition("=")
        if key in ("slots", "max_slots", "max-slots") and value.isdigit():
            if key == "slots":
                slots = int(value)
            continue
        raise ValueError(f"ember run: hostfile {path!r} line {number}: {line!r}: expected 'host', 'host:SLOTS' "
                         "or 'host slots=SLOTS'")
    if not host or slots < 1:
        raise ValueError(f"ember run: hostfile {path!r} line {number}: {line!r}: a host needs at least one slot")
    return host, slots


def render(hosts: list, kind: str) -> str:
    """The hostfile text for an mpiexec flavour ('openmpi': `host slots=N`; Hydra and others: `host:N`)."""
    if kind == "openmpi":
        return "".join(f"{h} slots={n}\n" for h, n in hosts)
    return "".join(f"{h}:{n}\n" for h, n in hosts)


@contextlib.contextmanager
def translated(path: str | None, kind: str):
    """A hostfile in `kind`'s spelling (a temporary copy, removed afterwards), or None without one."""
    if path is None:
        yield None
        return
    fd, copy = tempfile.mkstemp(prefix="ember-hosts-", text=True)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(render(parse(path), kind))
        yield copy
    finally:
        os.unlink(copy)
