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
   episodes alone (fitted Q evaluation), and keep one next to the last: the
   best-scored, if its 95% interval lies wholly above the last's, else the
   last. The environment's returns show whether the choice was right.
5. Save the last checkpoint and print how to restore either.

Everything goes into `--output-dir` (default `./offline_cartpole_run`):

- `episodes/`: the recorded episodes (inspect them with
  `python -m ray.rllib.offline.episodes info <output-dir>/episodes`),
- `checkpoint/`: the algorithm after the last iteration (`algo.save_to_path`),
- `checkpoint_best_by_ope/`: the algorithm after the iteration that the
  off-policy scoring chose (`--ope-updates 0`: not kept),
- `results.json`: the metrics of every iteration and a summary,
- `learning_curve.png`: loss and evaluation return per iteration (`--plot`,
  needs matplotlib: `pip install matplotlib`).

A later run into the same directory replaces these; a directory this example
did not create must be empty.

How to run this script
----------------------
`python train_on_external_episodes.py [--algo=bc] [--num-episodes=40]
[--iterations=10] [--num-gpus-per-learner=1] [--compression=zstd]
[--ope-updates=10000] [--ope-resample-fits=4] [--output-dir=DIR] [--plot]`

Results to expect
-----------------
With the defaults, on 2 CPUs, in one to two minutes before the off-policy
scoring (11 to 17 more minutes, below; `--ope-updates 0` skips it): 40
episodes in 4 files (the data's return is about 495) and a policy that
imitates the near-perfect controller. Evaluation returns vary with the
seed, most in the first iterations. Measured on the 2-core CI machine
(`--seed` 0, 1, 2):

- `--algo bc`: 497.4 and 491.4 after 10 iterations (seeds 0 and 1); after 4
  iterations 305.2, 500.0 and 332.8 (seeds 0, 1, 2).
- MARWIL (the default): 449.0 after 10 iterations, 302.2 after 4 (seed 0).

Scoring the 10 checkpoints off-policy takes longer than training: one FQE
fit of 10,000 updates each, and 4 refits on resampled episodes for the last
and for the best-scored one (`--ope-resample-fits`), 14 to 19 fits in all:
650 to 1,170 s with seeds 0 to 5 while other jobs shared the 2 cores.
FQE estimates the discounted return (gamma 0.99): every policy that balances
more than about 300 steps scores 97 to 99.7, so it separates poor iterations
from good ones but not good ones from each other, and it can be biased by
several points where the data (a near-perfect controller) does not show the
policy's mistakes. The best-scored checkpoint therefore replaces the last
only when its interval lies wholly above the last's.

Measured with seeds 0 to 5, each kept checkpoint then rolled out for 100
episodes: the intervals overlapped each time, so the job kept the last
(483.3, 497.7, 493.0, 496.9, 493.1 and 493.9). The best-scored checkpoints
were iterations 7, 8, 5, 4, 9 and 3. The rule was chosen after seeds 0 to
2; seeds 3 to 5 ran after it. Iteration 5 of seed 2 scored 99.4 [93.0,
105.8] against the last's 93.8 [88.5, 99.2] and returns 443.7; the last's
true discounted value is 99.2, so FQE was 5.4 low on it, a bias its refits
share. A paired test of the difference (+5.5 [+3.9, +7.2]) had chosen
iteration 5; keeping the best-scored without a test (the job before) kept
checkpoints that returned 425.6 on average against 452.1 for the last (5
evaluation episodes each).

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
    parser.add_argument(
        "--ope-resample-fits",
        type=int,
        default=4,
        help="FQE refits on resampled episodes of the last and the best-scored "
        "checkpoint: the best replaces the last only when its 95%% interval lies "
        "wholly above the last's (0: keep the best-scored, no comparison)",
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

        # The advantage normalizer follows the advantages: it starts from the
        # first train batch and moves at 0.05 per update.
        config = MARWILConfig().training(
            beta=1.0,
            moving_average_sqd_adv_norm_start=0.0,
            moving_average_sqd_adv_norm_update_rate=0.05,
        )
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


def fqe_estimate(path: str, episodes, args, gamma: float, resample_fits: int, desc):
    """Fitted Q evaluation of the greedy policy of the checkpoint at `path`,
    from `episodes` alone, with a bar over its FQE updates."""
    from ray.rllib.core.rl_module.rl_module import RLModule

    from rllib.offline.off_policy_estimation import FQEConfig, evaluate_module

    with tqdm(
        total=args.ope_updates * (1 + resample_fits),
        desc=f"      FQE {desc}",
        unit=" updates",
        leave=False,
        dynamic_ncols=True,
    ) as updates:
        (result,) = evaluate_module(
            RLModule.from_checkpoint(module_checkpoint(path)),
            episodes,
            gamma=gamma,
            estimators=["fqe"],
            # The greedy policy, as the evaluation EnvRunner runs it, and
            # CartPole's 500-step limit.
            deterministic=True,
            fqe_config=FQEConfig(
                num_updates=args.ope_updates, horizon=500, seed=args.seed
            ),
            fqe_resample_fits=resample_fits,
            seed=args.seed,
            on_fqe_update=updates.update,
        ).values()
    return result


def select_checkpoint(
    checkpoints: Dict[int, str], episodes, args, gamma: float
) -> Dict[str, Any]:
    """Scores every iteration's checkpoint off-policy and picks the one to keep.

    The best-scored iteration replaces the last only when its FQE interval
    lies wholly above the last's, both from `--ope-resample-fits` refits on
    resampled episodes (bootstrapped FQE). Otherwise the last is kept: OPE's
    error must not swap a policy for a worse one. The intervals miss a bias
    that every fit shares, so the test is the stricter non-overlap one, not
    a paired test of the difference.
    """
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # One core for FQE; Ray's processes share the rest.
    last = max(checkpoints)
    refits = args.ope_resample_fits
    estimates = {}
    try:
        for iteration, path in tqdm(
            sorted(checkpoints.items(), key=lambda item: item[0] != last),
            desc="[4/5] Scoring",
            unit="ckpt",
            dynamic_ncols=True,
        ):
            estimates[iteration] = fqe_estimate(
                path,
                episodes,
                args,
                gamma,
                refits if iteration == last else 0,
                f"iteration {iteration}",
            )
        best = max(estimates, key=lambda i: estimates[i].estimates["fqe"].value)
        selection = {"best_scored_iteration": best, "kept_iteration": best}
        if refits and best != last:
            tqdm.write(
                f"      iteration {best} scores best; refitting it {refits} times "
                "for an interval to compare with the last's ..."
            )
            estimates[best] = fqe_estimate(
                checkpoints[best],
                episodes,
                args,
                gamma,
                refits,
                f"iteration {best}, refits",
            )
            candidate = estimates[best].estimates["fqe"]
            if candidate.low <= estimates[last].estimates["fqe"].high:
                selection["kept_iteration"] = last
    finally:
        torch.set_num_threads(threads)
    selection["estimates"] = {
        iteration: {
            "fqe": result.estimates["fqe"].value,
            "fqe_ci_low": result.estimates["fqe"].low,
            "fqe_ci_high": result.estimates["fqe"].high,
        }
        for iteration, result in sorted(estimates.items())
    }
    return selection


def selection_report(ope: Dict[str, Any], gamma: float) -> str:
    """What the off-policy scoring kept, why, and how the environment judged it."""
    kept, last = ope["kept_iteration"], ope["last_iteration"]
    best = ope["best_scored_iteration"]
    scores = ope["estimates"]

    def fqe(iteration):
        s = scores[iteration]
        return f"{s['fqe']:.1f} [{s['fqe_ci_low']:.1f}, {s['fqe_ci_high']:.1f}]"

    def env_return(value):
        return "-" if value is None else f"{value:.1f}"

    if best == last:
        why = "the last iteration scores best"
    elif not ope["resample_fits"]:
        why = f"iteration {best} scores best (--ope-resample-fits 0: no comparison)"
    elif kept == best:
        why = (
            f"the best-scored, its interval wholly above the last's "
            f"({ope['resample_fits']} refits each)"
        )
    else:
        why = (
            f"iteration {best} scores best, FQE {fqe(best)}, but its interval "
            f"overlaps the last's ({ope['resample_fits']} refits each)"
        )
    lines = [
        "Off-policy selection (fitted Q evaluation from the recorded episodes "
        f"alone, discounted with gamma {gamma}; a policy that balances all 500 "
        f"steps scores {(1 - gamma**500) / (1 - gamma):.1f}):",
        f"  kept {BEST_CHECKPOINT_DIR}/: iteration {kept}, FQE {fqe(kept)}; {why}",
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
        ope = select_checkpoint(
            iteration_checkpoints, list(read_episodes(data_dir)), args, algo_gamma
        )
        kept = ope["kept_iteration"]
        best_dir = os.path.join(output_dir, BEST_CHECKPOINT_DIR)
        shutil.copytree(iteration_checkpoints[kept], best_dir)
        shutil.rmtree(os.path.join(output_dir, ITERATIONS_DIR))
        returns_by_iteration = {h["iteration"]: h["eval_return_mean"] for h in history}
        for entry in history:
            entry["fqe"] = ope["estimates"][entry["iteration"]]["fqe"]
        ope.update(
            kept_checkpoint_dir=best_dir,
            last_iteration=args.iterations,
            fqe_updates=args.ope_updates,
            resample_fits=args.ope_resample_fits,
            kept_eval_return_mean=returns_by_iteration[kept],
            last_eval_return_mean=returns_by_iteration[args.iterations],
            time_s=time.perf_counter() - start,
        )
        print(
            f"      scored in {ope['time_s']:.1f}s "
            f"({ope['time_s'] / len(ope['estimates']):.1f}s per checkpoint)"
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
