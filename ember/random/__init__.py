"""Random number generation as PyTorch does it on the CPU: `manual_seed`, `Generator`, the default
generator, its state, and `fork_rng`.

After `ember.manual_seed(s)` Ember draws PyTorch's numbers: the same engine (mt19937) and the same
sampler per function (see generator.py and sampling.py). CUDA devices keep their own generators.
"""

from __future__ import annotations

import contextlib

from ember.random.generator import Generator

default_generator = Generator()
default_generator.seed()  # like PyTorch's: from the operating system's entropy until manual_seed


def manual_seed(seed: int) -> Generator:
    """Seed every device's default random generator; returns the CPU one."""
    seed = int(seed)
    default_generator.manual_seed(seed)
    from ember.device import Device

    for dev in list(Device._cache.values()):
        if dev._backend is not None and dev.type == "cuda":
            dev._backend.manual_seed(seed % 2**64)
    return default_generator


def seed() -> int:
    """Reseed the default generator from the operating system's entropy; returns the seed."""
    return default_generator.seed()


def initial_seed() -> int:
    """The seed the default generator was last started from."""
    return default_generator.initial_seed()


def get_rng_state():
    """The default CPU generator's state: PyTorch's uint8 tensor of 5056 bytes."""
    return default_generator.get_state()


def set_rng_state(new_state) -> None:
    """Restore the default CPU generator's state (from get_rng_state, Ember's or PyTorch's)."""
    default_generator.set_state(new_state)


@contextlib.contextmanager
def fork_rng(devices=None, enabled: bool = True, device_type: str = "cuda"):
    """Run a block with the default CPU generator's state saved and put back afterwards (torch.random.fork_rng).

    `devices` and `device_type` are accepted for PyTorch's signature; CUDA generators are not forked."""
    if not enabled:
        yield
        return
    saved = default_generator.get_state()
    try:
        yield
    finally:
        default_generator.set_state(saved)


def host_rng(generator: Generator | None = None) -> Generator:
    """The generator host draws come from: `generator`, else the default one."""
    if generator is None:
        return default_generator
    if not isinstance(generator, Generator):
        raise TypeError(f"generator must be an ember.Generator, got {type(generator).__name__}")
    return generator
