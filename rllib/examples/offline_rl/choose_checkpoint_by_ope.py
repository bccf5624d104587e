"""Choose the best of several checkpoints from recorded data alone.

A user with logs but no simulator cannot roll a policy out to compare
checkpoints. This example:

1. records CartPole episodes of a noisy scripted controller, with each
   action's probability (`action_logp`), and writes them with
   `EpisodeWriter` (your own logs take this place);
2. trains BC on them and saves a checkpoint before training and after a few
   iterations;
3. scores every checkpoint on the episodes with the `ope` command
   (`python -m ray.rllib.offline.episodes ope --data ... --checkpoint ...`),
   and picks the best by fitted Q evaluation (the command's default ranking;
   doubly robust estimates carry the importance weights' variance, which on
   500-step episodes can rank a good checkpoint last);
4. with `--verify`, rolls every checkpoint out in CartPole to show how the
   estimates compare with the real discounted returns (what you could not do
   without a simulator).

`python choose_checkpoint_by_ope.py [--verify] [--iterations 1,3,8]`
"""

import argparse
import os
import tempfile
from typing import Dict, List

import gymnasium as gym
import numpy as np

from rllib.examples.offline_rl.scripted_cartpole import balance_action, record_episodes
from rllib.offline.episode_files.writer import write_episodes
from rllib.offline.tools.cli import build_parser
from rllib.offline.tools.ope_command import (
    load_modules,
    print_table,
    rank_estimator,
    score_checkpoints,
)
from rllib.offline.tools.quiet_output import quiet_output

GAMMA = 0.99


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--num-episodes", type=int, default=60)
    parser.add_argument("--epsilon", type=float, default=0.5)
    parser.add_argument(
        "--iterations",
        default="1,3,8",
        help="save a checkpoint after these training iterations (and one before)",
    )
    parser.add_argument("--fqe-updates", type=int, default=10_000)
    parser.add_argument("--verify", action="store_true")
    parser.add_argument("--verify-episodes", type=int, default=50)
    parser.add_argument("--output-dir", default=None)
    parser.add_argument(
        "--verbose",
        action="store_true",
        help="Keep ray's warnings that need no action here and Ray Data's "
        "progress bars.",
    )
    return parser.parse_args(argv)


def record(data_dir: str, num_episodes: int, epsilon: float) -> None:
    env = gym.make("CartPole-v1")
    episodes = record_episodes(
        env,
        num_episodes,
        lambda obs: balance_action(obs[2], obs[3]),
        epsilon=epsilon,
        record_logp=True,
    )
    write_episodes([episode.to_numpy() for episode in episodes], data_dir)


def train_and_save(data_dir: str, out_dir: str, iterations: List[int]) -> List[str]:
    """Checkpoints of BC before training and after each of `iterations`."""
    from ray.rllib.algorithms.bc import BCConfig

    config = (
        BCConfig()
        .environment("CartPole-v1")
        .training(train_batch_size_per_learner=256, lr=1e-3, gamma=GAMMA)
        .offline_data(
            input_=[data_dir], input_read_episodes=True, dataset_num_iters_per_learner=2
        )
        .debugging(seed=0)
    )
    algo = config.build_algo()
    checkpoints = [algo.save_to_path(os.path.join(out_dir, "iteration_0"))]
    for iteration in range(1, max(iterations) + 1):
        algo.train()
        if iteration in iterations:
            path = os.path.join(out_dir, f"iteration_{iteration}")
            checkpoints.append(algo.save_to_path(path))
    algo.stop()
    return checkpoints


def true_returns(checkpoints: List[str], num_episodes: int) -> Dict[str, float]:
    """Mean discounted return of each checkpoint's policy in CartPole."""
    import torch
    from ray.rllib.core import DEFAULT_MODULE_ID
    from ray.rllib.core.columns import Columns

    env = gym.make("CartPole-v1")
    returns = {}
    for checkpoint in checkpoints:
        module = load_modules(checkpoint)[DEFAULT_MODULE_ID]
        dist_cls = module.get_inference_action_dist_cls()
        torch.manual_seed(0)
        values = []
        for i in range(num_episodes):
            obs, _ = env.reset(seed=10_000 + i)
            done, t, value = False, 0, 0.0
            while not done:
                with torch.no_grad():
                    out = module.forward_inference(
                        {Columns.OBS: torch.as_tensor(obs[None])}
                    )
                action = dist_cls.from_logits(out[Columns.ACTION_DIST_INPUTS]).sample()
                obs, reward, terminated, truncated, _ = env.step(int(action[0]))
                value += GAMMA**t * reward
                t += 1
                done = terminated or truncated
            values.append(value)
        returns[checkpoint] = float(np.mean(values))
    return returns


def main(argv=None) -> Dict[str, object]:
    args = parse_args(argv)
    quiet_output(args.verbose)
    out_dir = args.output_dir or tempfile.mkdtemp(prefix="choose_by_ope_")
    data_dir = os.path.join(out_dir, "episodes")
    record(data_dir, args.num_episodes, args.epsilon)
    iterations = [int(i) for i in args.iterations.split(",")]
    checkpoints = train_and_save(data_dir, out_dir, iterations)

    ope_args = build_parser().parse_args(
        ["ope", "--data", data_dir, "--checkpoint", *checkpoints]
        + ["--estimators", "wis,fqe,dr", "--gamma", str(GAMMA)]
        + ["--fqe-updates", str(args.fqe_updates)]
    )
    rows = score_checkpoints(ope_args, progress=False)
    print_table(rows, ope_args.estimators)
    rank = rank_estimator(ope_args)
    picked = rows[0]["checkpoint"]
    print(f"\nPicked by {rank}: {picked}")
    outcome = {"picked": picked, "estimates": rows}
    if args.verify:
        truth = true_returns(checkpoints, args.verify_episodes)
        best = max(truth, key=truth.get)
        for row in rows:
            print(
                f"{row['checkpoint']}: {rank} {row['estimates'][rank]['value']:.1f}"
                f"  true {truth[row['checkpoint']]:.1f}"
            )
        print(f"True best: {best} ({truth[best]:.1f}); picked: {truth[picked]:.1f}")
        outcome["true_returns"] = truth
    return outcome


if __name__ == "__main__":
    main()
