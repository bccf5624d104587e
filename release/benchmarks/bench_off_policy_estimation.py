"""Off-policy estimates against true values, fork vs upstream vs d3rlpy's FQE.

For CartPole-v1 (discrete) and Pendulum-v1 started near upright (continuous),
a noisy scripted
behaviour policy records episodes (with `action_logp`). A ladder of five
target policies of graded quality is scored three ways:

- the truth: the mean discounted return of many rollouts in the environment;
- the fork's estimators (`rllib.offline.off_policy_estimation`): IS, WIS,
  PDIS, WPDIS, FQE and DR, with bootstrap intervals;
- ray 2.60's offline evaluation: its runner is run on the same files with
  `RLLIB_FORK_DISABLE=1` (it fails on episode files; the error is shown),
  and its 'is' formula (target probability of a freshly sampled action over
  the behaviour probability of the logged one, undiscounted) is applied to
  the same data and policies;
- d3rlpy's FQE on the same transitions and policies, the same network
  (256x256), batch, learning rate and number of updates, run in its own
  virtualenv (`--d3rlpy-python`, default `/work/d3rlpy-venv/bin/python`;
  skipped with a note when absent).

It prints per task the estimates and the summary the issue asks for: median
relative error and Spearman rank correlation over the ladder for each
estimator, and which target policy each estimator would pick with its true
value against the true best. `--json PATH` writes everything.

Usage::

    python release/benchmarks/bench_off_policy_estimation.py [--quick]
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from typing import Dict, List

import gymnasium as gym
import numpy as np
from scipy.stats import spearmanr

GAMMA = 0.99
HERE = os.path.dirname(os.path.abspath(__file__))
D3RLPY_SCRIPT = os.path.join(HERE, "d3rlpy_fqe.py")


class CartPolePolicy:
    """Epsilon-greedy around the scripted balance rule `angle + 0.5 * velocity`."""

    weights = np.array([0.0, 0.0, 1.0, 0.5])

    def __init__(self, epsilon: float):
        self.epsilon = epsilon
        self.action_space = gym.spaces.Discrete(2)
        self.deterministic = False

    @property
    def is_discrete(self):
        return True

    def action_probabilities(self, observations):
        greedy = (np.asarray(observations) @ self.weights > 0).astype(int)
        probs = np.full((len(greedy), 2), self.epsilon / 2)
        probs[np.arange(len(greedy)), greedy] += 1 - self.epsilon
        return probs

    def logp(self, observations, actions):
        probs = self.action_probabilities(observations)
        return np.log(probs[np.arange(len(probs)), np.asarray(actions).astype(int)])

    def sample(self, observations, num_samples, seed):
        rng = np.random.default_rng(seed)
        probs = self.action_probabilities(observations)
        draws = rng.random((len(probs), num_samples)) < probs[:, 1:2]
        return draws.astype(np.int64)

    def d3rlpy_arrays(self):
        # Logits [0, 1000 * w.x]: the argmax is the balance rule.
        w = np.zeros((4, 2), np.float32)
        w[:, 1] = 1000 * self.weights
        return {
            "policy_w0": w,
            "policy_b0": np.zeros(2, np.float32),
            "policy_epsilon": np.float32(self.epsilon),
        }


class PendulumPolicy:
    """`a = 2 * tanh(gain * (-sin(theta) - 0.5 * theta_dot)) + N(0, std^2)`.

    A damped push toward upright; the noise grades its quality. Actions are
    logged unclipped (the environment clips them to [-2, 2]).
    """

    direction = np.array([0.0, -1.0, -0.5])

    def __init__(self, gain: float, std: float):
        self.gain, self.std = gain, std
        self.action_space = gym.spaces.Box(-np.inf, np.inf, (1,), np.float32)
        self.deterministic = False

    @property
    def is_discrete(self):
        return False

    def mean(self, observations):
        return 2.0 * np.tanh(self.gain * (np.asarray(observations) @ self.direction))

    def logp(self, observations, actions):
        z = (np.asarray(actions)[:, 0] - self.mean(observations)) / self.std
        return -0.5 * z**2 - np.log(self.std * np.sqrt(2 * np.pi))

    def action_probabilities(self, observations):
        raise ValueError("continuous policy")

    def sample(self, observations, num_samples, seed):
        rng = np.random.default_rng(seed)
        mean = self.mean(observations)
        noise = rng.normal(size=(len(mean), num_samples))
        return (mean[:, None] + self.std * noise)[..., None].astype(np.float32)

    def d3rlpy_arrays(self):
        return {
            "policy_w0": (self.gain * self.direction)[:, None].astype(np.float32),
            "policy_b0": np.zeros(1, np.float32),
            "action_scale": np.float32(2.0),
            "policy_noise_std": np.float32(self.std),
        }


class UprightPendulum(gym.Wrapper):
    """Pendulum-v1 started near upright (|angle|, |velocity| <= 0.5): a
    balancing task, where a linear controller's quality shows in its return."""

    def reset(self, **kwargs):
        _, info = self.env.reset(**kwargs)
        rng = self.env.unwrapped.np_random
        angle, velocity = rng.uniform(-0.5, 0.5), rng.uniform(-0.5, 0.5)
        self.env.unwrapped.state = np.array([angle, velocity])
        obs = np.array([np.cos(angle), np.sin(angle), velocity], np.float32)
        return obs, info


def make_cartpole():
    return gym.make("CartPole-v1")


def make_short_cartpole():
    return gym.make("CartPole-v1", max_episode_steps=30)


def make_upright_pendulum():
    return UprightPendulum(gym.make("Pendulum-v1"))


TASKS = {
    "cartpole": dict(
        env=make_cartpole,
        horizon=500,
        behavior=CartPolePolicy(0.5),
        ladder={f"eps={e}": CartPolePolicy(e) for e in (0.1, 0.3, 0.5, 0.7, 0.9)},
    ),
    # Short horizons, where importance sampling has a fair chance.
    "cartpole_short": dict(
        env=make_short_cartpole,
        horizon=30,
        behavior=CartPolePolicy(0.5),
        ladder={f"eps={e}": CartPolePolicy(e) for e in (0.1, 0.3, 0.5, 0.7, 0.9)},
    ),
    "pendulum": dict(
        env=make_upright_pendulum,
        horizon=200,
        behavior=PendulumPolicy(gain=8.0, std=1.5),
        ladder={
            f"std={std}": PendulumPolicy(gain=8.0, std=std)
            for std in (0.2, 0.7, 1.2, 2.0, 3.0)
        },
    ),
}


def act(policy, obs, rng):
    if policy.is_discrete:
        probs = policy.action_probabilities(obs[None])[0]
        return int(rng.random() < probs[1])
    return policy.sample(obs[None], 1, int(rng.integers(2**31)))[0, 0]


def rollouts(make_env, policy, num_episodes, seed, record=False):
    """Discounted returns of `policy` (and the episodes, if `record`)."""
    from ray.rllib.env.single_agent_episode import SingleAgentEpisode

    env = make_env()
    rng = np.random.default_rng(seed)
    returns, episodes = [], []
    for i in range(num_episodes):
        obs, _ = env.reset(seed=seed + i)
        episode = SingleAgentEpisode(
            observations=[obs],
            observation_space=env.observation_space,
            action_space=env.action_space
            if policy.is_discrete
            else policy.action_space,
        )
        done, discounted, t = False, 0.0, 0
        while not done:
            action = act(policy, obs, rng)
            if record:
                logp = float(policy.logp(obs[None], np.asarray([action]))[0])
            obs, reward, terminated, truncated, _ = env.step(action)
            discounted += GAMMA**t * reward
            t += 1
            done = terminated or truncated
            if record:
                episode.add_env_step(
                    obs,
                    action,
                    reward,
                    terminated=terminated,
                    truncated=truncated,
                    extra_model_outputs={"action_logp": logp},
                )
        returns.append(discounted)
        if record:
            episodes.append(episode.to_numpy())
    return np.array(returns), episodes


def upstream_is_formula(trajectories, policy, seed):
    """Ray 2.60's 'is': ratio of pi(sampled a) to mu(logged a), undiscounted."""
    rng_seed = seed
    values = []
    for e in range(trajectories.num_episodes):
        length = trajectories.lengths[e]
        obs = trajectories.observations[e, :length]
        sampled = policy.sample(obs, 1, rng_seed + e)[:, 0]
        target = policy.logp(obs, sampled)
        behavior = trajectories.behavior_logp[e, :length]
        with np.errstate(over="ignore"):
            weight = np.exp(np.sum(target - behavior))
        values.append(weight * trajectories.rewards[e, :length].sum())
    return float(np.mean(values))


def upstream_runner_outcome(data_dir, timeout):
    """Runs ray 2.60's 'is' offline evaluation on the files; its outcome."""
    code = f"""
import gymnasium as gym
import ray
from ray.rllib.algorithms.bc import BCConfig
ray.init(num_cpus=4, include_dashboard=False, log_to_driver=False)
env = gym.make("CartPole-v1")
config = (
    BCConfig()
    .environment(observation_space=env.observation_space,
                 action_space=env.action_space)
    .offline_data(input_=[{data_dir!r}], input_read_episodes=True,
                  dataset_num_iters_per_learner=1)
    .evaluation(offline_evaluation_interval=1, num_offline_eval_runners=1,
                offline_evaluation_type="is")
)
algo = config.build_algo()
print("RESULT", algo.train()["evaluation"]["offline_eval_runners"]
      ["episode_return_mean"])
"""
    env = dict(os.environ, RLLIB_FORK_DISABLE="1", RAY_USAGE_STATS_ENABLED="0")
    try:
        out = subprocess.run(
            [sys.executable, "-c", code],
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired:
        return f"no result within {timeout} s"
    for line in out.stdout.splitlines():
        if line.startswith("RESULT"):
            return f"episode_return_mean {line.split()[1]}"
    for marker in ("KeyError", "Error"):
        lines = [x for x in out.stderr.splitlines() if marker in x]
        if lines:
            return "fails: " + lines[-1].strip()[:160]
    return f"fails (exit {out.returncode})"


def d3rlpy_fqe(python, trajectories, policy, fqe, workdir, name):
    """Starts d3rlpy's FQE on the data in a subprocess; returns (proc, out)."""
    mask = trajectories.mask
    episode, step = np.nonzero(mask)
    last = step == trajectories.lengths[episode] - 1
    actions = trajectories.actions[mask]
    arrays = dict(
        observations=trajectories.observations[episode, step].astype(np.float32),
        actions=actions if policy.is_discrete else actions.astype(np.float32),
        rewards=trajectories.rewards[mask].astype(np.float32),
        terminals=(last & trajectories.terminated[episode]).astype(np.float32),
        timeouts=(last & ~trajectories.terminated[episode]).astype(np.float32),
        initial_observations=trajectories.observations[:, 0].astype(np.float32),
        **policy.d3rlpy_arrays(),
    )
    path_in = os.path.join(workdir, f"{name}.npz")
    path_out = os.path.join(workdir, f"{name}.json")
    np.savez(path_in, **arrays)
    command = [
        python,
        D3RLPY_SCRIPT,
        "--input",
        path_in,
        "--output",
        path_out,
        "--n-steps",
        str(fqe.num_updates),
        "--batch-size",
        str(fqe.batch_size),
        "--gamma",
        str(GAMMA),
        "--seed",
        str(fqe.seed),
        "--learning-rate",
        str(fqe.learning_rate),
        "--target-update-interval",
        str(fqe.target_update_interval),
        "--hidden-units",
        ",".join(str(h) for h in fqe.hidden_sizes),
        "--num-threads",
        "1",
    ]
    if policy.is_discrete:
        command.append("--discrete")
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    return proc, path_out


def summarize(truth: Dict[str, float], estimates: Dict[str, float]):
    names = list(truth)
    true = np.array([truth[n] for n in names])
    est = np.array([estimates.get(n, np.nan) for n in names])
    if not np.all(np.isfinite(est)):
        return {"median_relative_error": None, "spearman": None, "picked": None}
    relative = np.abs(est - true) / np.abs(true)
    picked = names[int(np.argmax(est))]
    best = max(truth.values())
    return {
        "median_relative_error": float(np.median(relative)),
        "spearman": float(spearmanr(est, true).statistic),
        "picked": picked,
        "picked_true_value": truth[picked],
        "picked_within_5pct_of_best": bool(truth[picked] >= best - 0.05 * abs(best)),
    }


def run_task(name, spec, args, workdir) -> Dict:
    import torch

    from rllib.offline.episode_files.reader import read_episodes
    from rllib.offline.episode_files.writer import write_episodes
    from rllib.offline.off_policy_estimation import (
        FQEConfig,
        estimate_policy_value,
        trajectories_from_episodes,
    )

    torch.set_num_threads(1)
    _, episodes = rollouts(
        spec["env"], spec["behavior"], args.num_episodes, seed=0, record=True
    )
    data_dir = os.path.join(workdir, f"{name}_episodes")
    write_episodes(episodes, data_dir)
    trajectories = trajectories_from_episodes(read_episodes(data_dir))
    fqe = FQEConfig(
        num_updates=args.updates,
        learning_rate=args.learning_rate,
        target_update_interval=args.target_update_interval,
        batch_size=256,
        hidden_sizes=(256, 256),
        # The environments' time limits: estimates are of the return of an
        # episode as the environment cuts it (d3rlpy's FQE has no such input).
        horizon=spec["horizon"],
        seed=0,
    )
    report = {
        "data": {
            "episodes": trajectories.num_episodes,
            "steps": trajectories.num_steps,
            "behavior": type(spec["behavior"]).__name__,
        },
        "targets": {},
    }
    use_d3rlpy = os.path.exists(args.d3rlpy_python)
    for target_name, policy in spec["ladder"].items():
        row = {}
        started = time.time()
        truth, _ = rollouts(spec["env"], policy, args.true_rollouts, seed=100_000)
        row["true_value"] = float(truth.mean())
        row["true_value_stderr"] = float(truth.std() / np.sqrt(len(truth)))
        # The same policy from the recorded episodes' own initial states
        # (their reset seeds): what the estimators see, without the sampling
        # error of the initial states.
        on_data, _ = rollouts(spec["env"], policy, args.num_episodes, seed=0)
        row["true_value_on_data_starts"] = float(on_data.mean())
        row["rollout_s"] = time.time() - started
        proc = None
        if use_d3rlpy:
            proc, out_path = d3rlpy_fqe(
                args.d3rlpy_python,
                trajectories,
                policy,
                fqe,
                workdir,
                f"{name}_{target_name}",
            )
        started = time.time()
        result = estimate_policy_value(
            policy,
            trajectories,
            gamma=GAMMA,
            fqe_config=fqe,
            seed=0,
            fqe_resample_fits=args.fqe_resample_fits,
        )
        row["fork_s"] = time.time() - started
        row["fork"] = {k: [v.value, v.low, v.high] for k, v in result.estimates.items()}
        row["fork_effective_sample_size"] = result.effective_sample_size
        # The whole estimate (every estimator, bootstrap intervals, refits)
        # per update.
        row["fork_fqe_updates_per_s"] = (
            args.updates * (1 + args.fqe_resample_fits) / row["fork_s"]
        )
        row["fork_fqe_fit_updates_per_s"] = fqe_fit_rate(policy, trajectories, fqe)
        row["upstream_is_formula"] = upstream_is_formula(trajectories, policy, 0)
        if proc is not None:
            _, stderr = proc.communicate()
            if proc.returncode == 0:
                with open(out_path) as f:
                    d3 = json.load(f)
                row["d3rlpy_fqe"] = d3["estimate"]
                row["d3rlpy_updates_per_s"] = d3["updates_per_second"]
            else:
                row["d3rlpy_error"] = stderr.decode()[-400:]
        report["targets"][target_name] = row
        print(
            f"  {name} {target_name}: true {row['true_value']:.2f}  "
            f"fqe {row['fork']['fqe'][0]:.2f}  dr {row['fork']['dr'][0]:.2f}  "
            f"wis {row['fork']['wis'][0]:.2f}  "
            f"d3rlpy {row.get('d3rlpy_fqe', float('nan')):.2f}",
            flush=True,
        )
    report["summary"] = _summaries(report, "true_value", args, use_d3rlpy)
    report["summary_vs_data_starts"] = _summaries(
        report, "true_value_on_data_starts", args, use_d3rlpy
    )
    if name == "cartpole" and not args.skip_upstream_runner:
        report["upstream_runner"] = upstream_runner_outcome(data_dir, args.timeout)
    return report


def fqe_fit_rate(policy, trajectories, fqe) -> float:
    """Updates/s of the fork's FQE fit alone, doing d3rlpy's work per update:
    for continuous actions one draw of the target policy's action per next
    state (d3rlpy's FQE takes one; the fork's estimates average
    `fqe.num_action_samples` draws, that many target-network rows per
    transition)."""
    import dataclasses

    from rllib.offline.off_policy_estimation.fitted_q_evaluation import (
        FittedQEvaluation,
    )

    config = fqe
    if not policy.is_discrete:
        config = dataclasses.replace(fqe, num_action_samples=1)
    started = time.perf_counter()
    FittedQEvaluation(policy, GAMMA, config=config).fit(trajectories)
    return config.num_updates / (time.perf_counter() - started)


def _summaries(report, truth_key, args, use_d3rlpy):
    truth = {t: r[truth_key] for t, r in report["targets"].items()}
    summary = {}
    for estimator in ("is", "wis", "pdis", "wpdis", "fqe", "dr"):
        summary[f"fork_{estimator}"] = summarize(
            truth, {t: r["fork"][estimator][0] for t, r in report["targets"].items()}
        )
    summary["fork_intervals_cover_truth"] = {
        estimator: sum(
            r["fork"][estimator][1] <= r[truth_key] <= r["fork"][estimator][2]
            for r in report["targets"].values()
        )
        for estimator in ("wis", "fqe", "dr")
    }
    summary["upstream_is_formula"] = summarize(
        truth, {t: r["upstream_is_formula"] for t, r in report["targets"].items()}
    )
    if use_d3rlpy:
        summary["d3rlpy_fqe"] = summarize(
            truth,
            {t: r.get("d3rlpy_fqe", np.nan) for t, r in report["targets"].items()},
        )
    else:
        summary["d3rlpy_fqe"] = f"skipped: no interpreter at {args.d3rlpy_python}"
    return summary


def print_report(name, report):
    print(f"\n== {name}: {report['data']} ==")
    header = f"{'target':>10} {'true':>9} " + " ".join(
        f"{k:>9}" for k in ("is", "wis", "pdis", "wpdis", "fqe", "dr")
    )
    print(header + f" {'up. is':>10} {'d3rlpy':>9}")
    for target, row in report["targets"].items():
        cells = " ".join(
            f"{row['fork'][k][0]:9.2f}"
            for k in ("is", "wis", "pdis", "wpdis", "fqe", "dr")
        )
        print(
            f"{target:>10} {row['true_value']:9.2f} {cells} "
            f"{row['upstream_is_formula']:10.3g} "
            f"{row.get('d3rlpy_fqe', float('nan')):9.2f}"
        )
    _print_fqe_rates(report)
    for key, title in (
        ("summary", "against the true values (rollouts from fresh starts)"),
        ("summary_vs_data_starts", "against rollouts from the data's own starts"),
    ):
        print(f"-- {title}")
        _print_summary(report[key])


def _print_fqe_rates(report):
    """FQE's updates/s, fork vs d3rlpy, medians over the targets."""
    rows = list(report["targets"].values())

    def median(key):
        values = [r[key] for r in rows if r.get(key) is not None]
        return float(np.median(values)) if values else float("nan")

    fork_fit = median("fork_fqe_fit_updates_per_s")
    d3rlpy = median("d3rlpy_updates_per_s")
    print(
        f"-- FQE updates/s, one torch thread each (median over targets): fork "
        f"{fork_fit:.0f} (the fit alone, d3rlpy's work per update), d3rlpy "
        f"{d3rlpy:.0f}: {fork_fit / d3rlpy:.2f}x; the fork's whole estimate "
        f"(every estimator, intervals, its default action draws) "
        f"{median('fork_fqe_updates_per_s'):.0f}"
    )


def _print_summary(summary):
    print(f"{'estimator':>22} {'median rel. err':>16} {'spearman':>9} picks")
    for estimator, s in summary.items():
        if estimator == "fork_intervals_cover_truth":
            continue
        if isinstance(s, str):
            print(f"{estimator:>22} {s}")
            continue
        if s["median_relative_error"] is None:
            print(f"{estimator:>22} {'n/a':>16}")
            continue
        print(
            f"{estimator:>22} {s['median_relative_error']:16.3f} "
            f"{s['spearman']:9.2f} {s['picked']} "
            f"(true {s['picked_true_value']:.2f}, within 5% of best: "
            f"{s['picked_within_5pct_of_best']})"
        )
    print(
        "   95% intervals holding the true value: "
        + ", ".join(
            f"{name} {count}"
            for name, count in summary["fork_intervals_cover_truth"].items()
        )
    )


def main(argv: List[str] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="tiny sizes (CI)")
    parser.add_argument("--tasks", default="cartpole,cartpole_short,pendulum")
    parser.add_argument("--num-episodes", type=int, default=150)
    parser.add_argument("--true-rollouts", type=int, default=300)
    # FQEConfig's defaults, for the fork and d3rlpy alike.
    parser.add_argument("--updates", type=int, default=10_000)
    parser.add_argument("--learning-rate", type=float, default=3e-4)
    parser.add_argument("--target-update-interval", type=int, default=20)
    parser.add_argument(
        "--fqe-resample-fits",
        type=int,
        default=4,
        help="FQE refits on resampled episodes behind the fqe/dr intervals "
        "(0: the intervals resample episodes under one fit)",
    )
    parser.add_argument("--d3rlpy-python", default="/work/d3rlpy-venv/bin/python")
    parser.add_argument("--skip-upstream-runner", action="store_true")
    parser.add_argument("--timeout", type=int, default=300)
    parser.add_argument("--json", help="write the report here")
    args = parser.parse_args(argv)
    if args.quick:
        args.num_episodes, args.true_rollouts, args.updates = 8, 10, 200
        args.fqe_resample_fits = min(args.fqe_resample_fits, 2)
    reports = {}
    with tempfile.TemporaryDirectory() as workdir:
        for name in args.tasks.split(","):
            print(f"{name} ...", flush=True)
            reports[name] = run_task(name, TASKS[name], args, workdir)
    for name, report in reports.items():
        print_report(name, report)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"settings": vars(args), "tasks": reports}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
