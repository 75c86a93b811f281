"""The settings that define an `ember train` run, saved in its checkpoints, and how `--resume` reconciles them.

A resumed run keeps its own settings: flags left out come from the checkpoint, and a flag that
contradicts it is an error (the same run can't continue with another model, data or schedule).
"""

from __future__ import annotations

from ember.train.recipe import default_lr

DEFAULTS = {"model": "lenet5", "dataset": "mnist_sample", "epochs": 20, "batch_size": 32, "lr": None,
            "schedule": "onecycle", "optimizer": "adam", "augment": True, "seed": 0, "limit": None}
_FLAGS = {"model": "--model", "dataset": "--dataset", "batch_size": "--batch-size", "lr": "--lr",
          "schedule": "--schedule", "optimizer": "--optimizer", "seed": "--seed", "limit": "--limit"}

# How a resume goes on: continue an unfinished run, extend a finished one, or nothing left to do.
CONTINUE, EXTEND, DONE = "continue", "extend", "done"


def run_modes(args) -> str:
    """The run header's note of the flags that change how steps run: ", --jit --amp", or ""."""
    on = [flag for flag, value in (("--jit", args.jit), ("--amp", args.amp)) if value]
    return f", {' '.join(on)}" if on else ""


def fresh(given: dict) -> dict:
    """The settings of a new run: the flags given (not None), else the defaults."""
    config = {k: (given[k] if given.get(k) is not None else v) for k, v in DEFAULTS.items()}
    if config["lr"] is None:
        config["lr"] = default_lr(config["optimizer"])
    # The epoch after which the current LR schedule started (0; later, where a finished run was extended).
    config["schedule_start"] = 0
    return config


def _show(key: str, value) -> str:
    if key == "augment":
        return "with augmentation" if value else "with --no-augment"
    return f"{_FLAGS[key]} {value}"


def resumed(given: dict, saved: dict, done: int, source: str) -> tuple[dict, str]:
    """The settings of a run resumed after epoch `done` from a checkpoint with `saved` settings, and how to go on.

    Raises ValueError naming the flag when the command line contradicts the checkpoint.
    """
    missing = [k for k in (*DEFAULTS, "schedule_start") if k not in saved]
    if missing:
        raise ValueError(f"--resume {source}: the checkpoint's run settings lack {', '.join(missing)}")
    config = dict(saved)
    for key in DEFAULTS:
        if key == "epochs" or given.get(key) is None or given[key] == saved[key]:
            continue
        flag = "--no-augment" if key == "augment" else _FLAGS[key]
        raise ValueError(f"{flag}: the run in {source} was trained {_show(key, saved[key])}, and --resume continues "
                         f"a run with its own settings (leave {flag} out, or start a new run)")
    planned = int(saved["epochs"])
    target = given.get("epochs") or planned
    if done < planned:
        if target != planned:
            raise ValueError(f"--epochs {target}: the run in {source} stopped after epoch {done} of its {planned}; "
                             f"resume it to epoch {planned} first (leave --epochs out), then extend it")
        return config, CONTINUE
    if target < done:
        raise ValueError(f"--epochs {target}: the run in {source} already has {done} epochs")
    if target == done:
        return config, DONE
    config["epochs"] = target
    config["schedule_start"] = done
    return config, EXTEND
