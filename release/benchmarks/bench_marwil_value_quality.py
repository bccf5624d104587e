"""MARWIL value-function quality, fork vs upstream, on the same recorded episodes.

Records CartPole episodes with a scripted expert (epsilon-noisy, so episodes
end at different times), trains MARWIL for N iterations with a local learner,
and reports after each block of iterations:

- explained variance of V(s) against the discounted return-to-go of the
  recorded episodes, on every recorded state;
- mean prediction vs mean return-to-go;
- evaluation return of the greedy policy.

Runs itself twice in subprocesses, once as upstream (`RLLIB_FORK_DISABLE=1`),
once as the fork, and prints the figures side by side.

    python release/benchmarks/bench_marwil_value_quality.py --iterations 40
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np


def expert_action(obs) -> int:
    """The benchmark's controller: balances and keeps the cart near the middle."""
    x, x_dot, theta, theta_dot = obs
    return int(theta + 0.3 * theta_dot + 0.01 * x + 0.05 * x_dot > 0)


def record_episodes(num_episodes, epsilon, seed):
    """Numpy-ized CartPole episodes, `epsilon` of the actions random."""
    import gymnasium as gym

    from rllib.examples.offline_rl import scripted_cartpole

    episodes = scripted_cartpole.record_episodes(
        gym.make("CartPole-v1"), num_episodes, expert_action, epsilon=epsilon, seed=seed
    )
    return [episode.to_numpy() for episode in episodes]


def write_hand_rolled(episodes, path):
    """The format every RLlib version reads: msgpack'd episode states, `item`."""
    import msgpack
    import msgpack_numpy as mnp
    import pyarrow as pa
    import pyarrow.parquet as pq

    items = [msgpack.packb(e.get_state(), default=mnp.encode) for e in episodes]
    os.makedirs(path, exist_ok=True)
    pq.write_table(pa.table({"item": items}), os.path.join(path, "episodes.parquet"))


def discounted_returns_to_go(episodes, gamma):
    obs, rtg = [], []
    for e in episodes:
        rewards = np.asarray(e.get_rewards(), dtype=np.float64)
        g = np.zeros_like(rewards)
        running = 0.0
        for t in reversed(range(len(rewards))):
            running = rewards[t] + gamma * running
            g[t] = running
        obs.append(np.asarray(e.get_observations())[:-1])
        rtg.append(g)
    return np.concatenate(obs).astype(np.float32), np.concatenate(rtg)


def greedy_return(module, num_episodes, seed):
    """Mean return of the module's greedy policy on fresh CartPole episodes."""
    import gymnasium as gym
    import torch
    from ray.rllib.core.columns import Columns

    env = gym.make("CartPole-v1")
    returns = []
    for i in range(num_episodes):
        obs, _ = env.reset(seed=seed + i)
        total, done = 0.0, False
        while not done:
            with torch.no_grad():
                out = module.forward_inference(
                    {Columns.OBS: torch.from_numpy(obs[None]).float()}
                )
            action = int(out[Columns.ACTION_DIST_INPUTS][0].argmax())
            obs, reward, terminated, truncated, _ = env.step(action)
            total += reward
            done = terminated or truncated
        returns.append(total)
    return float(np.mean(returns))


def run_one(args):
    """Trains in this process; prints one JSON line of results."""
    import ray
    import torch
    from ray.rllib.algorithms.marwil import MARWILConfig
    from ray.rllib.core import DEFAULT_MODULE_ID
    from ray.rllib.core.columns import Columns

    import rllib

    data_dir = args.data
    import gymnasium as gym

    ray.init(num_cpus=4, include_dashboard=False, log_to_driver=False)
    env = gym.make("CartPole-v1")
    config = (
        MARWILConfig()
        .environment(
            "CartPole-v1",
            observation_space=env.observation_space,
            action_space=env.action_space,
        )
        .learners(num_learners=0)
        .training(train_batch_size_per_learner=args.batch_size, beta=1.0, lr=args.lr)
        .offline_data(
            input_=[data_dir],
            input_read_episodes=True,
            input_read_batch_size=16,
            dataset_num_iters_per_learner=args.updates_per_iteration,
        )
    )
    if args.separate_vf:
        config = config.rl_module(model_config={"vf_share_layers": False})
    algo = config.build_algo()
    episodes = record_episodes(args.episodes, args.epsilon, args.seed)
    obs, rtg = discounted_returns_to_go(episodes, config.gamma)
    curve = []
    eval_seconds = 0.0
    start = time.perf_counter()
    for it in range(1, args.iterations + 1):
        algo.train()
        if it % args.report_every == 0 or it == args.iterations:
            eval_start = time.perf_counter()
            module = algo.learner_group._learner.module[DEFAULT_MODULE_ID]
            with torch.no_grad():
                values = (
                    module.compute_values({Columns.OBS: torch.from_numpy(obs)})
                    .cpu()
                    .numpy()
                )
            ev = 1.0 - np.var(rtg - values) / np.var(rtg)
            curve.append(
                {
                    "iteration": it,
                    "explained_variance": float(ev),
                    "mean_value": float(values.mean()),
                }
            )
            if args.curve_eval_episodes:
                curve[-1]["eval_return"] = greedy_return(
                    module, args.curve_eval_episodes, seed=20_000
                )
            eval_seconds += time.perf_counter() - eval_start
    train_seconds = time.perf_counter() - start - eval_seconds
    eval_return = greedy_return(module, args.eval_episodes, seed=10_000)
    algo.stop()
    ray.shutdown()
    print(
        json.dumps(
            {
                "fork_active": rllib.is_active(),
                "curve": curve,
                "mean_return_to_go": float(rtg.mean()),
                "eval_return": float(eval_return),
                "train_seconds": train_seconds,
            }
        )
    )


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=8)
    parser.add_argument("--report-every", type=int, default=2)
    parser.add_argument("--episodes", type=int, default=40)
    parser.add_argument("--epsilon", type=float, default=0.1)
    parser.add_argument("--batch-size", type=int, default=1024)
    parser.add_argument("--lr", type=float, default=8e-4)
    parser.add_argument("--updates-per-iteration", type=int, default=25)
    parser.add_argument("--eval-episodes", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--separate-vf",
        action="store_true",
        help="Train with `vf_share_layers=False` on both sides (the fork's "
        "default; upstream MARWIL shares the trunk).",
    )
    parser.add_argument(
        "--curve-eval-episodes",
        type=int,
        default=0,
        help="Also evaluate the greedy policy at every report (not timed).",
    )
    parser.add_argument("--data", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        run_one(args)
        return

    with tempfile.TemporaryDirectory() as tmp:
        data = os.path.join(tmp, "episodes")
        write_hand_rolled(record_episodes(args.episodes, args.epsilon, args.seed), data)
        results = {}
        for name, disable in (("upstream", "1"), ("fork", "0")):
            env = dict(os.environ, RLLIB_FORK_DISABLE=disable)
            cmd = [sys.executable, __file__, "--child", "--data", data] + sys.argv[1:]
            out = subprocess.run(cmd, env=env, capture_output=True, text=True)
            if out.returncode != 0:
                sys.exit(f"{name} run failed:\n{out.stderr[-4000:]}")
            results[name] = json.loads(out.stdout.strip().splitlines()[-1])

    up, fk = results["upstream"], results["fork"]
    print(
        f"MARWIL on {args.episodes} CartPole episodes (epsilon={args.epsilon}), "
        f"batch {args.batch_size}, mean return-to-go {fk['mean_return_to_go']:.1f}"
    )
    print(
        f"{'iteration':>9} | {'EV upstream':>11} {'EV fork':>8} | "
        f"{'V upstream':>10} {'V fork':>7}"
    )
    for u, f in zip(up["curve"], fk["curve"]):
        print(
            f"{u['iteration']:>9} | {u['explained_variance']:>11.3f} "
            f"{f['explained_variance']:>8.3f} | {u['mean_value']:>10.1f} "
            f"{f['mean_value']:>7.1f}"
        )
    print(
        f"eval return: upstream {up['eval_return']:.1f}, fork {fk['eval_return']:.1f}; "
        f"train seconds: upstream {up['train_seconds']:.1f}, "
        f"fork {fk['train_seconds']:.1f}"
    )


if __name__ == "__main__":
    main()
