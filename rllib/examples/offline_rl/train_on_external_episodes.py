"""Trains MARWIL (or BC) on CartPole episodes collected outside RLlib.

This example shows the whole path for experiences you collect yourself:

1. Run CartPole with a scripted controller (push the cart toward the side the
   pole falls to; it balances to the 500-step limit) and record each run as a
   `SingleAgentEpisode`. No download, no pre-trained model.
2. Write the episodes with `ray.rllib.offline.episode_files.writer.EpisodeWriter`:
   parquet files with the spaces in their metadata.
3. Train MARWIL or BC from the files with
   `config.offline_data(input_read_episodes=True)`, with a progress bar over
   the training iterations (loss and evaluation return in its postfix).
4. Score the checkpoint of every iteration off-policy, from the recorded
   episodes alone (fitted Q evaluation), and keep the best one next to the
   last; the environment's returns show whether the estimate chose well.
5. Save the last checkpoint and print how to restore either.

Everything goes into `--output-dir` (default `./offline_cartpole_run`):

- `episodes/`: the recorded episodes (inspect them with
  `python -m ray.rllib.offline.episodes info <output-dir>/episodes`),
- `checkpoint/`: the algorithm after the last iteration (`algo.save_to_path`),
- `checkpoint_best_by_ope/`: the algorithm after the iteration that fitted Q
  evaluation ranks best (`--ope-updates 0`: not kept),
- `results.json`: the metrics of every iteration and a summary,
- `learning_curve.png`: loss and evaluation return per iteration (`--plot`,
  needs matplotlib: `pip install matplotlib`).

A later run into the same directory replaces these; a directory this example
did not create must be empty.

How to run this script
----------------------
`python train_on_external_episodes.py [--algo=bc] [--num-episodes=40]
[--iterations=10] [--num-gpus-per-learner=1] [--compression=zstd]
[--ope-updates=10000] [--output-dir=DIR] [--plot]`

Results to expect
-----------------
With the defaults, on 2 CPUs, in one to two minutes before the off-policy
scoring (about 5 more minutes, below; `--ope-updates 0` skips it): 40 episodes in 4
files (the data's return is about 495) and a policy that imitates the
near-perfect controller. Evaluation returns vary with the seed, most in the
first iterations. Measured on the 2-core CI machine (`--seed` 0, 1, 2):

- `--algo bc`: 497.4 and 491.4 after 10 iterations (seeds 0 and 1); after 4
  iterations 305.2, 500.0 and 332.8 (seeds 0, 1, 2).
- MARWIL (the default): 449.0 after 10 iterations, 302.2 after 4 (seed 0).

Scoring the 10 checkpoints off-policy takes longer than training: 290 to 390
s with 10,000 FQE updates each (training 20 to 29 s), measured with seeds 0,
1 and 2 while other work shared the 2 cores. FQE estimates the discounted
return (gamma 0.99): every policy that balances more than about 300 steps
scores 97 to 99.7, so it separates poor iterations from good ones but not
good ones from each other. The kept checkpoints returned 376.6, 479.8 and
420.4 in the environment, against 449.0, 473.2 and 434.2 for the last (mean
425.6 against 452.1). With 3,000 updates FQE had not converged: it kept
iteration 1 of seed 1 (return 112.2), and the kept checkpoints averaged 332.6.

`release/rllib_tests/offline/cartpole_marwil.py` checks that MARWIL passes
450 within 20 iterations.
"""

import argparse
import gc
import json
import math
import os
import shutil
import sys
import time
from typing import Any, Dict, List, Optional

import gymnasium as gym
import numpy as np
import ray
from ray.data import ActorPoolStrategy
from ray.rllib.core import (
    COMPONENT_LEARNER,
    COMPONENT_LEARNER_GROUP,
    COMPONENT_RL_MODULE,
    DEFAULT_MODULE_ID,
)
from ray.rllib.offline.episode_files.reader import read_episodes, read_spaces
from ray.rllib.offline.episode_files.writer import EpisodeWriter
from ray.rllib.offline.tools.quiet_output import quiet_output
from ray.rllib.utils.metrics import (
    ALL_MODULES,
    ENV_RUNNER_RESULTS,
    EPISODE_RETURN_MEAN,
    EVALUATION_RESULTS,
    LEARNER_RESULTS,
    NUM_ENV_STEPS_TRAINED_LIFETIME,
)
from tqdm import tqdm

from rllib.examples.offline_rl.scripted_cartpole import balance_action, record_episodes

#: Default of `--output-dir`.
DEFAULT_OUTPUT_DIR = "offline_cartpole_run"
#: What this example writes into `--output-dir`.
EPISODES_DIR = "episodes"
CHECKPOINT_DIR = "checkpoint"
BEST_CHECKPOINT_DIR = "checkpoint_best_by_ope"
#: Every iteration's checkpoint while the job runs (removed once scored).
ITERATIONS_DIR = "iterations"
RESULTS_FILE = "results.json"
PLOT_FILE = "learning_curve.png"
#: Marks a directory as this example's output, so a later run may replace it.
MARKER_FILE = ".train_on_external_episodes"


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n")[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument("--algo", choices=["marwil", "bc"], default="marwil")
    parser.add_argument(
        "--num-episodes", type=int, default=40, help="Episodes to collect."
    )
    parser.add_argument(
        "--iterations", type=int, default=10, help="Training iterations."
    )
    parser.add_argument(
        "--updates-per-iteration",
        type=int,
        default=25,
        help="Learner updates (train batches) per training iteration.",
    )
    parser.add_argument("--num-gpus-per-learner", type=float, default=0)
    parser.add_argument(
        "--episodes-per-file", type=int, default=10, help="`max_rows_per_file`."
    )
    parser.add_argument(
        "--compression",
        choices=["none", "zstd", "lz4", "gzip"],
        default="none",
        help="Compression of each episode payload (not of the parquet file).",
    )
    parser.add_argument(
        "--epsilon",
        type=float,
        default=0.05,
        help="Share of random actions while collecting (diversifies the data).",
    )
    parser.add_argument(
        "--eval-episodes", type=int, default=5, help="Episodes per evaluation."
    )
    parser.add_argument(
        "--eval-interval",
        type=int,
        default=1,
        help="Evaluate every N iterations (and always after the last).",
    )
    parser.add_argument(
        "--output-dir",
        default=DEFAULT_OUTPUT_DIR,
        help="Directory for the episodes, the checkpoint and the results.",
    )
    parser.add_argument(
        "--plot",
        action="store_true",
        help=f"Write `{PLOT_FILE}` (loss and evaluation return per iteration) "
        "into the output directory; needs matplotlib.",
    )
    parser.add_argument(
        "--ope-updates",
        type=int,
        default=10_000,
        help="FQE updates per iteration checkpoint when scoring them off-policy "
        "after training, from the recorded episodes alone (0: no scoring, no "
        f"`{BEST_CHECKPOINT_DIR}`)",
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--verbose",
        action="store_true",
        help="Keep ray's warnings that need no action here and Ray Data's "
        "progress bars.",
    )
    return parser.parse_args(argv)


def scripted_action(obs: np.ndarray) -> int:
    """The scripted controller on CartPole's observation vector."""
    _, _, angle, angular_velocity = obs
    return balance_action(angle, angular_velocity)


def collect_episodes(num_episodes: int, epsilon: float, seed: int):
    """Returns `num_episodes` finished CartPole episodes of the scripted policy."""
    env = gym.make("CartPole-v1")
    episodes = record_episodes(
        env,
        num_episodes,
        scripted_action,
        epsilon=epsilon,
        seed=seed,
        record_logp=True,
    )
    env.close()
    return episodes


def build_config(args: argparse.Namespace, data_dir: str):
    if args.algo == "marwil":
        from ray.rllib.algorithms.marwil import MARWILConfig

        config = MARWILConfig().training(beta=1.0)
    else:
        from ray.rllib.algorithms.bc import BCConfig

        config = BCConfig()
    return (
        config.environment("CartPole-v1")
        .env_runners(num_env_runners=0)
        .learners(num_learners=0, num_gpus_per_learner=args.num_gpus_per_learner)
        .training(train_batch_size_per_learner=1024, lr=0.0008)
        .offline_data(
            input_=[data_dir],
            input_read_episodes=True,
            # Episodes (rows) per Ray Data batch. Each batch yields one train
            # batch, sampled from the prelearner's episode buffer.
            input_read_batch_size=2,
            dataset_num_iters_per_learner=args.updates_per_iteration,
            # One Ray Data actor decodes the episodes.
            map_batches_kwargs={"compute": ActorPoolStrategy(size=1), "num_cpus": 1},
        )
        .evaluation(
            evaluation_interval=args.eval_interval,
            evaluation_num_env_runners=0,
            evaluation_duration=args.eval_episodes,
            evaluation_duration_unit="episodes",
        )
        .debugging(seed=args.seed)
    )


# ---------------------------------------------------------------------------
# The output directory.
# ---------------------------------------------------------------------------


def prepare_output_dir(path: str) -> str:
    """Creates (or takes over) the output directory; returns its absolute path.

    Raises:
        FileExistsError: If `path` is a file, or a non-empty directory that an
            earlier run of this example did not create.
    """
    path = os.path.abspath(path)
    if os.path.isfile(path):
        raise FileExistsError(f"`--output-dir {path}` is a file; pass a directory.")
    if os.path.isdir(path) and os.listdir(path):
        if not os.path.exists(os.path.join(path, MARKER_FILE)):
            raise FileExistsError(
                f"`--output-dir {path}` is not empty and was not written by this "
                "example. Pass a new or empty directory."
            )
        print(f"Replacing the previous run in {path}")
        for name in (EPISODES_DIR, CHECKPOINT_DIR, BEST_CHECKPOINT_DIR, ITERATIONS_DIR):
            shutil.rmtree(os.path.join(path, name), ignore_errors=True)
        for name in (RESULTS_FILE, PLOT_FILE):
            if os.path.exists(os.path.join(path, name)):
                os.remove(os.path.join(path, name))
    os.makedirs(path, exist_ok=True)
    with open(os.path.join(path, MARKER_FILE), "w") as marker:
        marker.write(
            "Output of rllib/examples/offline_rl/train_on_external_episodes.py\n"
        )
    return path


def module_checkpoint(checkpoint_dir: str) -> str:
    """The RLModule's directory inside an algorithm checkpoint."""
    return os.path.join(
        checkpoint_dir,
        COMPONENT_LEARNER_GROUP,
        COMPONENT_LEARNER,
        COMPONENT_RL_MODULE,
        DEFAULT_MODULE_ID,
    )


def require_matplotlib() -> None:
    """Raises an `ImportError` that says how to install matplotlib if missing."""
    try:
        import matplotlib  # noqa: F401
    except ImportError as error:
        raise ImportError(
            "`--plot` needs matplotlib, which is not installed. Install it with "
            "`pip install matplotlib`, or run without `--plot`."
        ) from error


def restore_instructions(checkpoint_dir: str) -> str:
    """How to load the policy and restore the algorithm from `checkpoint_dir`.

    Each indented block runs as printed in a fresh Python process.
    """
    module_dir = module_checkpoint(checkpoint_dir)
    return (
        f"Checkpoint: {checkpoint_dir}\n"
        "Load the trained policy network (no Ray needed):\n"
        "    import torch\n"
        "    from ray.rllib.core.rl_module.rl_module import RLModule\n"
        f"    module = RLModule.from_checkpoint({module_dir!r})\n"
        "    obs_batch = torch.tensor([[0.0, 0.0, 0.05, 0.0]])  # (batch, 4)\n"
        '    logits = module.forward_inference({"obs": obs_batch})'
        '["action_dist_inputs"]\n'
        "    action = int(logits.argmax(dim=-1)[0])\n"
        "Or restore the whole algorithm (Learner, optimizer, iteration) to "
        "train on:\n"
        "    from ray.rllib.algorithms.algorithm import Algorithm\n"
        f"    algo = Algorithm.from_checkpoint({checkpoint_dir!r})"
    )


def plot_learning_curve(
    history: List[Dict[str, Any]], data_return: float, path: str, algo: str
) -> None:
    """Writes loss and evaluation return per iteration as a PNG.

    Raises:
        ImportError: If matplotlib is not installed (the message says how to
            install it).
    """
    require_matplotlib()
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    iterations = [h["iteration"] for h in history]
    figure, (loss_axes, return_axes) = plt.subplots(1, 2, figsize=(10, 4))
    loss_axes.plot(iterations, [h["loss"] for h in history], marker="o")
    loss_axes.set(xlabel="training iteration", ylabel="total loss", title="Loss")
    evaluated = [h for h in history if h["eval_return_mean"] is not None]
    return_axes.plot(
        [h["iteration"] for h in evaluated],
        [h["eval_return_mean"] for h in evaluated],
        marker="o",
        label=f"{algo.upper()} policy",
    )
    return_axes.axhline(data_return, linestyle="--", color="gray", label="data")
    return_axes.set(
        xlabel="training iteration",
        ylabel="mean episode return",
        title="Evaluation in CartPole-v1",
    )
    return_axes.legend()
    for axes in (loss_axes, return_axes):
        axes.xaxis.set_major_locator(MaxNLocator(integer=True))
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)


# ---------------------------------------------------------------------------
# The job.
# ---------------------------------------------------------------------------


def score_checkpoints(
    checkpoints: Dict[int, str], episodes, gamma: float, num_updates: int, seed: int
) -> Dict[int, Dict[str, float]]:
    """Fitted Q evaluation of each iteration's greedy policy, from `episodes`
    alone: iteration -> {"fqe", "fqe_ci_low", "fqe_ci_high"}. Shows a bar over
    the checkpoints and one over each checkpoint's FQE updates."""
    import torch
    from ray.rllib.core.rl_module.rl_module import RLModule

    from rllib.offline.off_policy_estimation import FQEConfig, evaluate_module

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # One core for FQE; Ray's processes share the rest.
    scores = {}
    try:
        for iteration, path in tqdm(
            checkpoints.items(), desc="[4/5] Scoring", unit="ckpt", dynamic_ncols=True
        ):
            with tqdm(
                total=num_updates,
                desc=f"      FQE iteration {iteration}",
                unit=" updates",
                leave=False,
                dynamic_ncols=True,
            ) as updates:
                (result,) = evaluate_module(
                    RLModule.from_checkpoint(module_checkpoint(path)),
                    episodes,
                    gamma=gamma,
                    estimators=["fqe"],
                    # The greedy policy, as the evaluation EnvRunner runs it,
                    # and CartPole's 500-step limit.
                    deterministic=True,
                    fqe_config=FQEConfig(
                        num_updates=num_updates, horizon=500, seed=seed
                    ),
                    seed=seed,
                    on_fqe_update=updates.update,
                ).values()
            estimate = result.estimates["fqe"]
            scores[iteration] = {
                "fqe": estimate.value,
                "fqe_ci_low": estimate.low,
                "fqe_ci_high": estimate.high,
            }
    finally:
        torch.set_num_threads(threads)
    return scores


def selection_report(ope: Dict[str, Any], gamma: float) -> str:
    """What the off-policy scoring kept, and how the environment judged it."""
    kept, last = ope["kept_iteration"], ope["last_iteration"]
    scores = ope["estimates"]

    def fqe(iteration):
        s = scores[iteration]
        return f"{s['fqe']:.1f} [{s['fqe_ci_low']:.1f}, {s['fqe_ci_high']:.1f}]"

    def env_return(value):
        return "-" if value is None else f"{value:.1f}"

    lines = [
        "Off-policy selection (fitted Q evaluation from the recorded episodes "
        f"alone, discounted with gamma {gamma}; a policy that balances all 500 "
        f"steps scores {(1 - gamma**500) / (1 - gamma):.1f}):",
        f"  kept {BEST_CHECKPOINT_DIR}/: iteration {kept}, FQE {fqe(kept)}, "
        f"the best of {len(scores)} iterations",
        f"  last {CHECKPOINT_DIR}/: iteration {last}, FQE {fqe(last)}",
        "  In the environment (evaluation return): kept "
        f"{env_return(ope['kept_eval_return_mean'])}, last "
        f"{env_return(ope['last_eval_return_mean'])}.",
    ]
    return "\n".join(lines)


def _eval_return(result: Dict[str, Any]) -> Optional[float]:
    value = result.get(EVALUATION_RESULTS, {}).get(ENV_RUNNER_RESULTS, {})
    value = value.get(EPISODE_RETURN_MEAN)
    return None if value is None or math.isnan(value) else float(value)


def _step(message: str) -> float:
    print(message, flush=True)
    return time.perf_counter()


def main(argv=None) -> dict:
    args = parse_args(argv)
    quiet_output(args.verbose)
    if args.plot:  # Fail now, not after training, if matplotlib is missing.
        require_matplotlib()
    output_dir = prepare_output_dir(args.output_dir)
    data_dir = os.path.join(output_dir, EPISODES_DIR)
    checkpoint_dir = os.path.join(output_dir, CHECKPOINT_DIR)
    compression = None if args.compression == "none" else args.compression

    # 1. + 2. Collect and write.
    start = _step(
        f"[1/5] Recording {args.num_episodes} CartPole episodes with the scripted "
        f"controller ({args.epsilon:.0%} random actions)..."
    )
    episodes = collect_episodes(args.num_episodes, args.epsilon, args.seed)
    returns = [episode.get_return() for episode in episodes]
    print(
        f"      {sum(len(e) for e in episodes):,} steps, mean return "
        f"{np.mean(returns):.1f} ({time.perf_counter() - start:.1f}s)"
    )
    start = _step(f"[2/5] Writing them with EpisodeWriter to {data_dir} ...")
    env = gym.make("CartPole-v1")
    with EpisodeWriter(
        data_dir,
        observation_space=env.observation_space,
        action_space=env.action_space,
        max_rows_per_file=args.episodes_per_file,
        compression=compression,
    ) as writer:
        writer.write_many(episodes)
    env.close()
    num_bytes = sum(os.path.getsize(f) for f in writer.files)
    print(
        f"      {writer.num_episodes} episodes in {len(writer.files)} files, "
        f"{num_bytes / 1e6:.2f} MB ({time.perf_counter() - start:.1f}s); recorded "
        f"spaces {read_spaces(data_dir)}"
    )

    # 3. Train.
    owns_ray = not ray.is_initialized()
    if owns_ray:
        start = _step("[3/5] Starting Ray (4 logical CPUs) ...")
        ray.init(num_cpus=4, include_dashboard=False, log_to_driver=False)
        print(f"      started ({time.perf_counter() - start:.1f}s)")
    start = _step(
        f"[3/5] Building {args.algo.upper()}: the Learner, the Ray Data pipeline "
        "over the episode files and an evaluation EnvRunner ..."
    )
    config = build_config(args, data_dir)
    algo_gamma = config.gamma
    algo = config.build_algo()
    print(f"      built ({time.perf_counter() - start:.1f}s)")
    history: List[Dict[str, Any]] = []
    trained_steps = 0
    train_s = 0.0
    iteration_checkpoints: Dict[int, str] = {}
    bar = tqdm(
        range(1, args.iterations + 1),
        desc=f"[3/5] Training {args.algo.upper()}",
        unit="iter",
        dynamic_ncols=True,
    )
    for iteration in bar:
        start = time.perf_counter()
        result = algo.train()
        elapsed = time.perf_counter() - start
        train_s += elapsed
        lifetime = result[LEARNER_RESULTS][ALL_MODULES][NUM_ENV_STEPS_TRAINED_LIFETIME]
        steps, trained_steps = int(lifetime - trained_steps), int(lifetime)
        eval_return = _eval_return(result)
        if eval_return is None and iteration == args.iterations:
            eval_return = _eval_return(algo.evaluate())
        if args.ope_updates:
            # Saved outside the timed training step; scored after training.
            path = os.path.join(output_dir, ITERATIONS_DIR, f"iter_{iteration:03d}")
            algo.save_to_path(path)
            iteration_checkpoints[iteration] = path
        loss = float(result[LEARNER_RESULTS][DEFAULT_MODULE_ID]["total_loss"])
        history.append(
            {
                "iteration": iteration,
                "loss": loss,
                "eval_return_mean": eval_return,
                "env_steps_trained": steps,
                "time_s": elapsed,
            }
        )
        postfix = {"loss": f"{loss:.3f}"}
        if eval_return is not None:
            postfix["eval_return"] = f"{eval_return:.1f}"
        bar.set_postfix(postfix)
        tqdm.write(
            f"      iter {iteration}: loss {loss:.4f}, "
            + (f"eval return {eval_return:.1f}, " if eval_return is not None else "")
            + f"{steps:,} steps trained in {elapsed:.1f}s "
            f"({steps / elapsed:,.0f} steps/s)"
        )
    bar.close()

    # 4. Score every iteration off-policy; keep the best next to the last.
    ope = None
    if iteration_checkpoints:
        start = time.perf_counter()
        tqdm.write(
            f"[4/5] Scoring the {len(iteration_checkpoints)} iteration checkpoints "
            "off-policy: fitted Q evaluation of each greedy policy from the "
            f"recorded episodes alone, {args.ope_updates:,} updates each ..."
        )
        scores = score_checkpoints(
            iteration_checkpoints,
            list(read_episodes(data_dir)),
            algo_gamma,
            args.ope_updates,
            args.seed,
        )
        best = max(scores, key=lambda i: scores[i]["fqe"])
        best_dir = os.path.join(output_dir, BEST_CHECKPOINT_DIR)
        shutil.copytree(iteration_checkpoints[best], best_dir)
        shutil.rmtree(os.path.join(output_dir, ITERATIONS_DIR))
        returns_by_iteration = {h["iteration"]: h["eval_return_mean"] for h in history}
        for entry in history:
            entry["fqe"] = scores[entry["iteration"]]["fqe"]
        ope = {
            "kept_iteration": best,
            "kept_checkpoint_dir": best_dir,
            "last_iteration": args.iterations,
            "fqe_updates": args.ope_updates,
            "estimates": scores,
            "kept_eval_return_mean": returns_by_iteration[best],
            "last_eval_return_mean": returns_by_iteration[args.iterations],
            "time_s": time.perf_counter() - start,
        }
        print(
            f"      scored in {ope['time_s']:.1f}s "
            f"({ope['time_s'] / len(scores):.1f}s per checkpoint)"
        )

    # 5. Save, summarize.
    start = _step(f"[5/5] Saving the last checkpoint to {checkpoint_dir} ...")
    algo.save_to_path(checkpoint_dir)
    print(f"      saved ({time.perf_counter() - start:.1f}s)")
    algo.stop()
    del algo
    gc.collect()  # Drop Ray Data iterators while Ray is still up.
    if owns_ray:
        ray.shutdown()
    eval_return = history[-1]["eval_return_mean"] if history else None
    summary = {
        "algo": args.algo,
        "output_dir": output_dir,
        "data_dir": data_dir,
        "checkpoint_dir": checkpoint_dir,
        "episodes_written": writer.num_episodes,
        "files": len(writer.files),
        "bytes": num_bytes,
        "train_s": train_s,
        "train_steps_per_s": trained_steps / train_s if train_s else 0.0,
        "eval_return_mean": eval_return,
        "expert_return_mean": float(np.mean(returns)),
        "off_policy_selection": ope,
    }
    with open(os.path.join(output_dir, RESULTS_FILE), "w") as f:
        json.dump({"args": vars(args), "iterations": history, "summary": summary}, f)
    if args.plot:
        summary["plot"] = os.path.join(output_dir, PLOT_FILE)
        plot_learning_curve(
            history, summary["expert_return_mean"], summary["plot"], args.algo
        )
    eval_text = "-" if eval_return is None else f"{eval_return:.1f}"
    print(
        f"Summary [{args.algo}]: {summary['episodes_written']} episodes in "
        f"{summary['files']} files; training {summary['train_steps_per_s']:,.0f} "
        f"timesteps/s over {args.iterations} iterations; evaluation return "
        f"{eval_text} over {args.eval_episodes} episodes "
        f"(data: {summary['expert_return_mean']:.1f})."
    )
    if ope is not None:
        print(selection_report(ope, algo_gamma))
    print(f"Results: {os.path.join(output_dir, RESULTS_FILE)}")
    if args.plot:
        print(f"Learning curve: {summary['plot']}")
    print(restore_instructions(checkpoint_dir))
    return summary


if __name__ == "__main__":
    try:
        main()
    except (FileExistsError, ImportError) as error:  # Bad `--output-dir`/`--plot`.
        sys.exit(f"error: {error}")
