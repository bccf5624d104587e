"""Does MARWIL learn better than BC from mixed-quality data? Fork vs upstream.

Records CartPole episodes with the scripted controller taking a uniformly
random action half of the time (`--epsilon 0.5`), writes them once in the
format every RLlib version reads (msgpack'd per-step episode states in an
`item` column), and trains BC and MARWIL (beta=1) on them with the same
hyperparameters and the same number of updates, each run in a fresh
subprocess as upstream (`RLLIB_FORK_DISABLE=1`) and as the fork, for several
seeds. Both sides use RLlib's default module layout (the value head shares
the policy's trunk); `--fork-separate-vf` adds fork MARWIL runs with a value
network of its own (`vf_share_layers=False`), for comparison.

Reported per run:

- the learning curve: mean return of the *stochastic* policy (actions
  sampled from its distribution) over `--eval-episodes` fresh episodes every
  `--eval-every` iterations (evaluation outside the timed updates);
- for MARWIL: mean V(s) over the recorded states of the terminated episodes
  against their mean discounted return-to-go (and the explained variance of
  V over all recorded states), after the last update;
- for MARWIL on the fork: the share of a Learner update that the value pass
  and the value targets take (`--value-share`).

    python release/benchmarks/bench_marwil_vs_bc.py
    python release/benchmarks/bench_marwil_vs_bc.py --seeds 0 --iterations 6
    python release/benchmarks/bench_marwil_vs_bc.py --sides fork --algos marwil
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
SIDES = ("upstream", "fork")
#: MARWIL's default discount (both sides), for the recorded return-to-go.
GAMMA = 0.99


def record(num_episodes: int, epsilon: float, seed: int, path: str) -> None:
    """Scripted CartPole episodes as hand-rolled per-step payloads, plus the
    recorded states' discounted return-to-go (`<path>.states.npz`)."""
    from episode_data import (
        discounted_returns_to_go,
        encode,
        record_episodes,
        write_payloads,
    )

    episodes = record_episodes(num_episodes, epsilon, seed)
    write_payloads([encode(e, "per_step") for e in episodes], path)
    obs, rtg, terminated = discounted_returns_to_go(episodes, GAMMA)
    np.savez(path + ".states.npz", obs=obs, rtg=rtg, terminated=terminated)


def stochastic_return(module, num_episodes: int, seed: int) -> float:
    """Mean return with actions sampled from the module's distribution."""
    import gymnasium as gym
    import torch
    from ray.rllib.core.columns import Columns

    env = gym.make("CartPole-v1")
    rng = np.random.default_rng(seed)
    returns = []
    for i in range(num_episodes):
        obs, _ = env.reset(seed=seed + i)
        total, done = 0.0, False
        while not done:
            with torch.no_grad():
                out = module.forward_inference(
                    {Columns.OBS: torch.as_tensor(obs[None], dtype=torch.float32)}
                )
            probs = torch.softmax(out[Columns.ACTION_DIST_INPUTS][0], -1).numpy()
            action = int(rng.choice(len(probs), p=probs / probs.sum()))
            obs, reward, terminated, truncated, _ = env.step(action)
            total += reward
            done = terminated or truncated
        returns.append(total)
    return float(np.mean(returns))


def value_pass_share(learner, batch, repeats: int = 20) -> float:
    """Share of `learner.update()` spent computing value targets."""
    from ray.rllib.core.learner.training_data import TrainingData

    import rllib.core.learner.value_targets as value_targets

    spent = [0.0]
    original = value_targets.add_value_targets

    def timed(module, module_batch):
        start = time.perf_counter()
        try:
            return original(module, module_batch)
        finally:
            spent[0] += time.perf_counter() - start

    value_targets.add_value_targets = timed
    try:
        learner.update(training_data=TrainingData(batch=batch))  # Warm-up.
        spent[0] = 0.0
        start = time.perf_counter()
        for _ in range(repeats):
            learner.update(training_data=TrainingData(batch=batch))
        total = time.perf_counter() - start
    finally:
        value_targets.add_value_targets = original
    return spent[0] / total


def offline_config(config, env, args):
    """`config` on `env`'s spaces, one local Learner, reading `args.data`
    with the benchmark's batch size, learning rate, seed and updates."""
    return (
        config.environment(
            observation_space=env.observation_space, action_space=env.action_space
        )
        .learners(num_learners=0)
        .debugging(seed=args.seed)
        .training(train_batch_size_per_learner=args.batch_size, lr=args.lr)
        .offline_data(
            input_=[args.data],
            input_read_episodes=True,
            dataset_num_iters_per_learner=args.updates_per_iteration,
        )
    )


def run_one(args) -> dict:
    """Trains one algorithm in this process and returns its figures."""
    import gymnasium as gym
    import ray
    import torch
    from ray.rllib.algorithms.bc import BCConfig
    from ray.rllib.algorithms.marwil import MARWILConfig
    from ray.rllib.core import DEFAULT_MODULE_ID
    from ray.rllib.core.columns import Columns

    import rllib

    env = gym.make("CartPole-v1")
    if args.algo == "marwil":
        config = MARWILConfig().training(beta=1.0)
        if args.separate_vf:
            config = config.rl_module(model_config={"vf_share_layers": False})
    else:
        config = BCConfig()
    config = offline_config(config, env, args)
    ray.init(num_cpus=4, include_dashboard=False, log_to_driver=False)
    algo = config.build_algo()
    learner = algo.learner_group._learner
    module = learner.module[DEFAULT_MODULE_ID]
    curve = []
    train_seconds = 0.0
    for iteration in range(1, args.iterations + 1):
        start = time.perf_counter()
        algo.train()
        train_seconds += time.perf_counter() - start
        if iteration % args.eval_every == 0 or iteration == args.iterations:
            curve.append(
                {
                    "iteration": iteration,
                    "updates": iteration * args.updates_per_iteration,
                    "eval_return": stochastic_return(
                        module, args.eval_episodes, seed=10_000 + 100 * iteration
                    ),
                }
            )
    result = {
        "fork_active": rllib.is_active(),
        "algo": args.algo,
        "seed": args.seed,
        "separate_vf": bool(args.separate_vf),
        "curve": curve,
        "final_eval_return": curve[-1]["eval_return"],
        "train_seconds": train_seconds,
    }
    if args.algo == "marwil":
        states = np.load(args.data + ".states.npz")
        obs, rtg, terminated = states["obs"], states["rtg"], states["terminated"]
        with torch.no_grad():
            values = (
                module.compute_values({Columns.OBS: torch.from_numpy(obs)})
                .cpu()
                .numpy()
            )
        result["mean_value_terminated"] = float(values[terminated].mean())
        result["mean_return_to_go_terminated"] = float(rtg[terminated].mean())
        result["explained_variance"] = float(1.0 - np.var(rtg - values) / np.var(rtg))
        if args.value_share and rllib.is_active():
            batch = algo.offline_data.sample(num_samples=args.batch_size)
            result["value_pass_share"] = value_pass_share(learner, batch)
    algo.stop()
    ray.shutdown()
    return result


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--episodes", type=int, default=100)
    parser.add_argument("--epsilon", type=float, default=0.5)
    parser.add_argument("--data-seed", type=int, default=0)
    parser.add_argument("--iterations", type=int, default=30)
    parser.add_argument("--updates-per-iteration", type=int, default=10)
    parser.add_argument("--batch-size", type=int, default=512)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--eval-every", type=int, default=5)
    parser.add_argument("--eval-episodes", type=int, default=20)
    parser.add_argument(
        "--fork-separate-vf",
        action="store_true",
        help="Also train fork MARWIL with `vf_share_layers=False`.",
    )
    parser.add_argument(
        "--sides",
        nargs="+",
        choices=SIDES,
        default=list(SIDES),
        help="Which sides to run (upstream's MARWIL takes minutes per seed).",
    )
    parser.add_argument(
        "--value-share",
        action="store_true",
        help="Measure the value pass's share of a fork MARWIL Learner update.",
    )
    parser.add_argument(
        "--algos",
        nargs="+",
        choices=("bc", "marwil"),
        default=["bc", "marwil"],
        help="Which algorithms to run, in this order.",
    )
    parser.add_argument("--timeout", type=float, default=1800)
    parser.add_argument("--json", default=None, help="Write every result here.")
    parser.add_argument("--algo", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--seed", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--separate-vf", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--data", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def _child(args, data, side, algo, seed, separate_vf=False) -> dict:
    cmd = [
        sys.executable,
        __file__,
        "--child",
        "--data",
        data,
        "--algo",
        algo,
        "--seed",
        str(seed),
        "--separate-vf",
        str(int(separate_vf)),
        "--iterations",
        str(args.iterations),
        "--updates-per-iteration",
        str(args.updates_per_iteration),
        "--batch-size",
        str(args.batch_size),
        "--lr",
        str(args.lr),
        "--eval-every",
        str(args.eval_every),
        "--eval-episodes",
        str(args.eval_episodes),
    ]
    if args.value_share:
        cmd.append("--value-share")
    env = dict(os.environ, RLLIB_FORK_DISABLE="1" if side == "upstream" else "0")
    return run_child(cmd, env, args.timeout, f"{side} {algo} seed {seed}")


def run_child(cmd, env, timeout: float, what: str) -> dict:
    """Runs a `--child` command; returns the JSON its last line prints."""
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
    if out.returncode != 0:
        sys.exit(f"{what} failed:\n{out.stderr[-4000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def run_all(args) -> dict:
    runs = []
    with tempfile.TemporaryDirectory() as tmp:
        data = os.path.join(tmp, "episodes")
        record(args.episodes, args.epsilon, args.data_seed, data)
        for seed in args.seeds:
            for algo in args.algos:
                sides = [s for s in SIDES if s in args.sides]
                for side in sides if seed % 2 == 0 else sides[::-1]:
                    result = _child(args, data, side, algo, seed)
                    runs.append(dict(result, side=side))
                    print(
                        f"  {side:<8} {algo:<6} seed {seed}: "
                        f"{result['final_eval_return']:.1f}",
                        flush=True,
                    )
            if args.fork_separate_vf:
                result = _child(args, data, "fork", "marwil", seed, separate_vf=True)
                runs.append(dict(result, side="fork"))
                print(
                    f"  fork     marwil seed {seed}, separate vf: "
                    f"{result['final_eval_return']:.1f}",
                    flush=True,
                )
    return {"settings": vars(args), "runs": runs, "summary": summarize(runs)}


def summarize(runs) -> dict:
    summary = {}
    for side in SIDES:
        for variant, separate in (("", False), ("_separate_vf", True)):
            for algo in ("bc", "marwil"):
                chosen = [
                    r
                    for r in runs
                    if r["side"] == side
                    and r["algo"] == algo
                    and r.get("separate_vf", False) == separate
                ]
                if not chosen or (separate and algo == "bc"):
                    continue
                key = f"{side}_{algo}{variant}"
                finals = [r["final_eval_return"] for r in chosen]
                entry = {
                    "final_eval_return_mean": statistics.mean(finals),
                    "final_eval_returns": finals,
                }
                if algo == "marwil":
                    entry["mean_value_terminated"] = statistics.mean(
                        r["mean_value_terminated"] for r in chosen
                    )
                    entry["mean_return_to_go_terminated"] = statistics.mean(
                        r["mean_return_to_go_terminated"] for r in chosen
                    )
                    entry["explained_variance"] = statistics.mean(
                        r["explained_variance"] for r in chosen
                    )
                    shares = [
                        r["value_pass_share"] for r in chosen if "value_pass_share" in r
                    ]
                    if shares:
                        entry["value_pass_share"] = statistics.mean(shares)
                summary[key] = entry
        bc, marwil = summary.get(f"{side}_bc"), summary.get(f"{side}_marwil")
        if bc and marwil:
            summary[f"{side}_marwil_over_bc"] = (
                marwil["final_eval_return_mean"] / bc["final_eval_return_mean"]
            )
    return summary


def print_summary(summary) -> None:
    print(f"{'':<24}{'upstream':>12}{'fork':>12}")
    for label, key in (
        ("BC return", "bc"),
        ("MARWIL return", "marwil"),
        ("fork MARWIL, separate vf", "marwil_separate_vf"),
    ):
        values = [summary.get(f"{side}_{key}") for side in SIDES]
        if not any(values):
            continue
        cells = [
            f"{v['final_eval_return_mean']:12.1f}" if v else f"{'-':>12}"
            for v in values
        ]
        print(f"{label:<24}{''.join(cells)}")
    ratios = [summary.get(f"{side}_marwil_over_bc") for side in SIDES]
    print(f"{'MARWIL / BC':<24}" + "".join(f"{r:12.2f}" for r in ratios if r))
    for side in SIDES:
        marwil = summary.get(f"{side}_marwil")
        if marwil:
            value = marwil["mean_value_terminated"]
            returns = marwil["mean_return_to_go_terminated"]
            print(
                f"{side} MARWIL: mean V over terminated episodes' states "
                f"{value:.1f} vs mean discounted return-to-go {returns:.1f} "
                f"(ratio {value / returns:.2f}), "
                f"explained variance {marwil['explained_variance']:.3f}"
            )
            if "value_pass_share" in marwil:
                print(
                    f"{side} MARWIL: value pass and targets take "
                    f"{100 * marwil['value_pass_share']:.1f}% of a Learner update"
                )


def main(argv=None):
    args = parse_args(argv)
    if args.child:
        print(json.dumps(run_one(args)))
        return
    result = run_all(args)
    print_summary(result["summary"])
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=2)


if __name__ == "__main__":
    main()
