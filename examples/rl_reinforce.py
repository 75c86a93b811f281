"""REINFORCE with a learned baseline on CartPole-v1 (gymnasium): a policy network trained by the policy gradient.

Each iteration plays a batch of episodes with the stochastic policy (ember.distributions.Categorical
over the two pushes), then takes one gradient step on -log pi(a|s) * (G - V(s)), where G is the
discounted return-to-go and V a value network fitted to it (the baseline, which lowers the
gradient's variance), plus a small entropy bonus. Training stops once the batches average 475 or
more; the final figure is the average return of the greedy policy over 100 new episodes
(CartPole-v1 counts as solved at 475). Needs gymnasium (the `rl` extra).

    python examples/rl_reinforce.py
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from rl_common import SOLVED, evaluate, make_envs, run_episodes  # noqa: E402

import ember as em  # noqa: E402
from ember.distributions import Categorical  # noqa: E402
from ember.nn import functional as F  # noqa: E402
from ember.train import progress_bar  # noqa: E402

RETURN_SCALE = 100.0  # discounted returns reach 1 / (1 - 0.99) = 100: the value network predicts them in these units


def mlp(out: int, hidden: int = 64) -> em.nn.Module:
    """4 observations -> hidden -> hidden -> out, tanh."""
    return em.nn.Sequential(em.nn.Linear(4, hidden), em.nn.Tanh(), em.nn.Linear(hidden, hidden), em.nn.Tanh(),
                            em.nn.Linear(hidden, out))


def returns_to_go(rewards: list, gamma: float) -> np.ndarray:
    """G_t = r_t + gamma * G_{t+1}, for one episode."""
    out, g = np.zeros(len(rewards), dtype=np.float32), 0.0
    for t in range(len(rewards) - 1, -1, -1):
        g = rewards[t] + gamma * g
        out[t] = g
    return out


def main(argv=None) -> dict:
    """Train until solved (or out of iterations); report the greedy policy's 100-episode average return."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--iterations", type=int, default=150, help="at most this many batches of episodes")
    p.add_argument("--batch", type=int, default=8, help="episodes per gradient step")
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--gamma", type=float, default=0.99)
    p.add_argument("--entropy", type=float, default=0.01, help="weight of the entropy bonus")
    p.add_argument("--eval-episodes", type=int, default=100)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--no-progress", action="store_true")
    args = p.parse_args(argv)
    t0 = time.perf_counter()
    em.manual_seed(args.seed)
    policy, value = mlp(2), mlp(1)
    opt = em.optim.Adam([*policy.parameters(), *value.parameters()], lr=args.lr)
    envs = make_envs(args.batch)

    def act(obs: np.ndarray) -> np.ndarray:
        with em.no_grad():
            return Categorical(logits=policy(em.tensor(obs))).sample().numpy()

    recent, episodes = [], 0
    bar = progress_bar(range(args.iterations), args.iterations, "REINFORCE", not args.no_progress)
    for it in bar:
        trajectories, returns = run_episodes(envs, act, seed=args.seed * 1_000_003 + it * args.batch)
        episodes += len(returns)
        obs = em.tensor(np.concatenate([np.stack(t[0]) for t in trajectories]))
        actions = em.tensor(np.concatenate([np.array(t[1]) for t in trajectories]))
        g = em.tensor(np.concatenate([returns_to_go(t[2], args.gamma) for t in trajectories]))
        baseline = RETURN_SCALE * value(obs).squeeze(1)
        advantage = g - baseline.detach()
        advantage = (advantage - advantage.mean()) / (advantage.std() + 1e-8)
        dist = Categorical(logits=policy(obs))
        value_loss = F.mse_loss(baseline / RETURN_SCALE, g / RETURN_SCALE)
        loss = -(dist.log_prob(actions) * advantage).mean() - args.entropy * dist.entropy().mean() + 0.5 * value_loss
        opt.zero_grad()
        loss.backward()
        opt.step()
        recent = (recent + list(returns))[-3 * args.batch:]
        if not args.no_progress:
            bar.set_postfix(avg_return=f"{np.mean(recent):.1f}")
        if len(recent) >= 3 * args.batch and np.mean(recent) >= SOLVED:
            break
    if hasattr(bar, "close"):
        bar.close()
    scores = evaluate(policy, args.eval_episodes, seed=10_000 + args.seed * 1000)
    result = {"average_return": float(scores.mean()), "episodes": episodes, "iterations": it + 1,
              "seconds": time.perf_counter() - t0}
    print(f"trained on {episodes} episodes ({it + 1} gradient steps); greedy policy over {args.eval_episodes} "
          f"new episodes: min {scores.min():.0f}, max {scores.max():.0f}")
    print(f"final average return: {result['average_return']:.1f} (solved at {SOLVED:.0f})  "
          f"({result['seconds']:.1f}s)")
    return result


if __name__ == "__main__":
    main()
