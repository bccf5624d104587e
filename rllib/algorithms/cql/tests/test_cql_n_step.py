"""CQL's Bellman target with n-step rows: a row whose reward sums `n_step`
discounted rewards bootstraps with `gamma ** n_step`, as SAC's does."""

import math

import pytest
import torch
from ray.rllib.algorithms.sac.sac_learner import QF_LOSS_KEY, QF_TWIN_LOSS_KEY

from rllib.algorithms.cql.tests.cql_fixtures import (
    build_learner,
    expected_critic_loss,
    forward,
    losses,
    make_batch,
)


@pytest.mark.parametrize("n_step", [1, 2, 3])
def test_bootstrap_is_discounted_by_gamma_to_the_n_step(n_step):
    # Actions in [-1, 1]: the random actions' density is upstream's (1/2)^2.
    config, learner = build_learner(high=1.0, twin_q=True)
    batch = make_batch(1.0, n_step=n_step, seed=1)
    fwd_out = forward(learner, batch, seed=1)
    with torch.no_grad():
        _, parts = losses(
            type(learner).compute_loss_for_module, learner, config, batch, fwd_out
        )
    log_density = 2 * math.log(0.5)
    assert parts[QF_LOSS_KEY] == pytest.approx(
        expected_critic_loss(config, batch, fwd_out, log_density), rel=1e-5
    )
    assert parts[QF_TWIN_LOSS_KEY] == pytest.approx(
        expected_critic_loss(config, batch, fwd_out, log_density, twin=True),
        rel=1e-5,
    )


if __name__ == "__main__":
    import sys

    sys.exit(pytest.main(["-v", __file__]))
