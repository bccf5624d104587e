"""MARWIL's advantage weights follow the advantages' scale and never overflow.

A local MARWIL Learner is built without Ray (`config.build_learner`) and fed
tensor batches whose rows carry value-target inputs, at reward scales from
0.01 to 10,000. The normalizer starts from the data and moves at 0.05 unless a
test configures it otherwise; configured values are used as given.
"""

import gymnasium as gym
import numpy as np
import pytest
import torch
from ray.rllib.algorithms.marwil import MARWILConfig
from ray.rllib.core import DEFAULT_MODULE_ID
from ray.rllib.core.columns import Columns
from ray.rllib.core.learner.learner import POLICY_LOSS_KEY
from ray.rllib.evaluation.postprocessing import Postprocessing
from ray.rllib.policy.sample_batch import MultiAgentBatch, SampleBatch

from rllib.algorithms.marwil.torch.advantage_statistics import (
    START_FROM_DATA,
    STATE_KEY,
)
from rllib.algorithms.marwil.torch.marwil_torch_learner import (
    MAX_EXPONENT,
    VALUE_TARGET_SCALE_KEY,
)
from rllib.core.learner.value_targets import add_value_targets
from rllib.utils.postprocessing.bootstrapped_returns import (
    BOOTSTRAP_DISCOUNT,
    BOOTSTRAP_OBS,
    RETURNS_TO_BOOTSTRAP,
)

ENV = gym.make("CartPole-v1")

#: The rate the tests' normalizer moves at unless a test sets another.
RATE = 0.05


def _learner(**training):
    training = {
        "moving_average_sqd_adv_norm_start": START_FROM_DATA,
        "moving_average_sqd_adv_norm_update_rate": RATE,
        **training,
    }
    config = (
        MARWILConfig()
        .environment(
            observation_space=ENV.observation_space, action_space=ENV.action_space
        )
        .training(train_batch_size_per_learner=64, **training)
        .rl_module(model_config={"fcnet_hiddens": [16]})
    )
    learner = config.build_learner(env=None)
    return config, learner


def _batch(num_rows, reward_scale, seed=0):
    rng = np.random.default_rng(seed)
    columns = {
        Columns.OBS: rng.normal(size=(num_rows, 4)).astype(np.float32),
        Columns.ACTIONS: rng.integers(0, 2, size=num_rows),
        RETURNS_TO_BOOTSTRAP: (
            reward_scale * rng.uniform(0, 100, size=num_rows)
        ).astype(np.float32),
        BOOTSTRAP_OBS: rng.normal(size=(num_rows, 4)).astype(np.float32),
        BOOTSTRAP_DISCOUNT: np.where(rng.random(num_rows) < 0.5, 0.0, 0.9).astype(
            np.float32
        ),
    }
    return {k: torch.as_tensor(v) for k, v in columns.items()}


def _update(learner, batch):
    return learner.update(
        batch=MultiAgentBatch(
            {DEFAULT_MODULE_ID: SampleBatch(batch)}, env_steps=len(batch[Columns.OBS])
        )
    )


def _squared_advantages(learner, batch) -> float:
    """The batch's mean squared advantage under the learner's current weights."""
    probe = {k: v.clone() for k, v in batch.items()}
    add_value_targets(learner.module[DEFAULT_MODULE_ID], probe)
    advantages = probe[Postprocessing.VALUE_TARGETS] - probe[Columns.VF_PREDS]
    return float((advantages**2).mean())


@pytest.mark.parametrize("start, rate", [(100.0, 1e-8), (100.0, 0.3), (4.0, 0.5)])
def test_configured_start_and_rate_are_used_as_given(start, rate):
    """ray 2.60's defaults (100, 1e-8) included: the average starts at the
    configured start and moves at the configured rate, once per update."""
    _, learner = _learner(
        moving_average_sqd_adv_norm_start=start,
        moving_average_sqd_adv_norm_update_rate=rate,
    )
    norms = learner.moving_avg_sqd_adv_norms_per_module
    expected = start
    for seed in (1, 2):
        batch = _batch(64, 1.0, seed=seed)
        expected += rate * (_squared_advantages(learner, batch) - expected)
        _update(learner, batch)
        assert float(norms[DEFAULT_MODULE_ID]) == pytest.approx(expected, rel=1e-5)
    if rate == 1e-8:
        assert float(norms[DEFAULT_MODULE_ID]) == pytest.approx(start, rel=1e-5)


def test_normalizer_starts_from_the_data_then_moves_at_the_rate():
    _, learner = _learner()
    norms = learner.moving_avg_sqd_adv_norms_per_module
    first, second = _batch(64, 1.0, seed=1), _batch(64, 1.0, seed=2)
    expected_first = _squared_advantages(learner, first)
    _update(learner, first)
    assert float(norms[DEFAULT_MODULE_ID]) == pytest.approx(expected_first, rel=1e-5)
    expected_second = _squared_advantages(learner, second)
    _update(learner, second)
    assert float(norms[DEFAULT_MODULE_ID]) == pytest.approx(
        expected_first + RATE * (expected_second - expected_first), rel=1e-5
    )


def test_value_targets_from_the_data_move_the_statistics():
    """A batch that brings its own `value_targets` (no `vf_preds`): the
    advantages come from the module's values under the update's weights."""
    _, learner = _learner()
    module = learner.module[DEFAULT_MODULE_ID]
    norms = learner.moving_avg_sqd_adv_norms_per_module
    expected = None
    for seed in (1, 2, 3):
        rng = np.random.default_rng(seed)
        batch = {
            Columns.OBS: torch.as_tensor(rng.normal(size=(64, 4)), dtype=torch.float32),
            Columns.ACTIONS: torch.as_tensor(rng.integers(0, 2, size=64)),
            Postprocessing.VALUE_TARGETS: torch.as_tensor(
                rng.uniform(0, 50, size=64), dtype=torch.float32
            ),
        }
        with torch.no_grad():
            values = module.compute_values(batch)
        squared = float(((batch[Postprocessing.VALUE_TARGETS] - values) ** 2).mean())
        expected = (
            squared if expected is None else expected + RATE * (squared - expected)
        )
        _update(learner, batch)
        assert float(norms[DEFAULT_MODULE_ID]) == pytest.approx(expected, rel=1e-5)


@pytest.mark.parametrize("reward_scale", [0.01, 1.0, 10_000.0])
def test_weights_are_scale_free_and_finite(reward_scale):
    """Normalized advantages: the same spread of weights at any reward scale."""
    _, learner = _learner()
    batch = _batch(256, reward_scale)
    for _ in range(3):
        results = _update(learner, {k: v.clone() for k, v in batch.items()})
    assert np.isfinite(float(results[DEFAULT_MODULE_ID][POLICY_LOSS_KEY].peek()))
    module = learner.module[DEFAULT_MODULE_ID]
    probe = {k: v.clone() for k, v in batch.items()}
    add_value_targets(module, probe)
    advantages = probe[Postprocessing.VALUE_TARGETS] - probe[Columns.VF_PREDS]
    norm = learner.moving_avg_sqd_adv_norms_per_module[DEFAULT_MODULE_ID]
    scaled = advantages / norm.sqrt()
    # About unit scale whatever the rewards: the weights exp(beta * A / c)
    # neither all collapse to 1 (tiny rewards) nor overflow (huge ones).
    assert 0.3 < float(scaled.std()) < 3.0


def test_direct_loss_call_uses_the_configured_start_and_clips():
    """A loss computed outside `update()` (as ray's MARWIL test does) reads the
    normalizer without moving it; no weight exceeds exp(MAX_EXPONENT)."""
    config, learner = _learner(moving_average_sqd_adv_norm_start=1e-6)
    batch = _batch(64, 1000.0)
    add_value_targets(learner.module[DEFAULT_MODULE_ID], batch)
    module = learner.module[DEFAULT_MODULE_ID]
    fwd_out = module.forward_train(batch)
    loss = learner.compute_loss_for_module(
        module_id=DEFAULT_MODULE_ID, config=config, batch=batch, fwd_out=fwd_out
    )
    assert torch.isfinite(loss)
    assert float(learner.moving_avg_sqd_adv_norms_per_module[DEFAULT_MODULE_ID]) == (
        pytest.approx(1e-6)
    )
    log_probs = (
        module.get_train_action_dist_cls()
        .from_logits(fwd_out[Columns.ACTION_DIST_INPUTS])
        .logp(batch[Columns.ACTIONS])
    )
    policy_loss = float(
        learner.metrics.peek((DEFAULT_MODULE_ID, POLICY_LOSS_KEY)).detach()
    )
    # Every advantage / 1e-3 is far above the clip: all weights are exp(20).
    expected = -float(torch.exp(torch.tensor(MAX_EXPONENT)) * log_probs.detach().mean())
    assert policy_loss == pytest.approx(expected, rel=1e-4)
    # Before any update the value loss is ray 2.60's (no value-target scale
    # yet): total = policy_loss + vf_coeff * 0.5 * mean(A**2).
    advantages = batch[Postprocessing.VALUE_TARGETS] - module.compute_values(batch)
    vf_loss = 0.5 * float((advantages.detach() ** 2).mean())
    assert float(loss) == pytest.approx(
        policy_loss + config.vf_coeff * vf_loss, rel=1e-4
    )


def test_direct_loss_call_before_any_update_starts_from_the_batch():
    """With the average starting from the data, a loss before any update
    normalizes by the batch's own mean squared advantage."""
    config, learner = _learner(beta=1.0)
    batch = _batch(64, 10.0, seed=3)
    add_value_targets(learner.module[DEFAULT_MODULE_ID], batch)
    module = learner.module[DEFAULT_MODULE_ID]
    fwd_out = module.forward_train(batch)
    learner.compute_loss_for_module(
        module_id=DEFAULT_MODULE_ID, config=config, batch=batch, fwd_out=fwd_out
    )
    advantages = (
        batch[Postprocessing.VALUE_TARGETS] - module.compute_values(batch)
    ).detach()
    log_probs = (
        module.get_train_action_dist_cls()
        .from_logits(fwd_out[Columns.ACTION_DIST_INPUTS])
        .logp(batch[Columns.ACTIONS])
        .detach()
    )
    weights = torch.exp(advantages / (1e-8 + (advantages**2).mean().sqrt()))
    policy_loss = float(
        learner.metrics.peek((DEFAULT_MODULE_ID, POLICY_LOSS_KEY)).detach()
    )
    assert policy_loss == pytest.approx(-float((weights * log_probs).mean()), rel=1e-4)
    assert DEFAULT_MODULE_ID not in learner.moving_avg_sqd_adv_norms_per_module


def test_value_loss_is_divided_by_the_value_target_scale():
    """The total loss is `policy_loss + vf_coeff * vf_loss / scale`, where the
    scale starts at the first batch's mean squared value target; `vf_loss` is
    reported unscaled, as ray 2.60 reported it."""
    config, learner = _learner(vf_coeff=0.5)
    batch = _batch(64, 1.0, seed=4)
    probe = {k: v.clone() for k, v in batch.items()}
    add_value_targets(learner.module[DEFAULT_MODULE_ID], probe)
    expected_scale = float((probe[Postprocessing.VALUE_TARGETS] ** 2).mean())
    stats = _update(learner, batch)[DEFAULT_MODULE_ID]
    scale = float(stats[VALUE_TARGET_SCALE_KEY].peek())
    assert scale == pytest.approx(expected_scale, rel=1e-5)
    policy_loss = float(stats[POLICY_LOSS_KEY].peek())
    vf_loss = float(stats["vf_loss"].peek())
    assert float(stats["total_loss"].peek()) == pytest.approx(
        policy_loss + 0.5 * vf_loss / scale, rel=1e-5
    )


def test_statistics_round_trip_through_the_learner_state(caplog):
    _, learner = _learner()
    _update(learner, _batch(64, 1.0, seed=5))
    _update(learner, _batch(64, 1.0, seed=6))
    state = learner.get_state()
    saved = state[STATE_KEY][DEFAULT_MODULE_ID]
    assert saved["updates"] == 2
    assert saved["moving_avg_sqd_adv_norm"] == float(
        learner.moving_avg_sqd_adv_norms_per_module[DEFAULT_MODULE_ID]
    )
    assert "marwil_advantage_statistics" not in learner.get_state(
        components="rl_module"
    )

    _, fresh = _learner()
    fresh.set_state(state)
    assert fresh.get_state()[STATE_KEY] == state[STATE_KEY]

    # A state without the statistics (saved by ray 2.60) starts them fresh.
    state_without_statistics = {k: v for k, v in state.items() if k != STATE_KEY}
    with caplog.at_level("WARNING"):
        fresh.set_state(state_without_statistics)
    assert "start fresh" in caplog.text
    batch = _batch(64, 1.0, seed=7)
    probe = {k: v.clone() for k, v in batch.items()}
    add_value_targets(fresh.module[DEFAULT_MODULE_ID], probe)
    advantages = probe[Postprocessing.VALUE_TARGETS] - probe[Columns.VF_PREDS]
    _update(fresh, batch)
    assert float(
        fresh.moving_avg_sqd_adv_norms_per_module[DEFAULT_MODULE_ID]
    ) == pytest.approx(float((advantages**2).mean()), rel=1e-5)


def test_fresh_statistics_restart_at_the_configured_start():
    """A state without the statistics resets a configured start too."""
    _, learner = _learner(
        moving_average_sqd_adv_norm_start=9.0,
        moving_average_sqd_adv_norm_update_rate=0.5,
    )
    _update(learner, _batch(64, 1.0, seed=5))
    state = {k: v for k, v in learner.get_state().items() if k != STATE_KEY}
    learner.set_state(state)
    batch = _batch(64, 1.0, seed=6)
    expected = 9.0 + 0.5 * (_squared_advantages(learner, batch) - 9.0)
    _update(learner, batch)
    norm = learner.moving_avg_sqd_adv_norms_per_module[DEFAULT_MODULE_ID]
    assert float(norm) == pytest.approx(expected, rel=1e-5)


if __name__ == "__main__":
    import sys

    sys.exit(pytest.main(["-v", __file__]))
