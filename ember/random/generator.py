"""`ember.Generator`: PyTorch's CPU generator (torch.Generator): its engine, seeds, state and draws.

After the same `manual_seed`, every draw gives PyTorch's numbers: the engine is aten's mt19937 and each
`fill_*` is the matching aten sampler (see sampling.py). `get_state` is PyTorch's 5056-byte state, so a
state moves between Ember and PyTorch (`torch.set_rng_state(torch.from_numpy(g.get_state().numpy()))`).
"""

from __future__ import annotations

import operator
import os
import threading

import numpy as np

from ember.random import sampling
from ember.random.mt19937 import MT19937, N

DEFAULT_SEED = 67280421310721  # what a new torch.Generator() starts from

# aten's CPUGeneratorImplState (x86-64 layout): the legacy THGenerator fields, then the float cache
_STATE = np.dtype({
    "names": ["seed", "left", "seeded", "next", "words", "normal_x", "normal_y", "normal_rho", "normal_valid",
              "float_normal", "float_normal_valid"],
    "formats": ["<u8", "<i4", "<i4", "<u8", ("<u8", N), "<f8", "<f8", "<f8", "<i4", "<f4", "u1"],
    "offsets": [0, 8, 12, 16, 24, 5016, 5024, 5032, 5040, 5048, 5052],
    "itemsize": 5056,
})
STATE_BYTES = _STATE.itemsize


def _as_seed(seed) -> int:
    """A seed as aten keeps it: an unsigned 64-bit value (negative seeds wrap, as PyTorch's do)."""
    if isinstance(seed, bool) or not hasattr(seed, "__index__"):
        raise TypeError(f"manual_seed expected an integer seed, got {type(seed).__name__} {seed!r}")
    seed = operator.index(seed)
    if not -(2**63) <= seed < 2**64:
        raise ValueError(f"manual_seed: seed {seed} is out of range [-2**63, 2**64)")
    return seed % 2**64


class Generator:
    """A source of random numbers with PyTorch's CPU streams (torch.Generator's interface).

    Beyond PyTorch's methods it offers the host draws Ember's ops make: `fill_uniform(array, low, high)`,
    `fill_normal`, `fill_integers`, `fill_random`, `fill_bernoulli`, `fill_exponential`, ... write a NumPy
    array in place as the matching `Tensor.*_` method does in PyTorch; `uniform(shape, dtype)`, `normal`,
    `integers`, `permutation`, `multinomial` return new arrays. `numpy` is a NumPy Generator drawing from
    the same engine, for samplers PyTorch does not have.
    """

    def __init__(self, device="cpu") -> None:
        self.device = device
        self._engine = MT19937(DEFAULT_SEED)
        self._next_double_normal: float | None = None  # the sine of aten's last scalar Box-Muller pair
        self._next_float_normal: float | None = None  # kept for the state's round trip; CPU kernels never set it
        self._lock = threading.RLock()

    # --- PyTorch's interface ---------------------------------------------------------------------
    def manual_seed(self, seed: int) -> Generator:
        """Restart from `seed` (an integer in [-2**63, 2**64); negative seeds wrap as in PyTorch)."""
        seed = _as_seed(seed)
        with self._lock:
            self._engine.seed(seed)
            self._next_double_normal = self._next_float_normal = None
        return self

    def seed(self) -> int:
        """Reseed from the operating system's entropy and return the new seed."""
        s = int.from_bytes(os.urandom(8), "little")
        self.manual_seed(s)
        return s

    def initial_seed(self) -> int:
        """The seed this generator was last started from."""
        return self._engine.initial_seed

    def get_state(self):
        """The state as PyTorch's uint8 tensor of 5056 bytes (restorable here or in PyTorch)."""
        from ember.creation import tensor

        return tensor(self._state_bytes())

    def set_state(self, new_state) -> Generator:
        """Restore a state from get_state (Ember's or PyTorch's)."""
        raw = np.asarray(new_state.numpy() if hasattr(new_state, "numpy") else new_state)
        if raw.dtype != np.uint8:
            raise TypeError(f"Generator.set_state: expected a uint8 (byte) tensor, got dtype {raw.dtype}")
        if raw.size != STATE_BYTES:
            raise ValueError(f"Generator.set_state: expected a state of {STATE_BYTES} bytes, got {raw.size}")
        fields = np.frombuffer(np.ascontiguousarray(raw).reshape(-1).tobytes(), dtype=_STATE)[0]
        with self._lock:
            self._engine.set_counters(int(fields["seed"]), fields["words"].astype(np.uint32), int(fields["left"]),
                                      int(fields["next"]))
            self._next_double_normal = float(fields["normal_y"]) if fields["normal_valid"] else None
            self._next_float_normal = float(fields["float_normal"]) if fields["float_normal_valid"] else None
        return self

    def clone_state(self) -> Generator:
        """A new generator in this one's state."""
        other = Generator(self.device)
        other.set_state(self._state_bytes())
        return other

    def _state_bytes(self) -> np.ndarray:
        with self._lock:
            key, left, next_ = self._engine.counters()
            fields = np.zeros((), dtype=_STATE)
            fields["seed"], fields["left"], fields["seeded"], fields["next"] = self._engine.initial_seed, left, 1, next_
            fields["words"] = key
            if self._next_double_normal is not None:
                fields["normal_y"], fields["normal_valid"] = self._next_double_normal, 1
            if self._next_float_normal is not None:
                fields["float_normal"], fields["float_normal_valid"] = self._next_float_normal, 1
        return np.frombuffer(fields.tobytes(), dtype=np.uint8).copy()

    def __getstate__(self) -> dict:
        return {"device": self.device, "state": self._state_bytes()}

    def __setstate__(self, state: dict) -> None:
        self.__init__(state["device"])
        self.set_state(state["state"])

    def __repr__(self) -> str:
        return f"<ember.Generator device={self.device!r} initial_seed={self.initial_seed()}>"

    # --- host draws, in place (PyTorch's Tensor.*_ methods) --------------------------------------
    def fill_uniform(self, out: np.ndarray, low: float = 0.0, high: float = 1.0) -> np.ndarray:
        """uniform_(low, high) into a float array."""
        with self._lock:
            sampling.fill_uniform(self._engine, out, low, high)
        return out

    def fill_normal(self, out: np.ndarray, mean: float = 0.0, std: float = 1.0) -> np.ndarray:
        """normal_(mean, std) into a float array (Box-Muller blocks when C-contiguous with 16+ values)."""
        with self._lock:
            sampling.fill_normal(self, out, mean, std)
        return out

    def fill_integers(self, out: np.ndarray, low: int, high: int | None) -> np.ndarray:
        """random_(low, high): integers in [low, high) into an array of any real dtype (high=None: up to the
        dtype's largest integer), with PyTorch's adjustment of bounds a float dtype can't hold."""
        base, span = sampling.random_range("random_", out.dtype, int(low), None if high is None else int(high))
        with self._lock:
            sampling.fill_random_from_to(self._engine, out, base, span)
        return out

    def fill_random(self, out: np.ndarray) -> np.ndarray:
        """random_() without bounds: [0, dtype max] for integers, [0, 2**mantissa] for floats."""
        with self._lock:
            sampling.fill_random_bits(self._engine, out)
        return out

    def fill_bernoulli(self, out: np.ndarray, p) -> np.ndarray:
        """bernoulli_(p), p a number or an array broadcastable to out."""
        with self._lock:
            if np.ndim(p) == 0 and not isinstance(p, np.ndarray):
                sampling.fill_bernoulli_scalar(self._engine, out, float(p))
            else:
                sampling.fill_bernoulli_tensor(self._engine, out, np.asarray(p))
        return out

    def fill_exponential(self, out: np.ndarray, lambd: float = 1.0) -> np.ndarray:
        """exponential_(lambd)."""
        with self._lock:
            sampling.fill_exponential(self._engine, out, lambd)
        return out

    def fill_cauchy(self, out: np.ndarray, median: float = 0.0, sigma: float = 1.0) -> np.ndarray:
        """cauchy_(median, sigma)."""
        with self._lock:
            sampling.fill_cauchy(self._engine, out, median, sigma)
        return out

    def fill_log_normal(self, out: np.ndarray, mean: float = 1.0, std: float = 2.0) -> np.ndarray:
        """log_normal_(mean, std)."""
        with self._lock:
            sampling.fill_log_normal(self, out, mean, std)
        return out

    def fill_geometric(self, out: np.ndarray, p: float) -> np.ndarray:
        """geometric_(p)."""
        with self._lock:
            sampling.fill_geometric(self._engine, out, p)
        return out

    # --- host draws, new arrays ----------------------------------------------------------------
    def uniform(self, shape, dtype=np.float32, low: float = 0.0, high: float = 1.0) -> np.ndarray:
        """A new array of uniform_(low, high) values."""
        return self.fill_uniform(np.empty(shape, dtype), low, high)

    def normal(self, shape, dtype=np.float32, mean: float = 0.0, std: float = 1.0) -> np.ndarray:
        """A new array of normal_(mean, std) values (torch.randn for mean 0, std 1)."""
        return self.fill_normal(np.empty(shape, dtype), mean, std)

    def integers(self, low: int, high: int | None, shape, dtype=np.int64) -> np.ndarray:
        """A new array of integers in [low, high) (torch.randint)."""
        return self.fill_integers(np.empty(shape, dtype), low, high)

    def bernoulli(self, p, shape, dtype=np.float32) -> np.ndarray:
        """A new array of 0/1 values, 1 with probability p (a number or an array)."""
        return self.fill_bernoulli(np.empty(shape, dtype), p)

    def exponential(self, shape, dtype=np.float32, lambd: float = 1.0) -> np.ndarray:
        """A new array of exponential_(lambd) values."""
        return self.fill_exponential(np.empty(shape, dtype), lambd)

    def permutation(self, n: int, dtype=np.int64) -> np.ndarray:
        """torch.randperm(n)."""
        with self._lock:
            return sampling.permutation(self._engine, int(n)).astype(dtype, copy=False)

    def multinomial(self, probs: np.ndarray, num_samples: int, replacement: bool = False) -> np.ndarray:
        """torch.multinomial on a 2-D array of non-negative weights (rows checked by the caller)."""
        with self._lock:
            return sampling.multinomial(self, probs, int(num_samples), bool(replacement))

    def random_seed(self) -> int:
        """torch.empty((), dtype=torch.int64).random_().item(): how PyTorch seeds a generator from another."""
        return int(self.fill_random(np.empty((), np.int64)))

    @property
    def numpy(self) -> np.random.Generator:
        """A NumPy Generator on this generator's engine (its draws advance this generator's state)."""
        return np.random.Generator(self._engine.bit_generator)
