"""Quick mode of the off-policy evaluation benchmark, end to end (no accuracy
or timing asserted: tiny data; the figures come from full runs)."""

import json
import math
import os
import subprocess
import sys

import pytest

SCRIPT = os.path.join(
    os.path.dirname(os.path.dirname(__file__)), "bench_off_policy_estimation.py"
)


@pytest.mark.timeout(600)
def test_quick_mode_scores_every_target_with_every_estimator(tmp_path):
    report_path = tmp_path / "ope.json"
    out = subprocess.run(
        [sys.executable, SCRIPT, "--quick", "--json", str(report_path)],
        capture_output=True,
        text=True,
        timeout=580,
    )
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-4000:]
    with open(report_path) as f:
        tasks = json.load(f)["tasks"]
    assert set(tasks) == {"cartpole", "cartpole_short", "pendulum"}
    for name, task in tasks.items():
        assert len(task["targets"]) == 5, name
        for target, row in task["targets"].items():
            assert set(row["fork"]) == {"is", "wis", "pdis", "wpdis", "fqe", "dr"}
            assert math.isfinite(row["fork"]["fqe"][0]), (name, target)
            assert math.isfinite(row["true_value"]), (name, target)
        assert "fork_fqe" in task["summary"]
    # Ray 2.60's own runner is run on the CartPole files; its outcome is shown.
    assert tasks["cartpole"]["upstream_runner"]


if __name__ == "__main__":
    sys.exit(pytest.main(["-v", __file__]))
