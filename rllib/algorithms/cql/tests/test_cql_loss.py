"""CQL's random actions lie where the policy acts, uniform on [-1, 1] per
dimension whatever the action box (the policy's squashed Gaussian; the
EnvRunner maps it onto the box), and the critic loss, checked against the loss
written out by hand from the same forward pass, weighs them by that
density."""

import numpy as np
import pytest
import torch
from ray.rllib.algorithms.sac.sac_learner import QF_LOSS_KEY
from ray.rllib.core import DEFAULT_MODULE_ID
from ray.rllib.policy.sample_batch import MultiAgentBatch, SampleBatch

from rllib.algorithms.cql.tests.cql_fixtures import (
    build_learner,
    check_critic_losses,
    forward,
    make_batch,
)


@pytest.mark.parametrize("high", [1.0, 2.0, 3.0])
def test_random_actions_are_uniform_where_the_policy_acts(high):
    _, learner = build_learner(high=high)
    batch = make_batch(high, n_step=1, seed=2, num_rows=256)
    with torch.no_grad():
        actions = forward(learner, batch, seed=2)["actions_rand_repeat"]
    assert actions.shape[-1] == 2
    assert float(actions.min()) >= -1.0 and float(actions.max()) <= 1.0
    # Uniform on [-1, 1]: the mean is near 0, a quarter lies in each half of
    # each half (256 rows times `num_actions` draws per dimension).
    assert abs(float(actions.mean())) < 0.05
    assert float((actions > 0.5).float().mean()) == pytest.approx(0.25, abs=0.03)


@pytest.mark.parametrize("high", [1.0, 2.0, 3.0])
def test_critic_losses_weigh_random_actions_by_their_density(high):
    check_critic_losses(high, n_step=1)


def test_update_trains_policy_and_critics():
    """A full `Learner.update`: finite losses, policy and Q weights change."""
    config, learner = build_learner(high=2.0)
    batch = make_batch(2.0, n_step=1, seed=3)
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


if __name__ == "__main__":
    import sys

    sys.exit(pytest.main(["-v", __file__]))
