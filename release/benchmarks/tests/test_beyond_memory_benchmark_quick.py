"""Quick mode of the beyond-memory benchmark, end to end (no rate or
uniformity asserted: tiny data; the figures come from full runs)."""

import json
import math
import os
import subprocess
import sys

import pytest

SCRIPT = os.path.join(
    os.path.dirname(os.path.dirname(__file__)), "bench_beyond_memory.py"
)


@pytest.mark.timeout(900)
def test_quick_mode_runs_both_sides_in_and_beyond_memory(tmp_path):
    report_path = tmp_path / "beyond_memory.json"
    command = [
        sys.executable, SCRIPT, "--episodes", "60", "--factors", "0.5", "8",
        "--batch-size", "256", "--passes", "1", "--iterations", "1",
        "--json", str(report_path),
    ]  # fmt: skip
    out = subprocess.run(command, capture_output=True, text=True, timeout=880)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-4000:]
    with open(report_path) as f:
        rows = json.load(f)["rows"]
    assert set(rows) == {
        "upstream (streaming)",
        "fork, data 0.5x budget",
        "fork, data 8x budget",
    }
    for name, figures in rows.items():
        assert "error" not in figures, (name, figures.get("error"))
        assert math.isfinite(figures["env_steps_per_s"]), name
    assert rows["upstream (streaming)"]["fork_active"] is False
    assert rows["fork, data 0.5x budget"]["mode"] == "in_memory"
    beyond = rows["fork, data 8x budget"]
    assert beyond["mode"] == "beyond_memory"
    (first, *_) = beyond["passes"]
    assert first["num_ranges"] > 8 and first["mean_draws_per_timestep"] >= 1.0


if __name__ == "__main__":
    sys.exit(pytest.main(["-v", __file__]))
