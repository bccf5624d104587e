"""A local CQL Learner (no Ray), batches and its forward pass, for the loss tests."""

import gymnasium as gym
import numpy as np
import torch
from ray.rllib.algorithms.cql import CQLConfig
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
