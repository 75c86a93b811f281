"""Optimizers and learning-rate schedulers with PyTorch's interface (`ember.optim`)."""

from ember.optim import lr_scheduler
from ember.optim.adagrad import Adagrad
from ember.optim.adam import Adam
from ember.optim.adamw import AdamW
from ember.optim.optimizer import Optimizer
from ember.optim.rmsprop import RMSprop
from ember.optim.sgd import SGD

__all__ = ["Adagrad", "Adam", "AdamW", "Optimizer", "RMSprop", "SGD", "lr_scheduler"]
