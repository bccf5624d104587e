"""CQL's Lagrangian form (`lagrangian=True`): the conservative weight
`alpha'` is learned by dual ascent on the penalty's excess over
`lagrangian_thresh`, checked against the loss written out by hand."""

import math

import numpy as np
import pytest
import torch
from ray.rllib.algorithms.sac.sac_learner import QF_LOSS_KEY, QF_TWIN_LOSS_KEY
from ray.rllib.core import DEFAULT_MODULE_ID
from ray.rllib.policy.sample_batch import MultiAgentBatch, SampleBatch

from rllib.algorithms.cql.tests.cql_fixtures import (
    build_learner,
    expected_penalty,
    expected_td_loss,
    forward,
    losses,
    make_batch,
)

#: The Lagrangian weight's optimizer and the key of its loss, as users see
#: them in the Learner's optimizers and results.
ALPHA_PRIME = "alpha_prime"
ALPHA_PRIME_LOSS_KEY = "alpha_prime_loss"


@pytest.mark.parametrize("twin_q", [True, False])
def test_lagrangian_losses_equal_the_written_out_loss(twin_q):
    """`lagrangian=True`: each critic's penalty weighs `alpha'` times its
    excess over `lagrangian_thresh`, and `alpha'`'s loss is minus `alpha'`
    times the critics' mean excess (alpha' = 1 before any update)."""
    thresh = 0.5
    config, learner = build_learner(
        high=2.0, twin_q=twin_q, lagrangian=True, lagrangian_thresh=thresh
    )
    batch = make_batch(2.0, n_step=1, seed=2)
    fwd_out = forward(learner, batch, seed=2)
    with torch.no_grad():
        _, parts = losses(
            type(learner).compute_loss_for_module, learner, config, batch, fwd_out
        )
    log_density = 2 * math.log(0.5)
    penalties = [expected_penalty(config, fwd_out, log_density)]
    assert parts[QF_LOSS_KEY] == pytest.approx(
        expected_td_loss(config, batch, fwd_out) + 1.0 * (penalties[0] - thresh),
        rel=1e-5,
    )
    if twin_q:
        penalties.append(expected_penalty(config, fwd_out, log_density, twin=True))
        assert parts[QF_TWIN_LOSS_KEY] == pytest.approx(
            expected_td_loss(config, batch, fwd_out, twin=True)
            + 1.0 * (penalties[1] - thresh),
            rel=1e-5,
        )
    assert parts[ALPHA_PRIME_LOSS_KEY] == pytest.approx(
        -1.0 * (np.mean(penalties) - thresh), rel=1e-5
    )


@pytest.mark.parametrize("thresh,grows", [(-100.0, True), (100.0, False)])
def test_lagrangian_weight_follows_the_penalty_excess(thresh, grows):
    """An update raises `alpha'` while the penalty exceeds the threshold and
    lowers it below; the critics and the policy train as without it."""
    config, learner = build_learner(high=2.0, lagrangian=True, lagrangian_thresh=thresh)
    names = [name for name, _ in learner.get_optimizers_for_module(DEFAULT_MODULE_ID)]
    assert ALPHA_PRIME in names, names
    batch = make_batch(2.0, n_step=1, seed=4)
    before = float(learner.curr_log_alpha_prime[DEFAULT_MODULE_ID])
    results = learner.update(
        batch=MultiAgentBatch({DEFAULT_MODULE_ID: SampleBatch(batch)}, env_steps=32)
    )
    after = float(learner.curr_log_alpha_prime[DEFAULT_MODULE_ID])
    assert (after > before) if grows else (after < before), (before, after)
    logged = results[DEFAULT_MODULE_ID]
    assert np.isfinite(float(logged[ALPHA_PRIME_LOSS_KEY].peek()))
    assert float(logged["alpha_prime_value"].peek()) == pytest.approx(1.0)


def test_restored_learner_keeps_the_lagrangian_weight():
    """`log_alpha'` is in the Learner's state: a fresh Learner that takes the
    state holds the learned weight and, after one more identical (seeded)
    update on each, the same one as the original."""

    def update(learner, seed):
        batch = make_batch(2.0, n_step=1, seed=seed)
        torch.manual_seed(seed)
        learner.update(
            batch=MultiAgentBatch({DEFAULT_MODULE_ID: SampleBatch(batch)}, env_steps=32)
        )

    def log_alpha_prime(learner):
        return float(learner.curr_log_alpha_prime[DEFAULT_MODULE_ID].detach()[0])

    training = dict(lagrangian=True, lagrangian_thresh=-100.0, critic_lr=0.05)
    _, learner = build_learner(high=2.0, **training)
    for seed in range(3):
        update(learner, seed)
    learned = log_alpha_prime(learner)
    assert learned > 0.1  # it rose from log(1) = 0

    _, restored = build_learner(high=2.0, **training)
    restored.set_state(learner.get_state())
    assert log_alpha_prime(restored) == pytest.approx(learned, abs=1e-7)
    update(learner, 7)
    update(restored, 7)
    assert log_alpha_prime(restored) == pytest.approx(
        log_alpha_prime(learner), abs=1e-6
    )


def test_no_lagrangian_optimizer_by_default():
    _, learner = build_learner(high=1.0)
    names = [name for name, _ in learner.get_optimizers_for_module(DEFAULT_MODULE_ID)]
    assert ALPHA_PRIME not in names
    assert not getattr(learner, "curr_log_alpha_prime", {})


if __name__ == "__main__":
    import sys

    sys.exit(pytest.main(["-v", __file__]))
