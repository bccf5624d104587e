"""The fork's CQL loss computes upstream's values wherever its correction
does not apply (one-step rows, any action box), and changes only the critic
losses where it does (n-step rows). Both loss functions see the same batch and
forward pass. The fork's module draws the random actions it scores on
[-1, 1]: upstream's box-uniform draws, mapped affinely."""

import pytest
import ray.rllib.algorithms.cql.torch.cql_torch_learner  # noqa: F401 (applies the fork)
import ray.rllib.algorithms.cql.torch.default_cql_torch_rl_module  # noqa: F401
import torch
from ray.rllib.algorithms.sac.sac_learner import QF_LOSS_KEY
from ray.rllib.core import DEFAULT_MODULE_ID
from ray.rllib.core.columns import Columns
from ray.rllib.core.learner.learner import POLICY_LOSS_KEY

from rllib._fork import overlay
from rllib.algorithms.cql.tests.cql_fixtures import (
    build_learner,
    forward,
    losses,
    make_batch,
)

UPSTREAM_REPEAT_ACTIONS = overlay.ORIGINALS[
    (
        "ray.rllib.algorithms.cql.torch.default_cql_torch_rl_module",
        "DefaultCQLTorchRLModule._repeat_actions",
    )
]
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


@pytest.mark.parametrize("high", [1.0, 2.0])
@pytest.mark.parametrize("twin_q", [False, True])
@pytest.mark.parametrize("bc_iters", [0, 1000])
def test_one_step_rows_give_upstream_values_exactly(high, twin_q, bc_iters):
    config, learner = build_learner(high=high, twin_q=twin_q, bc_iters=bc_iters)
    batch = make_batch(high, n_step=1)
    fork, upstream = _both(learner, config, batch, forward(learner, batch))
    assert fork == upstream
    assert {POLICY_LOSS_KEY, QF_LOSS_KEY, "alpha_loss"} <= set(fork[1])


@pytest.mark.parametrize("high,n_step", [(1.0, 3), (2.0, 2)])
def test_n_step_rows_change_only_the_critic_losses(high, n_step):
    config, learner = build_learner(high=high)
    batch = make_batch(high, n_step=n_step, seed=1)
    with torch.no_grad():
        (_, fork), (_, upstream) = _both(
            learner, config, batch, forward(learner, batch, seed=1)
        )
    assert fork[QF_LOSS_KEY] != pytest.approx(upstream[QF_LOSS_KEY], rel=1e-6)
    assert fork[POLICY_LOSS_KEY] == upstream[POLICY_LOSS_KEY]
    assert fork["alpha_loss"] == upstream["alpha_loss"]


@pytest.mark.parametrize("high", [1.0, 3.0])
def test_random_actions_are_upstreams_draws_mapped_onto_the_unit_box(high):
    _, learner = build_learner(high=high)
    module = learner.module[DEFAULT_MODULE_ID]
    obs = make_batch(high, n_step=1)[Columns.OBS]
    box = torch.rand((obs.shape[0] * module.model_config["num_actions"], 2))
    drawn = -high + 2 * high * box
    with torch.no_grad():
        fork = module._repeat_actions(obs, drawn)[Columns.ACTIONS]
        upstream = UPSTREAM_REPEAT_ACTIONS(module, obs, drawn)[Columns.ACTIONS]
    assert torch.equal(upstream, drawn)
    expected = drawn if high == 1.0 else 2 * box - 1
    assert torch.allclose(fork, expected, atol=1e-6)


if __name__ == "__main__":
    import sys

    sys.exit(pytest.main(["-v", __file__]))
