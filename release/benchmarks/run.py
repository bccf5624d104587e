"""Runs every release benchmark as fork and as upstream, alternately, and charts them.

Each benchmark runs in fresh subprocesses, one per side and repeat: upstream
with `RLLIB_FORK_DISABLE=1`, the fork without. Repeats alternate the order
(upstream first, then fork first, ...) so drift in the machine's load falls on
both sides. Every subprocess has a timeout. The runner writes:

- `results.json`: per benchmark and metric, every sample, the medians and the
  ratio fork / upstream (metrics listed in a benchmark's `lower_is_better`
  are times; every other metric is a rate);
- `throughput.png`: writer and GAE kernel throughput, fork vs upstream;
- `prelearner.png`: train batches from recorded episodes, transitions/s:
  upstream's prelearner, the fork's, and the fork's in-memory sampler;
- `training_throughput.png`: env steps trained/s per grid cell, fork vs
  upstream, with the fork's Learner-only rate (the limit) as a marker;
- `time_to_first_update.png`: seconds from `build_algo()` to the end of the
  first `train()` per grid cell (the build part shaded);
- `learning_curves.png`: MARWIL evaluation return and value-function explained
  variance per iteration, fork vs upstream (medians over repeats).

Benchmarks:

- `writer`: `EpisodeWriter` vs the hand-rolled msgpack + Ray Data snippet
  (upstream has no writer: its side is the snippet users write today);
- `gae_kernel`: `compute_value_targets` timesteps/s (numpy), 3 batch sizes;
- `prelearner`: OfflinePreLearner transitions/s (CartPole and Dict
  observations, BC and MARWIL pipelines, both payload formats), called
  directly on one core, and the fork's in-memory sampler on the same batches;
- `training_bc`, `training_marwil`: env steps trained/s end to end, time to
  the first update and the fork's Learner-only rate, over a grid of recorded
  episodes (400, 4,000) x payload format (`per_step`, `numpy`) x
  `num_learners` (0, 1) (`--episodes`, `--payloads`, `--num-learners` pick a
  subset);
- `marwil_vs_bc`: BC and MARWIL on CartPole data with 50% random actions,
  3 seeds: stochastic evaluation return (learning curves), MARWIL / BC, and
  MARWIL's mean V against the recorded return-to-go.

    python release/benchmarks/run.py                 # full: 3 repeats
    python release/benchmarks/run.py --quick         # CI smoke, no timing asserts
    python release/benchmarks/run.py --only training_marwil --episodes 400
    python release/benchmarks/run.py --num-gpus-per-learner 1
"""

import argparse
import datetime
import itertools
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

sys.path.insert(0, HERE)
import bench_training_throughput as training  # noqa: E402

#: Every cell of the training grid: (episodes, payload, num_learners).
TRAINING_GRID = list(
    itertools.product(training.EPISODES, training.PAYLOADS, training.NUM_LEARNERS)
)

# Sizes per mode. Quick mode only checks that everything runs end to end.
SIZES = {
    "full": {
        "writer": ["--num-episodes", "200"],
        "gae_kernel": ["--repeats", "9"],
        "prelearner": [],
        "training": [],  # Its default timed iterations.
        "training_cells": {"bc": TRAINING_GRID, "marwil": TRAINING_GRID},
        "marwil_vs_bc": ["--value-share", "--fork-separate-vf"],
    },
    "quick": {
        "writer": ["--num-episodes", "10", "--max-steps", "100"],
        "gae_kernel": ["--repeats", "3"],
        "prelearner": [
            "--pool-episodes", "8", "--calls", "2", "--warmup", "1",
            "--batch-size", "256", "--episodes-per-call", "4",
        ],
        "training": [
            "--iterations", "1", "--updates-per-iteration", "3",
            "--batch-size", "256",
        ],
        # One cell per algorithm; between them both formats and both Learner
        # set-ups run.
        "training_cells": {
            "bc": [(8, "per_step", 0)],
            "marwil": [(8, "numpy", 1)],
        },
        "marwil_vs_bc": [
            "--seeds", "0", "--iterations", "1", "--eval-every", "1",
            "--eval-episodes", "1", "--episodes", "8",
            "--updates-per-iteration", "2", "--batch-size", "128",
        ],
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

    def add(metric, side, value):
        metrics.setdefault(metric, {s: [] for s in SIDES})[side].append(value)

    for repeat in range(args.repeats):
        sides = {}
        for side in order(repeat):
            cmd = [os.path.join(HERE, "bench_prelearner.py"), "--child"]
            sides[side] = run_child(cmd + sizes["prelearner"], side, args.timeout)
            for key, figures in sides[side]["results"].items():
                add(f"transitions_per_s_{key}", side, figures["transitions_per_s"])
        # The in-memory sampler replaces the prelearner: compared with
        # upstream's prelearner on the same calls (per payload format).
        for key, figures in sides["upstream"]["results"].items():
            fork = sides["fork"]["in_memory"][f"{figures['dataset']}_{figures['algo']}"]
            metric = f"in_memory_transitions_per_s_{key}"
            add(metric, "upstream", figures["transitions_per_s"])
            add(metric, "fork", fork["transitions_per_s"])
    return {
        "description": "train batches from recorded episodes, transitions "
        "(sampled items) per second on one core, by dataset, pipeline and "
        "payload format: `transitions_per_s_*`: the OfflinePreLearner called "
        "directly, 32 recorded episodes in, one train batch of 1024 out per "
        "call; `in_memory_transitions_per_s_*`: the fork's in-memory sampler "
        "(decoded once; sample + build a batch of 1024) vs upstream's "
        "prelearner on the same calls",
        "metrics": metrics,
    }


def training_data(tmp, sizes):
    """Writes the training grid's datasets once; `{(episodes, payload): dir}`."""
    root = os.path.join(tmp, "training")
    cells = [c for cells in sizes["training_cells"].values() for c in cells]
    if not os.path.isdir(root):
        training.write_data(
            root, sorted({c[0] for c in cells}), sorted({c[1] for c in cells})
        )
    return {
        (episodes, payload): os.path.join(root, f"episodes-{episodes}-{payload}")
        for episodes, payload, _ in cells
    }


def cell_name(episodes, payload, num_learners) -> str:
    return f"{episodes}ep_{payload}_nl{num_learners}"


def bench_training(algo):
    def bench(args, sizes, tmp):
        dirs = training_data(tmp, sizes)
        options = sizes["training"] + [
            "--num-gpus-per-learner", str(args.num_gpus_per_learner),
        ]  # fmt: skip
        metrics, modes, errors = {}, {}, []

        def add(metric, side, value):
            metrics.setdefault(metric, {s: [] for s in SIDES})[side].append(value)

        for repeat in range(args.repeats):
            for episodes, payload, num_learners in sizes["training_cells"][algo]:
                cell = {"algo": algo, "num_learners": num_learners}
                cmd = training.child_command(cell, dirs[(episodes, payload)], options)
                name = cell_name(episodes, payload, num_learners)
                for side in order(repeat):
                    try:
                        res = run_child(cmd, side, args.timeout)
                    except (RuntimeError, subprocess.TimeoutExpired) as error:
                        if args.quick:
                            raise
                        errors.append(f"{name} {side}: {str(error)[-2000:]}")
                        print(f"  {side:<8} {name} FAILED", flush=True)
                        continue
                    add(f"env_steps_trained_per_s_{name}", side, res["env_steps_per_s"])
                    add(
                        f"time_to_first_update_s_{name}",
                        side,
                        res["time_to_first_update_s"],
                    )
                    add(f"build_s_{name}", side, res["build_seconds"])
                    if side == "fork":
                        modes.setdefault(name, []).append(res["mode"])
                        if "learner_only_env_steps_per_s" in res:
                            add(
                                f"learner_only_env_steps_per_s_{name}",
                                side,
                                res["learner_only_env_steps_per_s"],
                            )
                            add(
                                f"e2e_over_learner_only_{name}",
                                side,
                                res["ratio_to_learner_only"],
                            )
        return {
            "description": f"{algo.upper()}: env steps trained per second after "
            "the first iteration, time to the first update (build_algo() to the "
            "end of the first train()) and the build alone, per cell "
            "(<episodes>ep_<payload>_nl<num_learners>); fork only: the "
            "Learner-only rate on train batches already in memory and end to "
            "end / Learner-only",
            "metrics": metrics,
            "lower_is_better": sorted(
                m for m in metrics if m.startswith(("time_to_first", "build_s"))
            ),
            "fork_modes": modes,
            "errors": errors,
        }

    return bench


def bench_marwil_vs_bc(args, sizes, tmp):
    """Both sides and algorithms run inside `bench_marwil_vs_bc.py`."""
    path = os.path.join(tmp, "marwil_vs_bc.json")
    cmd = [os.path.join(HERE, "bench_marwil_vs_bc.py"), "--json", path]
    res = run_child(cmd + sizes["marwil_vs_bc"], "fork", args.timeout, path)
    metrics = {}
    for run in res["runs"]:
        variant = "_separate_vf" if run.get("separate_vf") else ""
        key = f"{run['algo']}{variant}_final_eval_return"
        metrics.setdefault(key, {s: [] for s in SIDES})[run["side"]].append(
            run["final_eval_return"]
        )
        if run["algo"] == "marwil" and not variant:
            ratio = run["mean_value_terminated"] / run["mean_return_to_go_terminated"]
            metrics.setdefault(
                "marwil_mean_value_over_return_to_go", {s: [] for s in SIDES}
            )[run["side"]].append(ratio)
    for side in SIDES:
        ratio = res["summary"].get(f"{side}_marwil_over_bc")
        if ratio is not None:
            metrics.setdefault("marwil_over_bc", {s: [] for s in SIDES})[side].append(
                ratio
            )
    curves = {}
    for run in res["runs"]:
        if run.get("separate_vf"):
            continue
        curves.setdefault(run["side"], {}).setdefault(run["algo"], []).append(
            run["curve"]
        )
    return {
        "description": "BC vs MARWIL (beta=1) on CartPole episodes with 50% "
        "random actions, same data and updates: stochastic-policy evaluation "
        "return, and MARWIL's mean V over terminated episodes' states relative "
        "to their mean discounted return-to-go",
        "metrics": metrics,
        "curves": curves,
        "summary": res["summary"],
    }


BENCHMARKS = {
    "writer": bench_writer,
    "gae_kernel": bench_gae_kernel,
    "prelearner": bench_prelearner,
    "training_bc": bench_training("bc"),
    "training_marwil": bench_training("marwil"),
    "marwil_vs_bc": bench_marwil_vs_bc,
}
SIDE_COLORS = {"upstream": "tab:gray", "fork": "tab:blue"}


def _fmt(value, spec=",.3g"):
    return "-" if value is None else format(value, spec)


def summarize(result):
    """Adds medians (per side with samples) and the ratio fork / upstream."""
    for samples in result["metrics"].values():
        medians = {
            side: statistics.median(samples[side]) if samples.get(side) else None
            for side in SIDES
        }
        samples["median"] = medians
        up, fk = medians["upstream"], medians["fork"]
        samples["ratio_fork_over_upstream"] = fk / up if up and fk else None


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _save(fig, out_dir, name):
    path = os.path.join(out_dir, name)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    _pyplot().close(fig)
    return path


def plot_throughput(results, out_dir):
    """Writer and GAE kernel: one panel per metric, median bars and samples."""
    bars = []
    for name in ("writer", "gae_kernel"):
        for metric, samples in results.get(name, {}).get("metrics", {}).items():
            label = (
                "writer\n(upstream: snippet)"
                if name == "writer"
                else f"gae {metric.split('_')[-1]}"
            )
            bars.append((label, metric, samples))
    if not bars:
        return None
    plt = _pyplot()
    fig, axes = plt.subplots(1, len(bars), figsize=(2.6 * len(bars), 3.8))
    axes = axes if len(bars) > 1 else [axes]
    for ax, (label, metric, samples) in zip(axes, bars):
        medians = [samples["median"][s] or 0 for s in SIDES]
        ax.bar(SIDES, medians, color=[SIDE_COLORS[s] for s in SIDES])
        for i, side in enumerate(SIDES):
            ax.scatter([i] * len(samples[side]), samples[side], color="k", s=8)
        ratio = samples["ratio_fork_over_upstream"]
        ax.set_title(f"{label}\n{ratio:.2f}x" if ratio else label, fontsize=9)
        ax.set_ylabel(metric.replace("_", " "), fontsize=8)
        ax.tick_params(labelsize=8)
    fig.suptitle("Throughput, fork vs upstream (median; dots: repeats)")
    return _save(fig, out_dir, "throughput.png")


def _grouped_bars(ax, labels, series, log=False):
    """Bars per label, one per series `(name, values, color)`; values may be None."""
    width = 0.8 / len(series)
    for k, (name, values, color) in enumerate(series):
        xs = [i + (k - (len(series) - 1) / 2) * width for i in range(len(labels))]
        ax.bar(xs, [v or 0 for v in values], width, label=name, color=color)
    ax.set_xticks(range(len(labels)))
    ax.set_xticklabels(labels, rotation=30, ha="right", fontsize=8)
    if log:
        ax.set_yscale("log")
    ax.tick_params(axis="y", labelsize=8)


def plot_prelearner(results, out_dir):
    """Transitions/s: upstream's prelearner, the fork's, the fork's sampler."""
    metrics = results.get("prelearner", {}).get("metrics")
    if not metrics:
        return None
    keys = [m[len("transitions_per_s_") :] for m in metrics if m.startswith("trans")]
    medians = {m: s["median"] for m, s in metrics.items()}
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(max(6, 1.2 * len(keys)), 4.2))
    _grouped_bars(
        ax,
        keys,
        [
            ("upstream prelearner",
             [medians[f"transitions_per_s_{k}"]["upstream"] for k in keys],
             SIDE_COLORS["upstream"]),
            ("fork prelearner (streaming)",
             [medians[f"transitions_per_s_{k}"]["fork"] for k in keys],
             "tab:cyan"),
            ("fork in-memory sampler",
             [medians.get(f"in_memory_transitions_per_s_{k}", {}).get("fork")
              for k in keys],
             SIDE_COLORS["fork"]),
        ],
        log=True,
    )  # fmt: skip
    ax.set_ylabel("transitions/s (log)", fontsize=8)
    ax.legend(fontsize=8)
    ax.set_title("Train batches from recorded episodes, one core (median)", fontsize=10)
    return _save(fig, out_dir, "prelearner.png")


def _training_panels(results, metric_prefix):
    """`(algo, cells, medians per metric)` for each training benchmark run."""
    panels = []
    for name in ("training_bc", "training_marwil"):
        metrics = results.get(name, {}).get("metrics")
        if not metrics:
            continue
        cells = [
            m[len(metric_prefix) :] for m in metrics if m.startswith(metric_prefix)
        ]
        panels.append((name.split("_", 1)[1].upper(), cells, metrics))
    return panels


def _panel_figure(panels, panel_height):
    """One row of axes per training panel, wide enough for its cells."""
    width = max(len(cells) for _, cells, _ in panels)
    return _pyplot().subplots(
        len(panels), 1, figsize=(max(6, 0.9 * width + 2), panel_height * len(panels)),
        squeeze=False,
    )  # fmt: skip


def plot_training(results, out_dir):
    """Env steps trained/s per cell; the fork's Learner-only rate as a marker."""
    prefix = "env_steps_trained_per_s_"
    panels = _training_panels(results, prefix)
    if not panels:
        return None
    fig, axes = _panel_figure(panels, panel_height=3.8)
    for ax, (algo, cells, metrics) in zip(axes[:, 0], panels):
        medians = [metrics[prefix + c]["median"] for c in cells]
        _grouped_bars(
            ax,
            cells,
            [(side, [m[side] for m in medians], SIDE_COLORS[side]) for side in SIDES],
            log=True,
        )
        limit = [
            metrics.get(f"learner_only_env_steps_per_s_{c}", {}).get("median", {})
            for c in cells
        ]
        xs = [i + 0.2 for i, m in enumerate(limit) if m.get("fork")]
        ys = [m["fork"] for m in limit if m.get("fork")]
        ax.scatter(xs, ys, marker="_", s=400, color="k", zorder=3,
                   label="fork Learner-only (limit)")  # fmt: skip
        for i, c in enumerate(cells):
            ratio = metrics[prefix + c]["ratio_fork_over_upstream"]
            if ratio:
                top = max(v for v in medians[i].values() if v)
                ax.annotate(f"{ratio:.1f}x", (i, top), ha="center", va="bottom",
                            fontsize=7)  # fmt: skip
        ax.set_ylabel("env steps trained/s (log)", fontsize=8)
        ax.set_title(f"{algo}: after the first iteration (median)", fontsize=10)
        ax.legend(fontsize=8)
    return _save(fig, out_dir, "training_throughput.png")


def plot_first_update(results, out_dir):
    """Seconds to the first update per cell, with the build part shaded."""
    prefix = "time_to_first_update_s_"
    panels = _training_panels(results, prefix)
    if not panels:
        return None
    fig, axes = _panel_figure(panels, panel_height=3.6)
    for ax, (algo, cells, metrics) in zip(axes[:, 0], panels):
        series = []
        for side in SIDES:
            series.append(
                (side, [metrics[prefix + c]["median"][side] for c in cells],
                 SIDE_COLORS[side])
            )  # fmt: skip
        _grouped_bars(ax, cells, series)
        for k, side in enumerate(SIDES):
            builds = [
                metrics.get(f"build_s_{c}", {}).get("median", {}).get(side)
                for c in cells
            ]
            xs = [i + (k - 0.5) * 0.4 for i in range(len(cells))]
            ax.bar(xs, [b or 0 for b in builds], 0.4, color="none", hatch="//",
                   edgecolor="k", linewidth=0,
                   label="build_algo()" if k == 0 else None)  # fmt: skip
        ax.set_ylabel("seconds (lower is better)", fontsize=8)
        ax.set_title(
            f"{algo}: time to the first update (build_algo() + first train())",
            fontsize=10,
        )
        ax.legend(fontsize=8)
    return _save(fig, out_dir, "time_to_first_update.png")


def plot_learning_curves(results, out_dir):
    """Mean stochastic evaluation return over seeds, per side and algorithm."""
    curves = results.get("marwil_vs_bc", {}).get("curves")
    if not curves:
        return None
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7, 4))
    styles = {"bc": "--", "marwil": "-"}
    for side, by_algo in curves.items():
        for algo, runs in by_algo.items():
            updates = [p["updates"] for p in runs[0]]
            means = [
                statistics.mean(run[i]["eval_return"] for run in runs)
                for i in range(len(updates))
            ]
            label = f"{side} {algo.upper()}"
            ax.plot(updates, means, styles[algo], marker="o",
                    color=SIDE_COLORS[side], label=label)  # fmt: skip
    ax.set_xlabel("Learner updates")
    ax.set_ylabel("stochastic evaluation return (mean over seeds)")
    ax.set_title("BC vs MARWIL, CartPole data with 50% random actions")
    ax.legend(fontsize=8)
    return _save(fig, out_dir, "learning_curves.png")


#: Chart functions: each takes (results, out_dir) and returns the path it
#: wrote, or None when its benchmarks did not run.
CHARTS = [
    plot_throughput,
    plot_prelearner,
    plot_training,
    plot_first_update,
    plot_learning_curves,
]


def plot(results, out_dir):
    """Writes every chart whose benchmarks ran; returns their paths."""
    return [path for chart in CHARTS if (path := chart(results, out_dir))]


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="CI smoke run.")
    parser.add_argument("--repeats", type=int, default=None, help="Default 3 (1).")
    parser.add_argument(
        "--only", nargs="+", choices=sorted(BENCHMARKS), default=sorted(BENCHMARKS)
    )
    parser.add_argument("--num-gpus-per-learner", type=float, default=0)
    parser.add_argument("--timeout", type=float, default=1200, help="Per process.")
    grid = parser.add_argument_group(
        "training grid", "Subsets of the training benchmarks' grid (full mode)."
    )
    grid.add_argument(
        "--episodes", nargs="+", type=int, default=list(training.EPISODES)
    )
    grid.add_argument(
        "--payloads", nargs="+", choices=training.PAYLOADS,
        default=list(training.PAYLOADS),
    )  # fmt: skip
    grid.add_argument(
        "--num-learners", nargs="+", type=int, choices=training.NUM_LEARNERS,
        default=list(training.NUM_LEARNERS),
    )  # fmt: skip
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
    sizes = dict(SIZES[mode])
    if not args.quick:
        sizes["training_cells"] = {
            algo: [
                (e, p, n)
                for e, p, n in cells
                if e in args.episodes and p in args.payloads and n in args.num_learners
            ]
            for algo, cells in sizes["training_cells"].items()
        }
    now = datetime.datetime.now(datetime.timezone.utc)
    out_dir = args.out_dir or os.path.join(
        REPO, "release", "results", now.strftime("%Y%m%dT%H%M%SZ") + f"-{mode}"
    )
    os.makedirs(out_dir, exist_ok=True)
    start = time.perf_counter()
    results = {}
    with tempfile.TemporaryDirectory(prefix="release-bench-") as tmp:
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
                    f"  {metric}: upstream {_fmt(med['upstream'])}, fork "
                    f"{_fmt(med['fork'])}, ratio {_fmt(ratio, '.2f')}",
                    flush=True,
                )
            if "skipped" in results[name]:
                print(f"  skipped: {results[name]['skipped']}")
            for error in results[name].get("errors", []):
                print(f"  failed: {error}")
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
