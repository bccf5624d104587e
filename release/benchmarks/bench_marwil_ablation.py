"""MARWIL ablation: the Learner's live value targets alone, against live
targets plus the fork's advantage-normalizer, value-loss-scale and clamp
changes, with BC for reference; on a discrete and a continuous task.

Variants (every run with the fork active, each in a fresh process):

- `fork`: the fork's MARWIL as it ships: value targets from the Learner's
  live weights; the advantage normalizer moves at the fork's default rate
  (0.05 per update) and starts from the first batch; the value loss is
  divided by the value-target scale; the weight's exponent is clipped at 20.
- `live_targets_only`: the same live value targets, with MARWIL's loss as
  ray 2.60 computes it with ray 2.60's defaults: the normalizer starts at
  `moving_average_sqd_adv_norm_start=100` and moves at
  `moving_average_sqd_adv_norm_update_rate=1e-8` per loss call, the value
  loss is unscaled and the exponent unclipped. Only the loss changes: the value
  targets, data, module and optimizer are the fork's.
- `bc`: BC with the same settings.

Tasks: `cartpole`, 100 scripted CartPole episodes with 50% random actions
(hand-rolled per-step payloads, as `bench_marwil_vs_bc.py`); `pendulum`,
the scripted Pendulum-v1 controller's medium-quality episodes (20,000 steps,
torques in the environment's units, written with `EpisodeWriter`). The
result is the mean return of the stochastic policy over `--eval-episodes`
fresh episodes after the last update (CartPole: undiscounted, 500 at most;
Pendulum: about -1,200 random, -150 for the controller).

    python release/benchmarks/bench_marwil_ablation.py
    python release/benchmarks/bench_marwil_ablation.py --tasks pendulum --seeds 0
"""

import argparse
import concurrent.futures
import json
import os
import statistics
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
TASKS = ("cartpole", "pendulum")
VARIANTS = ("fork", "live_targets_only", "bc")


def record(task: str, path: str, seed: int = 0) -> None:
    if task == "cartpole":
        from episode_data import encode, record_episodes, write_payloads

        episodes = record_episodes(100, 0.5, seed)
        write_payloads([encode(e, "per_step") for e in episodes], path)
        return
    from ray.rllib.offline.episode_files.writer import write_episodes

    from rllib.examples.offline_rl.scripted_continuous_control import (
        record_episodes,
    )

    write_episodes(record_episodes("pendulum", "medium", 20_000, seed=seed), path)


def live_targets_only_loss(self, *, module_id, config=None, batch, fwd_out):
    """MARWIL's loss with ray 2.60's normalizer, no value-loss scale and no
    clip, on the value targets the fork's Learner computes."""
    import torch
    from ray.rllib.core.columns import Columns
    from ray.rllib.evaluation.postprocessing import Postprocessing

    from rllib.core.learner.value_targets import (
        add_value_targets,
        has_value_target_inputs,
    )

    module = self.module[module_id].unwrapped()
    dist = module.get_train_action_dist_cls().from_logits(
        fwd_out[Columns.ACTION_DIST_INPUTS]
    )
    log_probs = dist.logp(batch[Columns.ACTIONS])
    if Postprocessing.VALUE_TARGETS not in batch and has_value_target_inputs(batch):
        add_value_targets(module, batch)
    values = module.compute_values(batch, embeddings=fwd_out.get(Columns.EMBEDDINGS))
    advantages = batch[Postprocessing.VALUE_TARGETS] - values
    norms = self.moving_avg_sqd_adv_norms_per_module
    norm = norms[module_id]
    norm = norm + config.moving_average_sqd_adv_norm_update_rate * (
        torch.mean(advantages.detach() ** 2) - norm
    )
    norms[module_id] = norm
    weights = torch.exp(config.beta * advantages / (1e-8 + norm.sqrt())).detach()
    policy_loss = -torch.mean(weights * log_probs)
    return policy_loss + config.vf_coeff * 0.5 * torch.mean(advantages**2)


def stochastic_return(task: str, module, num_episodes: int, seed: int) -> float:
    """Mean return with actions sampled from the module's distribution; Box
    actions are clipped to [-1, 1] and scaled to the box, as EnvRunners do."""
    import gymnasium as gym
    import torch
    from ray.rllib.core.columns import Columns

    env = gym.make("CartPole-v1" if task == "cartpole" else "Pendulum-v1")
    dist_cls = module.get_inference_action_dist_cls()
    torch.manual_seed(seed)
    returns = []
    for i in range(num_episodes):
        obs, _ = env.reset(seed=seed + i)
        total, done = 0.0, False
        while not done:
            with torch.no_grad():
                out = module.forward_inference(
                    {Columns.OBS: torch.as_tensor(obs[None], dtype=torch.float32)}
                )
                action = dist_cls.from_logits(out[Columns.ACTION_DIST_INPUTS])
                action = action.sample()[0].numpy()
            if task == "cartpole":
                action = int(action)
            else:
                action = np.clip(action, -1.0, 1.0) * env.action_space.high
            obs, reward, terminated, truncated, _ = env.step(action)
            total += float(reward)
            done = terminated or truncated
        returns.append(total)
    return float(np.mean(returns))


def run_one(args) -> dict:
    """Trains one variant in this process and returns its figures."""
    import gymnasium as gym
    import ray
    from bench_marwil_vs_bc import offline_config
    from ray.rllib.algorithms.bc import BCConfig
    from ray.rllib.algorithms.marwil import MARWILConfig
    from ray.rllib.core import DEFAULT_MODULE_ID

    import rllib

    if not rllib.is_active():
        sys.exit("the ablation runs the fork: unset RLLIB_FORK_DISABLE")
    if args.variant == "live_targets_only":
        from ray.rllib.algorithms.marwil.torch.marwil_torch_learner import (
            MARWILTorchLearner,
        )
        from ray.rllib.core.learner.torch.torch_learner import TorchLearner

        MARWILTorchLearner.compute_losses = TorchLearner.compute_losses
        MARWILTorchLearner.compute_loss_for_module = live_targets_only_loss
    env = gym.make("CartPole-v1" if args.task == "cartpole" else "Pendulum-v1")
    config = BCConfig() if args.variant == "bc" else MARWILConfig()
    if args.variant != "bc":
        config = config.training(beta=1.0)
    if args.variant == "live_targets_only":
        # ray 2.60's normalizer defaults (the fork's are 0, from the data, and
        # 0.05).
        config = config.training(
            moving_average_sqd_adv_norm_start=100.0,
            moving_average_sqd_adv_norm_update_rate=1e-8,
        )
    config = offline_config(config, env, args)
    ray.init(num_cpus=4, include_dashboard=False, log_to_driver=False)
    algo = config.build_algo()
    module = algo.learner_group._learner.module[DEFAULT_MODULE_ID]
    start = time.perf_counter()
    for _ in range(args.iterations):
        algo.train()
    train_seconds = time.perf_counter() - start
    result = {
        "task": args.task,
        "variant": args.variant,
        "seed": args.seed,
        "updates": args.iterations * args.updates_per_iteration,
        "train_seconds": train_seconds,
        "eval_return": stochastic_return(
            args.task, module, args.eval_episodes, seed=10_000
        ),
    }
    if args.variant != "bc":
        norms = algo.learner_group._learner.moving_avg_sqd_adv_norms_per_module
        # Shows which loss ran: ray 2.60's normalizer barely leaves its start
        # (100) at rate 1e-8; the fork's follows the squared advantages.
        result["advantage_norm"] = float(norms[DEFAULT_MODULE_ID])
    algo.stop()
    ray.shutdown()
    return result


def _child(args, task, data, variant, seed) -> dict:
    cmd = [sys.executable, __file__, "--child", "--task", task, "--data", data]
    cmd += ["--variant", variant, "--seed", str(seed)]
    for name in ("iterations", "updates_per_iteration", "batch_size", "lr"):
        cmd += [f"--{name.replace('_', '-')}", str(getattr(args, name))]
    cmd += ["--eval-episodes", str(args.eval_episodes)]
    from bench_marwil_vs_bc import run_child

    env = {k: v for k, v in os.environ.items() if k != "RLLIB_FORK_DISABLE"}
    return run_child(cmd, env, args.timeout, f"{task} {variant} seed {seed}")


def run_all(args) -> dict:
    runs = []
    with tempfile.TemporaryDirectory() as tmp:
        jobs = []
        for task in args.tasks:
            data = os.path.join(tmp, task)
            record(task, data)
            jobs += [
                (task, data, variant, seed)
                for seed in args.seeds
                for variant in args.variants
            ]
        with concurrent.futures.ThreadPoolExecutor(args.parallel) as pool:
            for result in pool.map(lambda job: _child(args, *job), jobs):
                runs.append(result)
                norm = result.get("advantage_norm")
                print(
                    f"  {result['task']:<9} {result['variant']:<18} seed "
                    f"{result['seed']}: {result['eval_return']:8.1f} "
                    f"({result['train_seconds']:.0f} s"
                    + (f", advantage norm {norm:.4g})" if norm is not None else ")"),
                    flush=True,
                )
    return {"settings": vars(args), "runs": runs, "summary": summarize(runs)}


def summarize(runs) -> dict:
    summary = {}
    for run in runs:
        cell = summary.setdefault(run["task"], {}).setdefault(run["variant"], [])
        cell.append(run["eval_return"])
    return {
        task: {
            variant: {
                "per_seed": values,
                "mean": statistics.mean(values),
                "sd": statistics.stdev(values) if len(values) > 1 else 0.0,
            }
            for variant, values in variants.items()
        }
        for task, variants in summary.items()
    }


def print_summary(summary) -> None:
    print("\nMean stochastic return after the last update (sd over seeds):")
    print(f"{'task':<10}" + "".join(f"{v:>26}" for v in VARIANTS))
    for task, cells in summary.items():
        row = f"{task:<10}"
        for variant in VARIANTS:
            if variant in cells:
                cell = cells[variant]
                row += f"{cell['mean']:>17.1f} ± {cell['sd']:6.1f}"
            else:
                row += f"{'':>26}"
        print(row)


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", nargs="+", choices=TASKS, default=list(TASKS))
    parser.add_argument("--variants", nargs="+", choices=VARIANTS, default=VARIANTS)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--iterations", type=int, default=30)
    parser.add_argument("--updates-per-iteration", type=int, default=10)
    parser.add_argument("--batch-size", type=int, default=512)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--eval-episodes", type=int, default=20)
    parser.add_argument("--parallel", type=int, default=2, help="runs at once")
    parser.add_argument("--timeout", type=float, default=1800)
    parser.add_argument("--json", default=None, help="Write every result here.")
    parser.add_argument("--task", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--variant", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--seed", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--data", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    if args.child:
        print(json.dumps(run_one(args)))
        return 0
    report = run_all(args)
    print_summary(report["summary"])
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
