"""Continuous-control datasets at three qualities, rebuilt here without a download.

Two tasks, each with a scripted controller:

- `Pendulum-v1`: swing up by pumping energy, then balance with a PD law.
- `InvertedPendulum-v5` (MuJoCo, needs the `mujoco` package): a linear
  state-feedback law on cart position, pole angle and their velocities.

Each task has three behaviour policies, D4RL-style:

- `random`: uniform actions.
- `medium`: the controller with heavy Gaussian action noise (normalized
  scores of about 58 on Pendulum and 23 on InvertedPendulum).
- `expert`: the controller with light noise (the data is not deterministic).

`RETURNS` holds the mean returns of `random` and `expert` that normalize a
score to 0 (random) and 100 (expert data), measured with this module over
100 episodes (seeds 10_000 on); `python -m rllib.examples.offline_rl.
scripted_continuous_control --measure` measures them again.

Write the datasets with::

    python -m rllib.examples.offline_rl.scripted_continuous_control \\
        --out /tmp/continuous_control

`--out` gets `<task>-<quality>/` episode files (`EpisodeWriter`).
"""

import argparse
import dataclasses
import os
from typing import Callable, Dict, List, Optional, Sequence

import gymnasium as gym
import numpy as np
from ray.rllib.env.single_agent_episode import SingleAgentEpisode

# Pendulum-v1's dynamics: angular acceleration = 15 sin(theta) + 3 torque.
_PENDULUM_GRAVITY_TERM = 15.0


def pendulum_controller(obs: np.ndarray) -> np.ndarray:
    """Swings Pendulum-v1 up and holds it (mean return about -130).

    Far from upright it pumps energy (torque along the angular velocity,
    scaled by the energy still missing); near upright a PD law balances.
    """
    cos_theta, sin_theta, velocity = (float(x) for x in obs)
    angle = np.arctan2(sin_theta, cos_theta)
    if cos_theta > 0.8:
        torque = -(10.0 * angle + 2.0 * velocity)
    elif abs(velocity) < 0.3:
        # At rest below: kick off in the direction it already moves.
        torque = 2.0 if velocity >= 0 else -2.0
    else:
        missing_energy = -(
            0.5 * velocity**2 + _PENDULUM_GRAVITY_TERM * (cos_theta - 1.0)
        )
        torque = 0.3 * missing_energy * velocity
    return np.clip([torque], -2.0, 2.0).astype(np.float32)


def inverted_pendulum_controller(obs: np.ndarray) -> np.ndarray:
    """Balances InvertedPendulum-v5 for its full 1000 steps."""
    position, angle, velocity, angular_velocity = (float(x) for x in obs)
    force = 1.0 * position + 30.0 * angle + 1.5 * velocity + 4.0 * angular_velocity
    return np.clip([force], -3.0, 3.0).astype(np.float32)


@dataclasses.dataclass(frozen=True)
class Task:
    env_id: str
    controller: Callable[[np.ndarray], np.ndarray]
    #: Gaussian action noise (std) of each quality; None means uniform actions.
    noise: Dict[str, Optional[float]]


TASKS: Dict[str, Task] = {
    "pendulum": Task(
        "Pendulum-v1",
        pendulum_controller,
        {"random": None, "medium": 2.5, "expert": 0.3},
    ),
    "inverted_pendulum": Task(
        "InvertedPendulum-v5",
        inverted_pendulum_controller,
        {"random": None, "medium": 1.75, "expert": 0.5},
    ),
}
QUALITIES = ("random", "medium", "expert")

#: Mean returns of the `random` and `expert` behaviours (100 episodes each).
RETURNS: Dict[str, Dict[str, float]] = {
    "pendulum": {"random": -1166.4, "expert": -143.3},
    "inverted_pendulum": {"random": 5.0, "expert": 1000.0},
}


def normalized_score(task: str, episode_return: float) -> float:
    """0 at the random behaviour's mean return, 100 at the expert data's."""
    low, high = RETURNS[task]["random"], RETURNS[task]["expert"]
    return 100.0 * (episode_return - low) / (high - low)


def behaviour_policy(
    task: str, quality: str, rng: np.random.Generator
) -> Callable[[np.ndarray], np.ndarray]:
    """The `quality` behaviour of `task`, drawing its noise from `rng`."""
    spec = TASKS[task]
    space = gym.make(spec.env_id).action_space
    std = spec.noise[quality]
    if std is None:
        return lambda obs: rng.uniform(space.low, space.high).astype(np.float32)

    def act(obs):
        noisy = spec.controller(obs) + rng.normal(0.0, std, size=space.shape)
        return np.clip(noisy, space.low, space.high).astype(np.float32)

    return act


def record_episodes(
    task: str, quality: str, num_timesteps: int, *, seed: int = 0
) -> List[SingleAgentEpisode]:
    """Records whole episodes of one behaviour until `num_timesteps` are held.

    Episode `i` resets with `seed + i`; the noise comes from `seed`.
    """
    env = gym.make(TASKS[task].env_id)
    policy = behaviour_policy(task, quality, np.random.default_rng(seed))
    episodes, held = [], 0
    while held < num_timesteps:
        obs, info = env.reset(seed=seed + len(episodes))
        episode = SingleAgentEpisode(
            observations=[obs],
            infos=[info],
            observation_space=env.observation_space,
            action_space=env.action_space,
        )
        while not episode.is_done:
            action = policy(obs)
            obs, reward, terminated, truncated, info = env.step(action)
            episode.add_env_step(
                obs,
                action,
                reward,
                infos=info,
                terminated=terminated,
                truncated=truncated,
            )
        episodes.append(episode)
        held += len(episode)
    env.close()
    return episodes


def rollout_returns(
    task: str,
    policy: Callable[[np.ndarray], np.ndarray],
    num_episodes: int,
    *,
    seed: int = 10_000,
) -> np.ndarray:
    """Undiscounted returns of `policy` in `task`'s env (resets `seed + i`)."""
    env = gym.make(TASKS[task].env_id)
    returns = np.zeros(num_episodes)
    for i in range(num_episodes):
        obs, _ = env.reset(seed=seed + i)
        done = False
        while not done:
            obs, reward, terminated, truncated, _ = env.step(policy(obs))
            returns[i] += reward
            done = terminated or truncated
    env.close()
    return returns


def dataset_name(task: str, quality: str) -> str:
    return f"{task}-{quality}"


def build_datasets(
    out: str,
    *,
    tasks: Sequence[str] = tuple(TASKS),
    qualities: Sequence[str] = QUALITIES,
    num_timesteps: int = 20_000,
    seed: int = 0,
) -> Dict[str, str]:
    """Writes each task and quality under `out`; returns name -> directory."""
    from ray.rllib.offline.episode_files.writer import write_episodes

    written = {}
    for task in tasks:
        for quality in qualities:
            episodes = record_episodes(task, quality, num_timesteps, seed=seed)
            path = os.path.join(out, dataset_name(task, quality))
            write_episodes(episodes, path)
            written[dataset_name(task, quality)] = path
    return written


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", help="Directory for the episode files.")
    parser.add_argument("--tasks", nargs="+", choices=list(TASKS), default=list(TASKS))
    parser.add_argument("--qualities", nargs="+", choices=QUALITIES, default=QUALITIES)
    parser.add_argument("--num-timesteps", type=int, default=20_000)
    parser.add_argument(
        "--measure",
        action="store_true",
        help="Print the random and expert behaviours' mean returns instead.",
    )
    args = parser.parse_args(argv)
    if args.measure:
        for task in args.tasks:
            for quality in args.qualities:
                policy = behaviour_policy(task, quality, np.random.default_rng(0))
                returns = rollout_returns(task, policy, 100)
                print(f"{task:18} {quality:7} {returns.mean():9.1f}")
        return 0
    if not args.out:
        parser.error("--out is required (unless --measure)")
    written = build_datasets(
        args.out,
        tasks=args.tasks,
        qualities=args.qualities,
        num_timesteps=args.num_timesteps,
    )
    for name, path in written.items():
        print(f"{name:28} {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
