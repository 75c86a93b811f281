"""The search space of `ember tune`: each `ember train` setting fixed, a list of choices, or a numeric range.

Flags and space files share one syntax: `1e-4:1e-1:log` (a log-uniform range), `16:128:16` (a range
with a step), `adam,sgd` (choices), `5` (fixed). Files (TOML, YAML or JSON) may also use lists for
choices and tables `{low, high, log, step}` / `{choices}`.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass

from ember.train import recipe, settings

# The settings a trial can take, with their kind: every `ember train` setting (settings.DEFAULTS).
_CHOICES = {"model": recipe.MODELS, "dataset": recipe.DATASETS, "schedule": recipe.SCHEDULES,
            "optimizer": recipe.OPTIMIZERS}
_INT_LOW = {"epochs": 1, "batch_size": 1, "seed": 0, "limit": 1}
_FLOATS = ("lr",)
CATEGORICAL = _CHOICES
_BOOLS = ("augment",)
KEYS = tuple(settings.DEFAULTS)
_TRUE, _FALSE = ("true", "yes", "on", "1"), ("false", "no", "off", "0")


class SpaceError(ValueError):
    """A bad search-space entry (flag or file), reported as one line naming where it came from."""


@dataclass(frozen=True)
class Choice:
    """A categorical parameter: one of `values`."""

    values: tuple

    def to_dict(self) -> dict:
        """The file form, {"choices": [...]}."""
        return {"choices": list(self.values)}


@dataclass(frozen=True)
class Range:
    """A numeric parameter between `low` and `high` (inclusive), log-uniform or on a grid of `step`."""

    low: float
    high: float
    log: bool = False
    step: float | None = None

    def to_dict(self) -> dict:
        """The file form, {"low", "high", "log", "step"}."""
        d = {"low": self.low, "high": self.high, "log": self.log}
        if self.step is not None:
            d["step"] = self.step
        return d


# What a study searches when it is given no range or choices: the learning rate on a log range (it covers
# the defaults of Adam, 3e-3, and of SGD, 0.05), every optimizer `ember train` has, and the usual batch sizes.
# A grid needs choices, so there the learning rate is four values spanning the same defaults.
DEFAULT_SEARCH = {"lr": Range(1e-4, 1e-1, log=True), "optimizer": Choice(recipe.OPTIMIZERS),
                  "batch_size": Choice((16, 32, 64, 128))}
DEFAULT_GRID_LR = Choice((1e-3, 3e-3, 1e-2, 5e-2))


def flag(key: str) -> str:
    """The command-line flag of a setting: batch_size -> --batch-size."""
    return "--" + key.replace("_", "-")


def _scalar(key: str, value, where: str):
    """One value of setting `key`, checked and converted (from text or a file's number/bool/string)."""
    if key in _CHOICES:
        if not isinstance(value, str) or value not in _CHOICES[key]:
            raise SpaceError(f"{where}: {value!r} is not one of {', '.join(_CHOICES[key])}")
        return value
    if key in _BOOLS:
        if isinstance(value, bool):
            return value
        text = str(value).strip().lower()
        if text in _TRUE or text in _FALSE:
            return text in _TRUE
        raise SpaceError(f"{where}: expected true or false (yes/no, on/off), got {value!r}")
    if key in _INT_LOW:
        if isinstance(value, bool) or (isinstance(value, float) and not value.is_integer()):
            raise SpaceError(f"{where}: expected an integer, got {value!r}")
        try:
            number = int(value)
        except (TypeError, ValueError):
            raise SpaceError(f"{where}: expected an integer, got {value!r}") from None
        if number < _INT_LOW[key]:
            kind = "a positive" if _INT_LOW[key] == 1 else "a non-negative"
            raise SpaceError(f"{where}: expected {kind} integer, got {number}")
        return number
    try:
        number = float(value) if not isinstance(value, bool) else math.nan
    except (TypeError, ValueError):
        raise SpaceError(f"{where}: expected a number, got {value!r}") from None
    if not (math.isfinite(number) and number > 0):
        raise SpaceError(f"{where}: expected a positive number, got {value!r}")
    return number


def _number_or_none(value):
    try:
        return None if isinstance(value, bool) else float(value)
    except (TypeError, ValueError):
        return None


def _range(key: str, low, high, log: bool, step, where: str) -> Range:
    if key not in _INT_LOW and key not in _FLOATS:
        raise SpaceError(f"{where}: {key} takes choices (a,b,c), not a range")
    if log and _number_or_none(low) is not None and _number_or_none(low) <= 0:
        raise SpaceError(f"{where}: a log range needs a low end above 0, got {low}")
    lo, hi = _scalar(key, low, where), _scalar(key, high, where)
    if lo > hi:
        raise SpaceError(f"{where}: the low end {lo:g} is above the high end {hi:g}")
    if log and lo <= 0:
        raise SpaceError(f"{where}: a log range needs a low end above 0, got {lo:g}")
    if step is not None:
        if log:
            raise SpaceError(f"{where}: a range is either log or stepped, not both")
        step = _scalar("lr" if key in _FLOATS else "batch_size", step, f"{where} (step)")
    return Range(lo, hi, bool(log), step)


def _choices(key: str, values, where: str):
    parsed = []
    for v in values:
        v = _scalar(key, v, where)
        if v not in parsed:
            parsed.append(v)
    if not parsed:
        raise SpaceError(f"{where}: no choices given")
    return parsed[0] if len(parsed) == 1 else Choice(tuple(parsed))


def parse_text(key: str, text: str, where: str | None = None):
    """A setting from its flag text: `low:high[:log|:step]`, `a,b,c`, or one value (fixed)."""
    where = where or f"{flag(key)} {text}"
    text = str(text).strip()
    if ":" in text:
        parts = [p.strip() for p in text.split(":")]
        if len(parts) not in (2, 3) or not all(parts):
            raise SpaceError(f"{where}: expected low:high, low:high:log or low:high:step")
        log = len(parts) == 3 and parts[2].lower() == "log"
        step = parts[2] if len(parts) == 3 and not log else None
        return _range(key, parts[0], parts[1], log, step, where)
    if "," in text:
        return _choices(key, [p.strip() for p in text.split(",") if p.strip()], where)
    return _scalar(key, text, where)


def _normal_key(key, where: str) -> str:
    name = str(key).replace("-", "_")
    if name == "no_augment":
        raise SpaceError(f"{where}: write augment = false, not no_augment")
    if name not in KEYS:
        raise SpaceError(f"{where}: unknown setting {key!r}; ember train's settings are {', '.join(KEYS)}")
    return name


def from_mapping(entries: dict, source: str) -> dict:
    """A space from a file's (or a saved study's) mapping of setting -> value, list or table."""
    if not isinstance(entries, dict):
        raise SpaceError(f"{source}: expected a table of settings (e.g. lr = \"1e-4:1e-1:log\"), "
                         f"got {type(entries).__name__}")
    space = {}
    for raw_key, value in entries.items():
        key = _normal_key(raw_key, source)
        where = f"{source}: {raw_key}"
        if isinstance(value, dict):
            extra = set(value) - {"low", "high", "log", "step", "choices"}
            if extra:
                raise SpaceError(f"{where}: unknown field(s) {', '.join(sorted(map(str, extra)))}; "
                                 "a range has low, high, log, step; choices have choices")
            if "choices" in value:
                if set(value) != {"choices"} or not isinstance(value["choices"], list):
                    raise SpaceError(f"{where}: choices must be a list, alone in its table")
                space[key] = _choices(key, value["choices"], where)
            elif "low" in value and "high" in value:
                space[key] = _range(key, value["low"], value["high"], bool(value.get("log", False)),
                                    value.get("step"), where)
            else:
                raise SpaceError(f"{where}: a range needs both low and high")
        elif isinstance(value, list):
            space[key] = _choices(key, value, where)
        elif isinstance(value, str):
            space[key] = parse_text(key, value, where)
        elif value is None:
            raise SpaceError(f"{where}: no value")
        else:
            space[key] = _scalar(key, value, where)
    return space


def load_file(path: str) -> dict:
    """A space from a .toml, .yaml/.yml or .json file; errors name the file and the key."""
    ext = os.path.splitext(path)[1].lower()
    if ext not in (".toml", ".yaml", ".yml", ".json"):
        raise SpaceError(f"--space {path}: expected a .toml, .yaml, .yml or .json file")
    if not os.path.isfile(path):
        raise SpaceError(f"--space {path}: no such file")
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise SpaceError(f"--space {path}: {e.strerror}") from None
    try:
        if ext == ".toml":
            try:
                import tomllib
            except ImportError:  # Python 3.10
                import tomli as tomllib
            entries = tomllib.loads(data.decode("utf-8"))
        elif ext == ".json":
            import json

            entries = json.loads(data.decode("utf-8"))
        else:
            import yaml  # optuna depends on PyYAML, so the tune extra has it

            entries = yaml.safe_load(data.decode("utf-8")) or {}
    except ImportError as e:
        raise SpaceError(f"--space {path}: can't read {ext} files here ({e}); use a .json file") from None
    except Exception as e:  # each parser raises its own kind of syntax error
        msg = " ".join(str(e).split())
        raise SpaceError(f"--space {path}: not valid {ext.lstrip('.').upper()}: {msg}") from None
    return from_mapping(entries, path)


def to_mapping(space: dict) -> dict:
    """The file form of a space (JSON-ready): fixed values, {"choices"} and {"low", "high", ...}."""
    return {k: (v.to_dict() if isinstance(v, (Choice, Range)) else v) for k, v in space.items()}


def searched(space: dict) -> list[str]:
    """The settings that vary between trials, in settings order."""
    return [k for k in KEYS if isinstance(space.get(k), (Choice, Range))]


def with_default_search(space: dict, grid: bool = False) -> tuple[dict, list[str]]:
    """`space` searching DEFAULT_SEARCH's settings it leaves out, when it searches nothing; and the keys added.

    Raises SpaceError when the space fixes every one of them, so that every trial would be the same run.
    """
    if searched(space):
        return space, []
    added = {k: (DEFAULT_GRID_LR if grid and k == "lr" else v) for k, v in DEFAULT_SEARCH.items() if k not in space}
    if not added:
        raise SpaceError("nothing to search: every setting is fixed, so every trial would be the same run; give a "
                         "range or choices, e.g. --lr 1e-4:1e-1:log, --optimizer adam,sgd or --seed 0:4")
    return {**space, **added}, list(added)


def values_of(space: dict, key: str) -> list:
    """Every value (choices; a range's ends; the fixed value, else the default) `key` may take."""
    v = space.get(key, settings.DEFAULTS[key])
    if isinstance(v, Choice):
        return list(v.values)
    if isinstance(v, Range):
        return [v.low, v.high]
    return [v]


def check(space: dict) -> None:
    """Raise SpaceError for a model that `ember train` can't train on a data set the space allows."""
    for model in values_of(space, "model"):
        for dataset in values_of(space, "dataset"):
            try:
                recipe.check_model(model, dataset)
            except ValueError as e:
                raise SpaceError(str(e)) from None


def grid(space: dict) -> dict:
    """The grid of a grid search: every searched setting's values (choices, or a stepped or integer range)."""
    points = {}
    for key in searched(space):
        v = space[key]
        if isinstance(v, Choice):
            points[key] = list(v.values)
        elif key in _FLOATS and v.step is None:
            raise SpaceError(f"{flag(key)} {show(v)}: a grid search needs choices or a stepped range "
                             f"(e.g. {v.low:g}:{v.high:g}:{(v.high - v.low) / 4:g}), not a continuous one")
        elif key in _FLOATS:
            n = int(math.floor((v.high - v.low) / v.step + 1e-9))
            points[key] = [round(v.low + i * v.step, 12) for i in range(n + 1)]  # 0.030000000000000002 -> 0.03
        elif v.log:
            raise SpaceError(f"{flag(key)} {show(v)}: a grid search needs choices or a stepped range, not a log one")
        else:
            points[key] = list(range(int(v.low), int(v.high) + 1, int(v.step or 1)))
    return points


def grid_size(space: dict) -> int:
    """How many points the grid of `space` has."""
    return math.prod(len(values) for values in grid(space).values())


def suggest(trial, space: dict) -> dict:
    """The settings of one trial: Optuna suggests the searched ones; fixed ones pass through."""
    given = {}
    for key, v in space.items():
        if isinstance(v, Choice):
            given[key] = trial.suggest_categorical(key, list(v.values))
        elif isinstance(v, Range) and key in _FLOATS:
            given[key] = trial.suggest_float(key, v.low, v.high, log=v.log, step=v.step)
        elif isinstance(v, Range):
            given[key] = trial.suggest_int(key, int(v.low), int(v.high), log=v.log, step=int(v.step or 1))
        else:
            given[key] = v
    return given


def show(entry) -> str:
    """An entry in flag syntax: 1e-04:0.1:log, adam,sgd, 5 (also for the file form of a saved study)."""
    if isinstance(entry, dict) and "choices" in entry:
        entry = Choice(tuple(entry["choices"]))
    elif isinstance(entry, dict):
        entry = Range(entry["low"], entry["high"], entry.get("log", False), entry.get("step"))
    if isinstance(entry, Choice):
        return ",".join(map(str, entry.values))
    if isinstance(entry, Range):
        tail = ":log" if entry.log else (f":{entry.step:g}" if entry.step else "")
        return f"{entry.low:g}:{entry.high:g}{tail}"
    return str(entry)


def describe(space: dict) -> str:
    """One line: what is searched and how."""
    parts = []
    for key in searched(space):
        v = space[key]
        if isinstance(v, Choice):
            parts.append(f"{key} in {{{', '.join(map(str, v.values))}}}")
        else:
            how = " log" if v.log else (f" step {v.step:g}" if v.step else "")
            parts.append(f"{key} in [{v.low:g}, {v.high:g}]{how}")
    return "; ".join(parts) or "nothing (every setting fixed)"
