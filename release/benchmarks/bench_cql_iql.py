"""CQL and IQL from recorded continuous-control episodes: fork vs ray 2.60 vs d3rlpy.

For each task and data quality (`rllib.examples.offline_rl.
scripted_continuous_control`: Pendulum-v1 and the MuJoCo InvertedPendulum-v5,
random / medium / expert behaviour), the same episodes are trained on by

- RLlib's CQL and IQL with the fork (its in-memory episode store),
- the same with `RLLIB_FORK_DISABLE=1` (ray 2.60's streaming path), under a
  wall-time cap (`--upstream-seconds`): it is often far slower,
- d3rlpy's CQL and IQL (`d3rlpy_offline.py`, in d3rlpy's own virtualenv).

The RLlib sides read the episodes as users hand-roll them (msgpack'd
`SingleAgentEpisode.get_state()` rows, the seed report's format, which ray
2.60 reads too). The fork reads them as the controller logged them, in the
environment's units, with `config.offline_data(input_action_units="env")`:
it maps them to the [-1, 1] its CQL and IQL modules act in
(`normalize_actions=True`, the default; the EnvRunners map the modules'
actions back to the box). Ray 2.60 cannot map them (fed raw Pendulum torques
in [-2, 2] its squashed Gaussian gives every action beyond 1 the same clamped
log-probability: IQL scored -9 on expert data after 2,000 updates, d3rlpy
102), so its side reads a copy rescaled to [-1, 1] by hand, as its users
must write it. d3rlpy gets the same
transitions as arrays in the env's units (it scales them itself). All sides use
batch 256, gamma 0.99, the same update budget, seeds and evaluation points.
With `--hparams matched` (the default) RLlib runs d3rlpy's settings (`MATCHED`
below: networks, learning rates, target rate, loss weights; the Q-network
one MLP over [s, a] as d3rlpy's, which ray 2.60 gets from the fork's catalog
in the upstream run's Learner process), so the figures compare
implementations; with `--hparams defaults` each library keeps its own.
Either way RLlib's CQL gets `lr=None` (its validation requires it) and
`bc_iters=0` (its default of 20,000 behaviour-cloning updates exceeds the
budgets here), d3rlpy's CQL a fixed conservative weight as RLlib's (see
`d3rlpy_offline.py`) unless `--hparams defaults`, and d3rlpy an action scaler
to the env's bounds.

Each evaluation plays `--eval-episodes` episodes with the deterministic
policy (reset seeds 10,000 + i, as d3rlpy's side) and reports the normalized
score: 0 = the random behaviour's mean return, 100 = the expert data's.
Updates/s counts training only (for RLlib: `algo.train()`, data path
included; for d3rlpy: sampling plus update). Every side's training process
runs `--torch-threads` torch threads (default 1, d3rlpy_offline.py's own
default).

    python release/benchmarks/bench_cql_iql.py [--quick] [--tasks pendulum]
        [--qualities medium,expert] [--algos iql,cql] [--updates 3000]
        [--json out.json] [--chart curves.png]
"""

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from typing import List

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
SIDES = ("fork", "upstream", "d3rlpy")

#: d3rlpy's defaults (the IQL and CQL papers' settings) in RLlib's names:
#: with `--hparams matched` the libraries train the same [256, 256] ReLU
#: networks with the same learning rates, target-network rate and loss
#: weights, so what differs is the implementation. RLlib's own defaults differ:
#: IQL `beta=0.1`, `expectile=0.8`, `tau=1.0` (its target network is a copy of
#: the Q network after every update); CQL `actor_lr=3e-5`, `alpha_lr=3e-4`;
#: tanh activations.
MATCHED = {
    "iql": {
        "beta": 3.0,
        "expectile": 0.7,
        "tau": 0.005,
        "actor_lr": 3e-4,
        "critic_lr": 3e-4,
        "value_lr": 3e-4,
    },
    "cql": {
        "actor_lr": 1e-4,
        "critic_lr": 3e-4,
        "alpha_lr": 1e-4,
        "initial_alpha": 1.0,
        "tau": 0.005,
        "min_q_weight": 5.0,
        "num_actions": 10,
        "temperature": 1.0,
        "deterministic_backup": True,
    },
}


#: d3rlpy's networks in RLlib: [256, 256] ReLU MLPs for the policy, the value
#: function and Q(s, a) = MLP([s, a]) (`qf_concat_obs_actions`, the fork's
#: `SACCatalog`). RLlib's default Q-network encodes s and a with separate MLPs
#: and adds three fusion layers, about four times d3rlpy's compute per sample.
MATCHED_MODEL_CONFIG = {
    "fcnet_hiddens": [256, 256],
    "fcnet_activation": "relu",
    "qf_concat_obs_actions": True,
}


def write_data(task: str, quality: str, num_timesteps: int, directory: str):
    """Records one dataset; writes hand-rolled payload files and d3rlpy arrays."""
    from rllib.examples.offline_rl.scripted_cartpole import write_hand_rolled_files
    from rllib.examples.offline_rl.scripted_continuous_control import (
        record_episodes,
    )

    episodes = record_episodes(task, quality, num_timesteps, seed=0)
    payload_dirs = {
        # The controller's log as written: torques in the env's units.
        "env": os.path.join(directory, "payloads-env-units"),
        # Rescaled by hand, for ray 2.60, which cannot map them.
        "normalized": os.path.join(directory, "payloads-normalized"),
    }
    for units, payload_dir in payload_dirs.items():
        os.makedirs(payload_dir)
        copies = episodes if units == "env" else map(normalized_actions, episodes)
        write_hand_rolled_files(list(copies), payload_dir, num_files=4)
    arrays = {
        "observations": [],
        "actions": [],
        "rewards": [],
        "terminals": [],
        "timeouts": [],
    }
    for episode in episodes:
        length = len(episode)
        arrays["observations"].append(np.asarray(episode.get_observations()[:-1]))
        arrays["actions"].append(np.asarray(episode.get_actions()))
        arrays["rewards"].append(np.asarray(episode.get_rewards()))
        last = np.zeros(length)
        last[-1] = 1.0
        arrays["terminals"].append(last * episode.is_terminated)
        arrays["timeouts"].append(last * (not episode.is_terminated))
    npz = os.path.join(directory, "transitions.npz")
    np.savez(npz, **{k: np.concatenate(v) for k, v in arrays.items()})
    returns = [e.get_return() for e in episodes]
    return payload_dirs, npz, float(np.mean(returns)), len(episodes)


def normalized_actions(episode):
    """A copy of `episode` with its actions mapped from the action box to
    [-1, 1], the units RLlib's modules act in (`normalize_actions=True`, the
    default) and RLlib's own recorder stores: what a ray 2.60 user must write."""
    from ray.rllib.env.single_agent_episode import SingleAgentEpisode

    space = episode.action_space
    actions = np.asarray(episode.get_actions())
    scaled = 2.0 * (actions - space.low) / (space.high - space.low) - 1.0
    return SingleAgentEpisode(
        observations=list(episode.get_observations()),
        actions=list(scaled.astype(np.float32)),
        rewards=list(episode.get_rewards()),
        terminated=episode.is_terminated,
        truncated=episode.is_truncated,
        observation_space=episode.observation_space,
        action_space=space,
        len_lookback_buffer=0,
    )


# ---------------------------------------------------------------- RLlib child


def _config(args):
    from ray.data import ActorPoolStrategy

    if args.algo == "cql":
        from ray.rllib.algorithms.cql import CQLConfig

        config = CQLConfig().training(lr=None, bc_iters=0)
    else:
        from ray.rllib.algorithms.iql import IQLConfig

        config = IQLConfig()
    if args.hparams == "matched":
        import rllib

        config = config.training(**MATCHED[args.algo]).rl_module(
            model_config=MATCHED_MODEL_CONFIG
        )
        if not rllib.is_active():
            # ray 2.60 has no concatenated-input Q-encoder: its SACCatalog gets
            # the fork's, in this process (the Learner's), so that both RLlib
            # sides train d3rlpy's networks.
            from ray.rllib.algorithms.sac.sac_catalog import SACCatalog

            from rllib.algorithms.sac.sac_catalog import build_qf_encoder

            SACCatalog.build_qf_encoder = build_qf_encoder
        if args.algo == "iql" and not rllib.is_active():
            # ray 2.60 rejects IQL's beta above 1 (MARWIL's [0, 1] range; the
            # fork's IQLConfig.validate fixes it): run it unvalidated.
            config = config.experimental(_validate_config=False)
    import gymnasium as gym

    env = gym.make(args.env_id)
    # The fork's typed settings, where set (upstream has neither).
    settings = {}
    if args.action_units is not None:
        settings["input_action_units"] = args.action_units
    if getattr(args, "memory_budget", None) is not None:
        settings["memory_budget"] = int(args.memory_budget)
    return (
        config.environment(
            args.env_id,
            observation_space=env.observation_space,
            action_space=env.action_space,
        )
        .env_runners(num_env_runners=0)
        .learners(num_learners=0)
        .training(train_batch_size_per_learner=args.batch_size, gamma=0.99)
        .offline_data(
            input_=[args.data],
            input_read_episodes=True,
            **settings,
            input_read_method_kwargs={"override_num_blocks": 4},
            dataset_num_iters_per_learner=args.iteration_updates,
            map_batches_kwargs={"compute": ActorPoolStrategy(size=1), "num_cpus": 1},
        )
        .debugging(seed=args.seed)
    )


def _evaluate(module, env_id: str, num_episodes: int) -> float:
    """Mean return of the module's deterministic actions (reset seeds 10,000 + i)."""
    import gymnasium as gym
    import torch
    from ray.rllib.core.columns import Columns

    env = gym.make(env_id)
    dist_class = module.get_inference_action_dist_cls()
    total = 0.0
    for i in range(num_episodes):
        obs, _ = env.reset(seed=10_000 + i)
        done = False
        while not done:
            with torch.no_grad():
                batch = {Columns.OBS: torch.as_tensor(obs[None], dtype=torch.float32)}
                logits = module.forward_inference(batch)[Columns.ACTION_DIST_INPUTS]
                action = dist_class.from_logits(logits).to_deterministic().sample()
            # [-1, 1] -> the action box, as RLlib's EnvRunners unsquash.
            low, high = env.action_space.low, env.action_space.high
            action = low + (action[0].numpy() + 1.0) * (high - low) / 2.0
            obs, reward, terminated, truncated, _ = env.step(np.clip(action, low, high))
            total += reward
            done = terminated or truncated
    env.close()
    return total / num_episodes


def rllib_child(args) -> dict:
    """Trains in this process (fork or upstream, as the environment says)."""
    import gc

    import ray
    import torch
    from ray.rllib.core import DEFAULT_MODULE_ID

    import rllib

    if getattr(args, "torch_threads", None):
        torch.set_num_threads(args.torch_threads)
    ray.init(num_cpus=4, include_dashboard=False, log_to_driver=False)
    algo = _config(args).build_algo()
    curve, iteration_seconds, updates = [], [], 0
    deadline = time.perf_counter() + args.max_seconds
    try:
        while updates < args.updates and time.perf_counter() < deadline:
            start = time.perf_counter()
            algo.train()
            iteration_seconds.append(time.perf_counter() - start)
            updates += args.iteration_updates
            at_eval_point = updates % args.eval_every == 0
            if (
                at_eval_point
                or updates >= args.updates
                or (time.perf_counter() >= deadline)
            ):
                # The local Learner's module: ray 2.60's `algo.get_module()`
                # fails for IQL without EnvRunners (`env_runner_group` is None).
                module = algo.learner_group._learner.module[DEFAULT_MODULE_ID]
                score = _evaluate(module, args.env_id, args.eval_episodes)
                curve.append([updates, score])
                print(f"  {updates} updates: return {score:.1f}", file=sys.stderr)
        data_mode = getattr(algo.offline_data, "mode", None)
    finally:
        algo.stop()
        del algo
        gc.collect()
        ray.shutdown()
    train_seconds = sum(iteration_seconds)
    later = iteration_seconds[1:]
    return {
        "fork_active": rllib.is_active(),
        "updates": updates,
        "updates_per_s": updates / train_seconds if train_seconds else None,
        # Without the first `train()` (it starts the data pipeline).
        "steady_updates_per_s": (
            args.iteration_updates * len(later) / sum(later) if later else None
        ),
        "train_seconds": train_seconds,
        "curve": curve,
        "final_return": curve[-1][1] if curve else None,
        "stopped_by_time": updates < args.updates,
        "data_mode": data_mode,
        "torch_threads": torch.get_num_threads(),
    }


# ---------------------------------------------------------------- driver


def run_side(side, algo, env_id, payload_dirs, npz, args, workdir, seed) -> dict:
    out = os.path.join(workdir, f"{side}-{algo}-{seed}.json")
    common = [
        "--algo",
        algo,
        "--env-id",
        env_id,
        "--updates",
        str(args.updates),
        "--eval-every",
        str(args.eval_every),
        "--eval-episodes",
        str(args.eval_episodes),
        "--seed",
        str(seed),
    ]
    threads = ["--num-threads" if side == "d3rlpy" else "--torch-threads"]
    threads.append(str(args.torch_threads))
    env = dict(os.environ, PYTHONPATH=REPO, RAY_USAGE_STATS_ENABLED="0")
    if side == "d3rlpy":
        if not os.path.exists(args.d3rlpy_python):
            return {"error": f"no d3rlpy interpreter at {args.d3rlpy_python}"}
        script = os.path.join(HERE, "d3rlpy_offline.py")
        cmd = [args.d3rlpy_python, script, "--data", npz, "--out", out]
        cmd += common + threads
        if args.hparams == "defaults" and algo == "cql":
            cmd += ["--cql-alpha-lr", "1e-4"]
        timeout = args.timeout
    else:
        seconds = args.upstream_seconds if side == "upstream" else args.timeout
        if side == "upstream":
            data = ["--data", payload_dirs["normalized"]]
        else:
            data = ["--data", payload_dirs["env"], "--action-units", "env"]
        cmd = [sys.executable, __file__, "--child", *data]
        cmd += common + threads + ["--max-seconds", str(seconds), "--out", out]
        cmd += ["--hparams", args.hparams]
        # `train()` calls of a few updates, so the time cap can stop upstream.
        cmd += ["--iteration-updates", str(math.gcd(args.eval_every, 25))]
        timeout = seconds + 600  # Start-up, evaluation and one last iteration.
        if side == "upstream":
            env["RLLIB_FORK_DISABLE"] = "1"
    start = time.perf_counter()
    try:
        done = subprocess.run(
            cmd, env=env, capture_output=True, text=True, timeout=timeout
        )
    except subprocess.TimeoutExpired:
        return {"error": f"no result within {timeout} s"}
    if done.returncode != 0:
        return {"error": " | ".join(done.stderr.strip().splitlines()[-3:]) or "exit"}
    with open(out) as f:
        result = json.load(f)
    result["wall_seconds"] = time.perf_counter() - start
    return result


def run(args) -> dict:
    from rllib.examples.offline_rl.scripted_continuous_control import (
        TASKS,
        normalized_score,
    )

    report = {}
    with tempfile.TemporaryDirectory() as workdir:
        for task in args.tasks:
            for quality in args.qualities:
                name = f"{task}-{quality}"
                directory = os.path.join(workdir, name)
                os.makedirs(directory)
                payloads, npz, data_return, num_episodes = write_data(
                    task, quality, args.num_timesteps, directory
                )
                entry = {
                    "data_return": data_return,
                    "data_score": normalized_score(task, data_return),
                    "episodes": num_episodes,
                }
                for algo in args.algos:
                    for side in args.sides:
                        # Upstream runs under a time cap; one seed shows it.
                        seeds = args.seeds[:1] if side == "upstream" else args.seeds
                        runs = []
                        for seed in seeds:
                            print(f"{name} {algo} {side} seed {seed} ...", flush=True)
                            result = run_side(
                                side,
                                algo,
                                TASKS[task].env_id,
                                payloads,
                                npz,
                                args,
                                directory,
                                seed,
                            )
                            for point in result.get("curve", []):
                                point.append(normalized_score(task, point[1]))
                            runs.append(result)
                        entry[f"{algo}/{side}"] = over_seeds(runs)
                report[name] = entry
    return report


def over_seeds(runs: List[dict]) -> dict:
    """The seeds' runs of one side, with their mean curve and figures."""
    errors = [run["error"] for run in runs if "error" in run]
    if errors:
        return {"error": errors[0], "runs": runs}
    # Evaluation points all runs reached (a time cap may stop one earlier).
    common = set.intersection(*({p[0] for p in run["curve"]} for run in runs))
    curve = []
    for updates in sorted(common):
        points = [next(p for p in run["curve"] if p[0] == updates) for run in runs]
        curve.append(
            [updates] + [float(np.mean([p[i] for p in points])) for i in (1, 2)]
        )
    finals = [run["curve"][-1][2] for run in runs if run["curve"]]
    rates = [run["updates_per_s"] for run in runs if run.get("updates_per_s")]
    return {
        "runs": runs,
        "curve": curve,
        "final_scores": finals,
        "final_score": float(np.mean(finals)) if finals else None,
        "final_score_std": float(np.std(finals)) if finals else None,
        "updates_per_s": float(np.mean(rates)) if rates else None,
        "updates": min(run["updates"] for run in runs),
        "stopped_by_time": any(run.get("stopped_by_time") for run in runs),
    }


def _cell(result: dict) -> str:
    if "error" in result:
        return "error"
    if result.get("final_score") is None:
        return "no eval"
    score = f"{result['final_score']:6.1f}"
    if len(result["final_scores"]) > 1:
        score += f"±{result['final_score_std']:.1f}"
    if result.get("stopped_by_time"):
        score += f" @{result['updates']}"
    return score


def print_report(report: dict, args) -> None:
    print(
        f"\nNormalized score after {args.updates} updates (0 random, 100 expert "
        f"data; mean±std over seeds {args.seeds}, upstream: the first only; "
        f"'@n': stopped by the time cap after n updates), and updates/s; "
        f"hyperparameters: {args.hparams}"
    )
    header = f"{'dataset':28} {'algo':5} {'data':>6}"
    for side in args.sides:
        header += f" {side + ' score':>18} {side + ' upd/s':>13}"
    print(header)
    for name, entry in report.items():
        for algo in args.algos:
            row = f"{name:28} {algo:5} {entry['data_score']:6.1f}"
            for side in args.sides:
                result = entry[f"{algo}/{side}"]
                rate = result.get("updates_per_s")
                row += f" {_cell(result):>18} {rate or float('nan'):13.1f}"
            print(row)
    for name, entry in report.items():
        for key, result in entry.items():
            if isinstance(result, dict) and "error" in result:
                print(f"{name} {key}: {result['error']}")


def plot(report: dict, args, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(report)
    fig, axes = plt.subplots(
        len(args.algos),
        len(names),
        figsize=(3.6 * len(names), 3.0 * len(args.algos)),
        squeeze=False,
    )
    for row, algo in enumerate(args.algos):
        for col, name in enumerate(names):
            ax = axes[row][col]
            for side in args.sides:
                curve = report[name][f"{algo}/{side}"].get("curve") or []
                if curve:
                    ax.plot([p[0] for p in curve], [p[2] for p in curve], label=side)
            ax.axhline(report[name]["data_score"], color="grey", ls=":", label="data")
            ax.set_title(f"{algo.upper()} {name}", fontsize=9)
            ax.set_xlabel("updates")
            ax.set_ylabel("normalized score")
    axes[0][0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    print(f"wrote {path}")


def parse_args(argv: List[str] = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--quick", action="store_true", help="tiny sizes (CI)")
    parser.add_argument("--tasks", default="pendulum,inverted_pendulum")
    parser.add_argument("--qualities", default="random,medium,expert")
    parser.add_argument("--algos", default="iql,cql")
    parser.add_argument("--sides", default=",".join(SIDES))
    parser.add_argument("--num-timesteps", type=int, default=20_000)
    parser.add_argument("--updates", type=int, default=3000)
    parser.add_argument("--eval-every", type=int, default=250)
    parser.add_argument("--eval-episodes", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--seeds", default="0,1,2", help="comma-separated")
    parser.add_argument(
        "--hparams",
        choices=["matched", "defaults"],
        default="matched",
        help="'matched': d3rlpy's settings on every side (see MATCHED); "
        "'defaults': each library's own",
    )
    parser.add_argument(
        "--torch-threads",
        type=int,
        default=1,
        help="torch threads of every side's training process (d3rlpy_offline.py's "
        "--num-threads; RLlib's local Learner)",
    )
    parser.add_argument("--upstream-seconds", type=int, default=300)
    parser.add_argument("--timeout", type=int, default=3600)
    parser.add_argument("--d3rlpy-python", default="/work/d3rlpy-venv/bin/python")
    parser.add_argument("--json", help="write the report here")
    parser.add_argument("--chart", help="write learning curves (PNG) here")
    # Child-only arguments.
    parser.add_argument("--data", help=argparse.SUPPRESS)
    parser.add_argument("--action-units", help=argparse.SUPPRESS)
    parser.add_argument("--algo", help=argparse.SUPPRESS)
    parser.add_argument("--env-id", help=argparse.SUPPRESS)
    parser.add_argument("--max-seconds", type=float, help=argparse.SUPPRESS)
    parser.add_argument("--iteration-updates", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    parser.add_argument("--seed", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        return args
    for name in ("tasks", "qualities", "algos", "sides"):
        setattr(args, name, getattr(args, name).split(","))
    args.seeds = [int(seed) for seed in args.seeds.split(",")]
    if args.quick:
        args.tasks, args.qualities = ["pendulum"], ["medium"]
        args.num_timesteps, args.updates, args.eval_every = 1000, 20, 10
        args.eval_episodes, args.upstream_seconds = 1, 60
        args.seeds = args.seeds[:1]
    return args


def main(argv: List[str] = None) -> int:
    args = parse_args(argv)
    if args.child:
        result = rllib_child(args)
        with open(args.out, "w") as f:
            json.dump(result, f)
        return 0
    report = run(args)
    print_report(report, args)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"settings": vars(args), "datasets": report}, f, indent=1)
    if args.chart:
        plot(report, args, args.chart)
    return 0


if __name__ == "__main__":
    sys.exit(main())
