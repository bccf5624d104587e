"""The Learner-side sampler of the in-memory path (no Ray)."""

import types

import gymnasium as gym
import numpy as np
import pytest
from ray.rllib.algorithms.bc import BCConfig
from ray.rllib.core import DEFAULT_MODULE_ID
from ray.rllib.core.columns import Columns

from rllib.offline.in_memory.columns import EpisodeBlock
from rllib.offline.in_memory.shard_sampler import EpisodeShardSampler
from rllib.offline.in_memory.store import HeldBlocks
from rllib.offline.tests.test_columnar_buffer import HAND_3_STEP_HALF, hand_episode


def test_in_memory_sampler_discounts_n_step_rewards_with_config_gamma():
    """The Learner-side sampler of the in-memory path uses `config.gamma` too."""
    obs_space = gym.spaces.Box(0.0, 10.0, (1,), np.float32)
    action_space = gym.spaces.Discrete(2)
    config = (
        BCConfig()
        .environment(observation_space=obs_space, action_space=action_space)
        .training(train_batch_size_per_learner=32, gamma=0.5)
        .offline_data(input_="/nonexistent", input_read_episodes=True)
    )
    config.n_step = 3
    rl_module = config.get_multi_rl_module_spec(
        spaces={DEFAULT_MODULE_ID: (obs_space, action_space)}, inference_only=False
    ).build()
    block = EpisodeBlock.from_episodes([hand_episode()])
    shard = types.SimpleNamespace(block_source=lambda rng: HeldBlocks([block]), index=0)
    sampler = EpisodeShardSampler(
        shard,
        pipeline=config.build_learner_connector(
            input_observation_space=obs_space, input_action_space=action_space
        ),
        rl_module=rl_module,
        config=config,
    )
    batch = sampler.sample(200).policy_batches[DEFAULT_MODULE_ID]
    starts = np.asarray(batch[Columns.OBS])[:, 0].astype(int).tolist()
    assert set(starts) == set(HAND_3_STEP_HALF)
    np.testing.assert_array_equal(
        np.asarray(batch[Columns.REWARDS]), [HAND_3_STEP_HALF[t] for t in starts]
    )


if __name__ == "__main__":
    import sys

    sys.exit(pytest.main(["-v", __file__]))
