"""How much return-to-go variance can any V(s) explain on recorded CartPole data?

Fits an MLP directly to (state, discounted return-to-go) pairs of episodes
from the scripted expert at several exploration rates, and prints the
explained variance it reaches on the same states. That is an upper bound for
what a value function trained by MARWIL can reach there: CartPole's state has
no time feature, so the drop of the return-to-go before the 500-step time
limit cannot be predicted from the state.

    python release/benchmarks/value_ev_upper_bound.py
"""

import argparse
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from episode_data import (  # noqa: E402
    centering_policy,
    discounted_returns_to_go,
    record_episodes,
)


def fitted_explained_variance(obs, returns, steps, seed):
    torch.manual_seed(seed)
    x = torch.from_numpy(obs)
    y = torch.from_numpy(returns).float()
    net = torch.nn.Sequential(
        torch.nn.Linear(obs.shape[1], 64),
        torch.nn.Tanh(),
        torch.nn.Linear(64, 64),
        torch.nn.Tanh(),
        torch.nn.Linear(64, 1),
    )
    optimizer = torch.optim.Adam(net.parameters(), lr=1e-2)
    for _ in range(steps):
        idx = torch.randint(0, len(y), (1024,))
        loss = ((net(x[idx]).squeeze(-1) - y[idx]) ** 2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    with torch.no_grad():
        pred = net(x).squeeze(-1)
    return 1.0 - float((y - pred).var() / y.var())


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=30)
    parser.add_argument("--epsilons", type=float, nargs="+", default=[0, 0.2, 0.4, 0.6])
    parser.add_argument("--steps", type=int, default=1500)
    parser.add_argument("--gamma", type=float, default=0.99)
    args = parser.parse_args()
    print(f"{'epsilon':>7} | {'mean len':>8} {'min len':>7} | {'EV bound':>8}")
    for epsilon in args.epsilons:
        episodes = record_episodes(
            args.episodes, epsilon, seed=0, policy=centering_policy
        )
        lengths = [len(e) for e in episodes]
        obs, returns, _ = discounted_returns_to_go(episodes, args.gamma)
        ev = fitted_explained_variance(obs, returns, args.steps, seed=0)
        print(
            f"{epsilon:>7.1f} | {np.mean(lengths):>8.0f} {min(lengths):>7} | {ev:>8.3f}"
        )


if __name__ == "__main__":
    main()
