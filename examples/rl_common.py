"""Shared by the CartPole examples: a batch of environments stepped together, and the 100-episode evaluation."""

from __future__ import annotations

import numpy as np

import ember as em

ENV = "CartPole-v1"
SOLVED = 475.0  # CartPole-v1 counts as solved at an average return of 475 over 100 episodes


def make_envs(n: int):
    """`n` CartPole-v1 environments (gymnasium, the `rl` extra)."""
    import gymnasium as gym

    return [gym.make(ENV) for _ in range(n)]


def run_episodes(envs, act, seed: int) -> tuple[list, np.ndarray]:
    """One episode in every environment, stepped together; `act(obs (k, 4) float32 array) -> k actions`.

    Returns the trajectories [(observations, actions, rewards) per environment] and the returns.
    """
    obs = np.stack([env.reset(seed=seed + i)[0] for i, env in enumerate(envs)]).astype(np.float32)
    live = list(range(len(envs)))
    trajectories = [([], [], []) for _ in envs]
    while live:
        actions = act(obs[live])
        still = []
        for k, i in enumerate(live):
            a = int(actions[k])
            trajectories[i][0].append(obs[i].copy())
            trajectories[i][1].append(a)
            nxt, r, terminated, truncated, _ = envs[i].step(a)
            trajectories[i][2].append(float(r))
            obs[i] = nxt
            if not (terminated or truncated):
                still.append(i)
        live = still
    return trajectories, np.array([sum(t[2]) for t in trajectories])


def greedy(net):
    """act() for run_episodes: the action with the largest network output, without gradients."""
    def act(obs: np.ndarray) -> np.ndarray:
        with em.no_grad():
            return net(em.tensor(obs)).argmax(1).numpy()

    return act


def evaluate(net, episodes: int = 100, seed: int = 10_000) -> np.ndarray:
    """Returns of `episodes` greedy episodes (environments seeded apart from training's)."""
    return run_episodes(make_envs(episodes), greedy(net), seed)[1]
