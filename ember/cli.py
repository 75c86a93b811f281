"""The `ember` command: `ember train` (the main job), `ember run` (N processes with MPI) and `ember summary`."""

from __future__ import annotations

import argparse
import os
import sys
import time

from ember import creation, models, serialization
from ember import random as ember_random
from ember.cli_args import int_at_least, positive_float
from ember.models.summary import summary
from ember.train import recipe, rng_state, settings
from ember.version import __version__

CHECKPOINT = "checkpoint.safetensors"


class CommandError(Exception):
    """A bad input or an I/O failure, reported as one line and exit status 2."""


class _Parser(argparse.ArgumentParser):
    """argparse with its errors on one line (no usage dump): `ember train: error: ...`, exit status 2.

    Flags are never abbreviated: a prefix such as `--data` must not be taken for `--dataset`.
    """

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


DATA_HELP = ("where mnist, fashion_mnist and cifar10 are read from: the folder holding the data set's files, or "
             "one holding its folder (mnist, fashion-mnist, cifar10) (default: $EMBER_DATA/<folder>, else "
             "~/.ember/data/<folder>; Ember never downloads)")

_TRAIN_DESCRIPTION = (
    "Train an image classifier from ember.models on a data set, writing a checkpoint after every epoch, "
    "metrics.json and curves.png to the output folder. With no arguments: LeNet-5 on the embedded MNIST "
    "sample (4,000 train / 1,000 test digits) with Adam, a one-cycle schedule and random crops, which reaches "
    "about 98% test accuracy in 20 epochs, about 25 s on two cores (docs/performance.md). --resume continues "
    "a run exactly where its checkpoint left it (same learning rates, batches, augmentations and results as "
    "without the stop); with a larger --epochs it extends a finished run with a new schedule over the added "
    "epochs."
)


def _parser() -> argparse.ArgumentParser:
    p = _Parser(prog="ember", description="Ember: train and inspect networks.")
    p.add_argument("--version", action="version", version=f"ember {__version__}")
    sub = p.add_subparsers(dest="command", required=True, metavar="{train,tune,run,summary,export,kernels}")

    t = sub.add_parser("train", help="train a model on a data set", description=_TRAIN_DESCRIPTION)
    d = settings.DEFAULTS
    t.add_argument("--model", metavar="NAME",
                   help=f"the model (default: {d['model']}): {recipe.supported_models_text()}")
    t.add_argument("--dataset", choices=recipe.DATASETS,
                   help=f"the data set (default: {d['dataset']}); mnist_sample and digits ship with the `datasets` "
                   "extra, mnist, fashion_mnist and cifar10 are read from files (see --data)")
    t.add_argument("--data", metavar="DIR", help=DATA_HELP)
    t.add_argument("--epochs", type=int_at_least(1), metavar="N",
                   help=f"total epochs of the run (default: {d['epochs']}; with --resume, the run's own, and a "
                   "larger number extends a finished run)")
    t.add_argument("--batch-size", type=int_at_least(1), metavar="N",
                   help=f"training batch size (default: {d['batch_size']})")
    t.add_argument("--lr", type=positive_float,
                   help="(peak) learning rate (default: 3e-3 for adam and adamw, 0.05 otherwise)")
    t.add_argument("--schedule", choices=recipe.SCHEDULES,
                   help=f"learning-rate schedule, stepped every batch (default: {d['schedule']})")
    t.add_argument("--no-augment", dest="augment", action="store_const", const=False, default=None,
                   help="no random crops (MNIST-like data) or crops and flips (cifar10)")
    t.add_argument("--optimizer", choices=recipe.OPTIMIZERS,
                   help=f"optimizer (default: {d['optimizer']}; sgd has momentum 0.9)")
    t.add_argument("--seed", type=int_at_least(0), metavar="N",
                   help=f"seed of the initialisation, shuffling and augmentation (default: {d['seed']})")
    t.add_argument("--limit", type=int_at_least(1), metavar="N",
                   help="use only the first N training and N/4 test samples (default: all)")
    t.add_argument("--device", default="cpu", help="cpu, cpu:N, cuda or cuda:N (default: cpu)")
    t.add_argument("--workers", type=int_at_least(0), default=0, metavar="N",
                   help="DataLoader worker processes (default: 0, load in the main process)")
    t.add_argument("--out", metavar="DIR",
                   help="output folder (default: ./runs/<timestamp>; with --resume, the checkpoint's folder)")
    t.add_argument("--resume", metavar="CKPT", help="continue the run whose checkpoint (a file) this is")
    t.add_argument("--tensorboard", metavar="DIR", help="log loss, accuracy and learning rate to TensorBoard in DIR "
                   "(needs the `tensorboard` extra; a resumed run continues the curves)")
    t.add_argument("--jit", action="store_true", help="run each training step as a compiled graph (ember.jit)")
    t.add_argument("--amp", action="store_true",
                   help="mixed precision: forward pass and loss under em.autocast (bfloat16 on the CPU)")
    t.add_argument("--no-progress", action="store_true", help="no progress bar")
    t.add_argument("--nproc", type=int, default=1,
                   help="train data-parallel on this many processes (MPI; see `ember run` and docs/distributed.md)")
    t.add_argument("--max-restarts", type=int, default=0, metavar="N",
                   help="with --nproc: when a rank fails, start the job again from its last checkpoint, up to N times")

    from ember.tune.command import add_parser as add_tune_parser

    add_tune_parser(sub)

    r = sub.add_parser("run", help="run a program on N processes with MPI (ember run -n 4 script.py [args])",
                       description="Start N ranks of a program with mpiexec; see docs/distributed.md.")
    from ember.distributed.launch import add_arguments

    add_arguments(r)

    s = sub.add_parser("summary", help="print a model's layers, output shapes, parameters and multiply-adds",
                       description="Print a model's layers, output shapes, parameters and multiply-adds, "
                       "computed on the meta device (no memory for weights or activations).")
    from ember.models import list_models

    s.add_argument("--model", required=True, metavar="NAME", help=f"a name from ember.models: {', '.join(list_models())}")
    s.add_argument("--input", metavar="SHAPE",
                   help="input size, e.g. 1,3,224,224 (default: the model's usual input)")
    s.add_argument("--num-classes", type=int_at_least(1), metavar="N",
                   help="number of classes (default: the model's own)")

    e = sub.add_parser("export", help="write a checkpoint's model (or a zoo model) as an ONNX file",
                       description="Export to ONNX (see docs/onnx.md; needs the onnx extra): `ember export "
                       "runs/x/checkpoint.safetensors` writes the model that checkpoint records, with its weights, to "
                       "runs/x/checkpoint.onnx; `ember export --model NAME --out FILE` writes a model of ember.models.")
    from ember.onnx.cli import add_arguments as add_export_arguments

    add_export_arguments(e)

    k = sub.add_parser("kernels", help="print this machine and which kernel each op runs when (docs/kernels.md)",
                       description="This machine as Ember's kernel layer sees it (CPU, instruction sets, cores, "
                       "NumPy's BLAS and its kernels, Numba), and every op's algorithms with the rule each runs "
                       "under and the thresholds (ember.kernels.selection). For one program, ember.kernels.explain.")
    k.add_argument("--doc", action="store_true", help="only the tables, as docs/kernels.md holds them")
    return p


def kernels_document() -> str:
    """Every op's algorithms and thresholds as Markdown (the kernel modules register them when imported)."""
    import importlib
    import pkgutil

    import ember.kernels
    from ember.graph import codegen  # noqa: F401 - the fused regions' renderers
    from ember.kernels import selection
    from ember.optim import fused  # noqa: F401 - the optimizers' compiled updates

    for found in pkgutil.walk_packages(ember.kernels.__path__, "ember.kernels."):  # each registers its algorithms
        if found.name not in ("ember.kernels.thread_intrinsics", "ember.kernels.sgemm_intrinsics"):  # need Numba
            importlib.import_module(found.name)
    return selection.document()


def kernels_main(args) -> int:
    """`ember kernels`: the machine line and the selection tables."""
    from ember.kernels import machine

    if not args.doc:
        print(machine.describe())
        print()
    print(kernels_document(), end="")
    return 0


def _check_device(name: str):
    from ember.device import as_device

    try:
        device = as_device(name)
    except (ValueError, TypeError) as e:
        raise CommandError(f"--device {name}: {e}") from None
    if device.type == "meta":
        raise CommandError("--device meta: the meta device holds shapes only, so nothing can be trained on it")
    try:
        creation.zeros(1, device=device)
    except (ImportError, RuntimeError) as e:
        raise CommandError(f"--device {name}: {e}") from None
    return device


def _load_checkpoint(path: str) -> dict:

    if os.path.isdir(path):
        raise CommandError(f"--resume {path}: is a folder; give the checkpoint file, "
                           f"e.g. {os.path.join(path, CHECKPOINT)}")
    if not os.path.exists(path):
        raise CommandError(f"--resume {path}: no such file")
    try:
        state = serialization.load(path)
    except (OSError, RuntimeError, ValueError) as e:
        msg = getattr(e, "strerror", None) or str(e)
        msg = msg.removeprefix(f"{path}: ")  # em.load's errors start with the file's name
        raise CommandError(f"--resume {path}: {msg}") from None
    if not isinstance(state, dict) or not isinstance(state.get("config"), dict) or "epoch" not in state:
        raise CommandError(f"--resume {path}: not a checkpoint of an `ember train` run (it has no run settings)")
    return state


def _new_schedule(state: dict, optimizer, callbacks) -> dict:
    """The checkpoint with the schedule of this (extended) run in place of the finished one's.

    Weights, optimizer moments, history and random streams continue; the learning rates and the
    scheduler state are those of the new schedule's start.
    """
    from ember.train import LRSchedulerCallback

    state = dict(state)
    state["optimizer"] = {**state["optimizer"], "param_groups": optimizer.state_dict()["param_groups"]}
    state["callbacks"] = [{"type": type(cb).__name__, "state": cb.state_dict()}
                          if isinstance(cb, LRSchedulerCallback) else entry
                          for cb, entry in zip(callbacks, state["callbacks"])]
    return state


def _make_out(out: str) -> list[str]:
    """Create the output folder; returns the folders created (deepest first), to remove if they stay empty."""
    created, path = [], os.path.abspath(out)
    while not os.path.lexists(path):
        created.append(path)
        path = os.path.dirname(path)
    if os.path.lexists(out) and not os.path.isdir(out):
        raise CommandError(f"--out {out}: is a file, not a folder")
    try:
        os.makedirs(out, exist_ok=True)
    except OSError as e:
        _remove_empty(created)
        raise CommandError(f"--out {out}: can't create the folder: {e.strerror}") from None
    if not os.access(out, os.W_OK | os.X_OK):
        _remove_empty(created)
        raise CommandError(f"--out {out}: the folder is not writable")
    return created


def _remove_empty(folders: list[str]) -> None:
    for folder in folders:
        try:
            os.rmdir(folder)  # only succeeds while empty: a checkpoint already written stays
        except OSError:
            return


def _settings(args) -> tuple[dict, dict | None, str | None]:
    """The run's settings, the checkpoint to resume from (or None) and how a resume goes on."""
    given = {k: getattr(args, k) for k in settings.DEFAULTS}
    if not args.resume:
        return settings.fresh(given), None, None
    state = _load_checkpoint(args.resume)
    try:
        config, mode = settings.resumed(given, state["config"], int(state["epoch"]), args.resume)
    except ValueError as e:
        raise CommandError(str(e)) from None
    return config, state, mode


def train_main(args, callbacks=()) -> int:
    """`ember train`: fit, report the test accuracy, write checkpoint, metrics and curves (`callbacks` added to fit's)."""
    from ember.distributed._env import launched

    if args.nproc != 1 or launched() is not None:  # data-parallel on several processes: its own module
        if args.tensorboard:
            raise CommandError("--tensorboard is not supported with --nproc yet")
        from ember.distributed.train import train_main as data_parallel_main

        return data_parallel_main(args)
    config, state, mode = _settings(args)
    if mode == settings.DONE:
        print(f"nothing to do: the run in {args.resume} already has its {config['epochs']} epochs "
              "(a larger --epochs extends it)")
        return 0
    try:
        recipe.check_model(config["model"], config["dataset"])
        recipe.check_data(args.data, [config["dataset"]])
    except ValueError as e:
        raise CommandError(str(e)) from None
    device = _check_device(args.device)
    if args.out is not None:
        out = args.out
    elif args.resume:
        out = os.path.dirname(os.path.abspath(args.resume))
    else:
        out = os.path.join("runs", time.strftime("%Y%m%d-%H%M%S"))
    ckpt = os.path.join(out, CHECKPOINT)
    created = _make_out(out)
    try:
        return _train(args, config, state, mode, device, out, ckpt, callbacks)
    except KeyboardInterrupt:
        where = f"; resume with: ember train --resume {ckpt}" if os.path.exists(ckpt) else ""
        print(f"ember train: interrupted{where}", file=sys.stderr)
        return 130
    finally:
        _remove_empty(created)  # only while still empty: after an early error, or Ctrl-C before any checkpoint


def _train(args, config: dict, state: dict | None, mode: str | None, device, out: str, ckpt: str,
           extra_callbacks=()) -> int:
    from ember.data import DataLoader
    from ember.train import LRSchedulerCallback, ModelCheckpoint, fit

    # A resumed run builds everything exactly as the first one did (same seed, same draws), then fit
    # puts the checkpoint's state, random streams included, on top.
    rng_state.seed_all(config["seed"])
    if device.type == "cpu" and not getattr(args, "jit", False):
        from ember.kernels import ahead

        ahead.compile_pool_ahead()  # on another core while the data loads and the model is built
    train_set, test_set = recipe.load_dataset(config["dataset"], config["limit"], config["augment"], args.data)
    model = recipe.build_model(config["model"], config["dataset"])
    model.to(device)
    optimizer = recipe.make_optimizer(config["optimizer"], model.parameters(), config["lr"])
    gen = ember_random.Generator().manual_seed(config["seed"])
    train_loader = DataLoader(train_set, batch_size=config["batch_size"], shuffle=True, num_workers=args.workers,
                              generator=gen)
    test_loader = DataLoader(test_set, batch_size=256, num_workers=args.workers)
    steps = (config["epochs"] - config["schedule_start"]) * len(train_loader)
    scheduler = recipe.make_scheduler(config["schedule"], optimizer, config["lr"], steps)
    callbacks = [ModelCheckpoint(ckpt, monitor="val_accuracy", save_best_only=False)]
    if scheduler is not None:
        callbacks.append(LRSchedulerCallback(scheduler, per="batch"))

    done = int(state["epoch"]) if state is not None else 0
    if mode == settings.EXTEND:
        state = _new_schedule(state, optimizer, callbacks)
        what = (f"a new {config['schedule']} schedule (peak lr {config['lr']:g})" if scheduler is not None
                else f"the constant lr {config['lr']:g}")
        added = f"epoch {done + 1}" if config["epochs"] == done + 1 else f"epochs {done + 1}-{config['epochs']}"
        print(f"extending the finished {done}-epoch run in {args.resume} to {config['epochs']} epochs: {what} over "
              f"{added}; weights, optimizer state and random streams continue")
    elif mode == settings.CONTINUE:
        print(f"resumed from {args.resume} after epoch {done} of {config['epochs']}")
    if args.tensorboard:  # first, so it logs the learning rate a step used before the scheduler changes it
        from ember.train.tensorboard import TensorBoardLogger

        callbacks.insert(0, TensorBoardLogger(args.tensorboard, val_name="test"))
    n_params = sum(p.numel() for p in model.parameters())
    print(f"training {config['model']} ({n_params:,} parameters) on {config['dataset']}: {len(train_set)} train / "
          f"{len(test_set)} test samples, {config['optimizer']}, {config['epochs']} epochs, device {device}"
          f"{settings.run_modes(args)}")
    if args.tensorboard:
        print(f"logging to TensorBoard in {args.tensorboard} (view with: tensorboard --logdir {args.tensorboard})")

    t0 = time.perf_counter()
    history = fit(model, train_loader, test_loader, epochs=config["epochs"], optimizer=optimizer, device=device,
                  callbacks=[*callbacks, *extra_callbacks], progress=not args.no_progress, jit=args.jit, amp=args.amp,
                  resume=state, config=config)
    elapsed = time.perf_counter() - t0
    metrics, curves = os.path.join(out, "metrics.json"), os.path.join(out, "curves.png")
    history.to_json(metrics)
    try:
        history.plot(curves)
        wrote = f"{ckpt}, {metrics} and {curves}"
    except ImportError as e:
        print(f"(no curves: {e})")
        wrote = f"{ckpt} and {metrics}"
    acc = history.last("val_accuracy")
    print(f"final test accuracy: {acc * 100:.2f}%  ({elapsed:.1f}s)")
    print(f"wrote {wrote}")
    if args.tensorboard:
        print(f"TensorBoard logs in {args.tensorboard}")
    return 0


def _parse_shape(text: str) -> tuple[int, ...]:
    try:
        shape = tuple(int(d) for d in text.split(","))
    except ValueError:
        shape = ()
    if not shape or any(d < 1 for d in shape):
        raise CommandError(f"--input {text}: expected positive integers separated by commas, e.g. 1,3,224,224")
    return shape


def summary_main(args) -> int:
    """`ember summary`: the model table computed on the meta device."""
    name = args.model
    if name not in models.list_models():
        raise CommandError(f"--model {name}: unknown model; ember.models has {', '.join(models.list_models())}")
    kwargs = {}
    if args.num_classes is not None:
        if "num_classes" not in models.registry.model_arguments(name):
            raise CommandError(f"--num-classes: {name} has no class count to set")
        kwargs["num_classes"] = args.num_classes
    shape = _parse_shape(args.input) if args.input else models.default_input_size(name)
    model = models.get_model(name, **kwargs)
    try:
        table = summary(model, shape)
    except (ValueError, TypeError) as e:
        raise CommandError(f"--input {args.input or shape}: {name} can't take this input: {e}") from None
    print(table)
    return 0


def _os_error(e: OSError) -> str:
    return f"{e.filename}: {e.strerror}" if e.filename and e.strerror else str(e)


def main(argv=None) -> int:
    """Entry point of the `ember` console script and `python -m ember`."""
    args = _parser().parse_args(argv)
    prog = f"ember {args.command}"
    args.argv = list(sys.argv[1:] if argv is None else argv)
    try:
        if args.command in ("train", "tune"):
            from ember.kernels import tune_process

            tune_process()  # a training process: freed blocks kept for reuse, BLAS's threads asleep soon after a GEMM
            from ember.kernels.background import use_deterministic_algorithms

            # A run gives the same result on an empty kernel cache as on a full one (and --resume the same as an
            # uninterrupted run): kernels compile where first called, not while NumPy serves the first batches.
            use_deterministic_algorithms(True)
        if args.command == "train":
            return train_main(args)
        if args.command == "tune":
            from ember.tune.command import tune_main

            return tune_main(args)
        if args.command == "run":
            from ember.distributed.launch import run_main

            return run_main(args)
        if args.command == "export":
            from ember.onnx.cli import export_main

            return export_main(args)
        if args.command == "kernels":
            return kernels_main(args)
        return summary_main(args)
    except CommandError as e:
        msg = str(e)
    except OSError as e:  # a missing data file, a full disk, a folder that can't be written
        msg = _os_error(e)
    except (ValueError, KeyError, ImportError, RuntimeError) as e:
        # Bad data files or missing extras: one clear line, not a traceback.
        msg = e.args[0] if isinstance(e, KeyError) and e.args else str(e)
    print(f"{prog}: error: {msg}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
