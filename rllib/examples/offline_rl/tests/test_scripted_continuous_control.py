"""The continuous-control datasets: behaviours of the stated quality, and
files that read back exactly."""

import numpy as np
import pytest

from rllib.examples.offline_rl.scripted_continuous_control import (
    RETURNS,
    behaviour_policy,
    build_datasets,
    normalized_score,
    record_episodes,
    rollout_returns,
)


@pytest.mark.parametrize("task", ["pendulum", "inverted_pendulum"])
def test_qualities_are_ordered_and_match_the_recorded_normalization(task):
    scores = {}
    for quality in ("random", "medium", "expert"):
        policy = behaviour_policy(task, quality, np.random.default_rng(1))
        returns = rollout_returns(task, policy, 10)
        scores[quality] = normalized_score(task, returns.mean())
    assert scores["random"] < scores["medium"] < scores["expert"]
    # `RETURNS` was measured over 100 episodes: 10 land near it.
    assert abs(scores["random"]) < 15, scores
    assert abs(scores["expert"] - 100) < 10, scores
    assert 10 < scores["medium"] < 80, scores


def test_normalized_score_anchors():
    for task, anchors in RETURNS.items():
        assert normalized_score(task, anchors["random"]) == pytest.approx(0.0)
        assert normalized_score(task, anchors["expert"]) == pytest.approx(100.0)


def test_recording_is_seeded_and_bounded():
    first = record_episodes("pendulum", "medium", 450, seed=3)
    again = record_episodes("pendulum", "medium", 450, seed=3)
    # Pendulum episodes are 200 steps: three cover 450.
    assert [len(e) for e in first] == [200, 200, 200]
    for a, b in zip(first, again):
        np.testing.assert_array_equal(a.get_actions(), b.get_actions())
        np.testing.assert_array_equal(a.get_observations(), b.get_observations())
    actions = np.concatenate([e.get_actions() for e in first])
    assert actions.min() >= -2.0 and actions.max() <= 2.0
    assert all(e.is_truncated and not e.is_terminated for e in first)


def test_files_read_back_step_for_step(tmp_path):
    from ray.rllib.offline.episode_files.reader import read_episodes

    written = build_datasets(
        str(tmp_path),
        tasks=["inverted_pendulum"],
        qualities=["medium"],
        num_timesteps=300,
    )
    path = written["inverted_pendulum-medium"]
    recorded = record_episodes("inverted_pendulum", "medium", 300)
    loaded = list(read_episodes(path))
    assert len(loaded) == len(recorded)
    # Balancing ends by falling over (terminated) for noisy medium data.
    assert any(e.is_terminated for e in loaded)
    for original, copy in zip(
        sorted(recorded, key=_first_observation), sorted(loaded, key=_first_observation)
    ):
        np.testing.assert_array_equal(original.get_actions(), copy.get_actions())
        np.testing.assert_array_equal(original.get_rewards(), copy.get_rewards())
        np.testing.assert_array_equal(
            original.get_observations(), copy.get_observations()
        )
        assert original.is_terminated == copy.is_terminated


def _first_observation(episode):
    """Sort key: episode ids are random, first observations (seeded) are not."""
    return tuple(np.asarray(episode.get_observations(0)).tolist())


if __name__ == "__main__":
    import sys

    sys.exit(pytest.main(["-v", __file__]))
