"""`TensorBoardLogger`: a `fit` callback logging loss, accuracy and learning rate to TensorBoard
(`ember train --tensorboard DIR`); a resumed run continues the same curves."""

from __future__ import annotations

from ember.train.callbacks import Callback


class TensorBoardLogger(Callback):
    """Log per-step training loss and learning rate, and per-epoch loss and accuracy, to `log_dir`.

    Every value is logged at the global step (optimizer steps so far), so all charts share one
    axis and a resumed run, whose step continues from the checkpoint, extends the same curves:
    it opens the writer with `purge_step` at the step after the checkpoint, so TensorBoard drops
    what the interrupted run logged after it. Tags: `loss/train_step`, `lr`, and per epoch
    `loss/train`, `accuracy/train`, `loss/<val_name>`, `accuracy/<val_name>`.
    The logger keeps no state in checkpoints (a run may be resumed with or without it).
    """

    checkpointed = False

    def __init__(self, log_dir, val_name: str = "val", log_every: int = 1, flush_secs: float = 30) -> None:
        if not isinstance(log_every, int) or log_every < 1:
            raise ValueError(f"TensorBoardLogger: log_every must be a positive int, got {log_every!r}")
        from ember.utils.tensorboard import SummaryWriter  # fails early, with the install hint, when missing

        self._writer_class = SummaryWriter
        self.log_dir = log_dir
        self.val_name = val_name
        self.log_every = log_every
        self.flush_secs = flush_secs
        self.writer = None

    def on_train_begin(self, trainer) -> None:
        purge = trainer.global_step + 1 if trainer.global_step else None
        self.writer = self._writer_class(self.log_dir, purge_step=purge, flush_secs=self.flush_secs)

    def on_batch_end(self, trainer, step: int, loss: float) -> None:
        if step % self.log_every == 0:
            self.writer.add_scalar("loss/train_step", loss, step)
            self.writer.add_scalar("lr", trainer.optimizer.param_groups[0]["lr"], step)

    def on_epoch_end(self, trainer, epoch: int, metrics: dict) -> None:
        step = trainer.global_step
        for key, value in metrics.items():
            if key in ("lr", "time") or not isinstance(value, (int, float)):
                continue
            split, name = (self.val_name, key[4:]) if key.startswith("val_") else ("train", key)
            self.writer.add_scalar(f"{name}/{split}", value, step)
        self.writer.add_scalar("epoch", epoch, step)
        self.writer.flush()

    def on_train_end(self, trainer) -> None:
        if self.writer is not None:
            self.writer.close()
