"""CQL's critic loss, checked against the loss written out by hand from the
same forward pass: random actions weighed by the action box's own density,
bootstraps discounted with `gamma ** n_step`."""

import math

import numpy as np
import pytest
import torch
from ray.rllib.algorithms.sac.sac_learner import (
    QF_LOSS_KEY,
    QF_PREDS,
    QF_TWIN_LOSS_KEY,
    QF_TWIN_PREDS,
)
from ray.rllib.core import DEFAULT_MODULE_ID
from ray.rllib.core.columns import Columns
from ray.rllib.policy.sample_batch import MultiAgentBatch, SampleBatch

from rllib.algorithms.cql.tests.cql_fixtures import (
    build_learner,
    forward,
    losses,
    make_batch,
)
from rllib.algorithms.cql.torch.cql_torch_learner import (
    ALPHA_PRIME,
    ALPHA_PRIME_LOSS_KEY,
)


def expected_penalty(config, fwd_out, log_density, twin=False):
    """CQL's log-sum-exp penalty over random, next-state and current-state
    sampled actions, less the logged actions' Q-values, times `min_q_weight`."""
    prefix = "q_twin" if twin else "q"
    q = fwd_out[QF_TWIN_PREDS if twin else QF_PREDS].double()
    sampled = torch.cat(
        [
            fwd_out[f"{prefix}_rand_repeat"].double() - log_density,
            fwd_out[f"{prefix}_next_repeat"].double()
            - fwd_out["logps_next_repeat"].double(),
            fwd_out[f"{prefix}_curr_repeat"].double()
            - fwd_out["logps_curr_repeat"].double(),
        ],
        dim=1,
    )
    penalty = torch.logsumexp(sampled, dim=1).mean() - q.mean()
    return float(config.min_q_weight * penalty)


def expected_td_loss(config, batch, fwd_out, twin=False):
    """Squared TD error to the `gamma ** n_step` bootstrapped target."""
    q = fwd_out[QF_TWIN_PREDS if twin else QF_PREDS].double()
    discount = config.gamma ** batch["n_step"].double()
    not_terminated = 1.0 - batch[Columns.TERMINATEDS].double()
    target = (
        batch[Columns.REWARDS].double()
        + discount * not_terminated * fwd_out["q_target_next"].double()
    )
    return float(((q - target) ** 2).mean())


def expected_critic_loss(config, batch, fwd_out, log_density, twin=False):
    """Squared TD error to the n-step target plus CQL's log-sum-exp penalty
    over random, next-state and current-state sampled actions."""
    return expected_td_loss(config, batch, fwd_out, twin) + expected_penalty(
        config, fwd_out, log_density, twin
    )


@pytest.mark.parametrize("high,n_step", [(1.0, 1), (2.0, 1), (1.0, 3), (3.0, 2)])
def test_critic_losses_equal_the_written_out_loss(high, n_step):
    config, learner = build_learner(high=high, twin_q=True)
    batch = make_batch(high, n_step=n_step, seed=1)
    fwd_out = forward(learner, batch, seed=1)
    with torch.no_grad():
        _, parts = losses(
            type(learner).compute_loss_for_module, learner, config, batch, fwd_out
        )
    # Two action dimensions, each of width 2 * high.
    log_density = -2 * math.log(2 * high)
    assert parts[QF_LOSS_KEY] == pytest.approx(
        expected_critic_loss(config, batch, fwd_out, log_density), rel=1e-5
    )
    assert parts[QF_TWIN_LOSS_KEY] == pytest.approx(
        expected_critic_loss(config, batch, fwd_out, log_density, twin=True),
        rel=1e-5,
    )


def test_update_trains_policy_and_critics():
    """A full `Learner.update`: finite losses, policy and Q weights change."""
    config, learner = build_learner(high=2.0)
    batch = make_batch(2.0, n_step=2, seed=3)
    module = learner.module[DEFAULT_MODULE_ID]
    before = {k: v.clone() for k, v in module.state_dict().items()}
    results = learner.update(
        batch=MultiAgentBatch({DEFAULT_MODULE_ID: SampleBatch(batch)}, env_steps=32)
    )
    assert np.isfinite(float(results[DEFAULT_MODULE_ID][QF_LOSS_KEY].peek()))
    changed = [
        k for k, v in module.state_dict().items() if not torch.equal(before[k], v)
    ]
    assert any(k.startswith("pi") for k in changed), changed
    assert any(k.startswith("qf") for k in changed), changed


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
    log_density = -2 * math.log(4.0)
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


def test_no_lagrangian_optimizer_by_default():
    _, learner = build_learner(high=1.0)
    names = [name for name, _ in learner.get_optimizers_for_module(DEFAULT_MODULE_ID)]
    assert ALPHA_PRIME not in names
    assert not getattr(learner, "curr_log_alpha_prime", {})


if __name__ == "__main__":
    import sys

    sys.exit(pytest.main(["-v", __file__]))
