"""`ember train --nproc N`: the main job, data-parallel on N ranks (DistributedDataParallel).

Outside a launcher it starts itself again under `ember run -n N`. Inside, every rank builds the same
model and optimizer, reads its share of each epoch (DistributedSampler), and fit() runs as usual on
the DDP-wrapped model; rank 0 alone prints, writes the checkpoint (the inner module's state, the
same format as a single-process run, so either can resume the other) and the metrics. `--resume`
reads the checkpoint on rank 0 and sends it to the others.
"""

from __future__ import annotations

import argparse
import os
import time
import warnings

from ember.distributed import _env


def train_main(args) -> int:
    """Run `ember train` data-parallel (relaunching under `ember run -n N` when not started by a launcher)."""
    if _env.launched() is None:
        if args.nproc < 1:
            raise ValueError(f"ember train: --nproc must be at least 1, got {args.nproc}")
        from ember.distributed.launch import run_main

        run_args = argparse.Namespace(nproc=args.nproc, hostfile=None, servers=0, timeout=None, mpiexec=None,
                                      module="ember", program=list(args.argv))
        return run_main(run_args)
    return _rank_main(args)


class _EpochLoader:
    """A loader whose sampler gets the epoch number before each pass (DistributedSampler.set_epoch)."""

    def __init__(self, loader, sampler, first_epoch: int) -> None:
        self.loader, self.sampler, self.epoch = loader, sampler, first_epoch

    def __len__(self) -> int:
        return len(self.loader)

    def __iter__(self):
        self.sampler.set_epoch(self.epoch)
        self.epoch += 1
        return iter(self.loader)


def _rank_main(args) -> int:
    import ember as em
    import ember.distributed as dist
    from ember.cli import _input_shape, _load_dataset, _make_optimizer
    from ember.data import DataLoader
    from ember.distributed.checkpoint import load_on_main, save_on_main
    from ember.train import Callback, History, LRSchedulerCallback, fit

    dist.init_process_group()
    rank, world = dist.get_rank(), dist.get_world_size()
    if args.nproc not in (1, world):
        raise ValueError(f"ember train: --nproc {args.nproc}, but the launcher started {world} ranks")
    main = rank == 0
    say = print if main else (lambda *a, **k: None)
    em.manual_seed(args.seed)
    box = [args.out or os.path.join("runs", time.strftime("%Y%m%d-%H%M%S"))]
    dist.broadcast_object_list(box, src=0)  # one output folder, rank 0's clock
    out = box[0]
    if main:
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
        state = load_on_main(args.resume)
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        start_epoch = int(state["epoch"]) + 1
        for k, v in state.get("history", {}).items():
            history.history[k] = list(v)
        history.epochs = list(range(1, start_epoch))
        say(f"resumed from {args.resume} at epoch {start_epoch - 1}")
    ddp = dist.DistributedDataParallel(model)
    sampler = dist.DistributedSampler(train_set, shuffle=True, seed=args.seed)
    loader = DataLoader(train_set, batch_size=args.batch_size, sampler=sampler, num_workers=args.workers)
    train_loader = _EpochLoader(loader, sampler, start_epoch)
    test_loader = DataLoader(test_set, batch_size=256, num_workers=args.workers)
    n_params = sum(p.numel() for p in model.parameters())
    say(f"training {args.model} ({n_params:,} parameters) on {args.dataset} data-parallel on {world} ranks: "
        f"{len(train_set)} train / {len(test_set)} test samples, {args.optimizer}, {args.epochs} epochs, "
        f"batch {args.batch_size} per rank")
    ckpt = os.path.join(out, "checkpoint.safetensors")

    class Checkpoint(Callback):
        """The inner module's state, written by rank 0 after every epoch."""

        def on_epoch_end(self, trainer, epoch, metrics):
            save_on_main({"model": model.state_dict(), "optimizer": optimizer.state_dict(), "epoch": epoch,
                          "history": trainer.history.history}, ckpt)

    callbacks = [Checkpoint()]
    total_steps = args.epochs * len(train_loader)
    if args.schedule != "none":
        if args.schedule == "onecycle":
            sched = em.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=optimizer.param_groups[0]["lr"],
                                                     total_steps=total_steps)
        else:
            sched = em.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=total_steps)
        callbacks.append(LRSchedulerCallback(sched, per="batch"))
        with warnings.catch_warnings():  # fast-forwarding a schedule before any optimizer step is intended here
            warnings.simplefilter("ignore", UserWarning)
            for _ in range((start_epoch - 1) * len(train_loader)):  # resume: continue the schedule where it was
                sched.step()
    remaining = args.epochs - (start_epoch - 1)
    if remaining <= 0:
        say(f"nothing to do: the checkpoint already has {start_epoch - 1} of {args.epochs} epochs")
        return 0
    t0 = time.perf_counter()
    history = fit(ddp, train_loader, test_loader, epochs=remaining, optimizer=optimizer, device=args.device,
                  callbacks=callbacks, progress=main and not args.no_progress, jit=args.jit, start_epoch=start_epoch,
                  history=history, log=print if main else None)
    elapsed = time.perf_counter() - t0
    if main:
        history.to_json(os.path.join(out, "metrics.json"))
        try:
            history.plot(os.path.join(out, "curves.png"))
        except ImportError as e:
            print(f"(no curves: {e})")
        print(f"final test accuracy: {history.last('val_accuracy') * 100:.2f}%  ({elapsed:.1f}s on {world} ranks)")
        print(f"wrote {ckpt} and {os.path.join(out, 'metrics.json')}")
    dist.destroy_process_group()
    return 0
