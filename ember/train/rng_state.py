"""Random-stream states for checkpoints: every generator training draws from, as values `em.save` stores.

An ember.Generator's state is PyTorch's 5056 bytes (a uint8 array). NumPy's global state holds big
integers and uint32 arrays, which a checkpoint can't hold as they are (JSON numbers lose precision past
2**53 and tensors have no uint32), so both are encoded as int64 arrays: big integers as little-endian
32-bit limbs, uint32 arrays widened.
"""

from __future__ import annotations

import random
from typing import Any

import numpy as np

from ember.random import Generator, default_generator, manual_seed

_LIMB = 32


def _encode(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _encode(v) for k, v in value.items()}
    if isinstance(value, (bool, float, str)) or value is None:
        return value
    if isinstance(value, (int, np.integer)):
        value = int(value)
        if value < 0:
            raise ValueError(f"rng state: negative integer {value} in a bit-generator state")
        limbs = []
        while True:
            limbs.append(value & (2**_LIMB - 1))
            value >>= _LIMB
            if not value:
                break
        return {"uint": np.array(limbs, dtype=np.int64)}
    if isinstance(value, np.ndarray) and value.dtype.kind == "u":
        return {"uint_array": value.astype(np.int64), "dtype": value.dtype.name}
    if isinstance(value, (np.ndarray, np.generic)):
        return np.asarray(value)
    raise TypeError(f"rng state: can't encode a {type(value).__name__}")


def _decode(value: Any) -> Any:
    if isinstance(value, dict):
        if set(value) == {"uint"}:
            limbs = np.asarray(value["uint"]).tolist()
            return sum(int(v) << (_LIMB * i) for i, v in enumerate(limbs))
        if set(value) == {"uint_array", "dtype"}:
            return np.asarray(value["uint_array"]).astype(value["dtype"])
        return {k: _decode(v) for k, v in value.items()}
    if isinstance(value, np.ndarray) and value.ndim == 0:
        return value.item()
    return value


def encode_generator(gen: Generator) -> dict:
    """A Generator's state (PyTorch's mt19937 bytes), for em.save."""
    return {"mt19937": gen.get_state().numpy()}


def decode_generator(gen: Generator, state: dict) -> None:
    """Restore a Generator from encode_generator's value."""
    if "mt19937" not in state:
        raise ValueError("rng state: the checkpoint holds a random state of Ember's former generator (NumPy's "
                         "PCG64), not PyTorch's mt19937 that Ember now draws from, so it can't be resumed exactly")
    gen.set_state(np.asarray(state["mt19937"], dtype=np.uint8))


def _python_state() -> dict:
    version, internal, gauss_next = random.getstate()
    return {"version": version, "internal": np.array(internal, dtype=np.int64), "gauss_next": gauss_next}


def _set_python_state(state: dict) -> None:
    internal = tuple(int(v) for v in _decode(state["internal"]).tolist())
    random.setstate((int(state["version"]), internal, state["gauss_next"]))


def seed_all(seed: int) -> None:
    """Seed every stream `capture` saves: Ember's default generator, Python's `random`, NumPy's global one."""
    manual_seed(seed)
    random.seed(seed)
    np.random.seed(seed % 2**32)


def capture(generators: dict[str, Generator] | None = None) -> dict:
    """The states of Ember's default generator, Python's `random`, NumPy's global generator and `generators`.

    The default generator drives weight init, dropout and transforms without their own generator;
    the named ones are, e.g., a DataLoader's shuffling generator (which also seeds its workers).
    """
    return {
        "ember": encode_generator(default_generator),
        "python": _python_state(),
        "numpy": _encode(np.random.get_state(legacy=False)),
        "generators": {name: encode_generator(g) for name, g in (generators or {}).items()},
    }


def restore(state: dict, generators: dict[str, Generator] | None = None) -> None:
    """Put every stream captured by `capture` back; `generators` must name the same generators."""
    generators = generators or {}
    saved = state.get("generators", {})
    if set(saved) != set(generators):
        raise ValueError(f"rng state: the checkpoint has generators {sorted(saved)}, this run has {sorted(generators)}")
    decode_generator(default_generator, state["ember"])
    _set_python_state(state["python"])
    np.random.set_state(_decode(state["numpy"]))
    for name, gen in generators.items():
        decode_generator(gen, saved[name])
