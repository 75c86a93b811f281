"""Several "hosts" on this machine: Linux network namespaces joined by veth pairs to a bridge, one address each.

Each host is a namespace with its own network stack (its own loopback and one interface, 10.77.0.i/24);
a switch namespace holds the bridge. MPI sees them as different machines: Hydra starts the remote ranks
through a launcher command (`ip netns exec`, standing in for ssh), and their traffic crosses the veths
(MPICH's TCP network module, not shared memory). Needs root and iproute2; `unavailable()` says why not.
The namespaces, and every process left in them, are removed on exit, also after a failure.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time


def _ip(*args, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(["ip", *args], capture_output=True, text=True, check=check, timeout=30)


def unavailable() -> str | None:
    """Why network namespaces cannot be made here (None when they can)."""
    if not sys.platform.startswith("linux"):
        return "network namespaces are Linux's"
    if os.geteuid() != 0:
        return "making network namespaces needs root"
    if shutil.which("ip") is None:
        return "the ip command (iproute2) is not installed"
    probe = f"embprobe{os.getpid()}"
    made = _ip("netns", "add", probe, check=False)
    if made.returncode != 0:
        return f"ip netns add failed: {made.stderr.strip()}"
    _ip("netns", "del", probe, check=False)
    return None


class Hosts:
    """`with Hosts(2) as hosts:` hosts.addresses[i] is host i's address; hosts.run(i, argv) runs a command there."""

    def __init__(self, count: int, workdir: str) -> None:
        tag = f"emb{os.getpid() % 100000}"
        self.names = [f"{tag}h{i}" for i in range(count)]
        self.switch = f"{tag}sw"
        self.addresses = [f"10.77.0.{i + 1}" for i in range(count)]
        self.workdir = workdir
        self.launcher = os.path.join(workdir, "netns-launcher")

    def __enter__(self) -> Hosts:
        try:
            self._make()
        except BaseException:
            self.remove()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.remove()

    def _make(self) -> None:
        _ip("netns", "add", self.switch)
        _ip("-n", self.switch, "link", "add", "br0", "type", "bridge")
        _ip("-n", self.switch, "link", "set", "br0", "up")
        for i, (name, addr) in enumerate(zip(self.names, self.addresses)):
            _ip("netns", "add", name)
            _ip("link", "add", "eth0", "netns", name, "type", "veth", "peer", "name", f"port{i}", "netns", self.switch)
            _ip("-n", self.switch, "link", "set", f"port{i}", "master", "br0")
            _ip("-n", self.switch, "link", "set", f"port{i}", "up")
            _ip("-n", name, "addr", "add", f"{addr}/24", "dev", "eth0")
            _ip("-n", name, "link", "set", "eth0", "up")
            _ip("-n", name, "link", "set", "lo", "up")
        # Hydra's ssh launcher runs `LAUNCHER [-x] HOST COMMAND...`; this one runs the command in HOST's namespace
        # (a remote shell joins the words, as ssh does).
        cases = "\n".join(f"  {a}) ns={n};;" for a, n in zip(self.addresses, self.names))
        with open(self.launcher, "w") as f:
            f.write(f'#!/bin/sh\nwhile [ "${{1#-}}" != "$1" ]; do shift; done\nhost=$1; shift\ncase $host in\n{cases}\n'
                    '  *) echo "netns-launcher: unknown host $host" >&2; exit 1;;\nesac\n'
                    'exec ip netns exec "$ns" sh -c "$*"\n')
        os.chmod(self.launcher, 0o755)

    def hostfile(self, slots: list) -> str:
        """A hostfile with `slots[i]` ranks on host i; its path."""
        path = os.path.join(self.workdir, "hosts")
        with open(path, "w") as f:
            f.writelines(f"{a} slots={n}\n" for a, n in zip(self.addresses, slots) if n)
        return path

    def env(self, base: dict) -> dict:
        """`base` plus what makes Hydra start remote ranks through the namespace launcher, and UCX reach other
        hosts over TCP only (namespaces share the kernel, so UCX would take them for one machine and try shared
        memory, on which MPI_Comm_connect between two jobs hangs)."""
        return {**base, "HYDRA_LAUNCHER": "ssh", "HYDRA_LAUNCHER_EXEC": self.launcher, "UCX_TLS": "tcp,self"}

    def command(self, host: int, argv: list) -> list:
        """`argv` run in host `host`'s namespace."""
        return ["ip", "netns", "exec", self.names[host], *map(str, argv)]

    def pids(self, host: int) -> list:
        """The processes running in host `host`."""
        out = _ip("netns", "pids", self.names[host], check=False).stdout.split()
        return [int(p) for p in out if p.isdigit()]

    def kill(self, host: int) -> None:
        """Every process of host `host` killed at once (SIGKILL), as if the machine went down."""
        for pid in self.pids(host):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def remove(self) -> None:
        """Kill what runs in the namespaces and delete them (their interfaces and the bridge go with them)."""
        for i in range(len(self.names)):
            self.kill(i)
        deadline = time.monotonic() + 10
        while any(self.pids(i) for i in range(len(self.names))) and time.monotonic() < deadline:
            time.sleep(0.05)
        for name in [*self.names, self.switch]:
            _ip("netns", "del", name, check=False)
