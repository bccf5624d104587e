"""Trains BC on a Minari dataset recorded with Minari's own `DataCollector`.

This example shows the path from a Minari dataset to a trained RLlib policy:

1. Record CartPole with a scripted controller (push the cart toward the side
   the pole falls to; it balances to the 500-step limit) through
   `minari.DataCollector`, and create a Minari dataset from it. No download:
   the dataset is made here, under `<output-dir>/minari` (set as
   `MINARI_DATASETS_PATH`).
2. Convert it with `ray.rllib.offline.tools.minari_io.convert_minari`: the Minari
   episodes become RLlib episode files (parquet, spaces in the metadata),
   with a progress bar.
3. Train BC from the files with `config.offline_data(input_read_episodes=True)`.
4. Evaluate the greedy policy in the environment the dataset records
   (`dataset.env_spec`) and print a summary.

Recording needs Minari's `create` extra (jax) as well as the `minari` extra:
`pip install -e ".[minari,minari-create]"` in a source checkout.

How to run this script
----------------------
`python train_on_minari.py [--num-episodes=20] [--data-format=arrow]
[--iterations=10] [--output-dir=/tmp/minari-bc]`

Results to expect
-----------------
With the defaults, on 2 CPUs, in one to two minutes: 20 episodes (about 10,000
steps, mean return about 498) recorded in a few seconds and converted in
under a second, then 10 iterations of 10 BC updates, in which the loss falls
from about 0.42 to about 0.35 (5% of the actions are random, and the
controller's decisions sit close to its decision boundary), and a greedy
evaluation return of 500 (measured: 500.0 for seeds 0, 1 and 2).
"""

import argparse
import gc
import os
import shutil
import tempfile
import time

import gymnasium as gym
import minari
import numpy as np
import ray
from ray.data import ActorPoolStrategy
from ray.rllib.core import DEFAULT_MODULE_ID
from ray.rllib.offline.tools.quiet_output import quiet_output
from ray.rllib.utils.metrics import (
    ENV_RUNNER_RESULTS,
    EPISODE_RETURN_MEAN,
    EVALUATION_RESULTS,
    LEARNER_RESULTS,
)

from rllib.examples.offline_rl.scripted_cartpole import balance_action

DATASET_ID = "cartpole/scripted-expert-v0"


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--num-episodes", type=int, default=20, help="Episodes to record."
    )
    parser.add_argument(
        "--epsilon",
        type=float,
        default=0.05,
        help="Share of random actions while recording (diversifies the data).",
    )
    parser.add_argument(
        "--data-format",
        choices=["hdf5", "arrow"],
        default="hdf5",
        help="Minari storage backend of the recorded dataset.",
    )
    parser.add_argument(
        "--iterations", type=int, default=10, help="Training iterations."
    )
    parser.add_argument(
        "--updates-per-iteration",
        type=int,
        default=10,
        help="Learner updates (train batches of 1024 steps) per iteration.",
    )
    parser.add_argument("--lr", type=float, default=0.005)
    parser.add_argument("--eval-episodes", type=int, default=5)
    parser.add_argument(
        "--output-dir",
        default=None,
        help="Where the Minari dataset and the episode files go (default: a "
        "temp dir). Both are replaced if they exist.",
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--verbose",
        action="store_true",
        help="Keep ray's warnings that need no action here and Ray Data's "
        "progress bars.",
    )
    return parser.parse_args(argv)


# __record_begin__
def record_cartpole_dataset(
    dataset_id: str,
    num_episodes: int,
    *,
    epsilon: float = 0.05,
    data_format: str = "hdf5",
    seed: int = 0,
) -> minari.MinariDataset:
    """Records the scripted controller through Minari's `DataCollector`."""
    env = minari.DataCollector(gym.make("CartPole-v1"), data_format=data_format)
    env.action_space.seed(seed)
    rng = np.random.default_rng(seed)
    for i in range(num_episodes):
        obs, _ = env.reset(seed=seed + i)
        done = False
        while not done:
            if rng.random() < epsilon:
                action = env.action_space.sample()
            else:
                action = balance_action(obs[2], obs[3])
            obs, _, terminated, truncated, _ = env.step(action)
            done = terminated or truncated
    dataset = env.create_dataset(
        dataset_id,
        algorithm_name="scripted balance controller",
        author="rllib-fork",
        author_email="rllib-fork@example.com",
        code_permalink="rllib/examples/offline_rl/train_on_minari.py",
        description=f"CartPole-v1, scripted controller, {epsilon:.0%} random actions",
    )
    env.close()
    return dataset


# __record_end__


def build_config(args: argparse.Namespace, data_dir: str, env_id: str):
    # __train_begin__
    from ray.rllib.algorithms.bc import BCConfig

    config = (
        BCConfig()
        # The dataset records its environment (`dataset.env_spec.id`);
        # RLlib evaluates there and takes the spaces from it.
        .environment(env_id)
        .env_runners(num_env_runners=0)
        .learners(num_learners=0)
        .training(train_batch_size_per_learner=1024, lr=args.lr)
        .offline_data(
            input_=[data_dir],
            input_read_episodes=True,
            input_read_batch_size=2,
            dataset_num_iters_per_learner=args.updates_per_iteration,
            map_batches_kwargs={"compute": ActorPoolStrategy(size=1), "num_cpus": 1},
        )
        .evaluation(
            evaluation_interval=args.iterations,
            evaluation_num_env_runners=0,
            evaluation_duration=args.eval_episodes,
            evaluation_duration_unit="episodes",
            # Greedy actions: the mode of the cloned policy.
            evaluation_config=BCConfig.overrides(explore=False),
        )
        .debugging(seed=args.seed)
    )
    # __train_end__
    return config


def main(argv=None) -> dict:
    args = parse_args(argv)
    quiet_output(args.verbose)
    output_dir = args.output_dir or tempfile.mkdtemp(prefix="minari-bc-")
    # Minari finds (and `DataCollector` creates) datasets under this root.
    os.environ["MINARI_DATASETS_PATH"] = os.path.join(output_dir, "minari")
    episodes_dir = os.path.join(output_dir, "episodes")
    for owned in (minari.storage.get_dataset_path(DATASET_ID), episodes_dir):
        shutil.rmtree(owned, ignore_errors=True)

    # 1. Record a Minari dataset.
    start = time.perf_counter()
    dataset = record_cartpole_dataset(
        DATASET_ID,
        args.num_episodes,
        epsilon=args.epsilon,
        data_format=args.data_format,
        seed=args.seed,
    )
    record_s = time.perf_counter() - start
    returns = [float(np.sum(e.rewards)) for e in dataset.iterate_episodes()]
    print(
        f"Recorded Minari dataset `{dataset.id}` ({args.data_format}): "
        f"{dataset.total_episodes} episodes, {dataset.total_steps} steps, mean "
        f"return {np.mean(returns):.1f}, in {record_s:.1f}s"
    )

    # 2. Convert it to RLlib episode files.
    # __convert_begin__
    from ray.rllib.offline.episode_files.reader import read_spaces
    from ray.rllib.offline.tools.minari_io import convert_minari

    start = time.perf_counter()
    files = convert_minari(DATASET_ID, episodes_dir, max_rows_per_file=10)
    convert_s = time.perf_counter() - start
    print(f"Converted to {len(files)} episode files in {convert_s:.2f}s")
    print(f"Recorded spaces: {read_spaces(episodes_dir)}")
    # __convert_end__

    # 3. Train.
    owns_ray = not ray.is_initialized()
    if owns_ray:
        ray.init(num_cpus=4, include_dashboard=False, log_to_driver=False)
    algo = build_config(args, episodes_dir, dataset.env_spec.id).build_algo()
    losses = []
    result = {}
    train_start = time.perf_counter()
    for iteration in range(1, args.iterations + 1):
        start = time.perf_counter()
        result = algo.train()
        losses.append(float(result[LEARNER_RESULTS][DEFAULT_MODULE_ID]["total_loss"]))
        print(
            f"iter {iteration}: loss {losses[-1]:.4f} "
            f"({time.perf_counter() - start:.1f}s)"
        )
    train_s = time.perf_counter() - train_start

    # 4. Evaluate (ran in the last iteration, see `evaluation_interval`).
    eval_return = result[EVALUATION_RESULTS][ENV_RUNNER_RESULTS][EPISODE_RETURN_MEAN]
    algo.stop()
    del algo
    gc.collect()  # Drop Ray Data iterators while Ray is still up.
    if owns_ray:
        ray.shutdown()
    summary = {
        "dataset_id": dataset.id,
        "total_episodes": dataset.total_episodes,
        "total_steps": dataset.total_steps,
        "files": len(files),
        "convert_s": convert_s,
        "train_s": train_s,
        "losses": losses,
        "eval_return_mean": float(eval_return),
        "expert_return_mean": float(np.mean(returns)),
    }
    print(
        f"Summary: BC on `{dataset.id}` ({dataset.total_steps} steps): loss "
        f"{losses[0]:.4f} -> {losses[-1]:.4f} over {args.iterations} iterations "
        f"({train_s:.1f}s); greedy evaluation return {eval_return:.1f} over "
        f"{args.eval_episodes} episodes (data: {summary['expert_return_mean']:.1f})."
    )
    return summary


if __name__ == "__main__":
    main()
