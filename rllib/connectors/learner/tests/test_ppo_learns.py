"""Online PPO goes through the fork's GAE connector and still learns."""

import sys

import pytest
from ray.rllib.algorithms.ppo import PPOConfig
from ray.rllib.core import DEFAULT_MODULE_ID
from ray.rllib.utils.metrics import ENV_RUNNER_RESULTS, EPISODE_RETURN_MEAN

from rllib.connectors.learner import general_advantage_estimation as gae_module


@pytest.mark.ray
@pytest.mark.timeout(420)
def test_ppo_cartpole_improves(ray_cluster, monkeypatch):
    calls = []
    original = gae_module.add_advantages_to_module_batch

    def spy(module, module_batch, **kwargs):
        calls.append(1)
        return original(module, module_batch, **kwargs)

    monkeypatch.setattr(gae_module, "add_advantages_to_module_batch", spy)
    config = (
        PPOConfig()
        .environment("CartPole-v1")
        .env_runners(num_env_runners=0)
        .learners(num_learners=0)
        .training(
            train_batch_size_per_learner=1000,
            minibatch_size=250,
            num_epochs=6,
            lr=1e-3,
        )
        .debugging(seed=0)
    )
    algo = config.build_algo()
    try:
        returns = []
        for _ in range(8):
            results = algo.train()
            returns.append(results[ENV_RUNNER_RESULTS][EPISODE_RETURN_MEAN])
        vf_loss = results["learners"][DEFAULT_MODULE_ID]["vf_loss"]
    finally:
        algo.stop()
    assert len(calls) == 8, "the fork's connector ran once per train batch"
    assert returns[-1] > 1.5 * returns[0], returns
    assert vf_loss == vf_loss  # not NaN


if __name__ == "__main__":
    sys.exit(pytest.main(["-v", __file__]))
