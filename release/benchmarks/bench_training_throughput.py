"""End-to-end offline training throughput, fork vs upstream, same episodes.

Records CartPole episodes with the scripted expert, writes them once in the
format every RLlib version reads (msgpack'd episode states in an `item`
column), then trains BC or MARWIL from them with a local learner
(`num_learners=0`) in two subprocesses: upstream (`RLLIB_FORK_DISABLE=1`) and
the fork. Reports env steps trained per second over the timed iterations; the
first iteration (dataset start-up, first-call costs; for BC, which
materializes the mapped dataset, the whole prelearner pass) is a warm-up and not
counted. No evaluation runs inside the timed loop.

MARWIL uses `vf_share_layers=False` on both sides (the fork's default), so
both train the same network.

    python release/benchmarks/bench_training_throughput.py --algo marwil
"""

import argparse
import gc
import json
import os
import subprocess
import sys
import tempfile
import time

from bench_marwil_value_quality import record_episodes, write_hand_rolled


def run_one(args) -> dict:
    """Trains in this process; returns env steps trained per second."""
    import gymnasium as gym
    import ray
    from ray.rllib.utils.metrics import (
        ALL_MODULES,
        LEARNER_RESULTS,
        NUM_ENV_STEPS_TRAINED_LIFETIME,
    )

    import rllib

    if args.algo == "marwil":
        from ray.rllib.algorithms.marwil import MARWILConfig

        config = MARWILConfig().training(beta=1.0)
        config = config.rl_module(model_config={"vf_share_layers": False})
    else:
        from ray.rllib.algorithms.bc import BCConfig

        config = BCConfig()
    env = gym.make("CartPole-v1")
    config = (
        config.environment(
            "CartPole-v1",
            observation_space=env.observation_space,
            action_space=env.action_space,
        )
        .env_runners(num_env_runners=0)
        .learners(num_learners=0, num_gpus_per_learner=args.num_gpus_per_learner)
        .training(train_batch_size_per_learner=args.batch_size, lr=8e-4)
        .offline_data(
            input_=[args.data],
            input_read_episodes=True,
            input_read_batch_size=16,
            dataset_num_iters_per_learner=args.updates_per_iteration,
            map_batches_kwargs={"concurrency": 1, "num_cpus": 1},
        )
    )
    ray.init(num_cpus=4, include_dashboard=False, log_to_driver=False)
    algo = config.build_algo()

    def trained(result):
        return int(result[LEARNER_RESULTS][ALL_MODULES][NUM_ENV_STEPS_TRAINED_LIFETIME])

    start = time.perf_counter()
    warm_steps = trained(algo.train())
    first_iteration_seconds = time.perf_counter() - start
    start = time.perf_counter()
    result = {}
    for _ in range(args.iterations):
        result = algo.train()
    seconds = time.perf_counter() - start
    steps = trained(result) - warm_steps
    algo.stop()
    del algo
    gc.collect()  # Drop Ray Data iterators while Ray is still up.
    ray.shutdown()
    return {
        "fork_active": rllib.is_active(),
        "algo": args.algo,
        "env_steps_trained": steps,
        "seconds": seconds,
        "env_steps_per_s": steps / seconds,
        "first_iteration_seconds": first_iteration_seconds,
    }


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--algo", choices=["bc", "marwil"], default="bc")
    parser.add_argument("--iterations", type=int, default=4, help="Timed ones.")
    parser.add_argument("--episodes", type=int, default=40)
    parser.add_argument("--epsilon", type=float, default=0.1)
    parser.add_argument("--batch-size", type=int, default=1024)
    parser.add_argument("--updates-per-iteration", type=int, default=25)
    parser.add_argument("--num-gpus-per-learner", type=float, default=0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", default=None, help="Write both results here.")
    parser.add_argument("--data", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    if args.child:
        print(json.dumps(run_one(args)))
        return

    argv = sys.argv[1:] if argv is None else list(argv)
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        data = os.path.join(tmp, "episodes")
        write_hand_rolled(record_episodes(args.episodes, args.epsilon, args.seed), data)
        for name, disable in (("upstream", "1"), ("fork", "0")):
            out = subprocess.run(
                [sys.executable, __file__, "--child", "--data", data] + argv,
                env=dict(os.environ, RLLIB_FORK_DISABLE=disable),
                capture_output=True,
                text=True,
                timeout=1200,
            )
            if out.returncode != 0:
                sys.exit(f"{name} run failed:\n{out.stderr[-4000:]}")
            results[name] = json.loads(out.stdout.strip().splitlines()[-1])
    up, fk = results["upstream"], results["fork"]
    print(
        f"{args.algo.upper()} on {args.episodes} CartPole episodes, batch "
        f"{args.batch_size}, {args.updates_per_iteration} updates/iteration, "
        f"{args.iterations} timed iterations"
    )
    print(
        f"env steps trained/s: upstream {up['env_steps_per_s']:,.0f}, "
        f"fork {fk['env_steps_per_s']:,.0f} "
        f"({fk['env_steps_per_s'] / up['env_steps_per_s']:.2f}x)"
    )
    print(
        "first (untimed) iteration, s: "
        f"upstream {up['first_iteration_seconds']:.1f}, "
        f"fork {fk['first_iteration_seconds']:.1f}"
    )
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)


if __name__ == "__main__":
    main()
