"""`TorchLearner.apply_gradients` with fused nan/inf checks does what upstream's
does: the same parameters, optimizer states and warnings, for finite gradients,
non-finite ones set to zero, and `torch_skip_nan_gradients`."""

import logging

import gymnasium as gym
import numpy as np
import pytest
import ray.rllib.core.learner.torch.torch_learner  # noqa: F401 (applies the fork)
import torch
from ray.rllib.algorithms.iql import IQLConfig
from ray.rllib.algorithms.ppo import PPOConfig

from rllib._fork import overlay
from rllib.core.learner.torch.torch_learner import all_finite

UPSTREAM = overlay.ORIGINALS[
    ("ray.rllib.core.learner.torch.torch_learner", "TorchLearner.apply_gradients")
]
OBS_SPACE = gym.spaces.Box(-1.0, 1.0, (4,), np.float32)
ACTION_SPACE = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)


def _learner(algo, skip_nan):
    config = IQLConfig() if algo == "iql" else PPOConfig()
    config = (
        config.environment(observation_space=OBS_SPACE, action_space=ACTION_SPACE)
        .rl_module(model_config={"fcnet_hiddens": [16]})
        .experimental(_torch_grad_scaler_class=None)
    )
    config.torch_skip_nan_gradients = skip_nan
    return config.build_learner(env=None)


def _gradients(learner, poison):
    generator = torch.Generator().manual_seed(0)
    grads = {
        pid: torch.randn(param.shape, generator=generator)
        for pid, param in learner._params.items()
    }
    if poison:
        first, last = list(grads)[0], list(grads)[-1]
        grads[first].view(-1)[0] = float("nan")
        grads[last].view(-1)[-1] = float("inf")
    return grads


def _learner_warnings(caplog):
    return [
        record.getMessage()
        for record in caplog.records
        if record.name == "ray.rllib.core.learner.torch.torch_learner"
    ]


def _apply(learner, apply_gradients, grads, steps=2):
    for _ in range(steps):
        apply_gradients(learner, {pid: g.clone() for pid, g in grads.items()})
    params = {pid: p.detach().clone() for pid, p in learner._params.items()}
    optim_states = [
        {k: v.clone() for k, v in state.items() if torch.is_tensor(v)}
        for _, optim in learner._named_optimizers.items()
        for state in optim.state.values()
    ]
    return params, optim_states


@pytest.mark.parametrize("algo", ["ppo", "iql"])
@pytest.mark.parametrize(
    "poison,skip_nan", [(False, False), (True, False), (True, True)]
)
def test_same_parameters_and_warnings_as_upstream(algo, poison, skip_nan, caplog):
    fork_learner = _learner(algo, skip_nan)
    upstream_learner = _learner(algo, skip_nan)
    upstream_learner.set_state(fork_learner.get_state())
    initial = [p.detach().clone() for p in fork_learner._params.values()]
    grads = _gradients(fork_learner, poison)
    assert all_finite(grads.values()) is not poison
    upstream_grads = _gradients(upstream_learner, poison)

    with caplog.at_level(logging.WARNING):
        fork_params, fork_optim = _apply(
            fork_learner, type(fork_learner).apply_gradients, grads
        )
        fork_warnings = _learner_warnings(caplog)
        caplog.clear()
        upstream_params, upstream_optim = _apply(
            upstream_learner, UPSTREAM, upstream_grads
        )
        upstream_warnings = _learner_warnings(caplog)

    assert len(fork_params) == len(upstream_params)
    for fork_value, value in zip(fork_params.values(), upstream_params.values()):
        torch.testing.assert_close(fork_value, value, rtol=0, atol=0, equal_nan=True)
    assert len(fork_optim) == len(upstream_optim) > 0
    for fork_state, upstream_state in zip(fork_optim, upstream_optim):
        for key, value in upstream_state.items():
            torch.testing.assert_close(
                fork_state[key], value, rtol=0, atol=0, equal_nan=True
            )
    # The parameters moved; nan/inf handling as upstream.
    assert any(
        not torch.equal(after, p) for after, p in zip(fork_params.values(), initial)
    )
    has_nan = any(torch.isnan(p).any() for p in fork_params.values())
    assert has_nan is (poison and skip_nan)
    if poison and not skip_nan:
        # One warning pair per poisoned gradient and step, named as upstream.
        assert len(fork_warnings) == len(upstream_warnings) == 8
        assert [w for w in fork_warnings if w.startswith("Gradients")] == [
            w for w in upstream_warnings if w.startswith("Gradients")
        ]
    else:
        assert fork_warnings == upstream_warnings == []


def test_all_finite():
    assert all_finite([])
    assert all_finite([torch.ones(3), torch.zeros(2, 2, dtype=torch.float64)])
    assert not all_finite([torch.ones(3), torch.tensor([1.0, float("-inf")])])
    assert not all_finite(
        [torch.ones(3), torch.tensor([float("nan")], dtype=torch.float64)]
    )
    # Checking leaves the values as they were.
    grad = torch.tensor([1.5, -2.25, 3e38])
    assert all_finite([grad])
    assert torch.equal(grad, torch.tensor([1.5, -2.25, 3e38]))


if __name__ == "__main__":
    import sys

    sys.exit(pytest.main(["-v", __file__]))
