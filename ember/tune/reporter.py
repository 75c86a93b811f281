"""The `fit` callback that reports each epoch's test accuracy to an Optuna trial and stops a pruned one."""

from __future__ import annotations

from ember.train.callbacks import Callback


class TrialReporter(Callback):
    """`trial.report(val_accuracy, epoch)` after every epoch; stops training when the pruner says so."""

    checkpointed = False  # no state: a trial's checkpoint resumes with plain `ember train --resume`

    def __init__(self, trial, monitor: str = "val_accuracy") -> None:
        self.trial = trial
        self.monitor = monitor
        self.last = None  # the latest reported value
        self.epochs = 0  # epochs trained (this run)
        self.pruned_at = None  # the epoch after which the pruner stopped the trial

    def on_epoch_end(self, trainer, epoch: int, metrics: dict) -> None:
        value = metrics.get(self.monitor)
        if value is None:
            raise KeyError(f"TrialReporter: metric {self.monitor!r} not found; have {sorted(metrics)}")
        self.last = float(value)
        self.epochs = epoch
        self.trial.report(self.last, epoch)
        if self.trial.should_prune():
            self.pruned_at = epoch
            trainer.stop_training = True  # fit ends the epoch cleanly: checkpoint and metrics.json are written
