"""IQL's policy extraction: the logged actions' likelihood under a Gaussian at
the squashed mean, and what it buys: a policy that fits a behaviour
saturating at the bounds."""

import numpy as np
import pytest
from ray.rllib.algorithms.dqn.dqn_learner import QF_LOSS_KEY, QF_PREDS
from ray.rllib.algorithms.iql.iql_learner import QF_TARGET_PREDS, VF_PREDS_NEXT
from ray.rllib.algorithms.sac.sac_learner import QF_TWIN_LOSS_KEY
from ray.rllib.core import DEFAULT_MODULE_ID
from ray.rllib.core.columns import Columns
from ray.rllib.core.learner.learner import POLICY_LOSS_KEY

from rllib.algorithms.cql.tests.cql_fixtures import losses
from rllib.algorithms.iql.tests.iql_fixtures import (
    build_learner,
    fit_saturating_behaviour,
    make_batch,
)


@pytest.mark.parametrize("twin_q", [False, True])
def test_losses_written_out_by_hand(twin_q):
    config, learner = build_learner(twin_q=twin_q)
    batch = make_batch(seed=1)
    fwd_out = learner.module[DEFAULT_MODULE_ID].forward_train(batch)
    total, parts = losses(
        type(learner).compute_loss_for_module, learner, config, batch, fwd_out
    )
    assert total == pytest.approx(sum(parts.values()), rel=1e-6)

    def numpy(key):
        return fwd_out[key].detach().numpy()

    # Actor: exp(beta * A), capped at 100, times the logged actions'
    # log-density under N(tanh(mean), std).
    loc, log_std = np.split(numpy(Columns.ACTION_DIST_INPUTS), 2, axis=-1)
    std = np.exp(np.clip(log_std, -5.0, 2.0))
    actions = batch[Columns.ACTIONS].numpy()
    logp = -((actions - np.tanh(loc)) ** 2) / (2 * std**2) - np.log(
        std * np.sqrt(2 * np.pi)
    )
    advantages = numpy(QF_TARGET_PREDS) - numpy(Columns.VF_PREDS)
    weights = np.minimum(np.exp(3.0 * advantages), 100.0)
    assert parts[POLICY_LOSS_KEY] == pytest.approx(
        -np.mean(weights * logp.sum(-1)), rel=1e-5
    )
    # Value: expectile 0.7 of the target Q.
    expectile = np.where(advantages > 0, 0.7, 0.3)
    assert parts["value_loss"] == pytest.approx(
        np.mean(expectile * advantages**2), rel=1e-5
    )
    # Critic(s): squared TD error to r + gamma * V(s'), halved per twin.
    not_done = 1.0 - batch[Columns.TERMINATEDS].numpy()
    target = batch[Columns.REWARDS].numpy() + 0.9 * not_done * numpy(VF_PREDS_NEXT)
    critic = np.mean((target - numpy(QF_PREDS)) ** 2)
    assert parts[QF_LOSS_KEY] == pytest.approx(
        critic * (0.5 if twin_q else 1.0), rel=1e-5
    )
    assert (QF_TWIN_LOSS_KEY in parts) == twin_q


def test_the_actor_fits_a_behaviour_saturating_at_the_bounds():
    loss_fn = type(build_learner()[1]).compute_loss_for_module
    assert fit_saturating_behaviour(loss_fn) < 0.05


if __name__ == "__main__":
    import sys

    sys.exit(pytest.main(["-v", __file__]))
