"""A small high-level trainer: `fit` with validation, metrics, callbacks, progress bar and history."""

from ember.train.callbacks import Callback, EarlyStopping, LRSchedulerCallback, ModelCheckpoint
from ember.train.history import History
from ember.train.loop import evaluate, fit
from ember.train.progress import progress_bar
from ember.train.tensorboard import TensorBoardLogger
from ember.train.trainer import Trainer

__all__ = ["fit", "evaluate", "History", "Callback", "ModelCheckpoint", "EarlyStopping", "LRSchedulerCallback",
           "Trainer", "progress_bar", "TensorBoardLogger"]
