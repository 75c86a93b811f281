"""`ember tune`: its flags, and the command itself (a new or resumed study, its trials, the results)."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import time

from ember.cli_args import int_at_least, positive_float
from ember.train import recipe, settings
from ember.tune import space as spaces

SPEC = "tune.json"
_STUDY_LOCK = ".study.lock"
PRUNERS = ("median", "hyperband", "none")
SAMPLERS = ("tpe", "random", "grid")
DEFAULT_TRIALS, DEFAULT_STARTUP = 20, 5
# How trials run, not what they train: these pass through to every trial and may change on resuming.
RUNTIME = ("device", "workers", "jit", "amp", "tensorboard", "data")

_DESCRIPTION = (
    "Search `ember train`'s settings with Optuna: each setting is fixed (--epochs 3), a list of choices "
    "(--optimizer adam,sgd) or a range (--lr 1e-4:1e-1:log, --batch-size 16:128:16), from flags or a "
    "--space file (TOML, YAML or JSON). Every trial is an `ember train` run in its own folder, reporting its "
    "test accuracy after each epoch so that unpromising ones are pruned. Writes trials.csv and best.json "
    "(with the `ember train` command that reproduces the best trial) to the output folder. See docs/train.md."
)


def add_parser(sub) -> argparse.ArgumentParser:
    """Add `ember tune` to the `ember` command's subparsers."""
    t = sub.add_parser("tune", help="search ember train's settings with Optuna (pruning, parallel trials)",
                       description=_DESCRIPTION)
    d = settings.DEFAULTS
    for key in spaces.KEYS:
        if key == "augment":
            continue
        default = d[key] if d[key] is not None else ("3e-3 for adam/adamw, 0.05 otherwise" if key == "lr" else "all")
        how = "a value, a,b,c or low:high[:log|:step]"
        if key in spaces.CATEGORICAL:
            names = "see ember train --help" if key == "model" else ", ".join(spaces.CATEGORICAL[key])
            how = f"a value or a,b,c ({names})"
        t.add_argument(spaces.flag(key), dest=key, metavar="SPACE", help=f"{how} (default: {default})")
    t.add_argument("--augment", metavar="SPACE", help="yes, no, or yes,no to search it (default: yes)")
    t.add_argument("--no-augment", dest="augment", action="store_const", const="no", help="the same as --augment no")
    t.add_argument("--space", metavar="FILE", help="search space file (.toml, .yaml or .json); flags override it")
    t.add_argument("--trials", type=int_at_least(1), metavar="N",
                   help=f"trials in the study, counting those of earlier runs of it (default: {DEFAULT_TRIALS})")
    t.add_argument("--jobs", type=int_at_least(1), default=1, metavar="N",
                   help="worker processes running trials at once (default: 1, in this process)")
    t.add_argument("--timeout", type=positive_float, metavar="SECONDS",
                   help="start no new trial after this many seconds (each worker runs one at least; default: none)")
    t.add_argument("--pruner", choices=PRUNERS, help="stop unpromising trials early (default: median)")
    t.add_argument("--startup-trials", type=int_at_least(0), metavar="N",
                   help=f"trials the median pruner lets finish before it prunes (default: {DEFAULT_STARTUP})")
    t.add_argument("--sampler", choices=SAMPLERS,
                   help="how trials are proposed (default: tpe; grid: every combination of the choices, once)")
    t.add_argument("--sampler-seed", type=int_at_least(0), metavar="N",
                   help="seed of the sampler (default: none, so each study differs)")
    from ember.cli import DATA_HELP

    t.add_argument("--data", metavar="DIR", help=DATA_HELP)
    t.add_argument("--device", help="cpu, cpu:N, cuda or cuda:N for every trial (default: cpu)")
    t.add_argument("--workers", type=int_at_least(0), metavar="N", help="DataLoader worker processes of each trial")
    t.add_argument("--jit", action="store_true", default=None, help="trials run compiled training steps")
    t.add_argument("--amp", action="store_true", default=None,
                   help="trials train in mixed precision (ember train --amp)")
    t.add_argument("--tensorboard", metavar="DIR",
                   help="log every trial to TensorBoard, trial N in DIR/trial-N (needs the `tensorboard` extra)")
    t.add_argument("--out", metavar="DIR",
                   help="output folder (default: ./runs/tune-<timestamp>); one holding the same study continues it")
    t.add_argument("--resume", metavar="DIR", help="continue the study in this folder with its own search space")
    return t


def _given_space(args) -> dict:
    """The space of this command line: the --space file's entries, then the flags on top."""
    space = spaces.load_file(args.space) if args.space else {}
    for key in spaces.KEYS:
        text = getattr(args, key, None)
        if text is not None:
            where = "--no-augment" if key == "augment" and text == "no" else None
            space[key] = spaces.parse_text(key, text, where)
    return space


def _normal(space: dict) -> dict:
    """Every setting's entry in file form, ember train's default where the space has none."""
    mapping = spaces.to_mapping(space)
    return {k: mapping.get(k, settings.DEFAULTS[k]) for k in spaces.KEYS}


def _read_spec(out: str, flag: str) -> dict | None:
    path = os.path.join(out, SPEC)
    if not os.path.exists(path):
        return None
    try:
        with open(path) as f:
            spec = json.load(f)
        spaces.from_mapping(spec["space"], path)
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise spaces.SpaceError(f"{flag} {out}: {path} is not a study description ember tune can read: {e}") from None
    return spec


def _spec(args) -> tuple[str, dict, bool]:
    """The output folder, the study's description, and whether the study already exists."""
    given, defaulted = _given_space(args), []
    if args.resume:
        if args.out and os.path.abspath(args.out) != os.path.abspath(args.resume):
            raise spaces.SpaceError(f"--out {args.out}: --resume {args.resume} writes to its own folder")
        out, flag = args.resume, "--resume"
        saved = _read_spec(out, flag)
        if saved is None:
            raise spaces.SpaceError(f"--resume {out}: no ember tune study there (no {SPEC})")
        have, want = _normal(spaces.from_mapping(saved["space"], SPEC)), _normal(given)
        for key in given:  # flags left out come from the study; one that contradicts it is an error
            if have[key] != want[key]:
                name = spaces.flag(key)
                raise spaces.SpaceError(f"{name}: the study in {out} has {name} {spaces.show(have[key])}, and --resume "
                                        f"continues a study with its own space (leave {name} out, or start a new "
                                        "study with another --out)")
    else:
        out = args.out or os.path.join("runs", time.strftime("tune-%Y%m%d-%H%M%S"))
        saved = _read_spec(out, "--out")
        grid = (args.sampler or (saved or {}).get("sampler")) == "grid"
        given, defaulted = spaces.with_default_search(given, grid)
        if saved is not None:
            have, want = _normal(spaces.from_mapping(saved["space"], SPEC)), _normal(given)
            diff = [k for k in spaces.KEYS if have[k] != want[k]]
            if diff:
                k = diff[0]
                raise spaces.SpaceError(f"--out {out}: holds a study with {spaces.flag(k)} {spaces.show(have[k])}, "
                                        f"not {spaces.show(want[k])}; --resume {out} continues it, or choose another "
                                        "--out")
        elif os.path.isfile(out):
            raise spaces.SpaceError(f"--out {out}: is a file, not a folder")
    spec = dict(saved or {"space": spaces.to_mapping(given), "default_search": defaulted})
    spaces.check(spaces.from_mapping(spec["space"], SPEC))
    for key, default in (("trials", DEFAULT_TRIALS), ("pruner", "median"), ("startup_trials", DEFAULT_STARTUP),
                         ("sampler", "tpe"), ("sampler_seed", None)):
        value = getattr(args, key)
        spec[key] = value if value is not None else spec.get(key, default)
    if spec["sampler"] == "grid":  # each point once: --trials is the grid's size unless fewer are asked for
        size = spaces.grid_size(spaces.from_mapping(spec["space"], SPEC))
        spec["trials"] = min(spec["trials"], size) if args.trials is not None or saved else size
    runtime = dict(spec.get("runtime", {"device": "cpu", "workers": 0, "jit": False}))
    for key in RUNTIME:
        if getattr(args, key) is not None:
            runtime[key] = getattr(args, key)
    if runtime.get("data") is not None:  # trials and the reproducing command work from any folder
        runtime["data"] = os.path.abspath(runtime["data"])
    spec["runtime"] = runtime
    return out, spec, saved is not None


@contextlib.contextmanager
def _only_study(out: str):
    """Refuse a second `ember tune` on the same folder at once (it would fail the other's running trials)."""
    try:
        import fcntl
    except ImportError:
        yield
        return
    with open(os.path.join(out, _STUDY_LOCK), "a") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            raise spaces.SpaceError(f"--out {out}: another ember tune is running this study") from None
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _check_device(name: str) -> None:
    from ember.cli import _check_device as check

    check(name)


def tune_main(args) -> int:
    """`ember tune`: run (or continue) a study, then print and save its results."""
    from ember.tune import study

    study.optuna()  # a missing extra is reported before any folder is made
    out, spec, existing = _spec(args)
    _check_device(spec["runtime"]["device"])
    space = spaces.from_mapping(spec["space"], SPEC)
    recipe.check_data(spec["runtime"].get("data"), spaces.values_of(space, "dataset"))
    if spec["runtime"].get("tensorboard"):
        from ember.utils.tensorboard import SummaryWriter  # noqa: F401  (a missing extra: one line, before any trial)
    os.makedirs(out, exist_ok=True)
    with _only_study(out):
        s = study.load(out, spec, create=True)
        stale = study.fail_interrupted(s)
        before = study.counted(s.get_trials(deepcopy=False))
        spec["resumed_trials"] = len(s.get_trials(deepcopy=False))
        with open(os.path.join(out, SPEC), "w") as f:
            json.dump({k: v for k, v in spec.items() if k not in ("resumed_trials", "deadline")}, f, indent=2)
            f.write("\n")
        space = spaces.from_mapping(spec["space"], SPEC)
        _header(out, spec, space, existing, before, stale, args.jobs)
        t0 = time.perf_counter()
        if args.timeout is not None:  # wall-clock, so that every worker process reads the same deadline
            spec["deadline"] = time.time() + args.timeout
        interrupted = False
        try:
            if args.jobs == 1:
                study.work(out, spec)
            else:
                codes = study.run_parallel(out, spec, args.jobs)
                interrupted = 130 in codes
                crashed = [c for c in codes if c not in (0, 130)]
                if crashed:
                    print(f"ember tune: {len(crashed)} worker process(es) stopped with exit status "
                          f"{', '.join(map(str, crashed))}", file=sys.stderr)
        except KeyboardInterrupt:
            interrupted = True
        return _report(out, spec, space, study.load(out, spec), time.perf_counter() - t0, interrupted)


def _header(out, spec, space, existing, before, stale, jobs) -> None:
    fixed = {k: v for k, v in space.items() if k not in spaces.searched(space)}
    what = ", ".join(f"{k} {v}" for k, v in fixed.items()) or "ember train's defaults"
    if existing:
        again = f"; {stale} interrupted trial(s) will be redone" if stale else ""
        print(f"continuing the study in {out}: {before} of {spec['trials']} trials done{again}")
    where = "in this process" if jobs == 1 else f"in {jobs} processes"
    how = "no range or choices given, so the default search: " if spec.get("default_search") else ""
    print(f"tuning ({what}): {how}{spaces.describe(space)}; {spec['trials']} trials {where}, {spec['sampler']} "
          f"sampler, {spec['pruner']} pruner; writing {out}", flush=True)


def _report(out, spec, space, s, elapsed: float, interrupted: bool) -> int:
    from ember.tune import results, study

    keys = spaces.searched(space)
    trials = s.get_trials(deepcopy=False)
    table = results.rows(trials, keys)
    results.write_csv(os.path.join(out, "trials.csv"), table)
    counts = {st: sum(r["state"] == st for r in table) for st in ("complete", "pruned", "fail")}
    print()
    print(results.format_table(table, keys, study.max_epochs(space)))
    stopped = sum(r["error"] == "interrupted" for r in table)
    again = f", {stopped} of them interrupted (redone, not counted)" if stopped else ""
    print(f"{len(table)} trials: {counts['complete']} complete, {counts['pruned']} pruned, {counts['fail']} failed"
          f"{again} ({elapsed:.1f}s this run)")
    complete = [t for t in trials if t.state.name == "COMPLETE"]
    if complete:
        best = results.write_best(os.path.join(out, "best.json"), s.best_trial, out)
        print(f"best: trial {best['trial']}, test accuracy {best['accuracy'] * 100:.2f}%; "
              f"wrote {os.path.join(out, 'trials.csv')} and {os.path.join(out, 'best.json')}")
        print(f"reproduce it with: {best['command']}")
    if interrupted:
        print(f"ember tune: interrupted; continue with: ember tune --resume {out}", file=sys.stderr)
        return 130
    left = spec["trials"] - study.counted(trials)
    if left > 0 and "deadline" in spec:
        print(f"--timeout: time was up before the study had its {spec['trials']} trials; "
              f"ember tune --resume {out} runs the other {left}")
    if not complete:
        errors = [r["error"] for r in table if r["error"]]
        if errors and counts["fail"] == len(table):
            raise spaces.SpaceError(f"every trial failed; the first: {errors[0]}")
        print("ember tune: no trial completed", file=sys.stderr)
        return 1
    return 0
