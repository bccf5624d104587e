"""The Dict-observation example runs end to end (a short run)."""

import math
import sys

import pytest

from rllib.examples.offline_rl import train_with_dict_observations as example


@pytest.mark.timeout(240)
def test_example_trains_on_dict_observations(ray_cluster, tmp_path):
    summary = example.main(
        [
            "--num-episodes=3",
            "--iterations=2",
            "--updates-per-iteration=2",
            "--eval-episodes=1",
            f"--output-dir={tmp_path}",
        ]
    )
    assert summary["first_call_leaves"] == {
        "cart": "Tensor on cpu",
        "pole": "Tensor on cpu",
    }
    assert all(math.isfinite(x) for x in summary["losses"])
    assert summary["eval_return_mean"] > 0


if __name__ == "__main__":
    sys.exit(pytest.main(["-v", __file__]))
