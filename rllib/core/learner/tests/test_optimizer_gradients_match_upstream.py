"""With one Learner, CQL's and IQL's per-optimizer gradients are upstream's
exactly, for one module and for two; only the module order is fixed."""

import gymnasium as gym
import numpy as np
import pytest
import ray.rllib.algorithms.cql.torch.cql_torch_learner  # noqa: F401 (applies the fork)
import ray.rllib.algorithms.iql.torch.iql_torch_learner  # noqa: F401
import torch
from ray.rllib.algorithms.cql import CQLConfig
from ray.rllib.algorithms.iql import IQLConfig

from rllib._fork import overlay
from rllib.algorithms.cql.tests.cql_fixtures import OBS_SPACE, make_batch

ACTION_SPACE = gym.spaces.Box(-2.0, 2.0, (2,), np.float32)
UPSTREAM = {
    "cql": overlay.ORIGINALS[
        (
            "ray.rllib.algorithms.cql.torch.cql_torch_learner",
            "CQLTorchLearner.compute_gradients",
        )
    ],
    "iql": overlay.ORIGINALS[
        (
            "ray.rllib.algorithms.iql.torch.iql_torch_learner",
            "IQLTorchLearner.compute_gradients",
        )
    ],
}


def _learner(algo, module_ids):
    if algo == "cql":
        config = CQLConfig().training(lr=None, bc_iters=0, target_entropy=-2.0)
    else:
        config = IQLConfig()
    config = config.environment(
        observation_space=OBS_SPACE, action_space=ACTION_SPACE
    ).rl_module(model_config={"fcnet_hiddens": [16]})
    if module_ids != ["default_policy"]:
        config = config.multi_agent(
            policies=set(module_ids),
            policy_mapping_fn=lambda agent_id, *_, **__: agent_id,
        )
    spaces = dict.fromkeys(module_ids, (OBS_SPACE, ACTION_SPACE))
    return config.build_learner(env=None, spaces=spaces)


def _gradients(learner, compute_gradients, batches):
    """Forward, losses and one call of `compute_gradients`, seeded."""
    torch.manual_seed(0)
    fwd_out = learner.module.forward_train(batches)
    loss_per_module = learner.compute_losses(fwd_out=fwd_out, batch=batches)
    grads = compute_gradients(learner, loss_per_module)
    names = {
        learner.get_param_ref(param): f"{module_id}/{name}"
        for module_id in learner.module.keys()
        for name, param in learner.module[module_id].named_parameters()
    }
    for module_id, log_alpha in getattr(learner, "curr_log_alpha", {}).items():
        names[learner.get_param_ref(log_alpha)] = f"{module_id}/log_alpha"
    return {names[ref]: grad.detach().clone() for ref, grad in grads.items()}


@pytest.mark.parametrize("algo", ["cql", "iql"])
@pytest.mark.parametrize("module_ids", [["default_policy"], ["p0", "p1"]])
def test_one_learner_gets_upstreams_gradients(algo, module_ids):
    learner = _learner(algo, module_ids)
    batches = {
        module_id: make_batch(2.0, n_step=1, seed=i)
        for i, module_id in enumerate(module_ids)
    }
    fork = _gradients(learner, type(learner).compute_gradients, batches)
    upstream = _gradients(learner, UPSTREAM[algo], batches)
    assert sorted(fork) == sorted(upstream)
    assert any(name.endswith("weight") for name in fork)
    for name, grad in upstream.items():
        assert torch.equal(fork[name], grad), name


if __name__ == "__main__":
    import sys

    sys.exit(pytest.main(["-v", __file__]))
