"""Recorded CartPole episodes for the benchmarks, in the formats users write.

The benchmarks train both sides (upstream with `RLLIB_FORK_DISABLE=1`, and
the fork) from the same files, so the files hold what every RLlib version
reads: one msgpack'd `SingleAgentEpisode.get_state()` per row of an `item`
column, written with pyarrow. Two payload formats:

- `per_step`: the episode as recorded (not numpy-ized: observations,
  actions, rewards and infos are per-step lists), the snippet users write by
  hand, `msgpack.packb(episode.get_state(), default=msgpack_numpy.encode)`;
- `numpy`: the same after `episode.to_numpy()` (columns as arrays).

Episodes come from a scripted controller with a share of uniformly random
actions (`rllib/examples/offline_rl/scripted_cartpole.py`).

    python release/benchmarks/episode_data.py --episodes 400 --out /tmp/cartpole
"""

import argparse
import copy
import os
from typing import Callable, List, Sequence

import numpy as np

PAYLOADS = ("per_step", "numpy")


def balance_policy(obs) -> int:
    """The shared scripted controller (`scripted_cartpole.balance_action`)."""
    from rllib.examples.offline_rl.scripted_cartpole import balance_action

    return balance_action(obs[2], obs[3])


def centering_policy(obs) -> int:
    """Balances and keeps the cart near the middle (the MARWIL value-quality
    benchmark's controller, kept so its figures stay comparable)."""
    x, x_dot, theta, theta_dot = obs
    return int(theta + 0.3 * theta_dot + 0.01 * x + 0.05 * x_dot > 0)


def record_episodes(
    num_episodes: int,
    epsilon: float,
    seed: int = 0,
    policy: Callable[[object], int] = balance_policy,
    env=None,
) -> list:
    """Episodes of `policy` with `epsilon` of the actions random.

    Args:
        env: The environment; None: `CartPole-v1`.

    Returns:
        Done `SingleAgentEpisode`s, not numpy-ized (per-step lists).
    """
    import gymnasium as gym

    from rllib.examples.offline_rl import scripted_cartpole

    env = gym.make("CartPole-v1") if env is None else env
    return scripted_cartpole.record_episodes(
        env, num_episodes, policy, epsilon=epsilon, seed=seed
    )


def encode(episode, payload: str) -> bytes:
    """One `item` payload of `episode` in the `payload` format.

    Raises:
        ValueError: For an unknown `payload`, or `per_step` of an episode
            that is already numpy-ized.
    """
    import msgpack
    import msgpack_numpy as mnp

    if payload == "numpy":
        if not episode.is_numpy:
            episode = copy.deepcopy(episode)
            episode.to_numpy()
    elif payload == "per_step":
        if episode.is_numpy:
            raise ValueError(
                f"`payload='per_step'` needs episodes as recorded, but episode "
                f"`{episode.id_}` is numpy-ized; encode it before `to_numpy()`."
            )
    else:
        raise ValueError(f"`payload` must be one of {PAYLOADS}, got {payload!r}.")
    return msgpack.packb(episode.get_state(), default=mnp.encode)


def write_payloads(
    payloads: Sequence[bytes], path: str, episodes_per_file: int = 200
) -> List[str]:
    """Writes payloads to `path` as parquet files with an `item` column.

    Returns:
        The files written.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    os.makedirs(path, exist_ok=True)
    files = []
    for start in range(0, len(payloads), episodes_per_file):
        name = os.path.join(path, f"episodes-{start // episodes_per_file:05d}.parquet")
        chunk = list(payloads[start : start + episodes_per_file])
        pq.write_table(pa.table({"item": pa.array(chunk, pa.binary())}), name)
        files.append(name)
    return files


def write_hand_rolled(
    episodes: Sequence,
    path: str,
    payload: str = "numpy",
    episodes_per_file: int = 200,
) -> List[str]:
    """Encodes `episodes` in the `payload` format and writes them to `path`."""
    return write_payloads(
        [encode(episode, payload) for episode in episodes], path, episodes_per_file
    )


def discounted_returns_to_go(episodes, gamma: float):
    """Observations and discounted return-to-go of every recorded step.

    Returns:
        `(obs, returns_to_go, terminated)`: float32 observations, float64
        returns, and whether each step's episode terminated.
    """
    obs, rtg, terminated = [], [], []
    for episode in episodes:
        rewards = np.asarray(episode.get_rewards(), dtype=np.float64)
        returns = np.zeros_like(rewards)
        running = 0.0
        for t in reversed(range(len(rewards))):
            running = rewards[t] + gamma * running
            returns[t] = running
        obs.append(np.asarray(episode.get_observations())[:-1])
        rtg.append(returns)
        terminated.append(np.full(len(rewards), bool(episode.is_terminated)))
    return (
        np.concatenate(obs).astype(np.float32),
        np.concatenate(rtg),
        np.concatenate(terminated),
    )


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=400)
    parser.add_argument("--epsilon", type=float, default=0.3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--payload", choices=PAYLOADS, default="per_step")
    parser.add_argument("--episodes-per-file", type=int, default=200)
    parser.add_argument("--out", required=True, help="Directory to write.")
    args = parser.parse_args()
    episodes = record_episodes(args.episodes, args.epsilon, args.seed)
    files = write_hand_rolled(episodes, args.out, args.payload, args.episodes_per_file)
    steps = sum(len(e) for e in episodes)
    print(f"{len(episodes)} episodes, {steps} steps, {len(files)} files in {args.out}")


if __name__ == "__main__":
    main()
