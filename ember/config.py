"""Every setting of Ember, declared once: its type, default, environment variable and meaning.

A setting reads its environment variable the first time it is asked for (never at import), so a program
may set the variable before its first use; `set()` overrides it from code and `reset()` forgets both, so
the next read looks at the environment again. Nothing else in Ember reads `os.environ` (the `ember run`
launcher excepted, which passes the environment on to the processes it starts). `table()` renders the
list as the Markdown table in docs/config.md.
"""

from __future__ import annotations

import contextlib
import os

_UNREAD = object()


class Setting:
    """One setting: `get()` its value (the environment's, parsed once, unless `set()`), `set(v)`, `reset()`."""

    __slots__ = ("name", "env", "default", "kind", "doc", "choices", "shown", "_parse", "_value")

    def __init__(self, env: str, default, kind: str, doc: str, parse=None, choices=None, shown=None) -> None:
        self.env = env
        self.name = env.removeprefix("EMBER_").lower()
        self.default = default
        self.kind = kind
        self.doc = doc
        self.choices = choices
        self.shown = shown  # how the docs show a default computed when read (a path under the home folder)
        self._parse = parse or _PARSERS[kind]
        self._value = _UNREAD

    def get(self):
        """The value in force: set(), else the environment variable (parsed on first read), else the default."""
        value = self._value
        if value is _UNREAD:
            raw = os.environ.get(self.env, "").strip()
            if raw:
                value = self.parse(raw)
            else:
                value = self.default() if callable(self.default) else self.default
            self._value = value
        return value

    def parse(self, raw: str):
        """`raw` (text from the environment) as this setting's value; a one-line error naming the variable."""
        try:
            value = self._parse(raw)
        except ValueError:
            raise ValueError(f"{self.env}={raw!r}: expected {self.kind}{self._choice_text()}") from None
        if self.choices is not None and value not in self.choices:
            raise ValueError(f"{self.env}={raw!r}: expected one of {self._choice_text(bare=True)}")
        return value

    def set(self, value) -> None:
        """Use `value` from now on in this process (checked against the choices); reset() reads the environment
        again."""
        if self.choices is not None and value not in self.choices:
            raise ValueError(f"{self.name}: expected one of {self._choice_text(bare=True)}, got {value!r}")
        self._value = value

    def reset(self) -> None:
        """Forget any set() and any value read: the next get() reads the environment again."""
        self._value = _UNREAD

    def _choice_text(self, bare: bool = False) -> str:
        if self.choices is None:
            return ""
        text = ", ".join(repr(c) if isinstance(c, str) else str(c) for c in self.choices)
        return text if bare else f" ({text})"

    def __repr__(self) -> str:
        return f"Setting({self.env}={self.get()!r})"


def _flag(raw: str) -> bool:
    low = raw.lower()
    if low in ("1", "true", "yes", "on"):
        return True
    if low in ("0", "false", "no", "off"):
        return False
    raise ValueError(raw)


def _positive_int(raw: str) -> int:
    value = int(raw)
    if value < 1:
        raise ValueError(raw)
    return value


def _positive_float(raw: str) -> float:
    value = float(raw)
    if not value > 0:
        raise ValueError(raw)
    return value


def _count(raw: str) -> int:
    value = int(raw)
    if value < 0:
        raise ValueError(raw)
    return value


def _word(raw: str) -> str:
    return raw.lower()


def _parallel(raw: str):
    return "auto" if raw.lower() == "auto" else _flag(raw)


_PARSERS = {"a flag (0/1)": _flag, "a positive integer": _positive_int, "a non-negative integer": _count, "a positive number of seconds": _positive_float,
            "a word": _word, "a path": os.path.expanduser, "a comma-separated list": str}

SETTINGS: dict[str, Setting] = {}


def _declare(env: str, default, kind: str, doc: str, parse=None, choices=None, shown=None) -> Setting:
    setting = Setting(env, default, kind, doc, parse, choices, shown)
    SETTINGS[setting.name] = setting
    return setting


# --- kernels and threads ---------------------------------------------------------------------------------------
KERNELS = _declare(
    "EMBER_FUSION_BACKEND", "auto", "a word", choices=("auto", "numba", "numpy"),
    doc="compiled kernels (the `jit` extra's Numba): `auto` picks per kernel and region, `numba` compiles every "
        "fused region it can, `numpy` never compiles (every op runs its NumPy path)")
COMPILE_IN_BACKGROUND = _declare(
    "EMBER_COMPILE_IN_BACKGROUND", True, "a flag (0/1)",
    doc="an op whose compiled kernel is not compiled yet (nor on disk) runs its NumPy path while the kernel "
        "compiles on a background thread; 0: compile it where it is first called")
COMPILE_AHEAD = _declare(
    "EMBER_COMPILE_AHEAD", True, "a flag (0/1)",
    doc="where kernels compile where first called (use_deterministic_algorithms), `fit` starts a process that "
        "compiles the first step's kernels from the last while the step compiles them from the first "
        "(ember.kernels.ahead); 0: none")
CPU_CAPABILITY = _declare(
    "EMBER_CPU_CAPABILITY", "auto", "a word", choices=("auto", "avx512", "avx2", "default"),
    doc="the widest instruction set Ember's compiled micro-kernels use, as PyTorch's ATEN_CPU_CAPABILITY: `auto` "
        "the CPU's widest, `avx2` AVX2 blocks on an AVX-512 CPU too, `default` none (the convolutions and products "
        "built on them take their NumPy and BLAS paths); read once, at import")
GEMM = _declare(
    "EMBER_GEMM", "auto", "a word", choices=("auto", "ember", "blas", "mkl"),
    doc="float32 matrix products: `auto` takes Ember's AVX-512 GEMM only where NumPy's OpenBLAS runs narrower "
        "kernels than the CPU has, `ember` wherever it runs; `mkl` MKL's (the `mkl` extra) for the sizes it wins, "
        "for GEMM-bound models; `blas` always NumPy's BLAS, and the convolutions' kernels built on Ember's GEMM "
        "off (the others keep them wherever it runs)")
NUM_THREADS = _declare(
    "EMBER_NUM_THREADS", None, "a positive integer",
    doc="threads inside one op (parallel_for and BLAS), as torch.set_num_threads; default: the cores this process "
        "may run on, at most 8")
NUM_INTEROP_THREADS = _declare(
    "EMBER_NUM_INTEROP_THREADS", None, "a positive integer",
    doc="threads of the dependency engine that run independent ops at once, as torch.set_num_interop_threads; "
        "default: as NUM_THREADS")
CACHE = _declare(
    "EMBER_CACHE", lambda: os.path.join(os.path.expanduser("~"), ".cache", "ember"), "a path", shown="~/.cache/ember",
    doc="where compiled kernels are kept (`<path>/kernels`); a folder only this user can write")

# --- graph and runtime ------------------------------------------------------------------------------------------
PASSES = _declare(
    "EMBER_PASSES", None, "a comma-separated list",
    doc="the graph passes ember.jit and optimize run when given none (default: all)")
MEMORY_PLAN = _declare(
    "EMBER_MEMORY_PLAN", True, "a flag (0/1)", doc="run graph plans in planned buffers (arenas and out= kernels)")
PARALLEL = _declare(
    "EMBER_PARALLEL", "auto", "a word", parse=_parallel, choices=("auto", True, False),
    doc="run graph plans through the dependency engine: `auto` (where it can help), 1 or 0")
REMAT = _declare(
    "EMBER_REMAT", None, "a word", choices=(None, "sqrt"),
    doc="rematerialisation for new graph plans: unset (keep every activation) or `sqrt`")
ASYNC = _declare(
    "EMBER_ASYNC", False, "a flag (0/1)", doc="start in asynchronous eager mode (ops pushed to the engine)")

# --- data and distributed ---------------------------------------------------------------------------------------
DATA = _declare(
    "EMBER_DATA", lambda: os.path.join(os.path.expanduser("~"), ".ember", "data"), "a path", shown="~/.ember/data",
    doc="where data sets are found (`<path>/<name>`); `ember train --data DIR` sets it for one run")
MPIEXEC = _declare("EMBER_MPIEXEC", None, "a path", doc="the mpiexec `ember run` uses (default: the one beside Python)")
DISTRIBUTED_TIMEOUT = _declare(
    "EMBER_DISTRIBUTED_TIMEOUT", None, "a positive number of seconds",
    doc="how long a rank may stay silent or a collective wait before the job fails (init_process_group(timeout=))")
DISTRIBUTED_DEBUG = _declare(
    "EMBER_DISTRIBUTED_DEBUG", "info", "a word", choices=("off", "info", "detail"),
    doc="checks that the ranks call matching collectives, as TORCH_DISTRIBUTED_DEBUG: `off`, `info` (ops, dtypes "
        "and sizes) or `detail` (every shape too)",
    parse=lambda raw: {"0": "off", "false": "off", "no": "off", "1": "detail", "true": "detail", "yes": "detail",
                       "on": "detail"}.get(raw.lower(), raw.lower()))
NUM_SERVERS = _declare(
    "EMBER_NUM_SERVERS", 0, "a non-negative integer",
    doc="how many ranks of an `ember run` job serve a parameter server (ember.distributed.ps) or are TF1 `ps` tasks")
NNODES = _declare(
    "EMBER_NNODES", 1, "a positive integer",
    doc="set by `ember run --nnodes K` for its ranks: how many machines' launches make up the job")
NODE_RANK = _declare(
    "EMBER_NODE_RANK", None, "a non-negative integer",
    doc="set by `ember run --node-rank I` for its ranks: this machine's place among the `--nnodes` machines")


def _torchelastic_restart_count() -> int:
    raw = outside("TORCHELASTIC_RESTART_COUNT") or "0"
    return int(raw) if raw.isdigit() else 0


RESTART_COUNT = _declare(
    "EMBER_RESTART_COUNT", _torchelastic_restart_count, "a non-negative integer", shown="0",
    doc="set by `ember run --max-restarts R` for its ranks: how many times the job has been restarted "
        "(else torchrun's TORCHELASTIC_RESTART_COUNT)")
MPI_CUDA_AWARE = _declare(
    "EMBER_MPI_CUDA_AWARE", False, "a flag (0/1)", doc="pass CUDA buffers to MPI directly (a CUDA-aware MPI)")


def get(name: str):
    """The value of setting `name` (its variable without EMBER_, lower case: "num_threads")."""
    return _setting(name).get()


def set(name: str, value) -> None:  # noqa: A001 - config.set, as config.get
    """Set setting `name` for this process (config.reset(name): back to its environment variable or default)."""
    _setting(name).set(value)


def reset(name: str) -> None:
    """Forget what set() gave setting `name`: its environment variable (or default) holds again."""
    _setting(name).reset()


def _setting(name: str) -> Setting:
    found = SETTINGS.get(name.lower().removeprefix("ember_"))
    if found is None:
        raise KeyError(f"ember.config: no setting {name!r}; the settings are {', '.join(sorted(SETTINGS))}")
    return found


def outside(name: str) -> str | None:
    """An environment variable Ember does not own but obeys or reports (OPENBLAS_CORETYPE,
    OPENBLAS_THREAD_TIMEOUT, launchers' rank variables), read now; None when unset or empty."""
    value = os.environ.get(name, "").strip()
    return value or None


def set_outside(name: str, value: str) -> None:
    """Set an environment variable Ember does not own, for this process's libraries and the processes it starts
    (tune_process's OPENBLAS_THREAD_TIMEOUT)."""
    os.environ[name] = value


@contextlib.contextmanager
def outside_for_children(values: dict, unless_set: bool = True):
    """Within the block, the environment variables `values` (not Ember's own) hold for the processes started in
    it, unless the user set any of them (`unless_set`); the environment is as it was after the block."""
    saved = {k: os.environ.get(k) for k in values}
    if not (unless_set and any(v is not None for v in saved.values())):
        os.environ.update(values)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def table() -> str:
    """The settings as a Markdown table (variable, default, meaning), for docs/config.md."""
    rows = ["| variable | default | meaning |", "|---|---|---|"]
    for s in SETTINGS.values():
        if s.shown is not None:
            default = s.shown
        elif s.default is None:
            default = "unset"
        else:
            default = str(int(s.default)) if isinstance(s.default, bool) else str(s.default)
        rows.append(f"| `{s.env}` | `{default}` | {s.doc} |")
    return "\n".join(rows)


def main() -> None:
    """`python -m ember.config`: the settings table (docs/config.md) and each setting's value here."""
    print(table())
    print()
    for s in SETTINGS.values():
        print(f"{s.env} = {s.get()!r}")


if __name__ == "__main__":
    main()
