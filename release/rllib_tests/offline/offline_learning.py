"""Shared driver for the offline learning tests in this folder.

Each test records CartPole episodes with a scripted controller (no download),
writes them with `EpisodeWriter`, trains BC or MARWIL from the files with
`input_read_episodes=True`, evaluates the greedy policy after every iteration,
and stops as soon as the evaluation return reaches the threshold. It prints the
iterations and the wall time used and exits non-zero if the threshold is not
reached within `--max-iterations`.
"""

import argparse
import gc
import json
import sys
import tempfile
import time

import gymnasium as gym
import numpy as np


def add_data_over_budget_argument(parser: argparse.ArgumentParser) -> None:
    """`--data-over-budget F`: run with the data at F times the memory budget."""
    parser.add_argument(
        "--data-over-budget",
        type=float,
        default=None,
        help="Set the memory budget so the decoded episodes are this many times "
        "it (e.g. 8: the fork's rotating caches); default: no budget set.",
    )


def memory_budget_for(files, factor: float, filesystem=None, **spaces) -> int:
    """The budget that puts the decoded episodes of `files` at `factor`
    times it (decodes them all here to measure them)."""
    from rllib.offline.in_memory.store import decoded_size

    decoded = decoded_size(files, filesystem=filesystem, **spaces)["nbytes"]
    budget = int(decoded / factor)
    print(
        f"decoded episodes {decoded / 2**20:.2f} MiB, memory budget "
        f"{budget / 2**20:.3f} MiB ({factor:g}x)"
    )
    return budget


def parse_args(argv=None, **defaults) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--algo", choices=["bc", "marwil"], default="bc")
    parser.add_argument("--observations", choices=["box", "dict"], default="box")
    parser.add_argument("--threshold", type=float, default=450.0)
    parser.add_argument("--max-iterations", type=int, default=20)
    parser.add_argument("--num-episodes", type=int, default=40)
    parser.add_argument("--updates-per-iteration", type=int, default=25)
    parser.add_argument("--lr", type=float, default=8e-4)
    parser.add_argument("--batch-size", type=int, default=1024)
    parser.add_argument("--eval-episodes", type=int, default=5)
    parser.add_argument("--epsilon", type=float, default=0.05)
    parser.add_argument("--num-gpus-per-learner", type=float, default=0)
    parser.add_argument("--seed", type=int, default=0)
    add_data_over_budget_argument(parser)
    parser.add_argument("--json", default=None, help="Write the result here.")
    parser.set_defaults(**defaults)
    return parser.parse_args(argv)


def _box_episodes(num_episodes, epsilon, seed):
    from rllib.examples.offline_rl.train_on_external_episodes import (
        collect_episodes,
    )

    env = gym.make("CartPole-v1")
    return list(collect_episodes(num_episodes, epsilon, seed)), env


def _dict_episodes(num_episodes, seed):
    from rllib.examples.offline_rl.train_with_dict_observations import (
        DictCartPole,
        collect_episodes,
    )

    return collect_episodes(num_episodes, seed), DictCartPole()


def build_config(args, data_dir, memory_budget=None):
    from ray.data import ActorPoolStrategy
    from ray.rllib.core.rl_module.rl_module import RLModuleSpec

    if args.algo == "marwil":
        from ray.rllib.algorithms.marwil import MARWILConfig

        config = MARWILConfig().training(beta=1.0)
    else:
        from ray.rllib.algorithms.bc import BCConfig

        config = BCConfig()
    if args.observations == "dict":
        from rllib.examples.offline_rl.train_with_dict_observations import (
            ENV_NAME,
            DictObsModule,
        )

        config = config.environment(ENV_NAME).rl_module(
            rl_module_spec=RLModuleSpec(module_class=DictObsModule)
        )
    else:
        config = config.environment("CartPole-v1")
        if args.algo == "marwil":
            config = config.rl_module(model_config={"vf_share_layers": False})
    # Only the fork has the setting; an upstream run leaves it out.
    budget_setting = {}
    if memory_budget is not None:
        budget_setting["memory_budget"] = int(memory_budget)
    return (
        config.env_runners(num_env_runners=0)
        .learners(
            num_learners=0,
            num_gpus_per_learner=args.num_gpus_per_learner,
        )
        .training(train_batch_size_per_learner=args.batch_size, lr=args.lr)
        .offline_data(
            **budget_setting,
            input_=[data_dir],
            input_read_episodes=True,
            input_read_batch_size=2,
            dataset_num_iters_per_learner=args.updates_per_iteration,
            map_batches_kwargs={"compute": ActorPoolStrategy(size=1), "num_cpus": 1},
        )
        .evaluation(
            evaluation_interval=1,
            evaluation_num_env_runners=0,
            evaluation_duration=args.eval_episodes,
            evaluation_duration_unit="episodes",
        )
        .debugging(seed=args.seed)
    )


def run(args) -> dict:
    """Trains until the evaluation return reaches `args.threshold`."""
    import ray
    from ray.rllib.offline.episode_files.writer import EpisodeWriter
    from ray.rllib.utils.metrics import (
        ENV_RUNNER_RESULTS,
        EPISODE_RETURN_MEAN,
        EVALUATION_RESULTS,
    )

    import rllib

    name = f"{args.algo}-{args.observations}"
    if args.observations == "dict":
        from ray.tune.registry import register_env

        from rllib.examples.offline_rl.train_with_dict_observations import (
            ENV_NAME,
            DictCartPole,
        )

        register_env(ENV_NAME, lambda config: DictCartPole(config))
        episodes, env = _dict_episodes(args.num_episodes, args.seed)
    else:
        episodes, env = _box_episodes(args.num_episodes, args.epsilon, args.seed)
    data_dir = tempfile.mkdtemp(prefix=f"release-offline-{name}-")
    with EpisodeWriter(
        data_dir,
        observation_space=env.observation_space,
        action_space=env.action_space,
        max_rows_per_file=10,
    ) as writer:
        for episode in episodes:
            writer.write(episode)
    data_return = float(np.mean([e.get_return() for e in episodes]))
    print(
        f"[{name}] wrote {writer.num_episodes} episodes (mean return "
        f"{data_return:.1f}) to {len(writer.files)} files in {data_dir}; "
        f"fork active: {rllib.is_active()}"
    )

    memory_budget = None
    if args.data_over_budget:
        memory_budget = memory_budget_for(
            writer.files,
            args.data_over_budget,
            observation_space=env.observation_space,
            action_space=env.action_space,
        )
    ray.init(num_cpus=4, include_dashboard=False, log_to_driver=False)
    start = time.perf_counter()
    algo = build_config(args, data_dir, memory_budget).build_algo()
    returns = []
    passed = False
    try:
        for iteration in range(1, args.max_iterations + 1):
            result = algo.train()
            eval_return = float(
                result[EVALUATION_RESULTS][ENV_RUNNER_RESULTS][EPISODE_RETURN_MEAN]
            )
            returns.append(eval_return)
            print(
                f"[{name}] iter {iteration}: evaluation return {eval_return:.1f} "
                f"({time.perf_counter() - start:.1f}s)"
            )
            if eval_return >= args.threshold:
                passed = True
                break
        data_mode = getattr(algo.offline_data, "mode", None)
    finally:
        algo.stop()
        del algo
        gc.collect()  # Drop Ray Data iterators while Ray is still up.
        ray.shutdown()
    summary = {
        "test": name,
        "passed": passed,
        "threshold": args.threshold,
        "iterations": len(returns),
        "max_iterations": args.max_iterations,
        "wall_seconds": time.perf_counter() - start,
        "evaluation_returns": returns,
        "data_return": data_return,
        "fork_active": rllib.is_active(),
        "data_over_budget": args.data_over_budget,
        "data_mode": data_mode,
    }
    verdict = "PASSED" if passed else "FAILED"
    print(
        f"[{name}] {verdict}: evaluation return {returns[-1]:.1f} "
        f"(threshold {args.threshold:.0f}) after {len(returns)} iterations "
        f"(max {args.max_iterations}), {summary['wall_seconds']:.1f}s wall time; "
        f"data mode: {data_mode}"
    )
    if args.json:
        with open(args.json, "w") as f:
            json.dump(summary, f, indent=2)
    return summary


def main(argv=None, **defaults) -> None:
    summary = run(parse_args(argv, **defaults))
    sys.exit(0 if summary["passed"] else 1)
