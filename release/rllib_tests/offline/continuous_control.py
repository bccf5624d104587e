"""Learning test: CQL or IQL on scripted continuous-control episodes reaches
a normalized score (0 = random behaviour, 100 = the expert data).

Records one dataset of `rllib.examples.offline_rl.scripted_continuous_control`
(default: InvertedPendulum-v5, 20,000 steps; expert data for IQL, medium data
for CQL, see `DEFAULTS`), writes it as hand-rolled
payload files with the actions in [-1, 1] (RLlib's units), trains `--algo`
with d3rlpy's settings and networks (`bench_cql_iql.MATCHED`) through
`input_read_episodes=True`,
evaluates the deterministic policy every `--eval-every` updates and exits 1
unless the last evaluation reaches `--threshold`. The thresholds are set from
`release/benchmarks/bench_cql_iql.py` (see release/README.md).

    python release/rllib_tests/offline/continuous_control.py [--algo {iql,cql}] \
        [--task inverted_pendulum] [--quality Q] [--updates N] [--threshold T]
"""

import argparse
import json
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)), "benchmarks"))

import bench_cql_iql  # noqa: E402
from offline_learning import (  # noqa: E402
    add_data_over_budget_argument,
    memory_budget_for,
)

#: Per algorithm: the default dataset quality (on InvertedPendulum-v5), update
#: budget and the normalized score the last evaluation must reach; from
#: `bench_cql_iql.py` (release/README.md).
DEFAULTS = {
    "iql": {"quality": "expert", "updates": 1500, "threshold": 90.0},
    "cql": {"quality": "medium", "updates": 2000, "threshold": 90.0},
}


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--algo", choices=sorted(DEFAULTS), default="iql")
    parser.add_argument("--task", default="inverted_pendulum")
    parser.add_argument("--quality", default=None, help="Default: see DEFAULTS.")
    parser.add_argument(
        "--threshold", type=float, default=None, help="Default: see DEFAULTS."
    )
    parser.add_argument(
        "--updates", type=int, default=None, help="Default: see DEFAULTS."
    )
    parser.add_argument("--eval-every", type=int, default=250)
    parser.add_argument("--eval-episodes", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    add_data_over_budget_argument(parser)
    parser.add_argument("--json", default=None, help="Write the result here.")
    return parser.parse_args(argv)


def main(argv=None) -> int:
    from rllib.examples.offline_rl.scripted_continuous_control import (
        TASKS,
        normalized_score,
    )

    args = parse_args(argv)
    for name, value in DEFAULTS[args.algo].items():
        if getattr(args, name) is None:
            setattr(args, name, value)
    with tempfile.TemporaryDirectory() as directory:
        payloads, _, _, _ = bench_cql_iql.write_data(
            args.task, args.quality, 20_000, directory
        )
        memory_budget = None
        if args.data_over_budget:
            from rllib.offline.episode_files.reader import list_episode_files

            filesystem, files = list_episode_files(payloads)
            memory_budget = memory_budget_for(
                files, args.data_over_budget, filesystem=filesystem
            )
        child = argparse.Namespace(
            algo=args.algo,
            hparams="matched",
            env_id=TASKS[args.task].env_id,
            data=payloads,
            batch_size=256,
            updates=args.updates,
            eval_every=args.eval_every,
            eval_episodes=args.eval_episodes,
            iteration_updates=25,
            max_seconds=3600,
            seed=args.seed,
            memory_budget=memory_budget,
        )
        result = bench_cql_iql.rllib_child(child)
    curve = [[u, normalized_score(args.task, r)] for u, r in result["curve"]]
    final = curve[-1][1]
    summary = {
        "algo": args.algo,
        "task": args.task,
        "quality": args.quality,
        "threshold": args.threshold,
        "curve": curve,
        "final_score": final,
        "updates_per_s": result["updates_per_s"],
        "passed": final >= args.threshold,
        "data_over_budget": args.data_over_budget,
        "data_mode": result["data_mode"],
    }
    print(json.dumps(summary))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(summary, f)
    return 0 if summary["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
