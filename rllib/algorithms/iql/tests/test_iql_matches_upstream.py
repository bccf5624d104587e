"""The fork's IQL loss against ray 2.60's: the value and critic losses are
upstream's; only the actor loss changes, and it fits a saturating behaviour
better."""

import pytest
import ray.rllib.algorithms.iql.torch.iql_torch_learner as learner_file
from ray.rllib.core import DEFAULT_MODULE_ID
from ray.rllib.core.learner.learner import POLICY_LOSS_KEY

from rllib._fork import overlay
from rllib.algorithms.cql.tests.cql_fixtures import losses
from rllib.algorithms.iql.tests.iql_fixtures import (
    build_learner,
    fit_saturating_behaviour,
    make_batch,
)

UPSTREAM_LOSS = overlay.ORIGINALS[
    (learner_file.__name__, "IQLTorchLearner.compute_loss_for_module")
]


@pytest.mark.parametrize("twin_q", [False, True])
def test_only_the_actor_loss_differs_from_upstreams(twin_q):
    config, learner = build_learner(twin_q=twin_q)
    batch = make_batch(seed=1)
    fwd_out = learner.module[DEFAULT_MODULE_ID].forward_train(batch)
    _, fork = losses(
        type(learner).compute_loss_for_module, learner, config, batch, fwd_out
    )
    _, upstream = losses(UPSTREAM_LOSS, learner, config, batch, fwd_out)
    assert set(fork) == set(upstream)
    for name in set(fork) - {POLICY_LOSS_KEY}:
        assert fork[name] == upstream[name], name
    assert fork[POLICY_LOSS_KEY] != pytest.approx(upstream[POLICY_LOSS_KEY], rel=1e-3)


def test_upstreams_likelihood_fits_the_saturating_behaviour_worse():
    fork_error = fit_saturating_behaviour(
        type(build_learner()[1]).compute_loss_for_module
    )
    upstream_error = fit_saturating_behaviour(UPSTREAM_LOSS)
    # Measured: 0.012 vs 0.094.
    assert fork_error < upstream_error / 2, (fork_error, upstream_error)


if __name__ == "__main__":
    import sys

    sys.exit(pytest.main(["-v", __file__]))
