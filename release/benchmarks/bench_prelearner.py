"""OfflinePreLearner throughput, fork vs upstream, on recorded episodes.

Calls the prelearner directly (no Ray Data, one process per side, one core) the
way Ray Data's `map_batches` does: each call gets the `item` column of
`--episodes-per-call` recorded episodes (the stock msgpack format both sides
read) and returns one train batch of `--batch-size` sampled transitions. The
calls walk through a pool of episodes, so the prelearner's buffer turns over
as in training. Reports transitions (sampled items) per second over the timed
calls, after `--warmup` untimed ones.

Datasets: CartPole (Box observations, default model) and a Dict-observation
CartPole (`{"cart", "pole"}`, the per-key module of
`rllib/examples/offline_rl/train_with_dict_observations.py`). Pipelines: BC
and MARWIL (its bootstrap timestep and loss mask included).

    python release/benchmarks/bench_prelearner.py
    python release/benchmarks/bench_prelearner.py --datasets dict --algos bc
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
DATASETS = ("cartpole", "dict")
ALGOS = ("bc", "marwil")


def record(dataset: str, num_episodes: int, seed: int = 0):
    """Scripted episodes (10% random actions) and their payloads."""
    import gymnasium as gym
    import msgpack
    import msgpack_numpy as mnp

    from rllib.examples.offline_rl.scripted_cartpole import (
        balance_action,
        record_episodes,
    )

    if dataset == "dict":
        from rllib.examples.offline_rl.dict_cartpole import (
            DictCartPole,
            scripted_action,
        )

        env, policy = DictCartPole(), scripted_action
    else:
        env = gym.make("CartPole-v1")

        def policy(obs):
            return balance_action(obs[2], obs[3])

    episodes = record_episodes(env, num_episodes, policy, epsilon=0.1, seed=seed)
    payloads = []
    for episode in episodes:
        episode.to_numpy()
        payloads.append(msgpack.packb(episode.get_state(), default=mnp.encode))
    return env.observation_space, env.action_space, payloads


def build_prelearner(dataset, algo, observation_space, action_space, batch_size):
    from ray.rllib.core import DEFAULT_MODULE_ID
    from ray.rllib.core.rl_module.rl_module import RLModuleSpec
    from ray.rllib.offline.offline_prelearner import OfflinePreLearner

    if algo == "marwil":
        from ray.rllib.algorithms.marwil import MARWILConfig

        config = MARWILConfig().training(beta=1.0)
    else:
        from ray.rllib.algorithms.bc import BCConfig

        config = BCConfig()
    config = (
        config.environment(
            observation_space=observation_space, action_space=action_space
        )
        .training(train_batch_size_per_learner=batch_size)
        .offline_data(input_="/unused", input_read_episodes=True)
    )
    if dataset == "dict":
        from rllib.examples.offline_rl.dict_cartpole import DictObsModule

        spec = RLModuleSpec(module_class=DictObsModule)
        config = config.rl_module(rl_module_spec=spec)
    spec = config.get_multi_rl_module_spec(
        spaces={DEFAULT_MODULE_ID: (observation_space, action_space)},
        inference_only=False,
    )
    return OfflinePreLearner(
        config=config,
        spaces=(observation_space, action_space),
        module_spec=spec,
    )


def measure(args) -> dict:
    """Runs in the child process: both datasets and pipelines, this side."""
    import numpy as np
    import torch

    import rllib

    torch.set_num_threads(1)
    results = {}
    fast_path = {}
    for dataset in args.datasets:
        obs_space, act_space, payloads = record(dataset, args.pool_episodes)
        calls = [
            np.array(
                [
                    payloads[(i * args.episodes_per_call + j) % len(payloads)]
                    for j in range(args.episodes_per_call)
                ],
                dtype=object,
            )
            for i in range(args.warmup + args.calls)
        ]
        for algo in args.algos:
            prelearner = build_prelearner(
                dataset, algo, obs_space, act_space, args.batch_size
            )
            fast_path[f"{dataset}_{algo}"] = bool(
                getattr(prelearner, "uses_fast_path", False)
            )
            seconds = []
            for i, item in enumerate(calls):
                start = time.perf_counter()
                prelearner({"item": item})
                if i >= args.warmup:
                    seconds.append(time.perf_counter() - start)
            per_call = statistics.median(seconds)
            results[f"{dataset}_{algo}"] = {
                "transitions_per_s": args.batch_size / per_call,
                "ms_per_call": 1000 * per_call,
            }
    return {
        "fork_active": rllib.is_active(),
        "fast_path": fast_path,
        "results": results,
    }


def run_side(side, argv):
    env = dict(os.environ, RLLIB_FORK_DISABLE="1" if side == "upstream" else "0")
    out = subprocess.run(
        [sys.executable, os.path.abspath(__file__), "--child"] + argv,
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )
    if out.returncode != 0:
        raise RuntimeError(f"{side} child failed:\n{out.stderr[-4000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--datasets", nargs="+", choices=DATASETS, default=DATASETS)
    parser.add_argument("--algos", nargs="+", choices=ALGOS, default=ALGOS)
    parser.add_argument("--batch-size", type=int, default=1024)
    parser.add_argument("--episodes-per-call", type=int, default=32)
    parser.add_argument("--pool-episodes", type=int, default=96)
    parser.add_argument("--calls", type=int, default=12, help="Timed calls.")
    parser.add_argument("--warmup", type=int, default=2, help="Untimed calls.")
    return parser.parse_args(argv)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    if args.child:
        print(json.dumps(measure(args)))
        return
    sides = {side: run_side(side, argv) for side in ("upstream", "fork")}
    assert not sides["upstream"]["fork_active"] and sides["fork"]["fork_active"]
    print(
        f"OfflinePreLearner, {args.episodes_per_call} episodes in, "
        f"{args.batch_size} transitions out per call; median of {args.calls} calls"
    )
    print(
        f"{'dataset/algo':<16}{'upstream tr/s':>15}{'fork tr/s':>13}"
        f"{'ratio':>8}{'upstream ms':>13}{'fork ms':>9}  fork path"
    )
    for key, up in sides["upstream"]["results"].items():
        fork = sides["fork"]["results"][key]
        path = "fast" if sides["fork"]["fast_path"][key] else "general"
        print(
            f"{key:<16}{up['transitions_per_s']:>15,.0f}"
            f"{fork['transitions_per_s']:>13,.0f}"
            f"{fork['transitions_per_s'] / up['transitions_per_s']:>7.1f}x"
            f"{up['ms_per_call']:>13.1f}{fork['ms_per_call']:>9.1f}  {path}"
        )


if __name__ == "__main__":
    main()
