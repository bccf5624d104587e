"""The multi-agent offline example runs end to end (a short MARWIL run)."""

import sys

import pytest
from ray.rllib.offline.episode_files.reader import read_episodes

from rllib.examples.offline_rl import train_multi_agent_offline as example


@pytest.mark.timeout(240)
def test_example_records_trains_and_evaluates_each_agent(ray_cluster, tmp_path):
    returns = example.main(
        [
            "--algo=marwil",
            "--num-episodes=4",
            "--iterations=1",
            "--updates-per-iteration=2",
            "--eval-episodes=1",
            f"--output-dir={tmp_path}",
        ]
    )
    episodes = list(read_episodes(tmp_path))
    assert len(episodes) == 4
    assert all(set(e.agent_episodes) == {0, 1} for e in episodes)
    assert all(e.module_for(1) == "p1" for e in episodes)
    # One evaluation return per agent, from the environment.
    assert set(returns) == {"0", "1"}
    assert all(value > 0 for value in returns.values())


if __name__ == "__main__":
    sys.exit(pytest.main(["-v", __file__]))
