"""Online PPO with the fork computes exactly what upstream computes.

The fork does not set out to change online training: a seeded PPO run on
CartPole must report the same losses, entropy and returns, per iteration, as
the same run with `RLLIB_FORK_DISABLE=1`.
"""

import sys

import pytest

from rllib._fork.tests.differential import assert_same, run_in_both_modes

#: Seeded PPO on CartPole with 0, 1 and 2 Learners (one Ray cluster), 2 small
#: iterations each; emits per-iteration metrics by number of Learners.
SCENARIO = """
import ray
import torch
from ray.rllib.algorithms.ppo import PPOConfig
from ray.rllib.core import DEFAULT_MODULE_ID
from ray.rllib.utils.metrics import ENV_RUNNER_RESULTS, EPISODE_RETURN_MEAN

torch.use_deterministic_algorithms(True)
torch.set_num_threads(1)
ray.init(num_cpus=4, include_dashboard=False)
by_learners = {}
for num_learners in (0, 1, 2):
    config = (
        PPOConfig()
        .environment("CartPole-v1")
        .env_runners(num_env_runners=0)
        .learners(num_learners=num_learners)
        .training(train_batch_size_per_learner=256, minibatch_size=64, num_epochs=2)
        .rl_module(model_config={"fcnet_hiddens": [32]})
        .debugging(seed=0)
    )
    algo = config.build_algo()
    metrics = by_learners[num_learners] = []
    for _ in range(2):
        results = algo.train()
        learner = results["learners"][DEFAULT_MODULE_ID]
        metrics.append({
            "policy_loss": float(learner["policy_loss"]),
            "vf_loss": float(learner["vf_loss"]),
            "entropy": float(learner["entropy"]),
            "episode_return_mean": float(
                results[ENV_RUNNER_RESULTS][EPISODE_RETURN_MEAN]
            ),
        })
    algo.stop()
emit(by_learners)
"""


@pytest.mark.timeout(500)
def test_seeded_ppo_metrics_identical():
    upstream, fork = run_in_both_modes(SCENARIO, timeout=240)
    assert sorted(upstream) == ["0", "1", "2"]
    assert all(len(metrics) == 2 for metrics in upstream.values())
    assert_same(upstream, fork)


if __name__ == "__main__":
    sys.exit(pytest.main(["-v", __file__]))
