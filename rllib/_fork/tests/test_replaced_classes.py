"""The overlay serves the fork's classes under ray's names.

Moved here from the offline tests that go into the patch series: in ray's own
tree these names are ray's classes, so the checks only mean something with the
overlay.
"""


def test_offline_single_agent_env_runner_is_the_forks():
    from ray.rllib.offline.offline_env_runner import OfflineSingleAgentEnvRunner

    import rllib.offline.offline_env_runner as fork

    assert OfflineSingleAgentEnvRunner is fork.OfflineSingleAgentEnvRunner


def test_offline_multi_agent_env_runner_is_the_forks():
    from ray.rllib.offline.offline_multi_agent_env_runner import (
        OfflineMultiAgentEnvRunner,
    )

    import rllib.offline.offline_multi_agent_env_runner as fork

    assert OfflineMultiAgentEnvRunner is fork.OfflineMultiAgentEnvRunner


def test_offline_prelearner_is_the_forks():
    from ray.rllib.offline import offline_data, offline_prelearner

    import rllib.offline.offline_prelearner as fork

    assert offline_prelearner.OfflinePreLearner is fork.OfflinePreLearner
    assert offline_data.OfflinePreLearner is fork.OfflinePreLearner


if __name__ == "__main__":
    import sys

    import pytest

    sys.exit(pytest.main(["-v", __file__]))
