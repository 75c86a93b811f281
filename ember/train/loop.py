"""The training loop behind `fit`: epochs of optimizer steps, validation, metrics and callbacks."""

from __future__ import annotations

import contextlib
import os
import time

from ember import dtypes, nn, optim, serialization
from ember.amp.autocast_mode import autocast as autocast_block
from ember.amp.grad_scaler import GradScaler
from ember.autograd import grad_mode
from ember.device import Device
from ember.graph.jit import jit as jit_compile
from ember.kernels import ahead
from ember.kernels.parallel import get_num_threads
from ember.train.callbacks import Callback
from ember.train.history import History
from ember.train.progress import progress_bar as _progress
from ember.train.trainer import Trainer


def _to(batch, device):
    x, y = batch[0], batch[1]
    return x.to(device), y.to(device)


def _accuracy_count(logits, y) -> int:
    if logits.ndim < 2:
        return 0
    return int((logits.argmax(dim=1) == y).sum().item())


def evaluate(model, loader, loss_fn=None, device="cpu") -> dict:
    """Mean loss and accuracy of `model` over `loader`, without gradients."""
    loss_fn = loss_fn or nn.functional.cross_entropy
    was_training = model.training
    model.eval()
    total, loss_sum, correct = 0, 0.0, 0
    with grad_mode.no_grad():
        for batch in loader:
            x, y = _to(batch, device)
            logits = model(x)
            n = x.shape[0]
            loss_sum += float(loss_fn(logits, y).item()) * n
            correct += _accuracy_count(logits, y)
            total += n
    model.train(was_training)
    if total == 0:
        raise ValueError("evaluate: the loader produced no batches")
    return {"loss": loss_sum / total, "accuracy": correct / total}


def _mixed_precision(amp: bool, device, jit: bool):
    """(a context manager factory for the forward pass, a GradScaler or None) for fit's `amp` setting."""
    if not amp:
        return contextlib.nullcontext, None
    device_type = Device(device).type if not isinstance(device, Device) else device.type
    if device_type == "cuda":
        if jit:
            raise ValueError("fit: amp on CUDA (float16 with loss scaling) skips steps by their values and can't run "
                             "under jit=True")
        return (lambda: autocast_block("cuda", dtype=dtypes.float16)), GradScaler("cuda")
    if device_type != "cpu":
        raise ValueError(f"fit: amp runs on cpu or cuda, not on {device_type}")
    return (lambda: autocast_block("cpu", dtype=dtypes.bfloat16)), None


def _step_key(model, optimizer, x, y, amp: bool) -> str:
    """What a training step's kernels depend on: the model, the optimizer, the batch's shapes and dtypes, autocast."""
    return (f"{model!r}|{type(optimizer).__name__}|{tuple(x.shape)} {x.dtype}|{tuple(y.shape)} {y.dtype}|amp {amp}"
            f"|threads {get_num_threads()}")


def fit(model, train_loader, val_loader=None, *, epochs: int = 1, optimizer=None, loss_fn=None,
        device="cpu", callbacks: list[Callback] | None = None, progress: bool = True, jit: bool = False,
        amp: bool = False, resume=None, config: dict | None = None, log=print) -> History:
    """Train `model` up to epoch `epochs`, validating after each; returns the History.

    Each batch is (inputs, integer labels); the default loss is cross-entropy and accuracy is
    reported for classification outputs. With jit=True the whole training step runs as a graph.
    With amp=True the forward pass and the loss run under `em.autocast` (bfloat16 on the CPU; float16
    with a `GradScaler` on CUDA); weights, gradients, optimizer state and evaluation stay float32.
    `resume` is a checkpoint written by ModelCheckpoint (a path, or the dict em.load returned):
    model, optimizer, history, the callbacks' state (LR schedulers included) and every random
    stream (Ember's default generator, Python's and NumPy's, the train loader's generator) are
    restored, and training continues with the epoch after the saved one, exactly as if it had not
    stopped. `config` (plain values) is saved in every checkpoint under "config".
    """
    if not isinstance(epochs, int) or isinstance(epochs, bool) or epochs < 1:
        raise ValueError(f"fit: epochs must be a positive integer, got {epochs!r}")
    loss_fn = loss_fn or nn.functional.cross_entropy
    optimizer = optimizer or optim.SGD(model.parameters(), lr=0.01)
    callbacks = list(callbacks or [])
    history = History()
    trainer = Trainer(model, optimizer, history, callbacks, train_loader, config)
    if resume is not None:
        trainer.load_state_dict(serialization.load(resume) if isinstance(resume, (str, os.PathLike)) else resume)
        if trainer.epoch > epochs:
            raise ValueError(f"fit: the checkpoint is at epoch {trainer.epoch}, past epochs={epochs}")
    start_epoch = trainer.epoch + 1

    autocast, scaler = _mixed_precision(amp, device, jit)

    def step(x, y):
        optimizer.zero_grad()
        with autocast():
            logits = model(x)
            loss = loss_fn(logits, y)
        if scaler is None:
            loss.backward()
            optimizer.step()
        else:
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
        return loss, logits.argmax(dim=1)

    run_step = jit_compile(step) if jit else step
    for cb in callbacks:
        cb.on_train_begin(trainer)
    for epoch in range(start_epoch, epochs + 1):
        trainer.epoch = epoch
        model.train()
        t0 = time.perf_counter()
        seen, loss_sum, correct = 0, 0.0, 0
        bar = _progress(train_loader, len(train_loader), f"epoch {epoch}/{epochs}", progress)
        for batch in bar:
            x, y = _to(batch, device)
            # the first step's CPU kernels compile ahead on another core (a forked process; never after a GPU's
            # context exists, which a fork cannot share)
            if not jit and trainer.global_step == 0 and x.device.type == "cpu" and ahead.useful():
                ahead.compile_ahead(step, (x, y), _step_key(model, optimizer, x, y, amp))
            loss, pred = run_step(x, y)
            n = x.shape[0]
            loss_value = float(loss.item())
            loss_sum += loss_value * n
            correct += int((pred == y).sum().item())
            seen += n
            trainer.global_step += 1
            if progress and trainer.global_step % 5 == 0:
                bar.set_postfix(loss=f"{loss_sum / seen:.4f}", acc=f"{correct / seen:.3f}")
            for cb in callbacks:
                cb.on_batch_end(trainer, trainer.global_step, loss_value)
        if hasattr(bar, "close"):
            bar.close()
        metrics = {"loss": loss_sum / max(seen, 1), "accuracy": correct / max(seen, 1)}
        if val_loader is not None:
            val = evaluate(model, val_loader, loss_fn, device)
            metrics.update({f"val_{k}": v for k, v in val.items()})
        metrics["lr"] = optimizer.param_groups[0]["lr"]
        metrics["time"] = time.perf_counter() - t0
        history.record(epoch, metrics)
        if log is not None:
            parts = [f"{k} {v:.4f}" for k, v in metrics.items() if k not in ("lr", "time")]
            log(f"epoch {epoch:3d}  " + "  ".join(parts) + f"  ({metrics['time']:.1f}s)")
        trainer.end_epoch(epoch, metrics)
        if trainer.stop_training:
            if log is not None:
                log(f"early stop after epoch {epoch}")
            break
    for cb in callbacks:
        cb.on_train_end(trainer)
    return history
