"""`tf.train.Saver`: a session's variable values to and from checkpoints in Ember's safetensors format.

`save(sess, "dir/model.ckpt", global_step=100)` writes `dir/model.ckpt-100.safetensors` (with
`ember.save`: atomic, checksummed, named by the variables' TF names, readable by any safetensors
tool) and records it in `dir/checkpoint`, the text file TF keeps, so `tf.train.latest_checkpoint`
finds it; older checkpoints beyond `max_to_keep` are deleted. `restore(sess, prefix)` takes what
`save` returned. TF's meta graphs (`.meta` files) are not written: a program rebuilds its graph
and restores the values into it.
"""

from __future__ import annotations

import os
import re
import time

import numpy as np

from ember.serialization import load as _load
from ember.serialization import save as _save
from ember.tensor import Tensor
from ember.v1.errors import InvalidArgumentError, NotFoundError
from ember.v1.graph_api import GraphKeys, get_default_graph

SUFFIX = ".safetensors"
STATE_FILE = "checkpoint"


def checkpoint_file(prefix: str) -> str:
    """The file a checkpoint prefix (what Saver.save returns) is stored in."""
    prefix = os.fspath(prefix)
    return prefix if prefix.endswith(SUFFIX) else prefix + SUFFIX


def _host(x) -> np.ndarray:
    return x.numpy() if isinstance(x, Tensor) else np.asarray(x)


def checkpoint_exists(checkpoint_prefix) -> bool:
    """Whether a checkpoint was written under this prefix."""
    return os.path.isfile(checkpoint_file(checkpoint_prefix))


def _names(var_list) -> dict:
    """{checkpoint name: variable}: a list names each variable by its op name, a dict says the names."""
    from ember.v1.variables import Variable

    if var_list is None:
        var_list = get_default_graph().get_collection(GraphKeys.GLOBAL_VARIABLES)
    if isinstance(var_list, dict):
        items = list(var_list.items())
    else:
        items = [(v.op_name if isinstance(v, Variable) else None, v) for v in var_list]
    names = {}
    for name, var in items:
        if not isinstance(var, Variable):
            raise TypeError(f"Saver: expected variables to save, got {type(var).__name__}")
        if name in names:
            raise ValueError(f"At least two variables have the same name: {name}")
        names[name] = var
    return names


class Saver:
    """Saves and restores variables; checkpoints are safetensors files of the variables' values by name."""

    def __init__(self, var_list=None, reshape: bool = False, sharded: bool = False, max_to_keep: int = 5,
                 keep_checkpoint_every_n_hours: float = 10000.0, name: str | None = None,
                 restore_sequentially: bool = False, saver_def=None, builder=None, defer_build: bool = False,
                 allow_empty: bool = False, write_version: int = 2, pad_step_number: bool = False,
                 save_relative_paths: bool = False, filename: str | None = None) -> None:
        self._var_list = var_list
        self._names = None if defer_build else _names(var_list)
        if not allow_empty and self._names is not None and not self._names:
            raise ValueError("No variables to save")
        self._max_to_keep = max_to_keep
        self._keep_every = keep_checkpoint_every_n_hours * 3600.0
        self._next_kept = time.time() + self._keep_every
        self._pad = pad_step_number
        self._last: list = []  # (prefix, time) of this saver's checkpoints, oldest first
        get_default_graph().add_to_collection(GraphKeys.SAVERS, self)

    def build(self) -> None:
        """Decide which variables to save (done at construction unless defer_build)."""
        if self._names is None:
            self._names = _names(self._var_list)

    @property
    def last_checkpoints(self) -> list:
        """The prefixes of the checkpoints this saver keeps, oldest first."""
        return [p for p, _ in self._last]

    def save(self, sess, save_path, global_step=None, latest_filename: str | None = None,
             meta_graph_suffix: str = "meta", write_meta_graph: bool = True, write_state: bool = True,
             strip_default_attrs: bool = False, save_debug_info: bool = False) -> str:
        """Write the variables' values in `sess`; returns the checkpoint prefix (for restore)."""
        self.build()
        prefix = os.fspath(save_path)
        if global_step is not None:
            step = int(sess.run(global_step)) if isinstance(global_step, Tensor) else int(global_step)
            prefix = f"{prefix}-{step:08d}" if self._pad else f"{prefix}-{step}"
        folder = os.path.dirname(os.path.abspath(prefix))
        if not os.path.isdir(folder):
            raise ValueError(f"Parent directory of {save_path} doesn't exist, can't save.")
        values = sess.variable_values
        arrays = {}
        for name, var in self._names.items():
            arr = values.read(var)  # FailedPreconditionError for a variable never initialised in sess
            arrays[name] = np.array(var._device.backend.to_host(arr) if var._device.type != "cpu" else arr)
        _save(arrays, checkpoint_file(prefix))
        self._remember(prefix)
        if write_state:
            update_checkpoint_state(folder, prefix, [p for p, _ in self._last], latest_filename)
        return prefix

    def _remember(self, prefix: str) -> None:
        self._last = [(p, t) for p, t in self._last if p != prefix] + [(prefix, time.time())]
        if not self._max_to_keep:
            return
        while len(self._last) > self._max_to_keep:
            old, stamp = self._last.pop(0)
            if stamp >= self._next_kept:  # keep_checkpoint_every_n_hours: this one stays on disk
                self._next_kept += self._keep_every
                continue
            try:
                os.remove(checkpoint_file(old))
            except FileNotFoundError:
                pass

    def restore(self, sess, save_path) -> None:
        """Load every saved variable's value into `sess` from the checkpoint `save_path` (a prefix save returned)."""
        self.build()
        if save_path is None:
            raise ValueError("Can't load save_path when it is None.")
        path = checkpoint_file(save_path)
        if not os.path.isfile(path):
            raise ValueError(f"The passed save_path is not a valid checkpoint: {save_path}")
        stored = _load(path)
        values = sess.variable_values
        for name, var in self._names.items():
            if name not in stored:
                raise NotFoundError(f"Key {name} not found in checkpoint {save_path}")
            arr = _host(stored[name])
            if tuple(arr.shape) != tuple(var.spec_shape):
                raise InvalidArgumentError(
                    f"Assign requires shapes of both tensors to match. lhs shape= {list(var.spec_shape)} rhs shape= "
                    f"{list(arr.shape)} (variable {name} from {save_path})"
                )
            if arr.dtype != var.spec_dtype:
                raise InvalidArgumentError(f"variable {name} is {var.dtype.name} but the checkpoint {save_path} "
                                           f"holds {arr.dtype.name}")
            backend = var._device.backend
            values.write(var, backend.xp, backend.from_host(arr))

    def recover_last_checkpoints(self, checkpoint_paths) -> None:
        """Take over older checkpoints (e.g. of an earlier run) so max_to_keep counts and deletes them too."""
        self._last = [(p, time.time()) for p in checkpoint_paths if checkpoint_exists(p)] + self._last


# --- the checkpoint state file ---------------------------------------------------------------------------
class CheckpointState:
    """What a folder's `checkpoint` file says: the newest checkpoint and all the kept ones."""

    def __init__(self, model_checkpoint_path: str, all_model_checkpoint_paths: list) -> None:
        self.model_checkpoint_path = model_checkpoint_path
        self.all_model_checkpoint_paths = list(all_model_checkpoint_paths)

    def __repr__(self) -> str:
        return f"CheckpointState(model_checkpoint_path={self.model_checkpoint_path!r})"


def _quote(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def update_checkpoint_state(folder: str, latest: str, all_paths: list, latest_filename: str | None = None) -> None:
    """Write the folder's checkpoint state file (TF's text format; paths relative to the folder)."""
    def rel(p: str) -> str:
        p = os.path.abspath(p)
        return os.path.relpath(p, folder) if os.path.dirname(p) == folder else p

    lines = [f"model_checkpoint_path: {_quote(rel(latest))}"]
    lines += [f"all_model_checkpoint_paths: {_quote(rel(p))}" for p in all_paths]
    target = os.path.join(folder, latest_filename or STATE_FILE)
    tmp = target + ".tmp"
    with open(tmp, "w") as fh:
        fh.write("\n".join(lines) + "\n")
    os.replace(tmp, target)


_LINE = re.compile(r'^\s*(model_checkpoint_path|all_model_checkpoint_paths)\s*:\s*"((?:[^"\\]|\\.)*)"\s*$')


def get_checkpoint_state(checkpoint_dir, latest_filename: str | None = None) -> CheckpointState | None:
    """The folder's checkpoint state (None when it has no state file)."""
    folder = os.fspath(checkpoint_dir)
    path = os.path.join(folder, latest_filename or STATE_FILE)
    if not os.path.isfile(path):
        return None
    latest, paths = None, []
    with open(path) as fh:
        for line in fh:
            m = _LINE.match(line)
            if m is None:
                continue
            value = re.sub(r"\\(.)", r"\1", m.group(2))
            if not os.path.isabs(value):
                value = os.path.join(folder, value)
            if m.group(1) == "model_checkpoint_path":
                latest = value
            else:
                paths.append(value)
    if latest is None:
        return None
    return CheckpointState(latest, paths or [latest])


def latest_checkpoint(checkpoint_dir, latest_filename: str | None = None) -> str | None:
    """The prefix of the newest checkpoint saved in the folder (None if there is none)."""
    state = get_checkpoint_state(checkpoint_dir, latest_filename)
    if state is None or not checkpoint_exists(state.model_checkpoint_path):
        return None
    return state.model_checkpoint_path


def _file_of(ckpt_dir_or_file) -> str:
    """The file of a checkpoint prefix, or of a folder's newest checkpoint; TF's NotFoundError if there is none."""
    path = os.fspath(ckpt_dir_or_file)
    if os.path.isdir(path):
        latest = latest_checkpoint(path)
        if latest is None:
            raise ValueError(f"Couldn't find 'checkpoint' file or checkpoints in given directory {path}")
        path = latest
    file = checkpoint_file(path)
    if not os.path.isfile(file):
        raise NotFoundError(f"Unsuccessful TensorSliceReader constructor: Failed to find any matching files for "
                            f"{path}")
    return file


def list_variables(ckpt_dir_or_file) -> list:
    """[(name, shape)] of the variables in a checkpoint (or the folder's newest one), sorted by name."""
    stored = _load(_file_of(ckpt_dir_or_file))
    return sorted((name, list(np.shape(t))) for name, t in stored.items())


def load_variable(ckpt_dir_or_file, name: str) -> np.ndarray:
    """One variable's value in a checkpoint (or the folder's newest one)."""
    stored = _load(_file_of(ckpt_dir_or_file))
    if name not in stored:
        raise NotFoundError(f"Key {name} not found in checkpoint")
    return _host(stored[name])
