"""The OfflinePreLearner's n-step rewards are discounted with the algorithm's
`gamma`, not the replay buffer's default of 0.99."""

import gymnasium as gym
import msgpack
import msgpack_numpy
import numpy as np
import pytest
from ray.rllib.algorithms.cql import CQLConfig
from ray.rllib.core import DEFAULT_MODULE_ID
from ray.rllib.core.columns import Columns
from ray.rllib.env.single_agent_episode import SingleAgentEpisode
from ray.rllib.offline.offline_prelearner import OfflinePreLearner

OBS_SPACE = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
ACTION_SPACE = gym.spaces.Box(-1.0, 1.0, (1,), np.float32)


def _payloads(num_episodes=4, length=20):
    """Episodes with a reward of 1 at every step, in the recorder's format."""
    rng = np.random.default_rng(0)
    payloads = []
    for _ in range(num_episodes):
        episode = SingleAgentEpisode(observations=[OBS_SPACE.sample()])
        for t in range(length):
            episode.add_env_step(
                rng.uniform(-1, 1, 2).astype(np.float32),
                rng.uniform(-1, 1, 1).astype(np.float32),
                1.0,
                truncated=t == length - 1,
            )
        payloads.append(
            msgpack.packb(episode.get_state(), default=msgpack_numpy.encode)
        )
    return np.array(payloads, dtype=object)


@pytest.mark.parametrize("gamma", [0.5, 0.9])
def test_two_step_rewards_are_discounted_with_the_configs_gamma(gamma):
    config = (
        CQLConfig()
        .environment(observation_space=OBS_SPACE, action_space=ACTION_SPACE)
        .training(gamma=gamma, n_step=2, train_batch_size_per_learner=256)
        .rl_module(model_config={"fcnet_hiddens": [8]})
        .offline_data(input_="/nonexistent", input_read_episodes=True)
    )
    spec = config.get_multi_rl_module_spec(
        spaces={DEFAULT_MODULE_ID: (OBS_SPACE, ACTION_SPACE)}
    )
    prelearner = OfflinePreLearner(
        config=config, spaces=(OBS_SPACE, ACTION_SPACE), module_spec=spec
    )
    rows = prelearner({"item": _payloads()})
    rewards = np.asarray(rows[f"{DEFAULT_MODULE_ID}/{Columns.REWARDS}"])
    assert len(rewards) == 256
    # Two steps of reward 1 discounted once; a row at an episode's end has one.
    two_steps = np.isclose(rewards, 1.0 + gamma)
    assert np.all(two_steps | np.isclose(rewards, 1.0)), sorted(set(rewards))
    assert two_steps.mean() > 0.5


if __name__ == "__main__":
    import sys

    sys.exit(pytest.main(["-v", __file__]))
