"""Optimizers and learning-rate schedulers with PyTorch's interface (`ember.optim`)."""

from ember.optim import lr_scheduler
from ember.optim.adadelta import Adadelta
from ember.optim.adafactor import Adafactor
from ember.optim.adagrad import Adagrad
from ember.optim.adam import Adam
from ember.optim.adamax import Adamax
from ember.optim.adamw import AdamW
from ember.optim.asgd import ASGD
from ember.optim.lbfgs import LBFGS
from ember.optim.muon import Muon
from ember.optim.nadam import NAdam
from ember.optim.optimizer import Optimizer
from ember.optim.radam import RAdam
from ember.optim.rmsprop import RMSprop
from ember.optim.rprop import Rprop
from ember.optim.sgd import SGD
from ember.optim.sparse_adam import SparseAdam

__all__ = ["ASGD", "Adadelta", "Adafactor", "Adagrad", "Adam", "AdamW", "Adamax", "LBFGS", "Muon", "NAdam", "Optimizer",
           "RAdam", "RMSprop", "Rprop", "SGD", "SparseAdam", "lr_scheduler", "swa_utils"]


def __getattr__(name: str):
    """`swa_utils` on first use: it builds on ember.nn (AveragedModel is a Module), which `import ember.optim` does
    not otherwise load."""
    if name == "swa_utils":
        import importlib

        return importlib.import_module("ember.optim.swa_utils")
    raise AttributeError(f"module 'ember.optim' has no attribute {name!r}")
