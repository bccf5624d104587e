"""Data larger than the memory budget: fork's rotating caches vs upstream streaming.

The same recorded CartPole episodes (the hand-rolled per-step payloads of the
seed report, `episode_data.py`) train MARWIL (beta=1, separate value network;
`--algo bc` for BC) with the memory budget
(`config.offline_data(memory_budget=...)`) set so the decoded
episodes are `--factors` times it (0.5: they fit, the in-memory mode; 2 and
8: each Learner samples a rotating cache, `rllib.offline.in_memory.
block_cache`), and once with `RLLIB_FORK_DISABLE=1` (ray 2.60's Ray Data
streaming, which has no budget). Every side runs in its own subprocess under
a timeout, from the same files, with the same config (batch 1024, 10 updates
per iteration, 1 torch thread per process), on local Ray or, with
`--cluster-nodes N`, on a `ray.cluster_utils.Cluster` of N nodes (a head and
one Learner per worker node; the budget is per node, so each Learner's node
gets its share of it). Measured:

- env steps trained/s over the timed `algo.train()` calls after the first
  (`num_env_steps_trained_lifetime`); every fork cell runs enough iterations
  for `--passes` passes of the caches, upstream for two passes of its Ray
  Data pipeline;
- fork only: the Learner-only rate (the same Learner updating on a batch
  already in memory; see `bench_training_throughput.learner_only_rate`) and
  end to end / Learner-only;
- fork, beyond memory: per finished pass over a Learner's shard, the draws
  per timestep of every cached range (mean, max/min spread, coefficient of
  variation), Pearson's chi-square of the per-range draw counts against
  counts proportional to the ranges' timesteps (with its degrees of freedom
  and p-value; unbiased uniform draws give about dof), and the seconds the
  Learner waited for a range to decode. The table shows the worst pass.

    python release/benchmarks/bench_beyond_memory.py [--episodes 2000]
        [--algo marwil|bc] [--factors 0.5 2 8] [--num-learners 0]
        [--cluster-nodes 3] [--json out.json]
"""

import argparse
import json
import os
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from bench_training_throughput import (  # noqa: E402
    EPSILON,
    learner_only_rate,
    run_side,
    trained_steps,
)
from episode_data import record_episodes, write_hand_rolled  # noqa: E402

FACTORS = (0.5, 2.0, 8.0)
LEARNER_SLOT = "learner_slot"
#: Object store of each node of a `--cluster-nodes` cluster.
NODE_STORE = 200 * 2**20


def decoded_bytes(path: str) -> int:
    """Decoded bytes of the episodes in `path`, as the fork's store counts."""
    from rllib.offline.in_memory.store import decoded_size
    from rllib.offline.offline_data import list_input_episodes

    config = _config(
        argparse.Namespace(
            algo="bc",
            num_learners=0,
            cluster_nodes=0,
            data=path,
            batch_size=1,
            updates=1,
        )
    )
    filesystem, files, _, _ = list_input_episodes(config)
    return decoded_size(
        files,
        filesystem=filesystem,
        observation_space=config.observation_space,
        action_space=config.action_space,
    )["nbytes"]


def _config(args, budget=None):
    import gymnasium as gym
    from ray.rllib.algorithms.bc import BCConfig
    from ray.rllib.algorithms.marwil import MARWILConfig

    env = gym.make("CartPole-v1")
    if args.algo == "marwil":
        # A separate value network, set explicitly: the same network both sides.
        config = MARWILConfig().training(beta=1.0)
        config = config.rl_module(model_config={"vf_share_layers": False})
    else:
        config = BCConfig()
    # Only the fork has the setting; an upstream run leaves it out.
    budget_setting = {} if budget is None else {"memory_budget": int(budget)}
    learners = {"num_learners": args.num_learners}
    if args.cluster_nodes:
        # One Learner per worker node (the head is the driver's).
        learners["custom_resources_per_learner"] = {LEARNER_SLOT: 1}
    return (
        config.environment(
            observation_space=env.observation_space, action_space=env.action_space
        )
        .learners(**learners)
        .training(train_batch_size_per_learner=args.batch_size, lr=8e-4)
        .offline_data(
            **budget_setting,
            input_=[args.data],
            input_read_episodes=True,
            input_read_batch_size=32,
            dataset_num_iters_per_learner=args.updates,
        )
    )


def start_ray(args):
    """Ray on this machine, or a `ray.cluster_utils.Cluster` of
    `--cluster-nodes` nodes (a head and one worker node per Learner, each
    with its own raylet and object store); returns the cluster or None."""
    import ray

    if not args.cluster_nodes:
        ray.init(num_cpus=args.num_cpus, include_dashboard=False, log_to_driver=False)
        return None
    from ray.cluster_utils import Cluster

    cluster = Cluster(
        initialize_head=True,
        head_node_args={"num_cpus": 2, "object_store_memory": NODE_STORE},
    )
    for _ in range(args.cluster_nodes - 1):
        cluster.add_node(
            num_cpus=2, resources={LEARNER_SLOT: 1}, object_store_memory=NODE_STORE
        )
    cluster.wait_for_nodes()
    ray.init(address=cluster.address, log_to_driver=False)
    return cluster


# --- In the child process ----------------------------------------------------


def pass_stats(algo):
    """Every Learner's finished passes (beyond memory), as dicts."""

    def collect(learner):
        sampler = learner.__dict__.get("_episode_shard_sampler")
        passes = getattr(getattr(sampler, "source", None), "passes", [])
        return [p.as_dict() for p in passes]

    if algo.config.num_learners == 0:
        return collect(algo.learner_group._learner)
    results = algo.learner_group.foreach_learner(collect)
    return [stat for result in results for stat in result.get()]


def run_child(args) -> dict:
    import ray
    import torch

    import rllib

    torch.set_num_threads(1)
    cluster = start_ray(args)
    algo = _config(args, args.budget).build_algo()
    warm_steps = trained_steps(algo.train())
    mode = getattr(algo.offline_data, "mode", None)
    rows_per_iteration = args.batch_size * args.updates * max(1, args.num_learners)
    iterations = args.iterations
    if rllib.is_active() and args.passes:
        # Every fork cell: enough draws for the passes of the beyond-memory
        # cells (the first pass visits the first cached ranges twice).
        draws = args.passes * 1.2 * args.total_timesteps * args.draws_per_timestep
        iterations = max(iterations, int(draws // rows_per_iteration) + 1)
    else:
        iterations = max(iterations, upstream_iterations(args))
    start = time.perf_counter()
    result = {}
    for _ in range(iterations):
        result = algo.train()
    seconds = time.perf_counter() - start
    steps = trained_steps(result) - warm_steps
    figures = {
        "fork_active": rllib.is_active(),
        "mode": mode,
        "iterations": iterations,
        "env_steps_per_s": steps / seconds,
    }
    if rllib.is_active():
        args.iterations = max(3, min(10, iterations))
        args.updates_per_iteration = args.updates
        figures["learner_only_env_steps_per_s"] = learner_only_rate(algo, args)[
            "env_steps_per_s"
        ]
        figures["ratio_to_learner_only"] = (
            figures["env_steps_per_s"] / figures["learner_only_env_steps_per_s"]
        )
        figures["passes"] = pass_stats(algo)
    algo.stop()
    ray.shutdown()
    if cluster is not None:
        cluster.shutdown()
    return figures


def upstream_iterations(args) -> int:
    """Two passes of upstream's Ray Data pipeline over the data, so its
    prefetched batches do not set its figure (see
    `bench_training_throughput.default_iterations`)."""
    reads = -(-args.episodes // 32)
    batches_per_read = 2 if args.algo == "marwil" else 1
    return -(-2 * reads * batches_per_read // args.updates)


# --- Parent --------------------------------------------------------------------


def chi_square_p_value(chi_square: float, dof: int):
    try:
        from scipy.stats import chi2
    except ImportError:
        return None
    return float(chi2.sf(chi_square, dof))


def print_table(rows) -> None:
    print(
        f"{'side':<22}{'mode':>15}{'steps/s':>10}{'learner/s':>11}{'e2e/lrn':>9}"
        f"{'passes':>7}{'spread':>8}{'cv':>7}{'chi2/dof':>12}{'p':>7}{'waited s':>9}"
    )
    for name, figures in rows:
        if "error" in figures:
            print(f"{name:<22} failed: {figures['error'][-1500:]}")
            continue
        passes = figures.get("passes") or []
        spread = max((p["spread"] for p in passes), default=None)
        cv = max((p["coefficient_of_variation"] for p in passes), default=None)
        worst = max(passes, key=lambda p: p["chi_square"], default=None)
        chi = p_value = None
        if worst:
            chi = f"{worst['chi_square']:.0f}/{worst['chi_square_dof']}"
            p_value = chi_square_p_value(worst["chi_square"], worst["chi_square_dof"])
        waited = sum(p["seconds_waited"] for p in passes) if passes else None

        def fmt(value, spec):
            return "-" if value is None else format(value, spec)

        print(
            f"{name:<22}{figures.get('mode') or '-':>15}"
            f"{fmt(figures.get('env_steps_per_s'), ',.0f'):>10}"
            f"{fmt(figures.get('learner_only_env_steps_per_s'), ',.0f'):>11}"
            f"{fmt(figures.get('ratio_to_learner_only'), '.0%'):>9}"
            f"{len(passes):>7}{fmt(spread, '.3f'):>8}{fmt(cv, '.3f'):>7}"
            f"{chi or '-':>12}{fmt(p_value, '.2f'):>7}{fmt(waited, '.1f'):>9}"
        )


def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="\n".join(__doc__.splitlines()[1:]),
    )
    parser.add_argument("--episodes", type=int, default=2000)
    parser.add_argument("--algo", choices=("marwil", "bc"), default="marwil")
    parser.add_argument(
        "--cluster-nodes",
        type=int,
        default=0,
        help="Run on a ray.cluster_utils.Cluster of this many nodes (a head "
        "and one Learner per worker node: --num-learners is nodes - 1).",
    )
    parser.add_argument("--factors", nargs="+", type=float, default=list(FACTORS))
    parser.add_argument("--num-learners", type=int, default=0)
    parser.add_argument("--batch-size", type=int, default=1024)
    parser.add_argument("--updates", type=int, default=10, help="Per iteration.")
    parser.add_argument("--iterations", type=int, default=10, help="The fewest.")
    parser.add_argument(
        "--passes", type=int, default=2, help="Beyond memory: run for this many."
    )
    parser.add_argument("--num-cpus", type=int, default=4, help="For ray.init().")
    parser.add_argument("--no-upstream", action="store_true")
    parser.add_argument("--timeout", type=float, default=1200, help="Per process.")
    parser.add_argument("--json", default=None)
    parser.add_argument("--data", help=argparse.SUPPRESS)
    parser.add_argument("--budget", type=float, help=argparse.SUPPRESS)
    parser.add_argument("--total-timesteps", type=int, help=argparse.SUPPRESS)
    parser.add_argument(
        "--draws-per-timestep", type=float, default=1.0, help=argparse.SUPPRESS
    )
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    if args.cluster_nodes:
        args.num_learners = args.cluster_nodes - 1
    if args.child:
        print(json.dumps(run_child(args)))
        return
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-beyond-memory-") as tmp:
        episodes = record_episodes(args.episodes, EPSILON, 0)
        timesteps = sum(len(e) for e in episodes)
        path = os.path.join(tmp, "episodes")
        write_hand_rolled(episodes, path, "per_step")
        nbytes = decoded_bytes(path)
        print(
            f"{args.episodes} episodes, {timesteps:,} timesteps, "
            f"{nbytes / 2**20:.1f} MiB decoded; {args.algo}, "
            f"num_learners={args.num_learners}, cluster nodes: "
            f"{args.cluster_nodes or 'none (local Ray)'}"
        )
        common = [
            os.path.join(HERE, "bench_beyond_memory.py"), "--child",
            "--data", path,
            "--num-learners", str(args.num_learners),
            "--algo", args.algo,
            "--episodes", str(args.episodes),
            "--cluster-nodes", str(args.cluster_nodes),
            "--batch-size", str(args.batch_size),
            "--updates", str(args.updates),
            "--iterations", str(args.iterations),
            "--passes", str(args.passes),
            "--num-cpus", str(args.num_cpus),
            "--total-timesteps", str(timesteps),
        ]  # fmt: skip
        if not args.no_upstream:
            rows.append(
                ("upstream (streaming)", run_side(common, "upstream", args.timeout))
            )
        for factor in args.factors:
            # Per node: with a cluster each Learner's node holds its share.
            budget = (
                nbytes / factor / max(1, args.num_learners if args.cluster_nodes else 1)
            )
            cmd = common + ["--budget", str(budget)]
            rows.append(
                (f"fork, data {factor:g}x budget", run_side(cmd, "fork", args.timeout))
            )
    print_table(rows)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(
                {
                    "episodes": args.episodes,
                    "timesteps": timesteps,
                    "decoded_bytes": nbytes,
                    "num_learners": args.num_learners,
                    "algo": args.algo,
                    "cluster_nodes": args.cluster_nodes,
                    "rows": dict(rows),
                },
                f,
                indent=2,
            )


if __name__ == "__main__":
    main()
