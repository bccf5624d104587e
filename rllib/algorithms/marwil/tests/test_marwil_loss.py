"""MARWIL's advantage weights follow the advantages' scale and never overflow.

A local MARWIL Learner is built without Ray (`config.build_learner`) and fed
tensor batches whose rows carry value-target inputs, at reward scales from
0.01 to 10,000.
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
    ADVANTAGE_NORM_UPDATE_RATE,
    STATE_KEY,
    update_rate,
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


def _learner(**training):
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


def test_default_update_rate_means_the_advantage_norm_rate():
    """The config keeps its ray 2.60 default (1e-8); the Learner reads it as
    `ADVANTAGE_NORM_UPDATE_RATE`. Any other configured rate is used as given."""
    assert MARWILConfig().moving_average_sqd_adv_norm_update_rate == 1e-8
    assert update_rate(MARWILConfig()) == ADVANTAGE_NORM_UPDATE_RATE
    explicit = MARWILConfig().training(moving_average_sqd_adv_norm_update_rate=0.3)
    assert update_rate(explicit) == 0.3


def test_normalizer_starts_from_the_data_then_moves_at_the_rate():
    config, learner = _learner()
    norms = learner.moving_avg_sqd_adv_norms_per_module
    first, second = _batch(64, 1.0, seed=1), _batch(64, 1.0, seed=2)

    def squared_advantages(batch):
        probe = {k: v.clone() for k, v in batch.items()}
        add_value_targets(learner.module[DEFAULT_MODULE_ID], probe)
        advantages = probe[Postprocessing.VALUE_TARGETS] - probe[Columns.VF_PREDS]
        return float((advantages**2).mean())

    expected_first = squared_advantages(first)
    _update(learner, first)
    assert float(norms[DEFAULT_MODULE_ID]) == pytest.approx(expected_first, rel=1e-5)
    expected_second = squared_advantages(second)
    _update(learner, second)
    rate = ADVANTAGE_NORM_UPDATE_RATE
    assert float(norms[DEFAULT_MODULE_ID]) == pytest.approx(
        expected_first + rate * (expected_second - expected_first), rel=1e-5
    )


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


if __name__ == "__main__":
    import sys

    sys.exit(pytest.main(["-v", __file__]))
