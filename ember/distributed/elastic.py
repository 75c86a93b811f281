"""Elastic restarts (`ember run --max-restarts R`, torchrun's flag): a failed job is started again, whole.

When a rank fails, the others stop (faults.py) and mpiexec exits non-zero; this loop then starts every
rank again, up to R times, telling them which attempt this is ($EMBER_RESTART_COUNT, and torchrun's
$TORCHELASTIC_RESTART_COUNT). A program resumes from its last checkpoint: `ember train` does so
itself, and a script uses `ember.distributed.checkpoint.load_latest` (see docs/distributed.md).
"""

from __future__ import annotations

import sys

from ember import config
from ember.distributed.jobwatch import run_job

RESTART_VARS = ("EMBER_RESTART_COUNT", "EMBER_MAX_RESTARTS", "TORCHELASTIC_RESTART_COUNT",
                "TORCHELASTIC_MAX_RESTARTS")


def restart_count() -> int:
    """How many times `ember run --max-restarts` has restarted this job (0 on the first attempt)."""
    return config.get("restart_count")


def _say(text: str) -> None:
    print(f"ember run: {text}", file=sys.stderr, flush=True)


def run(argv: list, env: dict, max_restarts: int, grace: float) -> int:
    """Run the job `argv`, again after each failure up to `max_restarts` times; its final exit status.

    `grace`: seconds mpiexec may outlive a reported failure (jobwatch.py).
    """
    attempt = 0
    while True:
        env = dict(env)
        env.update(EMBER_RESTART_COUNT=str(attempt), EMBER_MAX_RESTARTS=str(max_restarts),
                   TORCHELASTIC_RESTART_COUNT=str(attempt), TORCHELASTIC_MAX_RESTARTS=str(max_restarts))
        try:
            code = run_job(argv, env, grace)
        except KeyboardInterrupt:
            return 130
        if code == 0:
            if attempt:
                _say(f"the job finished after {attempt} restart{'s' * (attempt > 1)}")
            return 0
        if code in (-2, 130):  # interrupted (Ctrl-C): the user stopped it, do not start it again
            return 130
        if attempt >= max_restarts:
            tail = f" and {attempt} restart{'s' * (attempt > 1)}" if attempt else ""
            _say(f"the job failed (mpiexec exited with status {code}{tail})")
            return code if 0 < code < 256 else 1
        attempt += 1
        _say(f"the job failed (mpiexec exited with status {code}); restarting it from its last checkpoint "
             f"(restart {attempt} of {max_restarts})")
