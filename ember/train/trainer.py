"""The state `fit` shares with callbacks, and its checkpoints: everything a resumed run needs to continue exactly."""

from __future__ import annotations

from ember import serialization
from ember.train import rng_state
from ember.train.callbacks import ensure_dir, writing
from ember.train.history import History

CHECKPOINT_KEYS = ("model", "optimizer", "epoch", "step", "history", "callbacks", "rng")


def _loader_generators(loader) -> dict:
    """The generators a DataLoader shuffles with (and seeds its workers from), if it has its own."""
    gens = {}
    if loader is not None and getattr(loader, "generator", None) is not None:
        gens["train_loader"] = loader.generator
    sampler_gen = getattr(getattr(loader, "sampler", None), "generator", None)
    if sampler_gen is not None and all(sampler_gen is not g for g in gens.values()):
        gens["train_sampler"] = sampler_gen
    return gens


class Trainer:
    """State shared with callbacks: model, optimizer, history, the stop flag, and the checkpoint writer."""

    def __init__(self, model, optimizer, history: History, callbacks=(), train_loader=None,
                 config: dict | None = None) -> None:
        self.model = model
        self.optimizer = optimizer
        self.history = history
        self.callbacks = list(callbacks)
        self.train_loader = train_loader
        self.config = config
        self.stop_training = False
        self.epoch = 0
        self.global_step = 0
        self._pending: list[tuple[str, int]] | None = None

    def _checkpointed(self) -> list:
        """The callbacks whose state checkpoints keep (loggers opt out, so a run resumes with or without them)."""
        return [cb for cb in self.callbacks if getattr(cb, "checkpointed", True)]

    def state_dict(self) -> dict:
        """Model, optimizer, progress, history, callbacks (schedulers included) and every random stream."""
        state = {
            "model": self.model.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "epoch": self.epoch,
            "step": self.global_step,
            "history": self.history.state_dict(),
            "callbacks": [{"type": type(cb).__name__, "state": cb.state_dict()} for cb in self._checkpointed()],
            "rng": rng_state.capture(_loader_generators(self.train_loader)),
        }
        if self.config is not None:
            state["config"] = self.config
        return state

    def load_state_dict(self, state: dict) -> None:
        """Restore a checkpoint's state; the random streams last, so nothing draws from them before training."""
        missing = [k for k in CHECKPOINT_KEYS if k not in state]
        if missing:
            raise ValueError(f"fit: the checkpoint has no {', '.join(missing)}: it was not written by fit's "
                             "ModelCheckpoint of this Ember version, so it can't be resumed exactly")
        saved = [c["type"] for c in state["callbacks"]]
        have = [type(cb).__name__ for cb in self._checkpointed()]
        if saved != have:
            raise ValueError(f"fit: the checkpoint was written with callbacks {saved}; this run has {have}")
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.history.load_state_dict(state["history"])
        for cb, entry in zip(self._checkpointed(), state["callbacks"]):
            cb.load_state_dict(entry["state"])
        self.epoch = int(state["epoch"])
        self.global_step = int(state["step"])
        rng_state.restore(state["rng"], _loader_generators(self.train_loader))

    def save_checkpoint(self, path: str, epoch: int) -> None:
        """em.save the state (atomically); during on_epoch_end, after every callback has seen the epoch."""
        if self._pending is not None:
            # A callback later in the list may still change its state for this epoch (a scheduler
            # stepped per epoch, EarlyStopping's patience): write once they all have.
            self._pending.append((path, epoch))
            return
        state = self.state_dict()
        state["epoch"] = epoch
        with writing(path):
            ensure_dir(path)
            serialization.save(state, path)

    def end_epoch(self, epoch: int, metrics: dict) -> None:
        """Run the callbacks' on_epoch_end, then write the checkpoints they asked for."""
        self._pending = []
        try:
            for cb in self.callbacks:
                cb.on_epoch_end(self, epoch, metrics)
        finally:
            pending, self._pending = self._pending, None
        for path, ep in pending:
            self.save_checkpoint(path, ep)
