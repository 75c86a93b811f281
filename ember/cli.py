"""The `ember` command: `ember train` (the main job) and `ember summary`."""

from __future__ import annotations

import argparse
import os
import sys
import time

from ember.train import recipe, rng_state, settings

CHECKPOINT = "checkpoint.safetensors"


_TRAIN_DESCRIPTION = (
    "Train a model from ember.models on a data set, writing a checkpoint after every epoch, "
    "metrics.json and curves.png to the output folder. With no arguments: LeNet-5 on the embedded MNIST "
    "sample (4,000 train / 1,000 test digits) with Adam, a one-cycle schedule and random crops, which reaches "
    "about 98% test accuracy in well under two minutes on two cores. --resume continues a run exactly where its "
    "checkpoint left it (same learning rates, batches, augmentations and results as without the stop); "
    "with a larger --epochs it extends a finished run with a new schedule over the added epochs."
)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="ember", description="Ember: train and inspect networks.")
    sub = p.add_subparsers(dest="command", required=True)

    t = sub.add_parser("train", help="train a model on a data set", description=_TRAIN_DESCRIPTION)
    d = settings.DEFAULTS
    t.add_argument("--model", metavar="NAME",
                   help=f"a name from ember.models, e.g. mlp, lenet5, resnet20 (default: {d['model']})")
    t.add_argument("--dataset", choices=recipe.DATASETS,
                   help=f"the data set (default: {d['dataset']}); mnist_sample and digits ship with the `datasets` "
                   "extra, mnist, fashion_mnist and cifar10 are read from $EMBER_DATA/<name>")
    t.add_argument("--epochs", type=int, metavar="N",
                   help=f"total epochs of the run (default: {d['epochs']}; with --resume, the run's own, and a "
                   "larger number extends a finished run)")
    t.add_argument("--batch-size", type=int, metavar="N",
                   help=f"training batch size (default: {d['batch_size']})")
    t.add_argument("--lr", type=float,
                   help="(peak) learning rate (default: 3e-3 for adam and adamw, 0.05 otherwise)")
    t.add_argument("--schedule", choices=recipe.SCHEDULES,
                   help=f"learning-rate schedule, stepped every batch (default: {d['schedule']})")
    t.add_argument("--no-augment", dest="augment", action="store_const", const=False, default=None,
                   help="no random crops (MNIST-like data) or crops and flips (cifar10)")
    t.add_argument("--optimizer", choices=recipe.OPTIMIZERS,
                   help=f"optimizer (default: {d['optimizer']}; sgd has momentum 0.9)")
    t.add_argument("--seed", type=int, metavar="N",
                   help=f"seed of the initialisation, shuffling and augmentation (default: {d['seed']})")
    t.add_argument("--limit", type=int, metavar="N",
                   help="use only the first N training and N/4 test samples (default: all)")
    t.add_argument("--device", default="cpu", help="cpu, cpu:N, cuda or cuda:N (default: cpu)")
    t.add_argument("--workers", type=int, default=0, metavar="N",
                   help="DataLoader worker processes (default: 0, load in the main process)")
    t.add_argument("--out", metavar="DIR",
                   help="output folder (default: ./runs/<timestamp>; with --resume, the checkpoint's folder)")
    t.add_argument("--resume", metavar="CKPT", help="continue the run whose checkpoint (a file) this is")
    t.add_argument("--jit", action="store_true", help="run each training step as a compiled graph (ember.jit)")
    t.add_argument("--no-progress", action="store_true", help="no progress bar")

    s = sub.add_parser("summary", help="print a model's layers, output shapes, parameters and multiply-adds",
                       formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    s.add_argument("--model", required=True, help="a name from ember.models")
    s.add_argument("--input", default=None, help="input size, e.g. 1,3,224,224 (default: the model's usual input)")
    s.add_argument("--num-classes", type=int, default=None)
    return p


def _load_checkpoint(path: str) -> dict:
    import ember as em

    if os.path.isdir(path):
        raise ValueError(f"--resume {path}: is a folder; give the checkpoint file, "
                         f"e.g. {os.path.join(path, CHECKPOINT)}")
    if not os.path.exists(path):
        raise ValueError(f"--resume {path}: no such file")
    try:
        state = em.load(path)
    except (OSError, RuntimeError, ValueError) as e:
        msg = getattr(e, "strerror", None) or str(e)
        msg = msg.removeprefix(f"{path}: ")  # em.load's errors start with the file's name
        raise ValueError(f"--resume {path}: {msg}") from None
    if not isinstance(state, dict) or not isinstance(state.get("config"), dict) or "epoch" not in state:
        raise ValueError(f"--resume {path}: not a checkpoint of an `ember train` run (it has no run settings)")
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


def _settings(args) -> tuple[dict, dict | None, str | None]:
    """The run's settings, the checkpoint to resume from (or None) and how a resume goes on."""
    given = {k: getattr(args, k) for k in settings.DEFAULTS}
    if not args.resume:
        return settings.fresh(given), None, None
    state = _load_checkpoint(args.resume)
    config, mode = settings.resumed(given, state["config"], int(state["epoch"]), args.resume)
    return config, state, mode


def train_main(args) -> int:
    """`ember train`: fit, report the test accuracy, write checkpoint, metrics and curves."""
    config, state, mode = _settings(args)
    if mode == settings.DONE:
        print(f"nothing to do: the run in {args.resume} already has its {config['epochs']} epochs "
              "(a larger --epochs extends it)")
        return 0
    device = args.device
    if args.out is not None:
        out = args.out
    elif args.resume:
        out = os.path.dirname(os.path.abspath(args.resume))
    else:
        out = os.path.join("runs", time.strftime("%Y%m%d-%H%M%S"))
    ckpt = os.path.join(out, CHECKPOINT)
    os.makedirs(out, exist_ok=True)
    try:
        return _train(args, config, state, mode, device, out, ckpt)
    except KeyboardInterrupt:
        where = f"; resume with: ember train --resume {ckpt}" if os.path.exists(ckpt) else ""
        print(f"ember train: interrupted{where}", file=sys.stderr)
        return 130


def _train(args, config: dict, state: dict | None, mode: str | None, device, out: str, ckpt: str) -> int:
    import ember as em
    from ember.data import DataLoader
    from ember.train import LRSchedulerCallback, ModelCheckpoint, fit

    # A resumed run builds everything exactly as the first one did (same seed, same draws), then fit
    # puts the checkpoint's state, random streams included, on top.
    rng_state.seed_all(config["seed"])
    train_set, test_set = recipe.load_dataset(config["dataset"], config["limit"], config["augment"])
    in_shape = tuple(test_set[0][0].shape)  # the test set: no random transform draws for this
    model = em.models.get_model(config["model"], num_classes=recipe.NUM_CLASSES, in_channels=in_shape[0],
                                input_size=in_shape)
    model.to(device)
    optimizer = recipe.make_optimizer(config["optimizer"], model.parameters(), config["lr"])
    gen = em.Generator().manual_seed(config["seed"])
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
    n_params = sum(p.numel() for p in model.parameters())
    print(f"training {config['model']} ({n_params:,} parameters) on {config['dataset']}: {len(train_set)} train / "
          f"{len(test_set)} test samples, {config['optimizer']}, {config['epochs']} epochs, device {device}")

    t0 = time.perf_counter()
    history = fit(model, train_loader, test_loader, epochs=config["epochs"], optimizer=optimizer, device=device,
                  callbacks=callbacks, progress=not args.no_progress, jit=args.jit, resume=state, config=config)
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
    return 0


def summary_main(args) -> int:
    """`ember summary`: the model table computed on the meta device."""
    import ember as em

    shape = tuple(int(d) for d in args.input.split(",")) if args.input else None
    kwargs = {} if args.num_classes is None else {"num_classes": args.num_classes}
    model = em.models.get_model(args.model, **kwargs)
    if shape is None:
        shape = em.models.default_input_size(args.model)
    print(em.summary(model, shape))
    return 0


def main(argv=None) -> int:
    """Entry point of the `ember` console script and `python -m ember`."""
    args = _parser().parse_args(argv)
    try:
        if args.command == "train":
            return train_main(args)
        return summary_main(args)
    except (ValueError, KeyError, FileNotFoundError, ImportError, RuntimeError) as e:
        # Bad names, missing data files or extras: one clear line, not a traceback.
        msg = e.args[0] if isinstance(e, KeyError) and e.args else e
        print(f"ember {args.command}: error: {msg}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
