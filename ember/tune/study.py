"""Running a study: the Optuna storage in the output folder, the sampler and pruner, and the trials themselves.

Each trial parses its own `ember train` command line and runs `ember train`'s code in this process,
with a TrialReporter added to fit's callbacks. Worker processes share the study through Optuna's
journal file; a lock around "count the trials, ask for one" keeps the total at --trials.
"""

from __future__ import annotations

import contextlib
import math
import os
import sys
import threading
import time
import traceback
import warnings

from ember import config
from ember.data.lifeline import Lifeline, watch
from ember.train import recipe, settings
from ember.tune import results
from ember.tune import space as spaces
from ember.tune.reporter import TrialReporter

STUDY_NAME = "ember-tune"
JOURNAL = "study.journal"
_LOCK = ".claim.lock"


def optuna():
    """The optuna module, or an ImportError saying which extra brings it."""
    try:
        import optuna as module
    except ImportError:
        raise ImportError('ember tune needs Optuna: pip install "ember[tune]"') from None
    module.logging.set_verbosity(module.logging.WARNING)  # the trials' lines are printed by ember tune
    warnings.filterwarnings("ignore", category=module.exceptions.ExperimentalWarning)
    return module


def storage(out: str):
    """The study's journal storage, a file in the output folder that several processes can share."""
    op = optuna()
    path = os.path.join(out, JOURNAL)
    try:
        from optuna.storages.journal import JournalFileBackend
    except ImportError:  # Optuna 3.x
        from optuna.storages import JournalFileStorage as JournalFileBackend
    return op.storages.JournalStorage(JournalFileBackend(path))


def make_pruner(name: str, startup_trials: int, max_epochs: int):
    """`median` (Optuna's MedianPruner), `hyperband` (one epoch up to the run's epochs) or `none`."""
    op = optuna()
    if name == "median":
        return op.pruners.MedianPruner(n_startup_trials=startup_trials, n_warmup_steps=0)
    if name == "hyperband":
        return op.pruners.HyperbandPruner(min_resource=1, max_resource=max_epochs, reduction_factor=3)
    return op.pruners.NopPruner()


def make_sampler(name: str, seed: int | None, space: dict | None = None):
    """`tpe` (Optuna's TPESampler), `random`, or `grid` (each point of the space's grid once); seeded unless None."""
    op = optuna()
    if name == "random":
        return op.samplers.RandomSampler(seed=seed)
    if name == "grid":
        return op.samplers.GridSampler(spaces.grid(space or {}), seed=seed)
    return op.samplers.TPESampler(seed=seed)


def max_epochs(space: dict) -> int:
    """The most epochs any trial of `space` runs (the pruner's largest resource)."""
    return max(int(v) for v in spaces.values_of(space, "epochs"))


def load(out: str, spec: dict, worker: int = 0, create: bool = False):
    """The study in `out` (created if `create`), with this spec's sampler and pruner."""
    op = optuna()
    space = spaces.from_mapping(spec["space"], "tune.json")
    seed = spec.get("sampler_seed")
    if seed is not None:  # another stream per worker, and per resumption, so no trial repeats another's draw
        seed = seed + 7919 * worker + spec.get("resumed_trials", 0)
    kwargs = {"storage": storage(out), "sampler": make_sampler(spec["sampler"], seed, space),
              "pruner": make_pruner(spec["pruner"], spec["startup_trials"], max_epochs(space)),
              "study_name": STUDY_NAME}
    if create:
        return op.create_study(direction="maximize", load_if_exists=True, **kwargs)
    return op.load_study(**kwargs)


def counted(trials) -> int:
    """How many trials count toward --trials (all but those interrupted by a stop, which a resume redoes)."""
    return sum(not t.user_attrs.get("interrupted") for t in trials)


def fail_interrupted(study) -> int:
    """Mark trials left running by a stopped study as failed (interrupted); returns how many."""
    op = optuna()
    stale = study.get_trials(deepcopy=False, states=(op.trial.TrialState.RUNNING,))
    for t in stale:
        study._storage.set_trial_user_attr(t._trial_id, "interrupted", True)
        study.tell(t.number, state=op.trial.TrialState.FAIL, skip_if_finished=True)
    return len(stale)


@contextlib.contextmanager
def _claim(out: str):
    """Exclusive across the study's processes (fcntl); without fcntl (Windows), no lock: a trial may be extra."""
    try:
        import fcntl
    except ImportError:
        yield
        return
    with open(os.path.join(out, _LOCK), "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def train_argv(config: dict, runtime: dict) -> list[str]:
    """The `ember train` arguments that run `config` (every setting spelled out, the lr exactly)."""
    argv = ["--model", config["model"], "--dataset", config["dataset"], "--epochs", str(config["epochs"]),
            "--batch-size", str(config["batch_size"]), "--lr", repr(float(config["lr"])),
            "--schedule", config["schedule"], "--optimizer", config["optimizer"], "--seed", str(config["seed"])]
    if config["limit"] is not None:
        argv += ["--limit", str(config["limit"])]
    if not config["augment"]:
        argv.append("--no-augment")
    if runtime.get("data") and config["dataset"] in recipe.FILE_DATASETS:
        argv += ["--data", runtime["data"]]
    if runtime.get("device", "cpu") != "cpu":
        argv += ["--device", runtime["device"]]
    if runtime.get("workers"):
        argv += ["--workers", str(runtime["workers"])]
    if runtime.get("jit"):
        argv.append("--jit")
    if runtime.get("amp"):
        argv.append("--amp")
    return argv


def _message(e: BaseException) -> str:
    if isinstance(e, OSError) and e.filename and e.strerror:
        return f"{e.filename}: {e.strerror}"
    if isinstance(e, KeyError) and e.args:
        return str(e.args[0])
    return " ".join(str(e).split()) or type(e).__name__


def _tell(study, trial, value=None, state=None):
    """study.tell, returning the finished trial, also when the grid sampler ends the grid."""
    try:
        return study.tell(trial, value, state=state)
    except RuntimeError as e:
        # GridSampler calls study.stop() after the grid's last point, which only works inside
        # study.optimize; tell has stored the trial by then, and the trial count stops the workers.
        if "Study.stop" not in str(e):
            raise
        return study._storage.get_trial(trial._trial_id)


def run_trial(study, trial, spec: dict, out: str):
    """Train one trial's configuration with `ember train`'s code; tell the study how it ended (a FrozenTrial)."""
    from ember import cli

    op = optuna()
    trial.set_user_attr("pid", os.getpid())
    space = spaces.from_mapping(spec["space"], "tune.json")
    config = settings.fresh(spaces.suggest(trial, space))
    argv = train_argv(config, spec.get("runtime", {}))
    trial.set_user_attr("command", argv)
    trial.set_user_attr("settings", {k: config[k] for k in settings.DEFAULTS})
    folder = os.path.join(out, f"trial-{trial.number:03d}")
    os.makedirs(folder, exist_ok=True)
    reporter = TrialReporter(trial)
    error, rc = None, 0
    t0 = time.perf_counter()
    try:
        with open(os.path.join(folder, "train.log"), "w") as log, \
                contextlib.redirect_stdout(log), contextlib.redirect_stderr(log):
            try:
                line = ["train", *argv, "--out", folder, "--no-progress"]
                if spec.get("runtime", {}).get("tensorboard"):  # not part of the command that reproduces a trial
                    line += ["--tensorboard", os.path.join(spec["runtime"]["tensorboard"], f"trial-{trial.number:03d}")]
                args = cli._parser().parse_args(line)
                args.argv = line
                rc = cli.train_main(args, callbacks=[reporter])
            except KeyboardInterrupt:
                rc = 130
            except SystemExit as e:  # argparse refusing a value: the space checks should have caught it
                rc, error = 2, f"ember train refused {' '.join(argv)} (exit status {e.code})"
            except Exception as e:
                error = _message(e)
                traceback.print_exc()
    finally:
        trial.set_user_attr("time_s", time.perf_counter() - t0)
        trial.set_user_attr("epochs", reporter.epochs)
    state = op.trial.TrialState
    if rc == 130:
        trial.set_user_attr("interrupted", True)
        _tell(study, trial, state=state.FAIL)
        raise KeyboardInterrupt
    if error is not None or rc != 0 or reporter.last is None:
        trial.set_user_attr("error", error or f"ember train ended with exit status {rc} (see {folder}/train.log)")
        return _tell(study, trial, state=state.FAIL)
    if reporter.pruned_at is not None:
        return _tell(study, trial, state=state.PRUNED)
    return _tell(study, trial, reporter.last)


def _line(t) -> str:
    """One trial as it finishes: number, state, accuracy, parameters."""
    state = t.state.name.lower()
    acc = results.accuracy(t)
    what = f"{acc * 100:.2f}%" if acc is not None else t.user_attrs.get("error", "")
    params = ", ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in t.params.items())
    epochs = t.user_attrs.get("epochs", 0)
    return (f"trial {t.number:3d}  {state:8s} {what}  after {epochs} epoch{'s' * (epochs != 1)}  "
            f"({t.user_attrs.get('time_s', 0):.1f}s, pid {t.user_attrs.get('pid')})  {params}")


def work(out: str, spec: dict, worker: int = 0, ready=None) -> None:
    """Run trials until the study has spec["trials"] of them (counted across every process) or the deadline."""
    study = load(out, spec, worker)
    space = spaces.from_mapping(spec["space"], "tune.json")
    if ready is not None:  # start together, so that a worker slower to import takes its share of trials
        with contextlib.suppress(threading.BrokenBarrierError):
            ready.wait(timeout=120)
    while True:
        with _claim(out):
            if counted(study.get_trials(deepcopy=False)) >= spec["trials"]:
                return
            trial = study.ask()
        done = run_trial(study, trial, spec, out)
        print(_line(done), flush=True)
        with _claim(out):  # the table so far, for a look while the study runs
            results.write_csv(os.path.join(out, "trials.csv"),
                              results.rows(study.get_trials(deepcopy=False), spaces.searched(space)))
        if done.state.name == "FAIL" and not any(t.intermediate_values for t in study.get_trials(deepcopy=False)):
            # Not one epoch trained in the whole study: a setup error (missing data, a bad device) that
            # every other trial would repeat, so stop here rather than fail the rest one by one.
            return
        if time.time() >= spec.get("deadline", math.inf):  # as Optuna's timeout: checked after each trial
            return


def _worker_main(out: str, spec: dict, worker: int, ready, lifeline_reader, kill_with_parent: bool) -> None:
    watch(lifeline_reader, kill_with_parent)  # a worker never outlives the `ember tune` that started it
    from ember.kernels.background import use_deterministic_algorithms

    use_deterministic_algorithms(True)  # as in `ember train`: a trial's result does not depend on the kernel cache
    try:
        work(out, spec, worker, ready)
    except KeyboardInterrupt:
        sys.exit(130)


_THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


def run_parallel(out: str, spec: dict, jobs: int) -> list[int]:
    """Run `jobs` worker processes on the study; returns their exit codes."""
    import multiprocessing

    ctx = multiprocessing.get_context("spawn")  # a fresh interpreter: no forked threads or locks
    threads = str(max(1, (os.cpu_count() or 1) // jobs))  # share the cores instead of oversubscribing them
    with config.outside_for_children(dict.fromkeys(_THREAD_VARS, threads)):  # one the user set rules
        ready = ctx.Barrier(jobs)
        lifeline = Lifeline()
        procs = [ctx.Process(target=_worker_main, args=(out, spec, i, ready, lifeline.reader, lifeline.kill_with_parent),
                             name=f"ember-tune-{i}") for i in range(jobs)]
        for p in procs:
            p.start()
    try:
        for p in procs:
            p.join()
    except KeyboardInterrupt:  # the workers got the same Ctrl-C: let them record their trials as interrupted
        for p in procs:
            p.join()
        raise
    finally:
        lifeline.close()
    return [p.exitcode for p in procs]
