"""ember.Generator against torch.Generator: seeds, the 5056-byte state (both ways), and fork_rng."""

from __future__ import annotations

import copy
import pickle

import numpy as np
import pytest
import torch

import ember as em
from ember.random import fork_rng

SEEDS = [0, 1, 42, 2**32 - 1, 2**32 + 5, 2**63 + 11, 2**64 - 1, -1, -(2**63)]


def _state(g) -> np.ndarray:
    return np.asarray(g.get_state().numpy(), dtype=np.uint8)


def _draw_mix(gen, torch_side: bool):
    """Draws that leave aten's scalar normal cache set (randn(3)) and the engine part-way through a twist."""
    mod = torch if torch_side else em
    return [mod.randn(3, generator=gen).numpy(), mod.rand(700, generator=gen).numpy(),
            mod.randint(0, 10, (5,), generator=gen).numpy()]


@pytest.mark.parametrize("seed", SEEDS)
def test_a_seeded_generator_has_torchs_state_and_seed(seed):
    g, t = em.Generator().manual_seed(seed), torch.Generator().manual_seed(seed)
    assert g.initial_seed() == t.initial_seed()
    np.testing.assert_array_equal(_state(g), t.get_state().numpy())
    for a, b in zip(_draw_mix(g, False), _draw_mix(t, True)):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(_state(g), t.get_state().numpy())  # counters and the cached normal too


def test_a_new_generator_starts_from_torchs_default_seed():
    g, t = em.Generator(), torch.Generator()
    assert g.initial_seed() == t.initial_seed() == 67280421310721
    np.testing.assert_array_equal(_state(g), t.get_state().numpy())


def test_states_move_between_ember_and_torch():
    g = em.Generator().manual_seed(7)
    _draw_mix(g, False)
    t = torch.Generator()
    t.set_state(torch.from_numpy(_state(g).copy()))
    np.testing.assert_array_equal(em.randn(5, generator=g).numpy(), torch.randn(5, generator=t).numpy())

    torch.manual_seed(9)
    torch.randn(1)  # leaves the scalar path's cached sine in torch's state
    em.set_rng_state(torch.get_rng_state())
    np.testing.assert_array_equal(em.randn(40).numpy(), torch.randn(40).numpy())
    np.testing.assert_array_equal(em.get_rng_state().numpy(), torch.get_rng_state().numpy())


def test_the_default_generator_follows_manual_seed_like_torchs():
    assert em.manual_seed(123) is em.random.default_generator
    torch.manual_seed(123)
    assert em.initial_seed() == torch.initial_seed() == 123
    np.testing.assert_array_equal(em.randn(3).numpy(), torch.randn(3).numpy())
    em.manual_seed(2.0)  # torch.manual_seed takes int(seed)
    assert em.initial_seed() == 2


def test_seed_draws_a_64_bit_seed_from_the_system():
    g = em.Generator()
    s = g.seed()
    assert 0 <= s < 2**64 and g.initial_seed() == s
    assert em.seed() == em.initial_seed()
    seeds = {em.Generator().seed() for _ in range(8)}
    assert len(seeds) == 8


def test_bad_seeds_and_states_are_refused():
    g = em.Generator()
    with pytest.raises(TypeError, match="integer seed"):
        g.manual_seed(1.5)
    with pytest.raises(ValueError, match="out of range"):
        g.manual_seed(2**64)
    with pytest.raises(ValueError, match="5056 bytes, got 10"):
        g.set_state(em.zeros(10, dtype=em.uint8))
    with pytest.raises(TypeError, match="uint8"):
        g.set_state(np.zeros(5056, dtype=np.int64))
    bad = _state(g).copy()
    bad[8:12] = np.frombuffer(np.int32(700).tobytes(), np.uint8)  # left beyond the 624 words
    with pytest.raises(ValueError, match="invalid mt19937 state"):
        g.set_state(bad)
    with pytest.raises(TypeError, match="ember.Generator"):
        em.rand(2, generator=np.random.default_rng(0))


def test_fork_rng_puts_the_default_state_back():
    em.manual_seed(5)
    before = em.get_rng_state().numpy().copy()
    with fork_rng():
        em.randn(100)
    np.testing.assert_array_equal(em.get_rng_state().numpy(), before)
    with fork_rng(enabled=False):
        em.rand(1)
    assert not np.array_equal(em.get_rng_state().numpy(), before)


def test_generators_pickle_copy_and_clone_with_their_state():
    g = em.Generator().manual_seed(3)
    em.randn(1, generator=g)  # a cached normal, part of the state
    for other in (pickle.loads(pickle.dumps(g)), copy.deepcopy(g), g.clone_state()):
        np.testing.assert_array_equal(em.randn(9, generator=other).numpy(), em.randn(9, generator=g.clone_state()).numpy())


def test_numpy_view_draws_from_the_same_engine():
    g = em.Generator().manual_seed(1)
    g.numpy.random(3)  # NumPy's samplers advance the same mt19937 words
    t = torch.Generator().manual_seed(1)
    torch.randint(0, 2**32, (3,), generator=t)  # three 64-bit draws: six words, as NumPy's float64 draws take
    np.testing.assert_array_equal(em.rand(4, generator=g).numpy(), torch.rand(4, generator=t).numpy())
