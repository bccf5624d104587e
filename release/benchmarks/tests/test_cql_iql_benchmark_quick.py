"""Quick mode of the CQL/IQL benchmark, end to end (no score or timing
asserted: 20 updates on 1,000 steps, upstream capped at 60 s; the figures
come from full runs)."""

import json
import math
import os
import subprocess
import sys

import pytest

SCRIPT = os.path.join(os.path.dirname(os.path.dirname(__file__)), "bench_cql_iql.py")


@pytest.mark.timeout(900)
def test_quick_mode_trains_every_side(tmp_path):
    report_path, chart_path = tmp_path / "cql_iql.json", tmp_path / "curves.png"
    out = subprocess.run(
        [
            sys.executable,
            SCRIPT,
            "--quick",
            "--json",
            str(report_path),
            "--chart",
            str(chart_path),
        ],
        capture_output=True,
        text=True,
        timeout=880,
    )
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-4000:]
    assert chart_path.stat().st_size > 0
    with open(report_path) as f:
        (entry,) = json.load(f)["datasets"].values()
    for algo in ("iql", "cql"):
        for side in ("fork", "upstream"):
            result = entry[f"{algo}/{side}"]
            assert "error" not in result, (algo, side, result)
            # Quick mode runs one seed; each seed's run says which mode it ran.
            (run,) = result["runs"]
            assert run["fork_active"] == (side == "fork")
            # `--torch-threads` (default 1) reaches every side's trainer.
            assert run["torch_threads"] == 1
            assert result["final_scores"] == [run["curve"][-1][2]]
            assert result["updates_per_s"] > 0
            # Evaluations at 10 and 20 updates: (updates, return, score).
            # Upstream runs under a wall-time cap (60 s in quick mode); on a
            # slow machine it may stop before 20 updates, and the
            # report must then say so.
            if side == "upstream" and run["stopped_by_time"]:
                # `train()` calls of 5 updates; a last evaluation at the stop.
                stopped_at = result["updates"]
                assert stopped_at in (5, 10, 15), result
                expected = [10] * (stopped_at > 10) + [stopped_at]
                assert [p[0] for p in result["curve"]] == expected, result["curve"]
            else:
                assert not run["stopped_by_time"] and result["updates"] == 20
                assert [p[0] for p in result["curve"]] == [10, 20], result["curve"]
            assert all(math.isfinite(p[2]) for p in result["curve"])
        # d3rlpy runs where its virtualenv exists; otherwise the report says so.
        d3rlpy = entry[f"{algo}/d3rlpy"]
        assert "curve" in d3rlpy or "no d3rlpy interpreter" in d3rlpy["error"]
        if "curve" in d3rlpy:
            assert [run["torch_threads"] for run in d3rlpy["runs"]] == [1]


if __name__ == "__main__":
    sys.exit(pytest.main(["-v", __file__]))
