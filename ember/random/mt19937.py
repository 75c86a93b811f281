"""PyTorch's CPU random engine: the 32-bit Mersenne Twister (mt19937), its seeding, and its state.

The words come from NumPy's MT19937 bit generator, which runs the same recurrence in C (seeded by the
same `init_genrand`); this module keeps PyTorch's view of the state in step with it: the 64-bit seed
the user gave (only its low 32 bits seed the twister) and aten's `left`/`next` counters.
"""

from __future__ import annotations

import numpy as np

N = 624  # words in the state
_WORD32_HIGH = 2**32
_WORD64_HIGH = 2**64


def seed_key(seed: int) -> np.ndarray:
    """The 624 state words `init_genrand(seed & 0xffffffff)` gives (NumPy's legacy seeding is that function)."""
    return np.random.RandomState(seed & 0xFFFFFFFF).get_state()[1]


class MT19937:
    """The engine: a stream of 32-bit words; `random64` joins two as (first << 32) | second."""

    __slots__ = ("initial_seed", "_bits", "_words", "_seed_key")

    def __init__(self, seed: int) -> None:
        self._bits = np.random.MT19937(0)
        self._words = np.random.Generator(self._bits)
        self.seed(seed)

    def seed(self, seed: int) -> None:
        """Restart from `seed` (an unsigned 64-bit value; the twister takes its low 32 bits)."""
        self.initial_seed = seed
        self._seed_key = seed_key(seed)
        self._put(self._seed_key, N)

    def _put(self, key: np.ndarray, pos: int) -> None:
        self._bits.state = {"bit_generator": "MT19937", "state": {"key": key, "pos": pos}}

    def words32(self, n: int) -> np.ndarray:
        """The next n words, as uint32."""
        return self._words.integers(0, _WORD32_HIGH, size=n, dtype=np.uint32)

    def words64(self, n: int) -> np.ndarray:
        """The next n 64-bit draws (two words each, the first one high), as uint64."""
        return self._words.integers(0, _WORD64_HIGH, size=n, dtype=np.uint64)

    def word32(self) -> int:
        """One word."""
        return int(self._words.integers(0, _WORD32_HIGH, dtype=np.uint32))

    def word64(self) -> int:
        """One 64-bit draw."""
        return int(self._words.integers(0, _WORD64_HIGH, dtype=np.uint64))

    @property
    def bit_generator(self) -> np.random.MT19937:
        """NumPy's bit generator holding the state (NumPy's own samplers can draw from it)."""
        return self._bits

    # --- aten's view of the state --------------------------------------------------------------
    def counters(self) -> tuple[np.ndarray, int, int]:
        """(state words, left, next) as aten's mt19937 holds them."""
        state = self._bits.state["state"]
        key, pos = np.asarray(state["key"], dtype=np.uint32), int(state["pos"])
        if pos >= N:  # the next word twists first: aten marks that with left == 1
            fresh = np.array_equal(key, self._seed_key)  # untwisted since seeding: aten's next is still 0
            return key, 1, 0 if fresh else N
        return key, N + 1 - pos, pos

    def set_counters(self, seed: int, key: np.ndarray, left: int, next_: int) -> None:
        """Take aten's state: `left == 1` twists before the next word, else the next word is key[next_]."""
        if not (1 <= left <= N and 0 <= next_ <= N and (left == 1 or left + next_ == N + 1)):
            raise ValueError(f"Generator.set_state: invalid mt19937 state (left={left}, next={next_})")
        self.initial_seed = seed
        self._seed_key = seed_key(seed)
        self._put(np.asarray(key, dtype=np.uint32), N if left == 1 else next_)
