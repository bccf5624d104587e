"""Quick mode of the release benchmark runner, end to end (no timing asserts)."""

import json
import os
import subprocess
import sys

import pytest

RUNNER = os.path.join(os.path.dirname(os.path.dirname(__file__)), "run.py")
SIDES = ("upstream", "fork")
#: Metrics measured on the fork only.
FORK_ONLY = ("learner_only_", "e2e_over_learner_only_")


@pytest.mark.timeout(900)
def test_runner_quick_writes_json_and_charts(tmp_path):
    out = subprocess.run(
        [sys.executable, RUNNER, "--quick", "--out-dir", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=850,
    )
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-4000:]
    with open(tmp_path / "results.json") as f:
        report = json.load(f)
    benchmarks = report["benchmarks"]
    names = ("writer", "gae_kernel", "prelearner", "training_bc", "training_marwil")
    for name in names:
        assert benchmarks[name]["metrics"], name
        for metric, samples in benchmarks[name]["metrics"].items():
            sides = ("fork",) if metric.startswith(FORK_ONLY) else SIDES
            for side in sides:
                assert samples["median"][side] > 0, (name, metric, side)
            if sides == SIDES:
                assert samples["ratio_fork_over_upstream"] > 0, (name, metric)
    prelearner = benchmarks["prelearner"]["metrics"]
    keys = [
        f"{d}_{a}_{p}"
        for d in ("cartpole", "dict")
        for a in ("bc", "marwil")
        for p in ("per_step", "numpy")
    ]
    assert sorted(prelearner) == sorted(
        [f"transitions_per_s_{k}" for k in keys]
        + [f"in_memory_transitions_per_s_{k}" for k in keys]
    )
    # Quick mode: one grid cell per algorithm (both formats, both Learner
    # set-ups between them), with the fork's Learner-only rate.
    for name, cell in (
        ("training_bc", "8ep_per_step_nl0"),
        ("training_marwil", "8ep_numpy_nl1"),
    ):
        metrics = benchmarks[name]["metrics"]
        assert sorted(metrics) == sorted(
            f"{m}_{cell}"
            for m in (
                "env_steps_trained_per_s",
                "time_to_first_update_s",
                "build_s",
                "learner_only_env_steps_per_s",
                "e2e_over_learner_only",
            )
        ), name
        assert benchmarks[name]["fork_modes"] == {cell: ["in_memory"]}, name
        assert not benchmarks[name]["errors"], name
    learning = benchmarks["marwil_vs_bc"]
    for side in ("fork", "upstream"):
        for algo in ("bc", "marwil"):
            (curve,) = learning["curves"][side][algo]
            assert [p["updates"] for p in curve] == [2]
        assert len(learning["metrics"]["marwil_over_bc"][side]) == 1
    for name in (
        "throughput.png",
        "prelearner.png",
        "training_throughput.png",
        "time_to_first_update.png",
        "learning_curves.png",
    ):
        assert (tmp_path / name).stat().st_size > 1000, name


if __name__ == "__main__":
    sys.exit(pytest.main(["-v", __file__]))
