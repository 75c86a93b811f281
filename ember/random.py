"""Random number generation: `manual_seed`, `Generator`, and the seeded default generator."""

from __future__ import annotations

import numpy as np


class Generator:
    """A seeded source of random numbers (PyTorch's torch.Generator, backed by NumPy's PCG64)."""

    def __init__(self, device="cpu") -> None:
        self.device = device
        self._seed = None
        self._rng = np.random.default_rng()

    def manual_seed(self, seed: int) -> Generator:
        """Reset the generator to a known state."""
        self._seed = int(seed)
        self._rng = np.random.default_rng(self._seed)
        return self

    def seed(self) -> int:
        """Reseed from fresh entropy and return the new seed."""
        s = int(np.random.SeedSequence().entropy % (2**63))
        self.manual_seed(s)
        return s

    def initial_seed(self) -> int:
        """The seed last given to manual_seed (None if never seeded)."""
        return self._seed

    def get_state(self) -> dict:
        """The generator's state (restorable with set_state)."""
        return self._rng.bit_generator.state

    def set_state(self, state: dict) -> None:
        """Restore a state from get_state."""
        self._rng.bit_generator.state = state

    @property
    def numpy(self) -> np.random.Generator:
        """The NumPy generator that draws the numbers."""
        return self._rng


default_generator = Generator()


def manual_seed(seed: int) -> Generator:
    """Seed every device's default random generator."""
    default_generator.manual_seed(seed)
    from ember.device import Device

    for dev in list(Device._cache.values()):
        if dev._backend is not None and dev.type == "cuda":
            dev._backend.manual_seed(seed)
    return default_generator


seed = default_generator.seed


def initial_seed() -> int:
    """The seed of the default generator."""
    return default_generator.initial_seed()


def get_rng_state() -> dict:
    """State of the default CPU generator."""
    return default_generator.get_state()


def set_rng_state(state: dict) -> None:
    """Restore the default CPU generator's state."""
    default_generator.set_state(state)


def host_rng(generator: Generator | None = None) -> np.random.Generator:
    """The NumPy generator to draw host random numbers from."""
    return (generator or default_generator).numpy
