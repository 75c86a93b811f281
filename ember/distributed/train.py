"""`ember train --nproc N`: the main job, data-parallel on N ranks (DistributedDataParallel).

Outside a launcher it starts itself again under `ember run -n N` (with `--max-restarts`). Inside,
every rank builds the same model and optimizer, reads its share of each epoch (DistributedSampler),
and fit() runs as usual on the DDP-wrapped model; rank 0 alone prints and writes the metrics and
fit's checkpoint (the DDP module's state, keys prefixed "module." as in PyTorch). `--resume` reads
the checkpoint on rank 0, sends it to the others, and fit continues the run exactly (scheduler,
optimizer and random streams). A job that `ember run --max-restarts` started again resumes from the
checkpoint in its --out folder the same way, so it ends with the weights of an uninterrupted run.
"""

from __future__ import annotations

import argparse
import os
import time

from ember.distributed import _env, elastic


def train_main(args) -> int:
    """Run `ember train` data-parallel (relaunching under `ember run -n N` when not started by a launcher)."""
    if _env.launched() is None:
        if args.nproc < 1:
            raise ValueError(f"ember train: --nproc must be at least 1, got {args.nproc}")
        from ember.distributed.launch import add_arguments, run_main

        argv = list(args.argv)
        if args.max_restarts and not args.out and not args.resume:  # a restart must find the first attempt's folder
            argv += ["--out", os.path.join("runs", time.strftime("%Y%m%d-%H%M%S"))]
        parser = argparse.ArgumentParser(prog="ember run")
        add_arguments(parser)
        run_args = parser.parse_args(["-n", str(args.nproc), "--max-restarts", str(args.max_restarts), "-m", "ember",
                                      *argv])
        return run_main(run_args)
    return _rank_main(args)


def _restarted_from(args) -> str | None:
    """The checkpoint a restarted job (ember run --max-restarts) resumes from, if the first attempt wrote one."""
    if elastic.restart_count() == 0 or args.resume:
        return None
    ckpt = os.path.join(args.out, "checkpoint.safetensors")
    return ckpt if os.path.exists(ckpt) else None


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
    import ember.distributed as dist
    from ember.data import DataLoader
    from ember.distributed.checkpoint import load_on_main
    from ember.train import LRSchedulerCallback, fit, recipe, rng_state, settings

    dist.init_process_group()
    rank, world = dist.get_rank(), dist.get_world_size()
    if args.nproc not in (1, world):
        raise ValueError(f"ember train: --nproc {args.nproc}, but the launcher started {world} ranks")
    main = rank == 0
    say = print if main else (lambda *a, **k: None)
    given = {k: getattr(args, k) for k in settings.DEFAULTS}
    state, mode = None, None
    if elastic.restart_count() and not (args.out or args.resume):
        raise ValueError("ember train: a job that ember run --max-restarts starts again needs --out (the folder of "
                         "the checkpoint it resumes from)")
    box = [_restarted_from(args) if main else None]  # rank 0's file system decides for every rank
    dist.broadcast_object_list(box, src=0)
    restarted = box[0]
    resume = args.resume or restarted
    if resume:
        state = load_on_main(resume)
        config, mode = settings.resumed(given, state["config"], int(state["epoch"]), resume)
        if mode == settings.DONE and restarted:
            say(f"restart {elastic.restart_count()}: {resume} already has every epoch; nothing to do")
            dist.destroy_process_group()
            return 0
        if mode != settings.CONTINUE:
            raise ValueError(f"ember train --nproc: --resume {resume} can only continue an unfinished run")
    else:
        config = settings.fresh(given)
    recipe.check_model(config["model"], config["dataset"])
    recipe.check_data(args.data, [config["dataset"]])
    rng_state.seed_all(config["seed"])
    box = [args.out or (os.path.dirname(os.path.abspath(resume)) if resume
                        else os.path.join("runs", time.strftime("%Y%m%d-%H%M%S")))]
    dist.broadcast_object_list(box, src=0)  # one output folder, rank 0's clock
    out = box[0]
    if main:
        os.makedirs(out, exist_ok=True)
    train_set, test_set = recipe.load_dataset(config["dataset"], config["limit"], config["augment"], args.data)
    model = recipe.build_model(config["model"], config["dataset"])
    model.to(args.device)
    optimizer = recipe.make_optimizer(config["optimizer"], model.parameters(), config["lr"])
    ddp = dist.DistributedDataParallel(model)
    done = int(state["epoch"]) if state is not None else 0
    sampler = dist.DistributedSampler(train_set, shuffle=True, seed=config["seed"])
    loader = DataLoader(train_set, batch_size=config["batch_size"], sampler=sampler, num_workers=args.workers)
    train_loader = _EpochLoader(loader, sampler, done + 1)
    test_loader = DataLoader(test_set, batch_size=256, num_workers=args.workers)
    ckpt = os.path.join(out, "checkpoint.safetensors")
    steps = (config["epochs"] - config["schedule_start"]) * len(train_loader)
    scheduler = recipe.make_scheduler(config["schedule"], optimizer, config["lr"], steps)
    callbacks = [_checkpoint_class()(ckpt, main)]
    if scheduler is not None:
        callbacks.append(LRSchedulerCallback(scheduler, per="batch"))
    if state is not None:
        why = f"restart {elastic.restart_count()}: " if restarted else ""
        say(f"{why}resumed from {resume} at epoch {done}")
    n_params = sum(p.numel() for p in model.parameters())
    say(f"training {config['model']} ({n_params:,} parameters) on {config['dataset']} data-parallel on {world} "
        f"ranks: {len(train_set)} train / {len(test_set)} test samples, {config['optimizer']}, {config['epochs']} "
        f"epochs, batch {config['batch_size']} per rank{settings.run_modes(args)}")
    t0 = time.perf_counter()
    history = fit(ddp, train_loader, test_loader, epochs=config["epochs"], optimizer=optimizer, device=args.device,
                  callbacks=callbacks, progress=main and not args.no_progress, jit=args.jit, amp=args.amp, resume=state,
                  config=config, log=print if main else None)
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


def _checkpoint_class():
    from ember.train import ModelCheckpoint

    class MainCheckpoint(ModelCheckpoint):
        """ModelCheckpoint written by rank 0 alone (every rank keeps the same callback state)."""

        def __init__(self, path: str, main: bool) -> None:
            super().__init__(path, monitor="val_accuracy", save_best_only=False)
            self.main = main

        def on_epoch_end(self, trainer, epoch: int, metrics: dict) -> None:
            if self.main:
                super().on_epoch_end(trainer, epoch, metrics)

    MainCheckpoint.__name__ = "ModelCheckpoint"  # the same callback as a single-process run's, for resuming
    return MainCheckpoint
