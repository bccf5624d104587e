"""Learning test: BC and MARWIL on multi-agent CartPole expert episodes.

Records scripted-expert runs of RLlib's `MultiAgentCartPole` (two agents) as
`MultiAgentEpisode`s, writes them with `EpisodeWriter`, and trains one module
per agent (`p0`, `p1`) from the files. After every iteration both policies
are evaluated in the environment; an algorithm passes once every agent's
evaluation return reaches the threshold. Prints the iterations and wall time
of each algorithm; exits non-zero if one does not pass in `--max-iterations`.

python release/rllib_tests/offline/multi_agent_cartpole.py [--algos bc marwil]
    [--num-learners 0] [--max-iterations 20] [--stream]
    [--num-agents 4 --num-modules 2]

`--num-agents N --num-modules M` records N poles and trains M modules that
the agents share (agent i -> `p<i % M>`); by default two agents, one module
each.

`--stream` sets the memory budget to 0: the episodes stream through Ray Data
and the fork's prelearner (one episode per prelearner call) instead of being
held on the Learners.
"""

import argparse
import json
import sys
import tempfile
import time

from offline_learning import add_data_over_budget_argument, memory_budget_for


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--algos", nargs="+", default=["bc", "marwil"])
    parser.add_argument("--threshold", type=float, default=450.0)
    parser.add_argument("--max-iterations", type=int, default=20)
    parser.add_argument("--num-episodes", type=int, default=20)
    parser.add_argument("--num-learners", type=int, default=0, choices=[0, 1])
    parser.add_argument("--num-agents", type=int, default=2)
    parser.add_argument(
        "--num-modules",
        type=int,
        default=None,
        help="Modules the agents share (agent i -> p<i % N); one per agent if unset.",
    )
    parser.add_argument("--updates-per-iteration", type=int, default=25)
    parser.add_argument("--eval-episodes", type=int, default=5)
    parser.add_argument("--epsilon", type=float, default=0.05)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--stream", action="store_true", help="Stream the episodes (budget 0)."
    )
    add_data_over_budget_argument(parser)
    parser.add_argument("--json", default=None, help="Write the results here.")
    return parser.parse_args(argv)


def run(args) -> list:
    import ray
    from ray.rllib.offline.episode_files.reader import read_episodes

    import rllib
    from rllib.examples.offline_rl import train_multi_agent_offline as example

    data_dir = tempfile.mkdtemp(prefix="release-offline-multi-agent-")
    files = example.record_and_write(
        data_dir,
        args.num_episodes,
        args.epsilon,
        args.seed,
        num_agents=args.num_agents,
        num_modules=args.num_modules,
    )
    agent_returns = {}
    for episode in read_episodes(data_dir):
        for agent_id, agent_episode in episode.agent_episodes.items():
            agent_returns.setdefault(agent_id, []).append(agent_episode.get_return())
    data_returns = {a: sum(r) / len(r) for a, r in sorted(agent_returns.items())}
    print(
        f"wrote {args.num_episodes} {args.num_agents}-agent episodes to "
        f"{len(files)} files; "
        f"data return per agent {data_returns}; fork active: {rllib.is_active()}"
    )
    memory_budget = None
    if args.data_over_budget:
        memory_budget = memory_budget_for(files, args.data_over_budget)
    ray.init(num_cpus=4, include_dashboard=False, log_to_driver=False)
    summaries = []
    try:
        for algo in args.algos:
            config = example.build_config(
                algo,
                data_dir,
                num_learners=args.num_learners,
                updates_per_iteration=args.updates_per_iteration,
                eval_episodes=args.eval_episodes,
                seed=args.seed,
                num_agents=args.num_agents,
                num_modules=args.num_modules,
            )
            if args.stream:
                # One episode per prelearner call: with the read batch at its
                # default (the train batch size) one call takes all 20 rows,
                # so every update would start a new pass over the files (new
                # Ray Data actors, seconds each).
                config = config.offline_data(memory_budget=0, input_read_batch_size=1)
            elif memory_budget is not None:
                config = config.offline_data(memory_budget=memory_budget)
            history = []
            for iteration, returns, elapsed in example.train(
                config,
                args.max_iterations,
                stop_at=args.threshold,
                num_agents=args.num_agents,
            ):
                history.append(returns)
                shown = ", ".join(f"agent {a}: {r:.1f}" for a, r in returns.items())
                print(f"[{algo}] iter {iteration} ({elapsed:.1f}s): {shown}")
            final = history[-1] if history else {}
            passed = len(final) == args.num_agents and all(
                r >= args.threshold for r in final.values()
            )
            summaries.append(
                {
                    "algo": algo,
                    "num_learners": args.num_learners,
                    "num_agents": args.num_agents,
                    "num_modules": args.num_modules or args.num_agents,
                    "streamed": args.stream,
                    "passed": passed,
                    "threshold": args.threshold,
                    "iterations": len(history),
                    "wall_seconds": elapsed,
                    "evaluation_returns": history,
                    "data_returns": {str(a): r for a, r in data_returns.items()},
                }
            )
            verdict = "PASSED" if passed else "FAILED"
            print(
                f"[{algo}] {verdict}: evaluation return per agent {final} "
                f"(threshold {args.threshold:.0f}) after {len(history)} "
                f"iterations, {elapsed:.1f}s wall time"
            )
    finally:
        ray.shutdown()
    if args.json:
        with open(args.json, "w") as f:
            json.dump(summaries, f, indent=2)
    return summaries


if __name__ == "__main__":
    start = time.perf_counter()
    results = run(parse_args())
    print(f"total {time.perf_counter() - start:.1f}s")
    sys.exit(0 if all(s["passed"] for s in results) else 1)
