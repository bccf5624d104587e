"""The main job runs end to end, saves a checkpoint that restores, and plots."""

import json
import math
import os
import re
import sys

import numpy as np
import pytest

from rllib.examples.offline_rl import train_on_external_episodes as example

ARGS = [
    "--algo=bc",
    "--num-episodes=3",
    "--iterations=2",
    "--updates-per-iteration=2",
    "--eval-episodes=1",
    "--ope-updates=200",
    "--ope-resample-fits=2",
]


@pytest.fixture(scope="module")
def run(ray_cluster, tmp_path_factory):
    """One short run of the main job: `(argv, summary, stdout, stderr)`."""
    import contextlib
    import io

    argv = ARGS + [f"--output-dir={tmp_path_factory.mktemp('job') / 'run'}", "--plot"]
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        summary = example.main(argv)
    return argv, summary, out.getvalue(), err.getvalue()


def _checkpointed_module(checkpoint):
    from ray.rllib.core.rl_module.rl_module import RLModule

    return RLModule.from_checkpoint(example.module_checkpoint(checkpoint))


@pytest.mark.timeout(300)
def test_main_job_reports_and_writes_its_results(run):
    _, summary, out, err = run
    # Set-up is announced, training has a progress bar, restoring is explained.
    steps = ("[1/5] Recording", "[2/5] Writing", "[3/5] Building", "[4/5] Scoring")
    for step in (*steps, "[5/5] Saving"):
        assert step in out, step
    assert "Training BC: 100%" in err and "eval_return=" in err
    # Progress while scoring: over the checkpoints, and FQE's updates in each.
    assert "[4/5] Scoring: 100%" in err and "FQE iteration 2" in err
    assert example.restore_instructions(summary["checkpoint_dir"]) in out

    output_dir = summary["output_dir"]
    assert summary["data_dir"] == os.path.join(output_dir, example.EPISODES_DIR)
    assert summary["episodes_written"] == 3
    with open(os.path.join(output_dir, example.RESULTS_FILE)) as f:
        results = json.load(f)
    assert [r["iteration"] for r in results["iterations"]] == [1, 2]
    assert all(math.isfinite(r["loss"]) for r in results["iterations"])
    assert results["iterations"][-1]["eval_return_mean"] == summary["eval_return_mean"]
    assert summary["eval_return_mean"] > 0
    # Every iteration scored off-policy; the best kept next to the last, and
    # the time spent scoring reported apart from training's.
    ope = summary["off_policy_selection"]
    scores = {int(i): s for i, s in ope["estimates"].items()}
    assert sorted(scores) == [1, 2] and ope["fqe_updates"] == 200
    for score in scores.values():
        assert score["fqe_ci_low"] <= score["fqe"] <= score["fqe_ci_high"]
    best = max(scores, key=lambda i: scores[i]["fqe"])
    assert ope["best_scored_iteration"] == best and ope["last_iteration"] == 2
    if best != 2:
        # The best-scored replaces the last only if their intervals (from
        # refits) do not overlap.
        surely_better = scores[best]["fqe_ci_low"] > scores[2]["fqe_ci_high"]
        assert ope["kept_iteration"] == (best if surely_better else 2)
    else:
        assert ope["kept_iteration"] == 2
    evaluated = {r["iteration"]: r for r in results["iterations"]}
    assert (
        ope["kept_eval_return_mean"]
        == (evaluated[ope["kept_iteration"]]["eval_return_mean"])
    )
    assert ope["last_eval_return_mean"] == summary["eval_return_mean"]
    assert ope["time_s"] > 0 and summary["train_s"] > 0
    assert sum(r["time_s"] for r in results["iterations"]) == pytest.approx(
        summary["train_s"]
    )
    assert not os.path.exists(os.path.join(output_dir, example.ITERATIONS_DIR))
    assert example.selection_report(ope, 0.99) in out
    assert f"kept {example.BEST_CHECKPOINT_DIR}/: iteration" in out
    assert os.path.getsize(os.path.join(output_dir, example.PLOT_FILE)) > 0


@pytest.mark.timeout(300)
def test_kept_checkpoint_holds_the_iteration_that_ope_ranked_best(run):
    _, summary, _, _ = run
    ope = summary["off_policy_selection"]
    kept = _checkpointed_module(ope["kept_checkpoint_dir"])
    last = _checkpointed_module(summary["checkpoint_dir"])
    from ray.rllib.algorithms.algorithm import Algorithm

    algo = Algorithm.from_checkpoint(ope["kept_checkpoint_dir"])
    try:
        assert algo.iteration == ope["kept_iteration"]
    finally:
        algo.stop()
    same = all(
        np.array_equal(kept.get_state()[k], v) for k, v in last.get_state().items()
    )
    # Two training iterations move the weights: only the last one equals the last.
    assert same == (ope["kept_iteration"] == ope["last_iteration"])


@pytest.mark.timeout(300)
def test_checkpoint_restores_the_policy_and_the_learner(run):
    import torch
    from ray.rllib.core import DEFAULT_MODULE_ID

    argv, summary, _, _ = run
    checkpoint = summary["checkpoint_dir"]
    assert os.path.isdir(checkpoint)
    # The policy network alone, as the job's output says.
    module = _checkpointed_module(checkpoint)
    logits = module.forward_inference({"obs": torch.zeros((3, 4))})
    assert tuple(logits["action_dist_inputs"].shape) == (3, 2)
    # The Learner, into an algorithm built from the same config.
    args = example.parse_args(argv)
    algo = example.build_config(args, summary["data_dir"]).build_algo()
    try:
        algo.learner_group.restore_from_path(os.path.join(checkpoint, "learner_group"))
        restored = algo.learner_group.get_state(
            components=f"learner/rl_module/{DEFAULT_MODULE_ID}"
        )["learner"]["rl_module"][DEFAULT_MODULE_ID]
        for name, weights in module.get_state().items():
            np.testing.assert_array_equal(restored[name], weights, err_msg=name)
    finally:
        algo.stop()


@pytest.mark.timeout(300)
def test_algorithm_from_checkpoint(run):
    """ray 2.60 fails here for offline-only algorithms (no env runners to sync
    weights to); `Algorithm.from_checkpoint` restores them."""
    import torch
    from ray.rllib.algorithms.algorithm import Algorithm

    algo = Algorithm.from_checkpoint(run[1]["checkpoint_dir"])
    try:
        assert algo.iteration == 2
        restored = algo.get_module()
        saved = _checkpointed_module(run[1]["checkpoint_dir"])
        for name, weights in saved.get_state().items():
            np.testing.assert_array_equal(
                restored.get_state()[name], weights, err_msg=name
            )
        obs = torch.zeros((3, 4))
        torch.testing.assert_close(
            restored.forward_inference({"obs": obs})["action_dist_inputs"],
            saved.forward_inference({"obs": obs})["action_dist_inputs"],
        )
    finally:
        algo.stop()


def _printed_code_blocks(text):
    """The indented blocks of the job's restore instructions, dedented."""
    blocks, current = [], []
    for line in text.splitlines():
        if line.startswith("    "):
            current.append(line[4:])
        elif current:
            blocks.append("\n".join(current))
            current = []
    if current:
        blocks.append("\n".join(current))
    return blocks


@pytest.mark.timeout(300)
def test_printed_snippets_run_as_printed_in_a_fresh_process(run):
    """What the job prints works when pasted into a new interpreter that has
    not started Ray (the common way users come back to a checkpoint)."""
    import subprocess

    _, summary, _, _ = run
    load_module, restore_algorithm = _printed_code_blocks(
        example.restore_instructions(summary["checkpoint_dir"])
    )
    checks = [
        (
            load_module,
            "print('ACTION', action, tuple(logits.shape))",
            r"ACTION [01] \(1, 2\)",
        ),
        (restore_algorithm, "print('ITERATION', algo.iteration)", r"ITERATION 2"),
    ]
    for code, probe, expected in checks:
        result = subprocess.run(
            [sys.executable, "-c", code + "\n" + probe],
            capture_output=True,
            text=True,
            timeout=240,
        )
        assert result.returncode == 0, code + "\n" + result.stderr[-3000:]
        assert re.search(expected, result.stdout), result.stdout


def test_output_dir_is_taken_over_only_from_an_earlier_run(tmp_path):
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "thesis.tex").write_text("keep me")
    with pytest.raises(FileExistsError, match="not written by this example"):
        example.prepare_output_dir(str(foreign))
    assert os.listdir(foreign) == ["thesis.tex"]

    run_dir = tmp_path / "run"
    assert example.prepare_output_dir(str(run_dir)) == str(run_dir)
    (run_dir / example.EPISODES_DIR).mkdir()
    (run_dir / example.EPISODES_DIR / "old.parquet").write_bytes(b"old")
    (run_dir / example.RESULTS_FILE).write_text("{}")
    (run_dir / "notes.txt").write_text("mine")
    example.prepare_output_dir(str(run_dir))
    # The previous run's episodes and results are gone; other files stay.
    assert sorted(os.listdir(run_dir)) == [example.MARKER_FILE, "notes.txt"]


def test_plot_without_matplotlib_says_how_to_install_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    with pytest.raises(ImportError, match=r"`pip install matplotlib`"):
        example.require_matplotlib()


if __name__ == "__main__":
    sys.exit(pytest.main(["-v", __file__]))
