"""MARWIL gets a value network of its own unless the user asks otherwise."""

import sys

import gymnasium as gym
import pytest
from ray.rllib.algorithms.marwil import MARWILConfig

ENV = gym.make("CartPole-v1")


def _module(config):
    spec = config.get_default_rl_module_spec()
    spec.observation_space = ENV.observation_space
    spec.action_space = ENV.action_space
    spec.model_config = config.model_config
    return spec.build()


def test_separate_value_network_by_default():
    config = MARWILConfig()
    assert config.model_config["vf_share_layers"] is False
    names = [name for name, _ in _module(config).encoder.named_children()]
    assert names == ["actor_encoder", "critic_encoder"]


def test_user_choice_wins():
    config = MARWILConfig().rl_module(model_config={"vf_share_layers": True})
    assert config.model_config["vf_share_layers"] is True
    names = [name for name, _ in _module(config).encoder.named_children()]
    assert "critic_encoder" not in names


if __name__ == "__main__":
    sys.exit(pytest.main(["-v", __file__]))
