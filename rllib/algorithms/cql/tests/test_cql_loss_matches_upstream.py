"""The fork's CQL loss computes upstream's values wherever its two
corrections do not apply ([-1, 1] actions, one-step rows), and changes only
the critic losses where they do. Both loss functions see the same batch and
forward pass."""

import pytest
import ray.rllib.algorithms.cql.torch.cql_torch_learner  # noqa: F401 (applies the fork)
import torch
from ray.rllib.algorithms.sac.sac_learner import QF_LOSS_KEY
from ray.rllib.core.learner.learner import POLICY_LOSS_KEY

from rllib._fork import overlay
from rllib.algorithms.cql.tests.cql_fixtures import (
    build_learner,
    forward,
    losses,
    make_batch,
)

UPSTREAM_LOSS = overlay.ORIGINALS[
    (
        "ray.rllib.algorithms.cql.torch.cql_torch_learner",
        "CQLTorchLearner.compute_loss_for_module",
    )
]


def _both(learner, config, batch, fwd_out):
    fork = losses(
        type(learner).compute_loss_for_module, learner, config, batch, fwd_out
    )
    upstream = losses(UPSTREAM_LOSS, learner, config, batch, fwd_out)
    return fork, upstream


@pytest.mark.parametrize("twin_q", [False, True])
@pytest.mark.parametrize("bc_iters", [0, 1000])
def test_unit_box_and_one_step_rows_give_upstream_values_exactly(twin_q, bc_iters):
    config, learner = build_learner(high=1.0, twin_q=twin_q, bc_iters=bc_iters)
    batch = make_batch(1.0, n_step=1)
    fork, upstream = _both(learner, config, batch, forward(learner, batch))
    assert fork == upstream
    assert {POLICY_LOSS_KEY, QF_LOSS_KEY, "alpha_loss"} <= set(fork[1])


@pytest.mark.parametrize("high,n_step", [(2.0, 1), (1.0, 3)])
def test_corrections_change_only_the_critic_losses(high, n_step):
    config, learner = build_learner(high=high)
    batch = make_batch(high, n_step=n_step, seed=1)
    with torch.no_grad():
        (_, fork), (_, upstream) = _both(
            learner, config, batch, forward(learner, batch, seed=1)
        )
    assert fork[QF_LOSS_KEY] != pytest.approx(upstream[QF_LOSS_KEY], rel=1e-4)
    assert fork[POLICY_LOSS_KEY] == upstream[POLICY_LOSS_KEY]
    assert fork["alpha_loss"] == upstream["alpha_loss"]


if __name__ == "__main__":
    import sys

    sys.exit(pytest.main(["-v", __file__]))
