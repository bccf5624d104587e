"""With two Learners (DDP on CPU) MARWIL's statistics are the same on both."""

import sys

import gymnasium as gym
import pytest
from ray.rllib.algorithms.marwil import MARWILConfig
from ray.rllib.core import DEFAULT_MODULE_ID

from rllib.algorithms.marwil.torch.advantage_statistics import STATE_KEY
from rllib.examples.offline_rl.scripted_cartpole import (
    balance_action,
    record_episodes,
    write_hand_rolled_files,
)

ENV = gym.make("CartPole-v1")


@pytest.fixture(scope="module")
def episode_dir(tmp_path_factory):
    """Eight scripted episodes in two files, so each Learner gets a shard."""
    path = tmp_path_factory.mktemp("marwil_two_learner_episodes")
    episodes = record_episodes(
        ENV, 8, lambda obs: balance_action(obs[2], obs[3]), epsilon=0.5, seed=2
    )
    write_hand_rolled_files(episodes, path, num_files=2)
    return str(path)


@pytest.mark.timeout(300)
def test_statistics_are_all_reduced_across_learners(ray_cluster, episode_dir):
    config = (
        MARWILConfig()
        .training(beta=1.0, train_batch_size_per_learner=64)
        .environment(
            observation_space=ENV.observation_space, action_space=ENV.action_space
        )
        .rl_module(model_config={"fcnet_hiddens": [16]})
        .learners(num_learners=2)
        .offline_data(
            input_=[episode_dir],
            input_read_episodes=True,
            dataset_num_iters_per_learner=2,
        )
    )
    algo = config.build_algo()
    try:
        algo.train()
        states = [
            result.get()
            for result in algo.learner_group.foreach_learner(
                lambda learner: learner.get_state(not_components="rl_module")[STATE_KEY]
            )
        ]
    finally:
        algo.stop()
    assert len(states) == 2
    first, second = (state[DEFAULT_MODULE_ID] for state in states)
    # Two updates, each from both Learners' batches: identical values.
    assert first == second
    assert first["updates"] == 2
    assert first["moving_avg_sqd_adv_norm"] > 0
    assert first["moving_avg_sqd_adv_norm"] != 100.0  # Not the start value.
    assert first["value_target_scale"] > 0


if __name__ == "__main__":
    sys.exit(pytest.main(["-v", __file__]))
