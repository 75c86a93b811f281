"""`ember tune`: hyperparameter search over `ember train`'s settings with Optuna (the `tune` extra)."""

from ember.tune.reporter import TrialReporter
from ember.tune.space import Choice, Range, SpaceError

__all__ = ["TrialReporter", "Choice", "Range", "SpaceError"]
