"""A restored SAC Learner goes on from its learned entropy temperature.

A local SAC Learner (no Ray) learns its temperature for three updates at a
high `alpha_lr`; a fresh Learner takes its state. The fresh one must hold the
same `log_alpha` and, after one more identical (seeded) update on each, still
the same one.
"""

import gymnasium as gym
import numpy as np
import pytest
import torch
from ray.rllib.algorithms.sac import SACConfig
from ray.rllib.core import DEFAULT_MODULE_ID
from ray.rllib.core.columns import Columns
from ray.rllib.policy.sample_batch import MultiAgentBatch, SampleBatch

OBS_SPACE = gym.spaces.Box(-1.0, 1.0, (3,), np.float32)
ACTION_SPACE = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
NUM_ROWS = 32


def _config():
    return (
        SACConfig()
        .environment(observation_space=OBS_SPACE, action_space=ACTION_SPACE)
        # "auto"'s value; resolved lazily from a spec the built Learner drops.
        .training(alpha_lr=0.1, initial_alpha=1.0, target_entropy=-2.0)
        .rl_module(model_config={"fcnet_hiddens": [16]})
    )


def _update(learner, seed):
    rng = np.random.default_rng(seed)

    def floats(shape):
        return torch.as_tensor(rng.uniform(-1, 1, shape), dtype=torch.float32)

    batch = {
        Columns.OBS: floats((NUM_ROWS, 3)),
        Columns.NEXT_OBS: floats((NUM_ROWS, 3)),
        Columns.ACTIONS: floats((NUM_ROWS, 2)),
        Columns.REWARDS: floats((NUM_ROWS,)),
        Columns.TERMINATEDS: torch.as_tensor(rng.random(NUM_ROWS) < 0.3),
        "n_step": torch.ones(NUM_ROWS, dtype=torch.int64),
        "weights": torch.ones(NUM_ROWS),
    }
    torch.manual_seed(seed)
    learner.update(
        batch=MultiAgentBatch(
            {DEFAULT_MODULE_ID: SampleBatch(batch)}, env_steps=NUM_ROWS
        )
    )


def _log_alpha(learner) -> float:
    return float(learner.curr_log_alpha[DEFAULT_MODULE_ID].detach()[0])


def test_restored_learner_keeps_the_learned_temperature():
    learner = _config().build_learner(env=None)
    for seed in range(3):
        _update(learner, seed)
    learned = _log_alpha(learner)
    # It moved away from log(initial_alpha) = 0.
    assert abs(learned) > 0.1

    restored = _config().build_learner(env=None)
    restored.set_state(learner.get_state())
    assert _log_alpha(restored) == pytest.approx(learned, abs=1e-7)

    # Training goes on as it would have: one more identical update on each.
    _update(learner, 7)
    _update(restored, 7)
    assert _log_alpha(restored) == pytest.approx(_log_alpha(learner), abs=1e-6)
    assert _log_alpha(learner) != pytest.approx(learned, abs=1e-3)


def test_weights_only_state_leaves_the_temperature_out():
    learner = _config().build_learner(env=None)
    _update(learner, 0)
    state = learner.get_state(components="rl_module")
    assert "curr_log_alpha" not in state


if __name__ == "__main__":
    import sys

    sys.exit(pytest.main(["-v", __file__]))
