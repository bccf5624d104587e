"""The checkpoint-choosing example runs end to end (tiny sizes)."""

import sys

import pytest

from rllib.examples.offline_rl import choose_checkpoint_by_ope as example


@pytest.mark.timeout(300)
def test_example_scores_every_checkpoint_and_picks_the_top_row(ray_cluster, tmp_path):
    outcome = example.main(
        [
            "--num-episodes=6",
            "--iterations=1,2",
            "--fqe-updates=200",
            "--verify",
            "--verify-episodes=2",
            f"--output-dir={tmp_path}",
        ]
    )
    rows = outcome["estimates"]
    checkpoints = {row["checkpoint"] for row in rows}
    assert checkpoints == {str(tmp_path / f"iteration_{i}") for i in (0, 1, 2)}
    fqe = [row["estimates"]["fqe"]["value"] for row in rows]
    assert fqe == sorted(fqe, reverse=True)
    assert outcome["picked"] == rows[0]["checkpoint"]
    assert set(outcome["true_returns"]) == checkpoints
    assert all(value > 0 for value in outcome["true_returns"].values())


if __name__ == "__main__":
    sys.exit(pytest.main(["-v", __file__]))
