"""DataLoader workers die with their main process: killed, terminated, with a worker stuck in `__getitem__`."""

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads processes from /proc")

# Each later worker is forked while the earlier ones run, so it inherits whatever the main process holds
# for them; the last worker hangs in __getitem__, so it never gets back to any loop that could check.
PARENT = textwrap.dedent("""
    import multiprocessing, sys, threading, time
    from ember.data import DataLoader, Dataset

    class Stuck(Dataset):
        def __len__(self):
            return 60

        def __getitem__(self, i):
            if i % 3 == 2:
                if sys.argv[3] == "sleeping":
                    time.sleep(600)
                sum(range(10**15))  # one C call that keeps the GIL: no other thread of the worker runs
            return i

    def start():
        global it
        loader = DataLoader(Stuck(), batch_size=1, num_workers=3, multiprocessing_context=sys.argv[2])
        it = iter(loader)

    if __name__ == "__main__":
        if sys.argv[1] == "thread":  # workers started from a thread that has ended by the time the parent dies
            t = threading.Thread(target=start)
            t.start()
            t.join()
        else:
            start()
        for _ in range(2):
            next(it)  # batches 0 and 1; batch 2 never comes
        print("ready", flush=True)
        time.sleep(600)
""")


def _session(sid: int) -> list[int]:
    """Live (not zombie) processes of session `sid`."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[0] != "Z" and int(fields[3]) == sid:
            found.append(int(entry))
    return found


@pytest.mark.parametrize("sig, started_in, context, stuck", [
    (signal.SIGKILL, "main", "fork", "sleeping"),
    (signal.SIGTERM, "main", "fork", "sleeping"),
    (signal.SIGKILL, "thread", "fork", "sleeping"),
    (signal.SIGKILL, "main", "spawn", "sleeping"),
    pytest.param(signal.SIGKILL, "main", "forkserver", "sleeping", marks=pytest.mark.slow),  # spawn's path, mostly
    (signal.SIGKILL, "main", "fork", "holding the GIL"),
])
def test_workers_do_not_outlive_a_killed_parent(tmp_path, sig, started_in, context, stuck):
    script = tmp_path / "parent.py"
    script.write_text(PARENT)
    parent = subprocess.Popen([sys.executable, str(script), started_in, context, stuck], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        line = parent.stdout.readline()
        assert line == "ready\n", parent.stderr.read() if parent.poll() is not None else line
        others = [p for p in _session(parent.pid) if p != parent.pid]
        assert len(others) >= 3  # three workers, and the resource tracker
        parent.send_signal(sig)
        parent.wait(timeout=30)
        deadline = time.monotonic() + 5.0
        while _session(parent.pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _session(parent.pid) == [], f"processes left {time.monotonic() - deadline + 5:.1f} s after the parent"
    finally:
        for pid in _session(parent.pid):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if parent.poll() is None:
            parent.kill()
            parent.wait()
        parent.stdout.close()
        parent.stderr.close()
