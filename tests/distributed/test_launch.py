"""`ember run`: the mpiexec command it builds for MPICH's Hydra and Open MPI, and its errors."""

import argparse
import os
import re
import subprocess
import sys

import pytest

from ember.distributed import hostfile, launch
from tests.distributed.launch import PROGRAMS, ROOT, ember, env, free_port, nodes_command, requires_mpi


def _args(*argv):
    p = argparse.ArgumentParser()
    launch.add_arguments(p)
    return p.parse_args(list(argv))


def test_hydra_command_runs_each_rank_under_the_supervisor(tmp_path):
    argv, env = launch.build_command(_args("-n", "3", "--servers", "1", "train.py", "--lr", "0.1"), "/x/mpiexec",
                                     "hydra")
    sup = os.path.join(os.path.dirname(launch.__file__), "_supervise.py")
    assert argv == ["/x/mpiexec", "-n", "3", sys.executable, "-I", sup, sys.executable, "train.py", "--lr", "0.1"]
    assert env["EMBER_NUM_SERVERS"] == "1"
    root = os.path.dirname(os.path.dirname(os.path.dirname(launch.__file__)))
    assert env["PYTHONPATH"].split(os.pathsep)[0] == root


def test_hostfiles_in_either_spelling_are_read_and_written_in_the_launchers_own(tmp_path):
    hf = tmp_path / "hosts"
    hf.write_text("# cluster\nnode1 slots=4 max_slots=8\n\nnode2:2   # the second\nnode3\n")
    hosts = hostfile.parse(str(hf))
    assert hosts == [("node1", 4), ("node2", 2), ("node3", 1)]
    assert hostfile.render(hosts, "hydra") == "node1:4\nnode2:2\nnode3:1\n"
    assert hostfile.render(hosts, "openmpi") == "node1 slots=4\nnode2 slots=2\nnode3 slots=1\n"
    with hostfile.translated(str(hf), "hydra") as copy:
        assert open(copy).read() == "node1:4\nnode2:2\nnode3:1\n"
    assert not os.path.exists(copy)
    for bad, message in (("node1 slots=x\n", "line 1: 'node1 slots=x'"), ("node1:two\n", "expected host:SLOTS"),
                         ("# nothing\n", "names no host"), ("node1 cpus=2\n", "'host slots=SLOTS'")):
        hf.write_text(bad)
        with pytest.raises(ValueError, match=message):
            hostfile.parse(str(hf))


@requires_mpi
def test_ember_run_takes_a_hostfile_with_open_mpis_spelling(tmp_path):
    """The bundled MPICH's mpiexec rejects `host slots=N` ("error parsing input array"); ember run translates it
    (the other spelling, `host:N`, is Hydra's own: test_multihost runs it across hosts)."""
    hf = tmp_path / "hosts"
    hf.write_text("localhost slots=2\n")
    proc = ember("run", "--hostfile", str(hf), "-m", "tests.distributed.programs.hello", timeout=120)
    assert proc.returncode == 0, proc.stdout
    assert sorted(re.findall(r"hello \d of 2", proc.stdout)) == ["hello 0 of 2", "hello 1 of 2"]


def test_hostfile_sets_the_rank_count_and_is_passed_in_each_flavour(tmp_path):
    hf = tmp_path / "hosts"
    hf.write_text("# two machines\nnode1 slots=4\nnode2:2\n")
    argv, _ = launch.build_command(_args("--hostfile", str(hf), "-m", "pkg.job"), "mpiexec", "hydra")
    assert argv[:5] == ["mpiexec", "-n", "6", "-f", str(hf)] and argv[-3:] == [sys.executable, "-m", "pkg.job"]
    argv, env = launch.build_command(_args("--hostfile", str(hf), "--timeout", "5", "job.py"), "mpirun", "openmpi")
    i = argv.index("--hostfile")
    assert argv[i + 1] == str(hf) and "--oversubscribe" not in argv
    assert ["-x", "EMBER_DISTRIBUTED_TIMEOUT"] == argv[argv.index("EMBER_DISTRIBUTED_TIMEOUT") - 1:][:2]
    assert env["EMBER_DISTRIBUTED_TIMEOUT"] == "5.0"


def test_open_mpi_on_one_machine_oversubscribes_and_runs_as_root_when_root():
    argv, env = launch.build_command(_args("-n", "2", "job.py"), "mpirun", "openmpi")
    assert "--oversubscribe" in argv
    if os.geteuid() == 0:
        assert "--allow-run-as-root" in argv and env["OMPI_ALLOW_RUN_AS_ROOT_CONFIRM"] == "1"


def test_nnodes_passes_torchruns_rendezvous_to_the_ranks():
    argv, env = launch.build_command(_args("--nnodes", "3", "--node-rank", "2", "--master-addr", "10.0.0.1",
                                           "--master-port", "23456", "--nproc-per-node", "4", "job.py"), "mpiexec",
                                     "hydra")
    assert argv[:3] == ["mpiexec", "-n", "4"]
    assert (env["EMBER_NNODES"], env["EMBER_NODE_RANK"], env["MASTER_ADDR"], env["MASTER_PORT"]) == \
        ("3", "2", "10.0.0.1", "23456")
    _, env = launch.build_command(_args("-n", "2", "job.py"), "mpiexec", "hydra")
    assert "EMBER_NNODES" not in env


@pytest.mark.parametrize("argv, message", [
    ((), "give a script"),
    (("-n", "2", "--servers", "2", "job.py"), "--servers must leave at least one worker"),
    (("-n", "0", "job.py"), "-n must be at least 1"),
    (("--hostfile", "/no/such/file", "job.py"), "hostfile '/no/such/file' does not exist"),
    (("--nnodes", "2", "--node-rank", "2", "job.py"), "--node-rank must be 0 to --nnodes - 1"),
    (("--nnodes", "2", "--master-port", "70000", "job.py"), "--master-port must be a TCP port"),
    (("--max-restarts", "-1", "job.py"), "--max-restarts must be 0 or more"),
])
def test_bad_invocations_are_clear_errors(argv, message):
    with pytest.raises((ValueError, FileNotFoundError), match=message):
        launch.build_command(_args(*argv), "mpiexec", "hydra")


def test_a_missing_mpiexec_says_how_to_install_one(monkeypatch):
    with pytest.raises(FileNotFoundError, match="mpiexec 'no-such-mpiexec' was not found"):
        launch.find_mpiexec("no-such-mpiexec")
    monkeypatch.setattr(launch.sys, "executable", "/nonexistent/bin/python")
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.delenv("EMBER_MPIEXEC", raising=False)
    with pytest.raises(FileNotFoundError, match="pip install 'ember\\[distributed\\]'"):
        launch.find_mpiexec()


@requires_mpi
def test_ember_run_runs_a_module_on_every_rank_and_passes_the_exit_status():
    proc = ember("run", "-n", "2", "-m", "tests.distributed.programs.hello", "x", timeout=120)
    assert proc.returncode == 0, proc.stdout
    assert sorted(re.findall(r"hello \d of 2 \['x'\]", proc.stdout)) == ["hello 0 of 2 ['x']", "hello 1 of 2 ['x']"]
    failed = ember("run", "-n", "2", "-m", "tests.distributed.programs.hello", "fail", timeout=120)
    assert failed.returncode != 0 and "ember run: the job failed" in failed.stdout


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="job control signals as on Linux")
def test_the_supervisor_stops_a_frozen_rank_when_told_to_stop():
    """SIGTERM to a rank's supervisor reaches a stopped (SIGSTOP) child too: it is continued so that it acts
    on the signal, and the supervisor names the signal and exits, instead of waiting on the child."""
    import signal
    import subprocess
    import time

    sup = os.path.join(os.path.dirname(launch.__file__), "_supervise.py")
    freeze = "import os, signal, time; os.kill(os.getpid(), signal.SIGSTOP); time.sleep(60)"
    proc = subprocess.Popen([sys.executable, "-I", sup, sys.executable, "-c", freeze], stderr=subprocess.PIPE,
                            text=True, env={**os.environ, "PMI_RANK": "1"})
    try:
        deadline = time.monotonic() + 30
        while not _has_stopped_child(proc.pid):
            assert time.monotonic() < deadline and proc.poll() is None, "the child never stopped"
            time.sleep(0.05)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 128 + signal.SIGTERM
    assert "rank 1" in err and "killed by signal 15 (SIGTERM)" in err


def _has_stopped_child(pid: int) -> bool:
    try:
        children = open(f"/proc/{pid}/task/{pid}/children").read().split()
        return any(open(f"/proc/{c}/stat").read().rsplit(")", 1)[1].split()[0] == "T" for c in children)
    except OSError:
        return False


def test_a_torchrun_style_launch_is_refused_instead_of_training_separate_models():
    """Processes started as torchrun starts them (RANK, WORLD_SIZE, MASTER_ADDR, no MPI launcher) each used to
    become a world of one and exit 0; MPICH cannot join such processes, so each says how to start them."""
    procs = [subprocess.Popen([sys.executable, os.path.join(PROGRAMS, "hello.py")], cwd=ROOT, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True,
                              env=env(RANK=r, WORLD_SIZE=2, LOCAL_RANK=r, MASTER_ADDR="127.0.0.1", MASTER_PORT=29500))
             for r in range(2)]
    for r, proc in enumerate(procs):
        out, _ = proc.communicate(timeout=120)
        assert proc.returncode != 0 and "hello 0 of 1" not in out, out
        assert (f"RuntimeError: init_process_group: RANK={r} WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 say this process is "
                "one of 2 started by torchrun or by hand") in out, out
        assert "ember run --nproc-per-node 2 script.py" in out


@requires_mpi
def test_ember_run_nnodes_joins_two_launches_into_one_world():
    """Two `ember run --nnodes 2` (as on two machines; here both on this one) meet at the master address and
    form one world of 4 ranks, numbered as torchrun numbers them: node rank * ranks per node + local rank."""
    port = free_port()
    procs = [subprocess.Popen(nodes_command(2, node, port, "nodes.py", nproc=2), cwd=ROOT, env=env(),
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) for node in (1, 0)]
    outs = []
    try:
        for proc in procs:
            outs.append(proc.communicate(timeout=180)[0])
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
    for proc, out in zip(procs, outs):
        assert proc.returncode == 0, out
    text = "".join(outs)
    for r in range(4):
        assert f"rank {r} of 4: sum 6, nodes [0, 0, 1, 1], local rank {r % 2}" in text, text


def test_the_rendezvous_refuses_machines_that_do_not_fit_the_job():
    from ember.distributed.rendezvous import _mismatch

    mine = {"node": 0, "nnodes": 2, "nproc": 1, "restart": 0}
    assert _mismatch(mine, {"node": 1, "nnodes": 2, "nproc": 1, "restart": 0}, {}) is None
    assert "node 1 runs 2 ranks of 2 nodes, node 0 1 ranks of 2 nodes; give every machine the same -n" in \
        _mismatch(mine, {"node": 1, "nnodes": 2, "nproc": 2, "restart": 0}, {})
    assert "node 1 is at restart 1, node 0 at restart 0" in _mismatch(mine, {"node": 1, "nnodes": 2, "nproc": 1,
                                                                            "restart": 1}, {})
    assert "the nodes are 1 to 1, each once" in _mismatch(mine, {"node": 1, "nnodes": 2, "nproc": 1, "restart": 0},
                                                          {1: None})
