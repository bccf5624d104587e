"""`qf_concat_obs_actions`: SAC, CQL and IQL Q-networks as one MLP over [s, a]."""

import gymnasium as gym
import numpy as np
import pytest
import torch
from ray.rllib.algorithms.cql import CQLConfig
from ray.rllib.algorithms.iql import IQLConfig
from ray.rllib.algorithms.sac import SACConfig
from ray.rllib.core.columns import Columns
from ray.rllib.core.models.torch.encoder import TorchMultiStreamEncoder

from rllib.core.models.torch.concat_encoder import TorchConcatMLPEncoder

OBS_SPACE = gym.spaces.Box(-1.0, 1.0, (5,), np.float32)
ACTION_SPACE = gym.spaces.Box(-2.0, 2.0, (2,), np.float32)
CONFIGS = {
    "sac": SACConfig,
    "cql": lambda: CQLConfig().training(lr=None),
    "iql": IQLConfig,
}


def _module(algo, obs_space=OBS_SPACE, **model_config):
    config = CONFIGS[algo]().environment(
        observation_space=obs_space, action_space=ACTION_SPACE
    )
    model_config = {"fcnet_hiddens": [32, 16], "fcnet_activation": "relu"} | (
        model_config
    )
    return config.rl_module(model_config=model_config).get_rl_module_spec().build()


def _linears(module):
    return [m for m in module.modules() if isinstance(m, torch.nn.Linear)]


@pytest.mark.parametrize("algo", list(CONFIGS))
def test_q_is_one_mlp_over_observation_and_action(algo):
    module = _module(algo, qf_concat_obs_actions=True)
    for encoder in (module.qf_encoder, module.qf_twin_encoder):
        assert isinstance(encoder, TorchConcatMLPEncoder)
        shapes = [tuple(layer.weight.shape) for layer in _linears(encoder)]
        assert shapes == [(32, 5 + 2), (16, 32)]
    assert [tuple(layer.weight.shape) for layer in _linears(module.qf)] == [(1, 16)]
    # The policy's encoder is unchanged: observations only.
    assert _linears(module.pi_encoder)[0].weight.shape == (32, 5)

    obs = torch.randn(7, 5)
    actions = torch.rand(7, 2) * 4.0 - 2.0
    q = module._qf_forward_train_helper(
        {Columns.OBS: obs, Columns.ACTIONS: actions}, module.qf_encoder, module.qf
    )
    first, second = _linears(module.qf_encoder)
    (head,) = _linears(module.qf)
    hidden = torch.relu(first(torch.cat([obs, actions], dim=-1)))
    expected = head(torch.relu(second(hidden))).squeeze(-1)
    assert q.shape == (7,)
    torch.testing.assert_close(q, expected)


@pytest.mark.parametrize("algo", list(CONFIGS))
def test_default_q_keeps_the_multi_stream_encoder(algo):
    assert isinstance(_module(algo).qf_encoder, TorchMultiStreamEncoder)
    module = _module(algo, qf_concat_obs_actions=False)
    assert isinstance(module.qf_encoder, TorchMultiStreamEncoder)


def test_needs_flat_observations():
    obs_space = gym.spaces.Box(0, 255, (42, 42, 3), np.uint8)  # A CNN encoder.
    with pytest.raises(ValueError, match="qf_concat_obs_actions.*1D Box"):
        _module("sac", obs_space=obs_space, qf_concat_obs_actions=True)


def test_iql_learner_trains_and_builds_concat_targets():
    config = (
        IQLConfig()
        .environment(observation_space=OBS_SPACE, action_space=ACTION_SPACE)
        .rl_module(model_config={"fcnet_hiddens": [32], "qf_concat_obs_actions": True})
        .training(tau=0.5)
    )
    learner = config.build_learner(env=None)
    module = learner.module["default_policy"]
    assert isinstance(module.target_qf_encoder, TorchConcatMLPEncoder)
    rng = np.random.default_rng(0)
    batch = {
        Columns.OBS: rng.uniform(-1, 1, (64, 5)).astype(np.float32),
        Columns.ACTIONS: rng.uniform(-1, 1, (64, 2)).astype(np.float32),
        Columns.REWARDS: rng.normal(size=64).astype(np.float32),
        Columns.NEXT_OBS: rng.uniform(-1, 1, (64, 5)).astype(np.float32),
        Columns.TERMINATEDS: np.zeros(64, bool),
        Columns.TRUNCATEDS: np.zeros(64, bool),
    }
    from ray.rllib.policy.sample_batch import MultiAgentBatch, SampleBatch

    target_before = _linears(module.target_qf_encoder)[0].weight.detach().clone()
    learner.update(
        batch=MultiAgentBatch({"default_policy": SampleBatch(batch)}, 64),
        timesteps={"num_env_steps_sampled_lifetime": 64},
    )
    target_after = _linears(module.target_qf_encoder)[0].weight
    assert not torch.equal(target_before, target_after)
    main = _linears(module.qf_encoder)[0].weight.detach()
    # Polyak averaging with tau=0.5 moves the target towards the updated Q.
    assert torch.all((target_after - main).abs() <= (target_before - main).abs() + 1e-6)


if __name__ == "__main__":
    import sys

    sys.exit(pytest.main(["-v", __file__]))
