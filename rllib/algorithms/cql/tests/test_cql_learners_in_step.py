"""Two CQL Learners apply the same, averaged gradients: their modules stay
identical update after update (each Learner trains on its own shard)."""

import gymnasium as gym
import numpy as np
import pytest
import torch
from ray.rllib.algorithms.cql import CQLConfig
from ray.rllib.core import DEFAULT_MODULE_ID
from ray.rllib.policy.sample_batch import MultiAgentBatch, SampleBatch

from rllib.algorithms.cql.tests.cql_fixtures import OBS_SPACE, make_batch


def _weights_per_learner(learner_group):
    return [result.get() for result in learner_group.foreach_learner(_module_weights)]


def _module_weights(learner):
    module = learner.module[DEFAULT_MODULE_ID].unwrapped()
    return {k: v.detach().cpu().clone() for k, v in module.state_dict().items()}


@pytest.mark.timeout(300)
def test_two_learners_keep_identical_modules(ray_cluster):
    config = (
        CQLConfig()
        .environment(
            observation_space=OBS_SPACE,
            action_space=gym.spaces.Box(-2.0, 2.0, (2,), np.float32),
        )
        .training(lr=None, bc_iters=0, gamma=0.9, target_entropy=-2.0)
        .rl_module(model_config={"fcnet_hiddens": [16]})
        .learners(num_learners=2)
    )
    learner_group = config.build_learner_group(env=None)
    try:
        before, _ = _weights_per_learner(learner_group)
        for seed in range(3):
            # 64 rows: each Learner updates on a different half.
            batch = {
                column: values.numpy()
                for column, values in make_batch(2.0, 1, seed, 64).items()
            }
            learner_group.update(
                batch=MultiAgentBatch(
                    {DEFAULT_MODULE_ID: SampleBatch(batch)}, env_steps=64
                )
            )
        first, second = _weights_per_learner(learner_group)
    finally:
        learner_group.shutdown()
    moved = [k for k in before if not torch.equal(before[k], first[k])]
    assert any(k.startswith("qf") for k in moved), moved
    differ = [k for k in first if not torch.equal(first[k], second[k])]
    assert not differ, f"{len(differ)} of {len(first)} tensors differ: {differ[:3]}"


if __name__ == "__main__":
    import sys

    sys.exit(pytest.main(["-v", __file__]))
