"""DQN on CartPole-v1 (gymnasium): a Q-network learned from a replay buffer against a target network.

Eight environments are stepped together with an epsilon-greedy policy; every step stores their
transitions in a replay buffer and takes one gradient step on a random minibatch, regressing
Q(s, a) on r + gamma * Q_target(s', argmax_a' Q(s', a')) (double DQN) with the Huber loss. The
target network is a copy of the online one, refreshed every 100 gradient steps. Every few thousand transitions
the greedy policy is scored on 10 episodes and the best weights are kept; the final figure is the
average return of those weights over 100 new episodes (solved at 475). Needs gymnasium (the `rl` extra).

    python examples/rl_dqn.py
"""

from __future__ import annotations

import argparse
import copy
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from rl_common import SOLVED, evaluate, make_envs  # noqa: E402

import ember as em  # noqa: E402
from ember.nn import functional as F  # noqa: E402
from ember.train import progress_bar  # noqa: E402


class ReplayBuffer:
    """A fixed-size ring of transitions (s, a, r, s', done) in NumPy arrays."""

    def __init__(self, capacity: int, seed: int) -> None:
        self.obs = np.zeros((capacity, 4), np.float32)
        self.next_obs = np.zeros((capacity, 4), np.float32)
        self.actions = np.zeros(capacity, np.int64)
        self.rewards = np.zeros(capacity, np.float32)
        self.done = np.zeros(capacity, np.float32)
        self.capacity, self.size, self.pos = capacity, 0, 0
        self.rng = np.random.default_rng(seed)

    def add(self, obs, action, reward, next_obs, done) -> None:
        """Store one transition (the oldest is overwritten when full)."""
        i = self.pos
        self.obs[i], self.actions[i], self.rewards[i], self.next_obs[i], self.done[i] = obs, action, reward, next_obs, done
        self.pos = (i + 1) % self.capacity
        self.size = min(self.size + 1, self.capacity)

    def sample(self, n: int):
        """A random minibatch as Ember tensors."""
        i = self.rng.integers(0, self.size, n)
        return (em.tensor(self.obs[i]), em.tensor(self.actions[i]), em.tensor(self.rewards[i]),
                em.tensor(self.next_obs[i]), em.tensor(self.done[i]))


def q_network(hidden: int = 128) -> em.nn.Module:
    """4 observations -> hidden -> hidden -> one value per action, ReLU."""
    return em.nn.Sequential(em.nn.Linear(4, hidden), em.nn.ReLU(), em.nn.Linear(hidden, hidden), em.nn.ReLU(),
                            em.nn.Linear(hidden, 2))


def main(argv=None) -> dict:
    """Train for a budget of environment steps; report the best weights' 100-episode average return."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=50_000, help="environment transitions in total")
    p.add_argument("--envs", type=int, default=8, help="environments stepped together")
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--gamma", type=float, default=0.99)
    p.add_argument("--target-every", type=int, default=100, help="gradient steps between target network copies")
    p.add_argument("--warmup", type=int, default=1000, help="random transitions before learning starts")
    p.add_argument("--eps-steps", type=int, default=10_000, help="transitions over which epsilon falls to 0.05")
    p.add_argument("--eval-every", type=int, default=5000)
    p.add_argument("--eval-episodes", type=int, default=100)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--no-progress", action="store_true")
    args = p.parse_args(argv)
    t0 = time.perf_counter()
    em.manual_seed(args.seed)
    rng = np.random.default_rng(args.seed)
    online = q_network()
    target = copy.deepcopy(online)
    opt = em.optim.Adam(online.parameters(), lr=args.lr)
    buffer = ReplayBuffer(50_000, args.seed)
    envs = make_envs(args.envs)
    obs = np.stack([env.reset(seed=args.seed * 1000 + i)[0] for i, env in enumerate(envs)]).astype(np.float32)
    episode_return = np.zeros(args.envs)
    finished, best, best_state, evaluations, updates = [], -1.0, None, [], 0
    steps = args.steps // args.envs
    bar = progress_bar(range(steps), steps, "DQN", not args.no_progress)
    for step in bar:
        seen = step * args.envs
        eps = max(0.05, 1.0 - 0.95 * seen / args.eps_steps)
        with em.no_grad():
            greedy = online(em.tensor(obs)).argmax(1).numpy()
        actions = np.where(rng.random(args.envs) < eps, rng.integers(0, 2, args.envs), greedy)
        for i, env in enumerate(envs):
            nxt, r, terminated, truncated, _ = env.step(int(actions[i]))
            buffer.add(obs[i], actions[i], r, nxt, float(terminated))  # a time limit is not a terminal state
            episode_return[i] += r
            if terminated or truncated:
                finished.append(episode_return[i])
                episode_return[i] = 0.0
                nxt, _ = env.reset()
            obs[i] = nxt
        if seen >= args.warmup:
            s, a, r, s2, done = buffer.sample(args.batch)
            with em.no_grad():
                best_next = online(s2).argmax(1, keepdim=True)
                target_q = r + args.gamma * (1 - done) * target(s2).gather(1, best_next).squeeze(1)
            q = online(s).gather(1, a.unsqueeze(1)).squeeze(1)
            loss = F.smooth_l1_loss(q, target_q)
            opt.zero_grad()
            loss.backward()
            em.nn.utils.clip_grad_norm_(online.parameters(), 10.0)
            opt.step()
            updates += 1
            if updates % args.target_every == 0:
                target.load_state_dict(online.state_dict())
        if (seen + args.envs) % args.eval_every < args.envs and seen >= args.warmup:
            score = float(evaluate(online, 10, seed=20_000 + step).mean())
            evaluations.append(score)
            if score >= best:
                best, best_state = score, copy.deepcopy(online.state_dict())
        if not args.no_progress and step % 50 == 0 and finished:
            bar.set_postfix(eps=f"{eps:.2f}", avg_return=f"{np.mean(finished[-20:]):.1f}", best_eval=f"{best:.0f}")
    if hasattr(bar, "close"):
        bar.close()
    if best_state is not None:
        online.load_state_dict(best_state)
    scores = evaluate(online, args.eval_episodes, seed=10_000 + args.seed * 1000)
    result = {"average_return": float(scores.mean()), "episodes": len(finished), "best_eval": best,
              "seconds": time.perf_counter() - t0}
    print(f"trained on {steps * args.envs} transitions ({len(finished)} episodes); 10-episode checks: "
          f"{', '.join(f'{e:.0f}' for e in evaluations)}")
    print(f"final average return: {result['average_return']:.1f} over {args.eval_episodes} episodes (solved at "
          f"{SOLVED:.0f})  ({result['seconds']:.1f}s)")
    return result


if __name__ == "__main__":
    main()
