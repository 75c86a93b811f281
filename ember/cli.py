"""The `ember` command: `ember train` (the main job), `ember run` (N processes with MPI) and `ember summary`."""

from __future__ import annotations

import argparse
import os
import sys
import time

DATASETS = ("mnist_sample", "digits", "mnist", "fashion_mnist", "cifar10")
OPTIMIZERS = ("sgd", "adam", "adamw", "rmsprop", "adagrad")


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="ember", description="Ember: train and inspect networks.")
    sub = p.add_subparsers(dest="command", required=True)

    t = sub.add_parser(
        "train",
        help="train a model on a dataset",
        description="Train a model from ember.models on a dataset. With no arguments: LeNet-5 on the "
        "embedded MNIST sample (4,000 train / 1,000 test digits) with Adam, a one-cycle schedule and "
        "random crops, which reaches about 98% test accuracy in well under two minutes on two cores.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    t.add_argument("--model", default="lenet5", help="a name from ember.models (e.g. mlp, lenet5, resnet20)")
    t.add_argument("--dataset", default="mnist_sample", choices=DATASETS,
                   help="mnist_sample and digits ship with the `datasets` extra; mnist, fashion_mnist and "
                   "cifar10 read the standard files from $EMBER_DATA/<name>")
    t.add_argument("--epochs", type=int, default=20, help="total epochs (a resumed run continues up to this)")
    t.add_argument("--batch-size", type=int, default=32)
    t.add_argument("--lr", type=float, default=None,
                   help="(peak) learning rate (default: 3e-3 for adam/adamw, 0.05 otherwise)")
    t.add_argument("--schedule", default="onecycle", choices=("onecycle", "cosine", "none"),
                   help="learning-rate schedule, stepped every batch")
    t.add_argument("--no-augment", action="store_true", help="no random crops (MNIST-like) / crops+flips (CIFAR)")
    t.add_argument("--optimizer", default="adam", choices=OPTIMIZERS)
    t.add_argument("--device", default="cpu", help="cpu, cuda, cuda:N, cpu:N")
    t.add_argument("--seed", type=int, default=0)
    t.add_argument("--workers", type=int, default=0, help="DataLoader worker processes")
    t.add_argument("--out", default=None, help="output folder (default: ./runs/<timestamp>)")
    t.add_argument("--resume", default=None, metavar="CKPT", help="continue from a checkpoint written by this command")
    t.add_argument("--limit", type=int, default=None, help="use only the first N training and N/4 test samples")
    t.add_argument("--jit", action="store_true", help="run each training step as a compiled graph (ember.jit)")
    t.add_argument("--no-progress", action="store_true", help="no progress bar")
    t.add_argument("--nproc", type=int, default=1,
                   help="train data-parallel on this many processes (MPI; see `ember run` and docs/distributed.md)")

    r = sub.add_parser("run", help="run a program on N processes with MPI (ember run -n 4 script.py [args])",
                       description="Start N ranks of a program with mpiexec; see docs/distributed.md.")
    from ember.distributed.launch import add_arguments

    add_arguments(r)

    s = sub.add_parser("summary", help="print a model's layers, output shapes, parameters and multiply-adds",
                       formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    s.add_argument("--model", required=True, help="a name from ember.models")
    s.add_argument("--input", default=None, help="input size, e.g. 1,3,224,224 (default: the model's usual input)")
    s.add_argument("--num-classes", type=int, default=None)
    return p


def _load_dataset(name: str, limit: int | None, augment: bool):
    import ember.datasets as ds
    from ember.data import TransformDataset
    from ember.data.transforms import RandomCrop, ToTensor

    if name == "mnist_sample":
        pair = ds.mnist_sample()
        train, test = pair.train, pair.test
        if augment:  # 4,000 digits: small random shifts are worth about a point of accuracy
            train = TransformDataset(train, RandomCrop(28, padding=2))
    elif name == "digits":
        pair = ds.digits()
        train, test = pair.train, pair.test
    elif name in ("mnist", "fashion_mnist"):
        cls = ds.MNIST if name == "mnist" else ds.FashionMNIST
        train, test = cls(train=True, transform=ToTensor()), cls(train=False, transform=ToTensor())
        if augment:
            train = TransformDataset(train, RandomCrop(28, padding=2))
    else:
        from ember.data.transforms import Compose, Normalize, RandomCrop, RandomHorizontalFlip, ToTensor

        norm = Normalize((0.4914, 0.4822, 0.4465), (0.247, 0.243, 0.261))
        crops = [RandomCrop(32, padding=4), RandomHorizontalFlip()] if augment else []
        train = ds.CIFAR10(train=True, transform=Compose([*crops, ToTensor(), norm]))
        test = ds.CIFAR10(train=False, transform=Compose([ToTensor(), norm]))
    if limit:
        from ember.data import Subset

        train = Subset(train, range(min(limit, len(train))))
        test = Subset(test, range(min(max(limit // 4, 1), len(test))))
    return train, test


def _input_shape(dataset) -> tuple:
    x = dataset[0][0]
    return tuple(x.shape)


def _make_optimizer(name: str, params, lr: float | None):
    import ember as em

    if lr is None:
        lr = 3e-3 if name in ("adam", "adamw") else 0.05
    if name == "sgd":
        return em.optim.SGD(params, lr=lr, momentum=0.9)
    if name == "adam":
        return em.optim.Adam(params, lr=lr)
    if name == "adamw":
        return em.optim.AdamW(params, lr=lr)
    if name == "rmsprop":
        return em.optim.RMSprop(params, lr=lr)
    return em.optim.Adagrad(params, lr=lr)


def train_main(args) -> int:
    """`ember train`: fit, report the test accuracy, write checkpoint, metrics and curves."""
    import ember as em
    from ember.data import DataLoader
    from ember.distributed._env import launched
    from ember.train import History, LRSchedulerCallback, ModelCheckpoint, fit

    if args.nproc != 1 or launched() is not None:  # data-parallel on several processes: its own module
        from ember.distributed.train import train_main as data_parallel_main

        return data_parallel_main(args)
    em.manual_seed(args.seed)
    out = args.out or os.path.join("runs", time.strftime("%Y%m%d-%H%M%S"))
    os.makedirs(out, exist_ok=True)
    train_set, test_set = _load_dataset(args.dataset, args.limit, not args.no_augment)
    in_shape = _input_shape(train_set)
    labels = {int(train_set[i][1]) for i in range(min(len(train_set), 2000))}
    num_classes = 10 if args.dataset != "digits" else max(labels) + 1
    model = em.models.get_model(args.model, num_classes=num_classes, in_channels=in_shape[0], input_size=in_shape)
    model.to(args.device)
    optimizer = _make_optimizer(args.optimizer, model.parameters(), args.lr)
    history, start_epoch = History(), 1
    if args.resume:
        state = em.load(args.resume)
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        start_epoch = int(state["epoch"]) + 1
        for k, v in state.get("history", {}).items():
            history.history[k] = list(v)
        history.epochs = list(range(1, start_epoch))
        print(f"resumed from {args.resume} at epoch {start_epoch - 1}")
    gen = em.Generator().manual_seed(args.seed)
    train_loader = DataLoader(train_set, batch_size=args.batch_size, shuffle=True, num_workers=args.workers, generator=gen)
    test_loader = DataLoader(test_set, batch_size=256, num_workers=args.workers)
    n_params = sum(p.numel() for p in model.parameters())
    print(f"training {args.model} ({n_params:,} parameters) on {args.dataset}: {len(train_set)} train / "
          f"{len(test_set)} test samples, {args.optimizer}, {args.epochs} epochs, device {args.device}")
    callbacks = [ModelCheckpoint(os.path.join(out, "checkpoint.safetensors"), monitor="val_accuracy",
                                 save_best_only=False)]
    total_steps = args.epochs * len(train_loader)
    if args.schedule == "onecycle":
        max_lr = optimizer.param_groups[0]["lr"]
        sched = em.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=max_lr, total_steps=total_steps)
        callbacks.append(LRSchedulerCallback(sched, per="batch"))
    elif args.schedule == "cosine":
        sched = em.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=total_steps)
        callbacks.append(LRSchedulerCallback(sched, per="batch"))
    if args.schedule != "none":
        for _ in range((start_epoch - 1) * len(train_loader)):  # resume: continue the schedule where it was
            sched.step()
    ckpt = callbacks[0].path
    remaining = args.epochs - (start_epoch - 1)
    if remaining <= 0:
        print(f"nothing to do: the checkpoint already has {start_epoch - 1} of {args.epochs} epochs")
        return 0
    t0 = time.perf_counter()
    history = fit(model, train_loader, test_loader, epochs=remaining, optimizer=optimizer, device=args.device,
                  callbacks=callbacks,
                  progress=not args.no_progress, jit=args.jit, start_epoch=start_epoch, history=history)
    elapsed = time.perf_counter() - t0
    history.to_json(os.path.join(out, "metrics.json"))
    try:
        history.plot(os.path.join(out, "curves.png"))
    except ImportError as e:
        print(f"(no curves: {e})")
    acc = history.last("val_accuracy")
    print(f"final test accuracy: {acc * 100:.2f}%  ({elapsed:.1f}s)")
    print(f"wrote {ckpt}, {os.path.join(out, 'metrics.json')} and {os.path.join(out, 'curves.png')}")
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
    args.argv = list(sys.argv[1:] if argv is None else argv)
    try:
        if args.command == "train":
            return train_main(args)
        if args.command == "run":
            from ember.distributed.launch import run_main

            return run_main(args)
        return summary_main(args)
    except (ValueError, KeyError, FileNotFoundError, ImportError, RuntimeError) as e:
        # Bad names, missing data files or extras: one clear line, not a traceback.
        msg = e.args[0] if isinstance(e, KeyError) and e.args else e
        print(f"ember {args.command}: error: {msg}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
