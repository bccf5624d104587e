"""Quick mode of the release benchmark runner, end to end (no timing asserts)."""

import json
import os
import subprocess
import sys

import pytest

RUNNER = os.path.join(os.path.dirname(os.path.dirname(__file__)), "run.py")


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
            for side in ("upstream", "fork"):
                assert samples["median"][side] > 0, (name, metric, side)
            assert samples["ratio_fork_over_upstream"] > 0, (name, metric)
    prelearner = benchmarks["prelearner"]["metrics"]
    assert sorted(prelearner) == [
        f"transitions_per_s_{d}_{a}"
        for d in ("cartpole", "dict")
        for a in ("bc", "marwil")
    ]
    curves = benchmarks["marwil_quality"]["curves"]
    assert [p["iteration"] for p in curves["fork"]] == [1, 2]
    assert [p["iteration"] for p in curves["upstream"]] == [1, 2]
    for name in ("throughput.png", "learning_curves.png"):
        assert (tmp_path / name).stat().st_size > 1000, name


if __name__ == "__main__":
    sys.exit(pytest.main(["-v", __file__]))
