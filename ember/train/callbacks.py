"""Callbacks for `fit`: checkpoint the best model, stop early, step an LR scheduler."""

from __future__ import annotations

import contextlib
import math
import os


class Callback:
    """Hooks called by `fit`; override what you need. `trainer` exposes model, optimizer, history."""

    checkpointed = True  # whether fit's checkpoints keep this callback's state_dict (False: a logger)

    def on_train_begin(self, trainer) -> None:
        """Before the first epoch."""

    def on_epoch_end(self, trainer, epoch: int, metrics: dict) -> None:
        """After validation of each epoch."""

    def on_batch_end(self, trainer, step: int, loss: float) -> None:
        """After each optimizer step."""

    def on_train_end(self, trainer) -> None:
        """After the last epoch (or an early stop)."""

    def state_dict(self) -> dict:
        """What a resumed run needs to continue where this callback was (saved in fit's checkpoints)."""
        return {}

    def load_state_dict(self, state: dict) -> None:
        """Restore what state_dict returned."""


def _better(mode: str, value: float, best: float, min_delta: float = 0.0) -> bool:
    if math.isnan(value):
        return False
    return value < best - min_delta if mode == "min" else value > best + min_delta


def _default_mode(monitor: str) -> str:
    return "max" if "acc" in monitor else "min"


class ModelCheckpoint(Callback):
    """Save model + optimizer state (em.save) when the monitored metric improves (or every epoch)."""

    def __init__(self, path: str, monitor: str = "val_accuracy", mode: str | None = None,
                 save_best_only: bool = True) -> None:
        self.path = path
        self.monitor = monitor
        self.mode = mode or _default_mode(monitor)
        self.save_best_only = save_best_only
        self.best = math.inf if self.mode == "min" else -math.inf
        self.best_epoch = None

    def on_epoch_end(self, trainer, epoch: int, metrics: dict) -> None:
        value = metrics.get(self.monitor)
        if value is None and self.save_best_only:
            raise KeyError(f"ModelCheckpoint: metric {self.monitor!r} not found; have {sorted(metrics)}")
        if not self.save_best_only or _better(self.mode, value, self.best):
            if value is not None:
                self.best = value
            self.best_epoch = epoch
            trainer.save_checkpoint(self.path, epoch)

    def state_dict(self) -> dict:
        """The best value so far, so a resumed run does not overwrite a better checkpoint."""
        return {"best": self.best, "best_epoch": self.best_epoch}

    def load_state_dict(self, state: dict) -> None:
        """Restore what state_dict returned."""
        self.best, self.best_epoch = state["best"], state["best_epoch"]


class EarlyStopping(Callback):
    """Stop training when the monitored metric has not improved for `patience` epochs."""

    def __init__(self, monitor: str = "val_loss", patience: int = 3, mode: str | None = None,
                 min_delta: float = 0.0) -> None:
        self.monitor = monitor
        self.patience = patience
        self.mode = mode or _default_mode(monitor)
        self.min_delta = min_delta
        self.best = math.inf if self.mode == "min" else -math.inf
        self.wait = 0
        self.stopped_epoch = None

    def on_epoch_end(self, trainer, epoch: int, metrics: dict) -> None:
        value = metrics.get(self.monitor)
        if value is None:
            raise KeyError(f"EarlyStopping: metric {self.monitor!r} not found; have {sorted(metrics)}")
        if _better(self.mode, value, self.best, self.min_delta):
            self.best = value
            self.wait = 0
            return
        self.wait += 1
        if self.wait >= self.patience:
            self.stopped_epoch = epoch
            trainer.stop_training = True

    def state_dict(self) -> dict:
        """The best value and the epochs waited since, so patience counts across a resume."""
        return {"best": self.best, "wait": self.wait, "stopped_epoch": self.stopped_epoch}

    def load_state_dict(self, state: dict) -> None:
        """Restore what state_dict returned."""
        self.best, self.wait, self.stopped_epoch = state["best"], state["wait"], state["stopped_epoch"]


class LRSchedulerCallback(Callback):
    """Step an ember.optim.lr_scheduler every epoch or every batch (ReduceLROnPlateau gets a metric)."""

    def __init__(self, scheduler, per: str = "epoch", monitor: str = "val_loss") -> None:
        if per not in ("epoch", "batch"):
            raise ValueError(f"LRSchedulerCallback: per must be 'epoch' or 'batch', got {per!r}")
        self.scheduler = scheduler
        self.per = per
        self.monitor = monitor

    def _step(self, metrics=None) -> None:
        if type(self.scheduler).__name__ == "ReduceLROnPlateau":
            self.scheduler.step(metrics[self.monitor])
        else:
            self.scheduler.step()

    def on_batch_end(self, trainer, step: int, loss: float) -> None:
        if self.per == "batch":
            self._step({"loss": loss})

    def on_epoch_end(self, trainer, epoch: int, metrics: dict) -> None:
        if self.per == "epoch":
            self._step(metrics)

    def state_dict(self) -> dict:
        """The scheduler's own state_dict (PyTorch's layout)."""
        return {"scheduler": self.scheduler.state_dict()}

    def load_state_dict(self, state: dict) -> None:
        """Restore the scheduler; the learning rates themselves come back with the optimizer's state."""
        self.scheduler.load_state_dict(state["scheduler"])


def ensure_dir(path: str) -> None:
    """Create the parent folder of a file path."""
    parent = os.path.dirname(os.path.abspath(path))
    os.makedirs(parent, exist_ok=True)


@contextlib.contextmanager
def writing(path: str):
    """Name `path` in an OSError raised while writing it (a write() failing on a full disk names no file)."""
    try:
        yield
    except OSError as e:
        if e.filename:
            raise
        raise type(e)(e.errno, e.strerror or str(e), path) from e
