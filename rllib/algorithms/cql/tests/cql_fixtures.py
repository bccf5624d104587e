"""A local CQL Learner (no Ray), batches, its forward pass and CQL's losses
written out by hand, for the loss tests."""

import math

import gymnasium as gym
import numpy as np
import pytest
import torch
from ray.rllib.algorithms.cql import CQLConfig
from ray.rllib.algorithms.sac.sac_learner import (
    QF_LOSS_KEY,
    QF_PREDS,
    QF_TWIN_LOSS_KEY,
    QF_TWIN_PREDS,
)
from ray.rllib.core import DEFAULT_MODULE_ID
from ray.rllib.core.columns import Columns

OBS_SPACE = gym.spaces.Box(-1.0, 1.0, (3,), np.float32)


def build_learner(high, twin_q=True, bc_iters=0, **training):
    """A CQL Learner for 2-dim actions in `[-high, high]`, gamma 0.9
    (`training`: more `CQLConfig.training` settings)."""
    action_space = gym.spaces.Box(-high, high, (2,), np.float32)
    config = (
        CQLConfig()
        .environment(observation_space=OBS_SPACE, action_space=action_space)
        .training(
            lr=None,
            bc_iters=bc_iters,
            twin_q=twin_q,
            gamma=0.9,
            # "auto"'s value; resolved lazily from a spec the built Learner drops.
            target_entropy=-2.0,
            **training,
        )
        .rl_module(model_config={"fcnet_hiddens": [16]})
    )
    return config, config.build_learner(env=None)


def make_batch(high, n_step, seed=0, num_rows=32):
    """Random transitions whose rows carry `n_step` (as the samplers add it)."""
    rng = np.random.default_rng(seed)

    def floats(low, high, shape):
        return torch.as_tensor(rng.uniform(low, high, shape), dtype=torch.float32)

    return {
        Columns.OBS: floats(-1, 1, (num_rows, 3)),
        Columns.NEXT_OBS: floats(-1, 1, (num_rows, 3)),
        Columns.ACTIONS: floats(-high, high, (num_rows, 2)),
        Columns.REWARDS: floats(-1, 1, (num_rows,)),
        Columns.TERMINATEDS: torch.as_tensor(rng.random(num_rows) < 0.3),
        "n_step": torch.full((num_rows,), n_step, dtype=torch.int64),
    }


def forward(learner, batch, seed=0):
    """The module's train forward pass (its sampled actions seeded)."""
    torch.manual_seed(seed)
    return learner.module[DEFAULT_MODULE_ID].forward_train(batch)


def losses(loss_fn, learner, config, batch, fwd_out):
    """Runs one loss function; returns its total and per-optimizer losses."""
    learner._temp_losses.clear()
    total = loss_fn(
        learner,
        module_id=DEFAULT_MODULE_ID,
        config=config,
        batch=batch,
        fwd_out=fwd_out,
    )
    parts = {name: float(loss) for (_, name), loss in learner._temp_losses.items()}
    learner._temp_losses.clear()
    return float(total), parts


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


def check_critic_losses(high, n_step, seed=1):
    """Both critics' losses, as the learner computes them, equal the losses
    written out by hand from the same forward pass (2-dim actions in
    `[-high, high]`; the random actions uniform on [-1, 1]^2)."""
    config, learner = build_learner(high=high, twin_q=True)
    batch = make_batch(high, n_step=n_step, seed=seed)
    fwd_out = forward(learner, batch, seed=seed)
    with torch.no_grad():
        _, parts = losses(
            type(learner).compute_loss_for_module, learner, config, batch, fwd_out
        )
    log_density = 2 * math.log(0.5)
    for key, twin in ((QF_LOSS_KEY, False), (QF_TWIN_LOSS_KEY, True)):
        expected = expected_critic_loss(config, batch, fwd_out, log_density, twin)
        assert parts[key] == pytest.approx(expected, rel=1e-5), key
