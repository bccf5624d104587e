"""Offline training throughput, fork vs upstream, over a grid of setups.

Grid: algorithm (BC, MARWIL with beta=1) x recorded episodes (400, 4,000) x
payload format (`per_step`: the hand-rolled msgpack'd episode states users
write, not numpy-ized; `numpy`: the same after `episode.to_numpy()`; see
`episode_data.py`) x `num_learners` (0: a local Learner; 1: one Learner
actor). The episodes come from the scripted CartPole controller with 30%
random actions; every cell trains both sides from the same files.

Each cell runs twice, in fresh subprocesses, each under a timeout: as
upstream (`RLLIB_FORK_DISABLE=1`) and as the fork (which side goes first
alternates from cell to cell). Same config on both sides: batch 1024
(`train_batch_size_per_learner`), 10 updates per iteration
(`dataset_num_iters_per_learner`), 32 episodes per Ray Data read batch
(`input_read_batch_size`, used where data streams), upstream's defaults
otherwise, no evaluation, CPU Learners, torch limited to 1 thread per
process (`--torch-threads`; a Learner actor gets 1 CPU, so it runs one
thread either way). `ray.init()` is not timed. Measured per side:

- env steps trained/s: RLlib's `num_env_steps_trained_lifetime` counter over
  the timed `algo.train()` calls after the first (`--iterations`; by
  default at least 10 and enough for two passes of upstream's Ray Data
  pipeline over the data, 50 for MARWIL on 4,000 episodes: in its long
  first iteration upstream's pipeline prefetches train batches, and a short
  window would time the Learner eating that buffer, not the pipeline). It
  counts the rows of each train batch; upstream's MARWIL batches are half
  bootstrap rows (loss mask False), the fork's are all transitions, so per
  update both count 1024 and the figure is proportional to updates/s;
- time to the first update: from before `config.build_algo()` to the end of
  the first `algo.train()`; the build alone is reported as well;
- fork only, the Learner-only rate, the limit end to end can reach: the same
  Learner updating on train batches already in memory, as many calls as
  timed iterations, each one iteration's work (10 updates of 1024 rows, one
  train batch of 10 x 1024 rows sampled once before timing, value targets
  included), on `algo.learner_group._learner.update()` (`num_learners=0`)
  or `algo.learner_group.update()` (`num_learners=1`, so the batch travels
  to the actor once per call, as one iteration's call does); after one
  untimed call. Reported as env steps/s and as end to end / Learner-only;
- fork only, `algo.offline_data.mode` ("in_memory" or "streaming").

    python release/benchmarks/bench_training_throughput.py
    python release/benchmarks/bench_training_throughput.py --algos marwil \\
        --episodes 400 --payloads per_step --num-learners 0
"""

import argparse
import gc
import itertools
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)

from episode_data import PAYLOADS, record_episodes, write_hand_rolled  # noqa: E402

ALGOS = ("bc", "marwil")
EPISODES = (400, 4000)
NUM_LEARNERS = (0, 1)
SIDES = ("upstream", "fork")
#: Share of random actions in the recorded episodes.
EPSILON = 0.3
#: The fewest timed iterations by default.
MIN_ITERATIONS = 10


def cell_key(algo: str, episodes: int, payload: str, num_learners: int) -> str:
    return f"{algo}_{episodes}ep_{payload}_nl{num_learners}"


def grid(args):
    """The cells to run, as dicts, in a fixed order."""
    return [
        {"algo": a, "episodes": e, "payload": p, "num_learners": n}
        for a, e, p, n in itertools.product(
            args.algos, args.episodes, args.payloads, args.num_learners
        )
    ]


def write_data(root: str, episodes, payloads, seed: int = 0):
    """Records once and writes each (episodes, payload) dataset under `root`.

    The smaller datasets are prefixes of the largest recording (the recorder
    draws episode after episode from one stream).

    Returns:
        `{(num_episodes, payload): directory}`.
    """
    recorded = record_episodes(max(episodes), EPSILON, seed)
    dirs = {}
    for num, payload in itertools.product(sorted(set(episodes)), payloads):
        path = os.path.join(root, f"episodes-{num}-{payload}")
        write_hand_rolled(recorded[:num], path, payload)
        dirs[(num, payload)] = path
    return dirs


def child_command(cell, data: str, options=()) -> list:
    """The command line that trains one cell in a child process."""
    return [
        os.path.join(HERE, "bench_training_throughput.py"),
        "--child",
        "--data",
        data,
        "--algos",
        cell["algo"],
        "--num-learners",
        str(cell["num_learners"]),
        *options,
    ]


def run_side(cmd, side: str, timeout: float) -> dict:
    """Runs `cmd` as `side`; its JSON result, or `{"error": ...}`."""
    env = dict(os.environ, RLLIB_FORK_DISABLE="1" if side == "upstream" else "0")
    try:
        out = subprocess.run(
            [sys.executable] + cmd,
            env=env,
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout:.0f} s"}
    if out.returncode != 0:
        return {"error": f"exit code {out.returncode}: {out.stderr[-3000:]}"}
    return json.loads(out.stdout.strip().splitlines()[-1])


# --- In the child process ----------------------------------------------------


def build_config(args):
    import gymnasium as gym
    from ray.rllib.algorithms.bc import BCConfig
    from ray.rllib.algorithms.marwil import MARWILConfig

    (algo,) = args.algos
    (num_learners,) = args.num_learners
    if algo == "marwil":
        config = MARWILConfig().training(beta=1.0)
        # A separate value network, set explicitly: the same network both sides.
        config = config.rl_module(model_config={"vf_share_layers": False})
    else:
        config = BCConfig()
    env = gym.make("CartPole-v1")
    return (
        config.environment(
            observation_space=env.observation_space, action_space=env.action_space
        )
        .learners(
            num_learners=num_learners,
            num_gpus_per_learner=args.num_gpus_per_learner,
        )
        .training(train_batch_size_per_learner=args.batch_size, lr=8e-4)
        .offline_data(
            input_=[args.data],
            input_read_episodes=True,
            input_read_batch_size=args.read_batch_size,
            dataset_num_iters_per_learner=args.updates_per_iteration,
        )
    )


def default_iterations(args) -> int:
    """Timed iterations: at least `MIN_ITERATIONS`, and enough for two passes
    of upstream's pipeline over the data, so that neither the batches its Ray
    Data pipeline prefetches during the first iteration nor the restart of
    each pass dominate its figure.

    Upstream's prelearner turns each read batch of episodes into one train
    batch of `batch_size` sampled transitions; MARWIL's has a bootstrap row per
    transition, so it makes two batches of `batch_size` rows.
    """
    import glob

    import pyarrow.parquet as pq

    files = glob.glob(os.path.join(args.data, "**", "*.parquet"), recursive=True)
    episodes = sum(pq.ParquetFile(f).metadata.num_rows for f in files)
    batches_per_read = 2 if args.algos == ["marwil"] else 1
    reads = -(-episodes // args.read_batch_size)
    passes = -(-2 * reads * batches_per_read // args.updates_per_iteration)
    return max(MIN_ITERATIONS, passes)


def trained_steps(result) -> int:
    from ray.rllib.utils.metrics import (
        ALL_MODULES,
        LEARNER_RESULTS,
        NUM_ENV_STEPS_TRAINED_LIFETIME,
    )

    return int(result[LEARNER_RESULTS][ALL_MODULES][NUM_ENV_STEPS_TRAINED_LIFETIME])


def in_memory_batch(algo, num_rows: int):
    """A train batch of `num_rows` as the fork's Learner samples it."""
    offline_data = algo.offline_data
    if getattr(offline_data, "mode", None) != "in_memory":
        return offline_data.sample(num_samples=num_rows)
    if algo.config.num_learners == 0:
        return offline_data.sample(num_samples=num_rows)
    # Remote Learners: `OfflineData.sample()` builds batches with the local
    # Learner's pipeline, so sample on the Learner from its shard.
    (shard,) = offline_data.sample(
        num_samples=num_rows, return_iterator=True, num_shards=1
    )

    def sample(learner):
        from rllib.offline.in_memory.shard_sampler import EpisodeShardSampler

        sampler = EpisodeShardSampler(
            shard,
            pipeline=learner._learner_connector,
            rl_module=learner.module,
            config=learner.config,
        )
        return sampler.sample(num_rows)

    results = algo.learner_group.foreach_learner(sample)
    if isinstance(results, list):  # The local Learner.
        return results[0]
    # One batch is enough (with several Learners each sampled one).
    result = list(results)[0]
    if not result.ok:
        raise result.get()
    return result.get()


def learner_only_rate(algo, args) -> dict:
    """Env steps/s of the Learner alone, on a batch already in memory."""
    from ray.rllib.core.learner.training_data import TrainingData
    from ray.rllib.utils.metrics import NUM_ENV_STEPS_SAMPLED_LIFETIME

    batch = in_memory_batch(algo, args.batch_size * args.updates_per_iteration)
    kwargs = {
        "minibatch_size": args.batch_size,
        "num_epochs": 1,
        "timesteps": {NUM_ENV_STEPS_SAMPLED_LIFETIME: 0},
    }
    if algo.config.num_learners == 0:
        learner = algo.learner_group._learner

        def update():
            learner.update(training_data=TrainingData(batch=batch), **kwargs)

    else:

        def update():
            algo.learner_group.update(batch=batch, **kwargs)

    update()  # Untimed.
    start = time.perf_counter()
    for _ in range(args.iterations):
        update()
    seconds = time.perf_counter() - start
    steps = args.iterations * args.updates_per_iteration * args.batch_size
    return {"env_steps_per_s": steps / seconds, "seconds": seconds}


def run_cell(args) -> dict:
    """Trains one cell in this process (one side); returns its figures."""
    import ray
    import torch

    import rllib

    if args.torch_threads:
        torch.set_num_threads(args.torch_threads)
    if args.iterations is None:
        args.iterations = default_iterations(args)
    config = build_config(args)
    ray.init(num_cpus=args.num_cpus, include_dashboard=False, log_to_driver=False)
    start = time.perf_counter()
    algo = config.build_algo()
    build_seconds = time.perf_counter() - start
    warm_steps = trained_steps(algo.train())
    first_update_seconds = time.perf_counter() - start
    iteration_seconds = []
    result = {}
    for _ in range(args.iterations):
        iteration_start = time.perf_counter()
        result = algo.train()
        iteration_seconds.append(time.perf_counter() - iteration_start)
    seconds = sum(iteration_seconds)
    steps = trained_steps(result) - warm_steps
    figures = {
        "fork_active": rllib.is_active(),
        "env_steps_trained": steps,
        "seconds": seconds,
        "env_steps_per_s": steps / seconds,
        "iteration_seconds": iteration_seconds,
        "build_seconds": build_seconds,
        "time_to_first_update_s": first_update_seconds,
        "mode": getattr(algo.offline_data, "mode", None),
        "timed_iterations": args.iterations,
    }
    if rllib.is_active() and not args.no_learner_only:
        learner_only = learner_only_rate(algo, args)
        figures["learner_only_env_steps_per_s"] = learner_only["env_steps_per_s"]
        figures["ratio_to_learner_only"] = (
            figures["env_steps_per_s"] / learner_only["env_steps_per_s"]
        )
    algo.stop()
    del algo
    gc.collect()  # Drop Ray Data iterators while Ray is still up.
    ray.shutdown()
    return figures


# --- Parent: the grid and the table -----------------------------------------


def child_options(args) -> list:
    """Options every child gets (the measurement, not the cell)."""
    options = [
        "--batch-size", str(args.batch_size),
        "--updates-per-iteration", str(args.updates_per_iteration),
        "--read-batch-size", str(args.read_batch_size),
        "--num-gpus-per-learner", str(args.num_gpus_per_learner),
        "--num-cpus", str(args.num_cpus),
        "--torch-threads", str(args.torch_threads),
    ]  # fmt: skip
    if args.iterations is not None:
        options += ["--iterations", str(args.iterations)]
    if args.no_learner_only:
        options.append("--no-learner-only")
    return options


def _fmt(value, spec=",.0f", missing="-"):
    return missing if value is None else format(value, spec)


def print_table(cells) -> None:
    header = (
        f"{'cell':<26}{'upstream/s':>11}{'fork/s':>10}{'ratio':>7}"
        f"{'learner/s':>11}{'e2e/lrn':>8}{'1st up s':>9}{'1st fork s':>11}"
        f"{'build up':>9}{'build fork':>11}  fork mode"
    )
    print(header)
    for key, cell in cells.items():
        up, fk = cell["upstream"], cell["fork"]
        ratio = None
        if "env_steps_per_s" in up and "env_steps_per_s" in fk:
            ratio = fk["env_steps_per_s"] / up["env_steps_per_s"]
        print(
            f"{key:<26}{_fmt(up.get('env_steps_per_s')):>11}"
            f"{_fmt(fk.get('env_steps_per_s')):>10}{_fmt(ratio, '.1f'):>6}x"
            f"{_fmt(fk.get('learner_only_env_steps_per_s')):>11}"
            f"{_fmt(fk.get('ratio_to_learner_only'), '.0%'):>8}"
            f"{_fmt(up.get('time_to_first_update_s'), '.1f'):>9}"
            f"{_fmt(fk.get('time_to_first_update_s'), '.1f'):>11}"
            f"{_fmt(up.get('build_seconds'), '.1f'):>9}"
            f"{_fmt(fk.get('build_seconds'), '.1f'):>11}  {fk.get('mode') or '-'}"
        )
    for key, cell in cells.items():
        for side in SIDES:
            if "error" in cell[side]:
                print(f"{key} {side} failed: {cell[side]['error'][-1500:]}")


def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="\n".join(__doc__.splitlines()[1:]),
    )
    parser.add_argument("--algos", nargs="+", choices=ALGOS, default=list(ALGOS))
    parser.add_argument("--episodes", nargs="+", type=int, default=list(EPISODES))
    parser.add_argument("--payloads", nargs="+", choices=PAYLOADS, default=PAYLOADS)
    parser.add_argument(
        "--num-learners", nargs="+", type=int, choices=NUM_LEARNERS,
        default=list(NUM_LEARNERS),
    )  # fmt: skip
    parser.add_argument(
        "--iterations",
        type=int,
        default=None,
        help="Timed iterations (after the first). Default: at least "
        f"{MIN_ITERATIONS}, and two passes of upstream's Ray Data pipeline "
        "over the data.",
    )
    parser.add_argument("--batch-size", type=int, default=1024)
    parser.add_argument("--updates-per-iteration", type=int, default=10)
    parser.add_argument(
        "--read-batch-size", type=int, default=32, help="Episodes per Ray Data batch."
    )
    parser.add_argument("--num-gpus-per-learner", type=float, default=0)
    parser.add_argument("--num-cpus", type=int, default=4, help="For ray.init().")
    parser.add_argument(
        "--torch-threads", type=int, default=1, help="Per process; 0: torch default."
    )
    parser.add_argument("--no-learner-only", action="store_true")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--timeout", type=float, default=900, help="Per process.")
    parser.add_argument("--json", default=None, help="Write every figure here.")
    parser.add_argument("--data", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    if args.child:
        print(json.dumps(run_cell(args)))
        return
    cells = {}
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="bench-training-") as tmp:
        dirs = write_data(tmp, args.episodes, args.payloads, args.seed)
        for i, cell in enumerate(grid(args)):
            key = cell_key(**cell)
            data = dirs[(cell["episodes"], cell["payload"])]
            cmd = child_command(cell, data, child_options(args))
            cells[key] = dict(cell)
            for side in SIDES if i % 2 == 0 else SIDES[::-1]:
                cells[key][side] = run_side(cmd, side, args.timeout)
                status = "failed" if "error" in cells[key][side] else "ok"
                print(f"  {key} {side}: {status}", file=sys.stderr, flush=True)
    print(
        f"Offline training, CartPole ({EPSILON:.0%} random actions), batch "
        f"{args.batch_size}, {args.updates_per_iteration} updates/iteration, "
        f"{args.iterations or 'default'} timed iterations after the first; env "
        f"steps trained/s ({time.perf_counter() - start:.0f} s)"
    )
    print_table(cells)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"args": vars(args), "cells": cells}, f, indent=2)


if __name__ == "__main__":
    main()
