"""Joining the machines of `ember run --nnodes K` into one world: a TCP rendezvous, then MPI ports.

Each machine's `ember run` starts its own mpiexec, whose ranks share an MPI_COMM_WORLD of that machine
only. In init_process_group, local rank 0 of node 0 listens on MASTER_ADDR:MASTER_PORT and opens an
MPI port; local rank 0 of every other node connects there, says which node it is, and gets the port
name when its turn comes. Node 0 admits the nodes in order: the world so far accepts on the port, node
i connects, and the two merge, node i's ranks after the others. So rank = node rank * ranks per node
+ local rank, as torchrun numbers them. An error (a node missing, another -n, another restart) is
raised on every rank of every node that can be told.
"""

from __future__ import annotations

import json
import socket
import time

from ember.distributed.errors import DistBackendError

_RETRY = 0.2  # seconds between attempts to reach node 0


def join(local, MPI, nnodes: int, node: int, addr: str, port: int, restart: int, wait: float):  # noqa: N803
    """The intracommunicator of every node's ranks, node by node; `local` is this node's MPI_COMM_WORLD."""
    me, size = local.Get_rank(), local.Get_size()
    deadline = time.monotonic() + wait
    where = f"{addr}:{port}"
    peers: dict = {}  # node 0, local rank 0: the other nodes' connections, by node
    outcome = None
    if me == 0:
        hello = {"node": node, "nnodes": nnodes, "nproc": size, "restart": restart}
        outcome = _admit(MPI, hello, port, deadline, where, peers) if node == 0 else _ask(hello, addr, port, deadline,
                                                                                          where)
    outcome = local.bcast(outcome, root=0)  # {"port": name} or {"error": text}
    try:
        if "error" in outcome:
            raise DistBackendError(f"init_process_group on node {node}, local rank {me}: {outcome['error']}")
        port_name = outcome["port"]
        comm = local
        if node > 0:
            comm = _merge(local.Connect(port_name if me == 0 else "", root=0), high=True)
        for later in range(node + 1, nnodes):  # the world so far admits each later node in turn
            root = node == 0 and me == 0
            if root:
                _send(peers[later], {"port": port_name})
            merged = _merge(comm.Accept(port_name if root else "", root=0), high=False)
            if comm is not local:
                comm.Free()
            comm = merged
        return comm
    except MPI.Exception as e:
        raise DistBackendError(f"init_process_group on node {node}, local rank {me}: joining the nodes through MPI "
                               f"failed ({e}); every machine needs the same MPI (MPICH's mpiexec)") from e
    finally:
        for conn in peers.values():
            conn.close()
        if node == 0 and me == 0 and "port" in outcome:
            MPI.Close_port(outcome["port"])


def _merge(inter, high: bool):
    merged = inter.Merge(high=high)
    inter.Disconnect()  # waits for the intercommunicator's own traffic, which Free could leave behind
    return merged


def _admit(MPI, hello: dict, port: int, deadline: float, where: str, peers: dict) -> dict:  # noqa: N803
    """Node 0: wait for every other node's hello (kept in `peers`); {"port": MPI port name} or {"error": why}."""
    nnodes = hello["nnodes"]
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        server.bind(("", port))
        server.listen(nnodes)
        error = None
        start = time.monotonic()
        while len(peers) < nnodes - 1 and error is None:
            if time.monotonic() > deadline:
                missing = ", ".join(str(i) for i in range(1, nnodes) if i not in peers)
                error = (f"node(s) {missing} of {nnodes} did not reach the rendezvous at {where} within "
                         f"{time.monotonic() - start:.0f} s")
                break
            server.settimeout(1.0)
            try:
                conn, _ = server.accept()
            except TimeoutError:
                continue
            conn.settimeout(max(1.0, deadline - time.monotonic()))
            try:
                theirs = _receive(conn)
            except OSError:  # not one of ours, or gone already
                conn.close()
                continue
            error = _mismatch(hello, theirs, peers)
            peers[theirs.get("node")] = conn
    except OSError as e:
        error = f"node 0 cannot listen on port {port} ({e.strerror or e}); choose another --master-port"
    finally:
        server.close()
    if error is not None:
        for conn in peers.values():
            _send(conn, {"error": error})
        return {"error": error}
    return {"port": MPI.Open_port()}


def _mismatch(mine: dict, theirs: dict, peers: dict) -> str | None:
    """Why another node's hello does not fit this job (None when it does)."""
    node, nnodes = theirs.get("node"), mine["nnodes"]
    if not isinstance(node, int) or not 0 < node < nnodes or node in peers:
        return f"a machine said it is node {node!r}, but the nodes are 1 to {nnodes - 1}, each once"
    if theirs.get("nnodes") != nnodes or theirs.get("nproc") != mine["nproc"]:
        return (f"node {node} runs {theirs.get('nproc')} ranks of {theirs.get('nnodes')} nodes, node 0 {mine['nproc']} "
                f"ranks of {nnodes} nodes; give every machine the same -n and --nnodes")
    if theirs.get("restart") != mine["restart"]:
        return (f"node {node} is at restart {theirs.get('restart')}, node 0 at restart {mine['restart']}; a machine "
                "restarted without the others")
    return None


def _ask(hello: dict, addr: str, port: int, deadline: float, where: str) -> dict:
    """Another node: say hello to node 0 and wait for the MPI port name (or an error)."""
    conn = None
    while conn is None:
        try:
            conn = socket.create_connection((addr, port), timeout=5)
        except OSError as e:
            if time.monotonic() > deadline:
                return {"error": f"node 0 could not be reached at {where} ({e.strerror or e}); is `ember run --nnodes "
                                 f"{hello['nnodes']} --node-rank 0 ...` running there, with the port open?"}
            time.sleep(_RETRY)
    try:
        _send(conn, hello)
        conn.settimeout(max(1.0, deadline - time.monotonic()))
        reply = _receive(conn)
    except OSError as e:
        return {"error": f"the rendezvous at {where} broke off ({e})"}
    finally:
        conn.close()
    return reply if ("port" in reply or "error" in reply) else {"error": f"node 0 at {where} answered {reply!r}"}


def _send(conn, message: dict) -> None:
    conn.sendall(json.dumps(message).encode() + b"\n")


def _receive(conn) -> dict:
    """One JSON line from `conn` ({} if it is not a JSON object)."""
    data = b""
    while not data.endswith(b"\n"):
        chunk = conn.recv(4096)
        if not chunk:
            raise ConnectionError("the connection was closed")
        data += chunk
    try:
        message = json.loads(data)
    except ValueError:
        return {}
    return message if isinstance(message, dict) else {}
