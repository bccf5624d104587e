"""Runs every release benchmark as fork and as upstream, alternately, and charts them.

Each benchmark runs in fresh subprocesses, one per side and repeat: upstream
with `RLLIB_FORK_DISABLE=1`, the fork without. Repeats alternate the order
(upstream first, then fork first, ...) so drift in the machine's load falls on
both sides. Every subprocess has a timeout. The runner writes:

- `results.json`: per benchmark and metric, every sample, the medians and the
  ratio fork / upstream (higher is better for every metric here);
- `throughput.png`: throughput bars, fork vs upstream;
- `learning_curves.png`: MARWIL evaluation return and value-function explained
  variance per iteration, fork vs upstream (medians over repeats).

Benchmarks:

- `writer`: `EpisodeWriter` vs the hand-rolled msgpack + Ray Data snippet
  (upstream has no writer: its side is the snippet users write today);
- `gae_kernel`: `compute_value_targets` timesteps/s (numpy), 3 batch sizes;
- `prelearner`: OfflinePreLearner transitions/s (CartPole and Dict
  observations, BC and MARWIL pipelines), called directly on one core;
- `training_bc`, `training_marwil`: env steps trained/s end to end,
  `num_learners=0`;
- `marwil_quality`: value-function explained variance and greedy evaluation
  return per iteration.

    python release/benchmarks/run.py                 # full: 3 repeats
    python release/benchmarks/run.py --quick         # CI smoke, no timing asserts
    python release/benchmarks/run.py --num-gpus-per-learner 1
"""

import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
SIDES = ("upstream", "fork")

# Sizes per mode. Quick mode only checks that everything runs end to end.
SIZES = {
    "full": {
        "writer": ["--num-episodes", "200"],
        "gae_kernel": ["--repeats", "9"],
        "prelearner": [],
        "training": [
            "--iterations", "3", "--updates-per-iteration", "20", "--episodes", "40",
        ],
        "marwil_quality": [
            "--iterations", "8", "--report-every", "1", "--episodes", "40",
            "--updates-per-iteration", "20", "--curve-eval-episodes", "2",
        ],
        "episodes": 40,
    },
    "quick": {
        "writer": ["--num-episodes", "10", "--max-steps", "100"],
        "gae_kernel": ["--repeats", "3"],
        "prelearner": [
            "--pool-episodes", "8", "--calls", "2", "--warmup", "1",
            "--batch-size", "256", "--episodes-per-call", "4",
        ],
        "training": [
            "--iterations", "1", "--updates-per-iteration", "3", "--episodes", "8",
            "--batch-size", "256",
        ],
        "marwil_quality": [
            "--iterations", "2", "--report-every", "1", "--episodes", "8",
            "--updates-per-iteration", "3", "--batch-size", "256",
            "--curve-eval-episodes", "1", "--eval-episodes", "1",
        ],
        "episodes": 8,
    },
}  # fmt: skip


def run_child(cmd, side, timeout, json_path=None):
    """Runs one benchmark process as `side`; returns its JSON result."""
    env = dict(os.environ, RLLIB_FORK_DISABLE="1" if side == "upstream" else "0")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (HERE, env.get("PYTHONPATH")) if p)
    start = time.perf_counter()
    out = subprocess.run(
        [sys.executable] + cmd,
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    seconds = time.perf_counter() - start
    if out.returncode != 0:
        raise RuntimeError(
            f"`{' '.join(cmd)}` as {side} exited with {out.returncode}:\n"
            f"{out.stderr[-4000:]}"
        )
    if json_path is not None:
        with open(json_path) as f:
            result = json.load(f)
    else:
        result = json.loads(out.stdout.strip().splitlines()[-1])
    print(f"  {side:<8} {os.path.basename(cmd[0])} ok in {seconds:.0f}s", flush=True)
    return result


def order(repeat):
    """Alternates which side runs first."""
    return SIDES if repeat % 2 == 0 else SIDES[::-1]


def bench_writer(args, sizes, tmp):
    """Writer vs snippet: both measured in one fork process per repeat."""
    samples = {"fork": [], "upstream": []}
    for repeat in range(args.repeats):
        path = os.path.join(tmp, f"writer-{repeat}.json")
        cmd = [os.path.join(HERE, "bench_episode_writer.py"), "--json", path]
        res = run_child(cmd + sizes["writer"], "fork", args.timeout, path)
        samples["fork"].append(res["writers"]["fork EpisodeWriter"]["episodes_per_s"])
        samples["upstream"].append(
            res["writers"]["hand-rolled snippet"]["episodes_per_s"]
        )
    return {
        "description": "episodes written per second; upstream side = the "
        "hand-rolled msgpack + ray.data.write_parquet snippet (upstream has no "
        "writer API)",
        "metrics": {"episodes_per_s": samples},
    }


def bench_gae_kernel(args, sizes, tmp):
    metrics = {}
    for repeat in range(args.repeats):
        for side in order(repeat):
            cmd = [os.path.join(HERE, "bench_gae_kernel.py"), "--child"]
            res = run_child(cmd + sizes["gae_kernel"], side, args.timeout)
            for n, rate in res["numpy"].items():
                key = f"timesteps_per_s_numpy_{n}"
                metrics.setdefault(key, {s: [] for s in SIDES})[side].append(rate)
    return {
        "description": "compute_value_targets timesteps/s on random batches, "
        "numpy inputs, by batch size",
        "metrics": metrics,
    }


def bench_prelearner(args, sizes, tmp):
    metrics = {}
    for repeat in range(args.repeats):
        for side in order(repeat):
            cmd = [os.path.join(HERE, "bench_prelearner.py"), "--child"]
            res = run_child(cmd + sizes["prelearner"], side, args.timeout)
            for key, figures in res["results"].items():
                metric = f"transitions_per_s_{key}"
                samples = metrics.setdefault(metric, {s: [] for s in SIDES})
                samples[side].append(figures["transitions_per_s"])
    return {
        "description": "OfflinePreLearner transitions (sampled items) per "
        "second, called directly on one core: 32 recorded episodes in, one "
        "train batch of 1024 out per call, by dataset and pipeline",
        "metrics": metrics,
    }


def bench_training(algo):
    def bench(args, sizes, tmp):
        data = os.path.join(tmp, "episodes")
        samples = {s: [] for s in SIDES}
        for repeat in range(args.repeats):
            for side in order(repeat):
                cmd = [
                    os.path.join(HERE, "bench_training_throughput.py"),
                    "--child",
                    "--data",
                    data,
                    "--algo",
                    algo,
                    "--num-gpus-per-learner",
                    str(args.num_gpus_per_learner),
                ]
                res = run_child(cmd + sizes["training"], side, args.timeout)
                samples[side].append(res["env_steps_per_s"])
        return {
            "description": f"{algo.upper()} env steps trained per second, "
            "num_learners=0, first iteration not timed",
            "metrics": {"env_steps_trained_per_s": samples},
        }

    return bench


def bench_marwil_quality(args, sizes, tmp):
    data = os.path.join(tmp, "episodes")
    curves = {s: [] for s in SIDES}
    final = {
        "eval_return": {s: [] for s in SIDES},
        "final_explained_variance": {s: [] for s in SIDES},
    }
    for repeat in range(args.repeats):
        for side in order(repeat):
            cmd = [
                os.path.join(HERE, "bench_marwil_value_quality.py"),
                "--child",
                "--data",
                data,
                "--separate-vf",
            ]
            res = run_child(cmd + sizes["marwil_quality"], side, args.timeout)
            curves[side].append(res["curve"])
            final["eval_return"][side].append(res["eval_return"])
            final["final_explained_variance"][side].append(
                res["curve"][-1]["explained_variance"]
            )
    median_curves = {}
    for side in SIDES:
        points = []
        for per_iteration in zip(*curves[side]):
            point = {"iteration": per_iteration[0]["iteration"]}
            for key in ("explained_variance", "eval_return", "mean_value"):
                point[key] = statistics.median(p[key] for p in per_iteration)
            points.append(point)
        median_curves[side] = points
    return {
        "description": "MARWIL (beta=1, vf_share_layers=False on both sides): "
        "explained variance of V(s) vs discounted return-to-go of the data, and "
        "greedy evaluation return",
        "metrics": final,
        "curves": median_curves,
        "all_curves": curves,
    }


BENCHMARKS = {
    "writer": bench_writer,
    "gae_kernel": bench_gae_kernel,
    "prelearner": bench_prelearner,
    "training_bc": bench_training("bc"),
    "training_marwil": bench_training("marwil"),
    "marwil_quality": bench_marwil_quality,
}
# Metrics charted as throughput bars (higher is better).
THROUGHPUT = {
    "writer": "episodes_per_s",
    "training_bc": "env_steps_trained_per_s",
    "training_marwil": "env_steps_trained_per_s",
}


def summarize(result):
    for samples in result["metrics"].values():
        up = statistics.median(samples["upstream"])
        fk = statistics.median(samples["fork"])
        samples["median"] = {"upstream": up, "fork": fk}
        samples["ratio_fork_over_upstream"] = fk / up if up else None


def plot(results, out_dir):
    """Writes `throughput.png` and `learning_curves.png`; returns their paths."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    paths = []
    bars = []
    for name, result in results.items():
        for metric, samples in result.get("metrics", {}).items():
            if name in ("gae_kernel", "prelearner") or THROUGHPUT.get(name) == metric:
                label = {
                    "gae_kernel": f"gae {metric.split('_')[-1]}",
                    "prelearner": "prelearner\n" + metric.split("per_s_")[-1],
                    "writer": "writer\n(upstream: snippet)",
                }.get(name, name)
                bars.append((label, metric, samples))
    if bars:
        fig, axes = plt.subplots(1, len(bars), figsize=(2.6 * len(bars), 3.8))
        axes = axes if len(bars) > 1 else [axes]
        for ax, (label, metric, samples) in zip(axes, bars):
            medians = [samples["median"][s] for s in SIDES]
            ax.bar(SIDES, medians, color=["tab:gray", "tab:blue"])
            for i, side in enumerate(SIDES):
                ax.scatter([i] * len(samples[side]), samples[side], color="k", s=8)
            ratio = samples["ratio_fork_over_upstream"]
            ax.set_title(f"{label}\n{ratio:.2f}x" if ratio else label, fontsize=9)
            ax.set_ylabel(metric.replace("_", " "), fontsize=8)
            ax.tick_params(labelsize=8)
        fig.suptitle("Throughput, fork vs upstream (median; dots: repeats)")
        fig.tight_layout()
        path = os.path.join(out_dir, "throughput.png")
        fig.savefig(path, dpi=110)
        plt.close(fig)
        paths.append(path)

    curves = results.get("marwil_quality", {}).get("curves")
    if curves:
        fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
        for side, color in zip(SIDES, ("tab:gray", "tab:blue")):
            its = [p["iteration"] for p in curves[side]]
            axes[0].plot(its, [p["eval_return"] for p in curves[side]], "o-",
                         color=color, label=side)  # fmt: skip
            axes[1].plot(its, [p["explained_variance"] for p in curves[side]],
                         "o-", color=color, label=side)  # fmt: skip
        axes[0].set_title("MARWIL greedy evaluation return")
        axes[1].set_title("MARWIL value-function explained variance")
        for ax in axes:
            ax.set_xlabel("training iteration")
            ax.legend()
        fig.tight_layout()
        path = os.path.join(out_dir, "learning_curves.png")
        fig.savefig(path, dpi=110)
        plt.close(fig)
        paths.append(path)
    return paths


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="CI smoke run.")
    parser.add_argument("--repeats", type=int, default=None, help="Default 3 (1).")
    parser.add_argument(
        "--only", nargs="+", choices=sorted(BENCHMARKS), default=sorted(BENCHMARKS)
    )
    parser.add_argument("--num-gpus-per-learner", type=float, default=0)
    parser.add_argument("--timeout", type=float, default=1200, help="Per process.")
    parser.add_argument(
        "--out-dir",
        default=None,
        help="Default: release/results/<UTC timestamp>[-quick].",
    )
    args = parser.parse_args(argv)
    if args.repeats is None:
        args.repeats = 1 if args.quick else 3
    return args


def main(argv=None) -> dict:
    args = parse_args(argv)
    mode = "quick" if args.quick else "full"
    sizes = SIZES[mode]
    now = datetime.datetime.now(datetime.timezone.utc)
    out_dir = args.out_dir or os.path.join(
        REPO, "release", "results", now.strftime("%Y%m%dT%H%M%SZ") + f"-{mode}"
    )
    os.makedirs(out_dir, exist_ok=True)
    sys.path.insert(0, HERE)
    from bench_marwil_value_quality import record_episodes, write_hand_rolled

    start = time.perf_counter()
    results = {}
    with tempfile.TemporaryDirectory(prefix="release-bench-") as tmp:
        # Same hand-rolled episode files for both sides (upstream reads them).
        write_hand_rolled(
            record_episodes(sizes["episodes"], epsilon=0.1, seed=0),
            os.path.join(tmp, "episodes"),
        )
        for name in BENCHMARKS:
            if name not in args.only:
                continue
            print(f"[{name}]", flush=True)
            bench_start = time.perf_counter()
            results[name] = BENCHMARKS[name](args, sizes, tmp)
            summarize(results[name])
            results[name]["seconds"] = time.perf_counter() - bench_start
            for metric, samples in results[name]["metrics"].items():
                med = samples["median"]
                ratio = samples["ratio_fork_over_upstream"]
                print(
                    f"  {metric}: upstream {med['upstream']:,.3g}, fork "
                    f"{med['fork']:,.3g}, ratio {ratio:.2f}",
                    flush=True,
                )
            if "skipped" in results[name]:
                print(f"  skipped: {results[name]['skipped']}")
    report = {
        "date_utc": now.isoformat(timespec="seconds"),
        "mode": mode,
        "repeats": args.repeats,
        "num_gpus_per_learner": args.num_gpus_per_learner,
        "machine": {
            "cpus": os.cpu_count(),
            "platform": platform.platform(),
            "python": platform.python_version(),
        },
        "seconds": time.perf_counter() - start,
        "benchmarks": results,
    }
    report["charts"] = plot(results, out_dir)
    path = os.path.join(out_dir, "results.json")
    with open(path, "w") as f:
        json.dump(report, f, indent=2)
    print(f"Wrote {path} and {', '.join(report['charts'])} in {report['seconds']:.0f}s")
    return report


if __name__ == "__main__":
    main()
