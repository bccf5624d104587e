"""Train batches from recorded episodes per second, fork vs upstream.

Two figures, each in one process per side, on one core (torch limited to 1
thread), no Ray Data:

1. The `OfflinePreLearner`, called directly the way Ray Data's
   `map_batches` calls it when data streams: each call gets the `item`
   column of `--episodes-per-call` recorded episodes and returns one train
   batch of `--batch-size` sampled transitions. The calls walk through a
   pool of `--pool-episodes` episodes, so the prelearner's buffer turns over
   as in training. Both sides build it as their `OfflineData` does: the
   fork's with `compute_value_targets=False` (its Learners compute MARWIL's
   value targets with the live module; upstream's prelearner runs that value
   pass itself, with its module copy, inside the call).
2. What replaces the prelearner when the data fits in memory (fork only):
   the episodes decoded once into an `EpisodeBlock`, then per train batch
   `columnar_episode_buffer.sample_transitions` + `TransitionBatchBuilder.
   build` with the Learner's connector pipeline, as the Learner's
   `EpisodeShardSampler` does. Compared with upstream's prelearner on the
   same calls (the upstream side of this figure is figure 1's upstream side).
   The one-time decode is reported separately (episodes/s).

Reported: transitions (sampled items) per second, the median over `--calls`
timed calls after `--warmup` untimed ones, for each dataset (CartPole with
Box observations and the default model; a Dict-observation CartPole
`{"cart", "pole"}` with the per-key module of
`rllib/examples/offline_rl/train_with_dict_observations.py`), pipeline (BC;
MARWIL with value-target inputs) and payload format (`per_step`: episode
states as recorded, the hand-rolled format; `numpy`: after
`episode.to_numpy()`; see `episode_data.py`). Episodes from the scripted
controller with 30% random actions.

    python release/benchmarks/bench_prelearner.py
    python release/benchmarks/bench_prelearner.py --datasets dict --algos bc
"""

import argparse
import itertools
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)

from episode_data import (  # noqa: E402
    PAYLOADS,
    balance_policy,
    encode,
    record_episodes,
)

DATASETS = ("cartpole", "dict")
ALGOS = ("bc", "marwil")
#: Share of random actions in the recorded episodes.
EPSILON = 0.3


def record(dataset: str, num_episodes: int, seed: int = 0):
    """Scripted episodes and their spaces."""
    import gymnasium as gym

    if dataset == "dict":
        from rllib.examples.offline_rl.dict_cartpole import (
            DictCartPole,
            scripted_action,
        )

        env, policy = DictCartPole(), scripted_action
    else:
        env, policy = gym.make("CartPole-v1"), balance_policy
    episodes = record_episodes(num_episodes, EPSILON, seed, policy=policy, env=env)
    return env.observation_space, env.action_space, episodes


def build_prelearner(dataset, algo, observation_space, action_space, batch_size):
    """The prelearner as this side's `OfflineData` builds it."""
    from ray.rllib.core import DEFAULT_MODULE_ID
    from ray.rllib.core.rl_module.rl_module import RLModuleSpec
    from ray.rllib.offline.offline_prelearner import OfflinePreLearner

    import rllib

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
    kwargs = {"compute_value_targets": False} if rllib.is_active() else {}
    return OfflinePreLearner(
        config=config,
        spaces=(observation_space, action_space),
        module_spec=spec,
        **kwargs,
    )


def median_seconds(call, calls: int, warmup: int) -> float:
    seconds = []
    for i in range(warmup + calls):
        start = time.perf_counter()
        call(i)
        if i >= warmup:
            seconds.append(time.perf_counter() - start)
    return statistics.median(seconds)


def figures(batch_size: int, per_call: float) -> dict:
    return {"transitions_per_s": batch_size / per_call, "ms_per_call": 1000 * per_call}


def in_memory_sampler(prelearner, payloads, observation_space, action_space):
    """Decodes `payloads` once; returns (sample-and-build function, seconds)."""
    import numpy as np

    from rllib.offline.in_memory.batch_builder import make_batch_builder
    from rllib.offline.in_memory.columnar_buffer import (
        sample_transitions,
    )
    from rllib.offline.in_memory.columns import EpisodeBlock, decode_episode_columns
    from rllib.offline.offline_settings import VALUE_HORIZON, get_offline_setting

    start = time.perf_counter()
    blocks = [
        EpisodeBlock.from_episodes(
            [
                decode_episode_columns(
                    payload,
                    observation_space=observation_space,
                    action_space=action_space,
                )
                for payload in payloads
            ]
        )
    ]
    decode_seconds = time.perf_counter() - start
    config, module = prelearner.config, prelearner._module
    # The Learner builds batches with its own pipeline; the prelearner's is
    # the same one (built from the same config, CPU tensors).
    builder, reason = make_batch_builder(prelearner._learner_connector, module)
    value_targets = None
    if builder.value_targets:
        value_targets = (config.gamma, get_offline_setting(config, VALUE_HORIZON))
    rng = np.random.default_rng(0)

    def sample(_):
        transitions = sample_transitions(
            blocks,
            config.train_batch_size_per_learner,
            rng=rng,
            n_step=config.get("n_step", 1) or 1,
            n_step_gamma=config.gamma,
            value_targets=value_targets,
        )
        return builder.build(transitions, rl_module=module)

    return sample, decode_seconds, type(builder).__name__


def measure(args) -> dict:
    """Runs in the child process: every dataset, pipeline and format, this side."""
    import numpy as np
    import torch

    import rllib

    torch.set_num_threads(1)
    out = {
        "fork_active": rllib.is_active(),
        "results": {},
        "in_memory": {},
        "decode": {},
        "columnar_path": {},
        "builder": {},
    }
    for dataset in args.datasets:
        obs_space, act_space, episodes = record(dataset, args.pool_episodes)
        for payload in args.payloads:
            payloads = [encode(episode, payload) for episode in episodes]
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
                key = f"{dataset}_{algo}_{payload}"
                prelearner = build_prelearner(
                    dataset, algo, obs_space, act_space, args.batch_size
                )
                out["columnar_path"][key] = bool(
                    getattr(prelearner, "uses_columnar_path", False)
                )
                per_call = median_seconds(
                    lambda i, p=prelearner, c=calls: p({"item": c[i]}),
                    args.calls,
                    args.warmup,
                )
                out["results"][key] = {
                    "dataset": dataset,
                    "algo": algo,
                    "payload": payload,
                    **figures(args.batch_size, per_call),
                }
                if not rllib.is_active() or payload != args.payloads[0]:
                    continue
                # The in-memory sampler works on decoded columns: the same for
                # either payload format (the decode is timed per format below).
                sample, _, builder = in_memory_sampler(
                    prelearner, payloads, obs_space, act_space
                )
                per_call = median_seconds(sample, args.calls, args.warmup)
                out["in_memory"][f"{dataset}_{algo}"] = figures(
                    args.batch_size, per_call
                )
                out["builder"][f"{dataset}_{algo}"] = builder
            if rllib.is_active():
                _, seconds, _ = in_memory_sampler(
                    prelearner, payloads, obs_space, act_space
                )
                out["decode"][f"{dataset}_{payload}"] = {
                    "episodes_per_s": len(payloads) / seconds
                }
    return out


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


def print_table(args, sides) -> None:
    up, fork = sides["upstream"], sides["fork"]
    print(
        f"{args.episodes_per_call} episodes in, {args.batch_size} transitions out "
        f"per call; median of {args.calls} calls; transitions/s"
    )
    print(
        f"{'dataset/algo/payload':<24}{'upstream':>10}{'fork':>10}{'ratio':>7}"
        f"{'in-memory':>11}{'ratio':>7}{'up ms':>8}{'fork ms':>8}{'mem ms':>8}"
        "  fork path"
    )
    for dataset, algo, payload in itertools.product(
        args.datasets, args.algos, args.payloads
    ):
        key = f"{dataset}_{algo}_{payload}"
        u, f = up["results"][key], fork["results"][key]
        m = fork["in_memory"][f"{dataset}_{algo}"]
        rate = u["transitions_per_s"]
        path = "columnar" if fork["columnar_path"][key] else "episodes"
        print(
            f"{key:<24}{rate:>10,.0f}{f['transitions_per_s']:>10,.0f}"
            f"{f['transitions_per_s'] / rate:>6.1f}x"
            f"{m['transitions_per_s']:>11,.0f}{m['transitions_per_s'] / rate:>6.1f}x"
            f"{u['ms_per_call']:>8.1f}{f['ms_per_call']:>8.1f}"
            f"{m['ms_per_call']:>8.2f}  {path}, "
            f"{fork['builder'][f'{dataset}_{algo}']}"
        )
    for key, figures_ in fork["decode"].items():
        print(f"decode once ({key}): {figures_['episodes_per_s']:,.0f} episodes/s")


def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="\n".join(__doc__.splitlines()[1:]),
    )
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--datasets", nargs="+", choices=DATASETS, default=DATASETS)
    parser.add_argument("--algos", nargs="+", choices=ALGOS, default=ALGOS)
    parser.add_argument("--payloads", nargs="+", choices=PAYLOADS, default=PAYLOADS)
    parser.add_argument("--batch-size", type=int, default=1024)
    parser.add_argument("--episodes-per-call", type=int, default=32)
    parser.add_argument("--pool-episodes", type=int, default=96)
    parser.add_argument("--calls", type=int, default=12, help="Timed calls.")
    parser.add_argument("--warmup", type=int, default=2, help="Untimed calls.")
    parser.add_argument("--json", default=None, help="Write both sides here.")
    return parser.parse_args(argv)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    args = parse_args(argv)
    if args.child:
        print(json.dumps(measure(args)))
        return
    child_argv = [a for a in argv if a != "--json" and a != args.json]
    sides = {side: run_side(side, child_argv) for side in ("upstream", "fork")}
    if sides["upstream"]["fork_active"] or not sides["fork"]["fork_active"]:
        sys.exit("RLLIB_FORK_DISABLE did not select the sides; is the fork installed?")
    print_table(args, sides)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(sides, f, indent=2)


if __name__ == "__main__":
    main()
