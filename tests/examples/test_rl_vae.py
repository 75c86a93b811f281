"""The reinforcement-learning and VAE examples reach the figures measured for them.

Measured on a shared two-core machine with seeds 0-2 (default arguments unless stated):
REINFORCE 499.1, 500.0, 459.9 average return over 100 greedy episodes; DQN 500.0, 500.0, 270.2;
the VAE (3 epochs on 2,000 images) 207.4, 208.7, 204.7 nats of test negative ELBO.
"""

from __future__ import annotations

import pytest

from .helpers import run_example

pytest.importorskip("gymnasium")


def test_reinforce_with_a_baseline_balances_the_pole() -> None:
    """Seed 0 reaches 499.1 (CartPole's solved mark is 475); 400 leaves a margin for other BLAS builds."""
    result, printed = run_example("rl_reinforce", "--seed", "0")
    assert result["average_return"] >= 400
    assert "final average return:" in printed


@pytest.mark.slow
def test_dqn_balances_the_pole() -> None:
    """Seed 0 reaches 500.0 (a seed can stall, as seed 2 does at 270, so the test fixes the seed)."""
    result, _ = run_example("rl_dqn", "--seed", "0")
    assert result["average_return"] >= 400


def test_vae_learns_the_digits(tmp_path, monkeypatch) -> None:
    """Seeds 0-2 give 204.7-208.7 nats; an untrained model gives about 543 (784 ln 2). Its samples go under runs/."""
    monkeypatch.chdir(tmp_path)  # as if run from the repository's root
    result, printed = run_example("vae_mnist", "--epochs", "3", "--limit", "2000")
    assert result["test_neg_elbo"] <= 230
    assert "final test negative ELBO:" in printed
    assert [p.name for p in tmp_path.iterdir()] == ["runs"]
    assert (tmp_path / "runs" / "vae_mnist" / "samples.png").read_bytes()[:4] == b"\x89PNG"


def test_same_seed_same_numbers() -> None:
    """Two short runs with one seed give the same figures."""
    first, _ = run_example("rl_reinforce", "--iterations", "4", "--eval-episodes", "5", "--seed", "1")
    second, _ = run_example("rl_reinforce", "--iterations", "4", "--eval-episodes", "5", "--seed", "1")
    assert {k: v for k, v in first.items() if k != "seconds"} == {k: v for k, v in second.items() if k != "seconds"}
