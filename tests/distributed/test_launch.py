"""`ember run`: the mpiexec command it builds for MPICH's Hydra and Open MPI, and its errors."""

import argparse
import os
import re
import sys

import pytest

from ember.distributed import launch
from tests.distributed.launch import ember, requires_mpi


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


@pytest.mark.parametrize("argv, message", [
    ((), "give a script"),
    (("-n", "2", "--servers", "2", "job.py"), "--servers must leave at least one worker"),
    (("-n", "0", "job.py"), "-n must be at least 1"),
    (("--hostfile", "/no/such/file", "job.py"), "hostfile '/no/such/file' does not exist"),
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
