"""Offline CQL or IQL with d3rlpy, run as a standalone subprocess.

This script is meant to be executed with the interpreter of a separate
virtualenv that has d3rlpy (and gymnasium, plus mujoco for MuJoCo tasks)
installed; it is not importable from the main environment. It trains d3rlpy's
continuous ``CQL`` or ``IQL`` on logged transitions, evaluates the greedy policy
in a gymnasium environment every ``--eval-every`` updates and writes the
learning curve and the training throughput to a JSON file. It serves as the
reference point for RLlib's offline CQL/IQL benchmarks.

Usage::

    python d3rlpy_offline.py --data IN.npz --algo {cql,iql} --env-id ENV \\
        --updates N --eval-every K --eval-episodes E --seed S --out OUT.json \\
        [--batch-size 256] [--gamma 0.99] [--num-threads 1]

Input arrays (``IN.npz``), one row per step, episodes concatenated:

* ``observations`` ``(N, obs_dim)`` float32.
* ``actions`` ``(N, act_dim)`` float32.
* ``rewards`` ``(N,)``.
* ``terminals`` ``(N,)``: 1 where the episode terminated at this step.
* ``timeouts`` ``(N,)``: 1 where the episode was truncated at this step.

A row's next observation is the following row, so d3rlpy drops the last step
of every truncated episode (it has no next observation); a terminal last step
is kept. A step flagged both terminal and truncated counts as terminal.

Hyperparameters: d3rlpy's defaults of ``CQLConfig``/``IQLConfig`` (networks,
learning rates, ``tau``, ``n_critics``, CQL's ``alpha``/``conservative_weight``,
IQL's ``expectile``/``weight_temp``, no observation or reward scaler), except
``batch_size`` and ``gamma`` from the command line, CQL's Lagrangian
weight off unless ``--cql-alpha-lr`` is given (RLlib's CQL on the new API stack
has none, so both weigh the conservative term by a fixed 5.0), and one action
scaler:
d3rlpy's policies squash their output with tanh to ``[-1, 1]`` and CQL draws
its uniform actions from ``[-1, 1]``, so for an action space with other bounds
(Pendulum-v1: ``[-2, 2]``, InvertedPendulum-v5: ``[-3, 3]``) the script adds
``MinMaxActionScaler`` with the environment's bounds, which maps the logged
actions into ``[-1, 1]`` for training and the policy's actions back for the
environment. Logged actions are clipped to the bounds first (the environment
clips what it executes anyway).

Training runs on CPU with ``--num-threads`` torch threads. Instead of
``fit()``, the script runs the loop ``fit()`` runs (``sample_transition_batch``
then ``algo.update``) itself, without d3rlpy's logger and progress bar, so it
can time training (sampling plus update) apart from evaluation. Evaluation plays
``--eval-episodes`` episodes of ``gym.make(ENV)`` with reset seeds
``10_000 + i`` and the deterministic action ``algo.predict(obs[None])[0]``;
a curve point is the mean undiscounted return.

Output JSON keys: ``algo``, ``env_id``, ``updates``, ``updates_per_s``
(training only), ``curve`` (``[[updates_done, mean_return], ...]``),
``final_return``, ``train_seconds``, ``eval_seconds``, ``d3rlpy_version`` and a
few descriptive fields.
"""

import argparse
import json
import logging
import time
from typing import Optional

import d3rlpy
import gymnasium as gym
import numpy as np
import structlog
import torch
from d3rlpy.algos.utility import (
    assert_action_space_with_dataset,
    build_scalers_with_transition_picker,
)
from d3rlpy.constants import ActionSpace
from d3rlpy.dataset import MDPDataset
from d3rlpy.preprocessing import MinMaxActionScaler

EVAL_SEED_OFFSET = 10_000


def load_dataset(
    path: str, low: np.ndarray, high: np.ndarray
) -> tuple[MDPDataset, float]:
    """Reads the npz file into d3rlpy's dataset.

    Args:
        path: The ``.npz`` file.
        low: Lower action bounds of the environment.
        high: Upper action bounds of the environment.

    Returns:
        The dataset and the fraction of action entries that were clipped.

    Raises:
        ValueError: If the arrays disagree in length or action size.
    """
    with np.load(path) as data:
        observations = np.asarray(data["observations"], dtype=np.float32)
        actions = np.asarray(data["actions"], dtype=np.float32)
        rewards = np.asarray(data["rewards"], dtype=np.float32).reshape(-1, 1)
        terminals = np.asarray(data["terminals"], dtype=np.float32).reshape(-1)
        timeouts = np.asarray(data["timeouts"], dtype=np.float32).reshape(-1)
    n = len(observations)
    actions = actions.reshape(n, -1)
    if not len(actions) == len(rewards) == len(terminals) == len(timeouts) == n:
        raise ValueError("all arrays need one row per step")
    if actions.shape[1] != low.shape[0]:
        raise ValueError(
            f"actions have {actions.shape[1]} dimensions, the environment "
            f"{low.shape[0]}"
        )
    # d3rlpy rejects steps flagged both ways; treat them as terminal.
    timeouts = np.where(terminals > 0, 0.0, timeouts).astype(np.float32)
    if not terminals[-1] and not timeouts[-1]:
        # Close the last, unfinished episode.
        timeouts[-1] = 1.0
    clipped = np.clip(actions, low, high)
    clipped_fraction = float(np.mean(clipped != actions))
    dataset = MDPDataset(
        observations=observations,
        actions=clipped,
        rewards=rewards,
        terminals=terminals,
        timeouts=timeouts,
        action_space=ActionSpace.CONTINUOUS,
        action_size=actions.shape[1],
    )
    return dataset, clipped_fraction


def make_algo(
    name: str,
    batch_size: int,
    gamma: float,
    low: np.ndarray,
    high: np.ndarray,
    cql_alpha_lr: float = 0.0,
) -> d3rlpy.algos.QLearningAlgoBase:
    """Creates CQL or IQL with d3rlpy's defaults on CPU.

    Args:
        name: ``"cql"`` or ``"iql"``.
        batch_size: Mini-batch size.
        gamma: Discount factor.
        low: Lower action bounds of the environment.
        high: Upper action bounds of the environment.
        cql_alpha_lr: CQL's ``alpha_learning_rate`` (0: a fixed weight).

    Returns:
        The (not yet built) algorithm.
    """
    config_cls = {"cql": d3rlpy.algos.CQLConfig, "iql": d3rlpy.algos.IQLConfig}[name]
    action_scaler = None
    if not (np.all(low == -1.0) and np.all(high == 1.0)):
        action_scaler = MinMaxActionScaler(minimum=low, maximum=high)
    kwargs = {}
    if name == "cql":
        kwargs["alpha_learning_rate"] = cql_alpha_lr
    config = config_cls(
        batch_size=batch_size, gamma=gamma, action_scaler=action_scaler, **kwargs
    )
    return config.create(device="cpu:0")


def evaluate(
    algo: d3rlpy.algos.QLearningAlgoBase,
    env: gym.Env,
    num_episodes: int,
) -> float:
    """Plays episodes with the greedy policy.

    Args:
        algo: The trained algorithm.
        env: The evaluation environment (with its time limit).
        num_episodes: Number of episodes.

    Returns:
        The mean undiscounted return.
    """
    low, high = env.action_space.low, env.action_space.high
    returns = []
    for i in range(num_episodes):
        obs, _ = env.reset(seed=EVAL_SEED_OFFSET + i)
        total, done = 0.0, False
        while not done:
            action = algo.predict(np.asarray(obs, dtype=np.float32)[None])[0]
            obs, reward, terminated, truncated, _ = env.step(np.clip(action, low, high))
            total += float(reward)
            done = terminated or truncated
        returns.append(total)
    return float(np.mean(returns))


def parse_args(argv: Optional[list[str]] = None) -> argparse.Namespace:
    """Parses the command line.

    Args:
        argv: Arguments (defaults to ``sys.argv[1:]``).

    Returns:
        The parsed arguments.
    """
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", required=True, help="input .npz file")
    parser.add_argument("--algo", required=True, choices=["cql", "iql"])
    parser.add_argument("--env-id", required=True, help="gymnasium environment")
    parser.add_argument("--updates", type=int, required=True)
    parser.add_argument("--eval-every", type=int, required=True)
    parser.add_argument("--eval-episodes", type=int, required=True)
    parser.add_argument("--seed", type=int, required=True)
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--gamma", type=float, default=0.99)
    parser.add_argument("--num-threads", type=int, default=1)
    parser.add_argument(
        "--cql-alpha-lr",
        type=float,
        default=0.0,
        help="CQL's alpha_learning_rate; 0 (default here) keeps its weight fixed "
        "as RLlib's CQL does, d3rlpy's own default is 1e-4",
    )
    parser.add_argument("--out", required=True, help="output .json file")
    parser.add_argument(
        "--verbose", action="store_true", help="keep d3rlpy's info logging (stdout)"
    )
    return parser.parse_args(argv)


def main(argv: Optional[list[str]] = None) -> None:
    """Trains, evaluates and writes the JSON result."""
    args = parse_args(argv)
    for flag in ("updates", "eval_every", "eval_episodes", "batch_size"):
        if getattr(args, flag) < 1:
            raise ValueError(f"--{flag.replace('_', '-')} must be positive")
    if not args.verbose:
        # d3rlpy logs through structlog to stdout; keep warnings and errors.
        structlog.configure(
            wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING)
        )
    torch.set_num_threads(args.num_threads)
    d3rlpy.seed(args.seed)

    env = gym.make(args.env_id)
    if not isinstance(env.action_space, gym.spaces.Box):
        raise ValueError(f"{args.env_id} has no continuous (Box) action space")
    low = np.asarray(env.action_space.low, dtype=np.float32)
    high = np.asarray(env.action_space.high, dtype=np.float32)
    if not (np.all(np.isfinite(low)) and np.all(np.isfinite(high))):
        raise ValueError(f"{args.env_id} has unbounded actions")

    dataset, clipped_fraction = load_dataset(args.data, low, high)
    algo = make_algo(
        args.algo, args.batch_size, args.gamma, low, high, args.cql_alpha_lr
    )
    # What fit() does before its loop: checks, scalers, networks.
    assert_action_space_with_dataset(algo, dataset.dataset_info)
    build_scalers_with_transition_picker(algo, dataset)
    algo.build_with_dataset(dataset)

    curve = []
    sample_seconds = update_seconds = eval_seconds = 0.0
    done = 0
    while done < args.updates:
        steps = min(args.eval_every, args.updates - done)
        for _ in range(steps):
            start = time.perf_counter()
            batch = dataset.sample_transition_batch(args.batch_size)
            mid = time.perf_counter()
            metrics = algo.update(batch)
            update_seconds += time.perf_counter() - mid
            sample_seconds += mid - start
        done += steps
        start = time.perf_counter()
        curve.append([done, evaluate(algo, env, args.eval_episodes)])
        eval_seconds += time.perf_counter() - start
    env.close()

    train_seconds = sample_seconds + update_seconds
    output = {
        "algo": args.algo,
        "env_id": args.env_id,
        "updates": args.updates,
        "updates_per_s": args.updates / train_seconds,
        "curve": curve,
        "final_return": curve[-1][1],
        "train_seconds": train_seconds,
        "eval_seconds": eval_seconds,
        "d3rlpy_version": d3rlpy.__version__,
        "sample_seconds": sample_seconds,
        "update_seconds": update_seconds,
        "torch_version": torch.__version__,
        "torch_threads": torch.get_num_threads(),
        "batch_size": args.batch_size,
        "gamma": args.gamma,
        "seed": args.seed,
        "eval_every": args.eval_every,
        "eval_episodes": args.eval_episodes,
        "action_scaler": None
        if algo.config.action_scaler is None
        else {"minimum": low.tolist(), "maximum": high.tolist()},
        "clipped_action_fraction": clipped_fraction,
        "num_transitions": int(dataset.transition_count),
        "num_episodes": len(dataset.episodes),
        "last_metrics": {key: float(value) for key, value in metrics.items()},
    }
    with open(args.out, "w") as f:
        json.dump(output, f, indent=2)


if __name__ == "__main__":
    main()
