"""A local IQL Learner (no Ray), batches, and a small behaviour-cloning fit,
for the loss tests."""

import gymnasium as gym
import numpy as np
import torch
from ray.rllib.algorithms.dqn.dqn_learner import QF_PREDS
from ray.rllib.algorithms.iql import IQLConfig
from ray.rllib.algorithms.iql.iql_learner import QF_TARGET_PREDS, VF_PREDS_NEXT
from ray.rllib.algorithms.sac.sac_learner import QF_TWIN_PREDS
from ray.rllib.core import DEFAULT_MODULE_ID
from ray.rllib.core.columns import Columns
from ray.rllib.core.learner.learner import POLICY_LOSS_KEY
from ray.rllib.core.models.base import ENCODER_OUT

#: The train-pass outputs IQL's loss reads.
READ_BY_THE_LOSS = (
    Columns.ACTION_DIST_INPUTS,
    QF_PREDS,
    QF_TWIN_PREDS,
    QF_TARGET_PREDS,
    Columns.VF_PREDS,
    VF_PREDS_NEXT,
)


def build_learner(twin_q=True, beta=3.0, hiddens=(16,), obs_dim=3, seed=0):
    """An IQL Learner for `obs_dim` observations and 2-dim actions in [-1, 1]."""
    torch.manual_seed(seed)
    config = (
        IQLConfig()
        .environment(
            observation_space=gym.spaces.Box(-1.0, 1.0, (obs_dim,), np.float32),
            action_space=gym.spaces.Box(-1.0, 1.0, (2,), np.float32),
        )
        .training(twin_q=twin_q, beta=beta, expectile=0.7, gamma=0.9)
        .rl_module(model_config={"fcnet_hiddens": list(hiddens)})
    )
    return config, config.build_learner(env=None)


def make_batch(seed=0, num_rows=32, saturated=0.3):
    """Random transitions; a `saturated` share of the actions at the bounds,
    as a saturating controller logs them."""
    rng = np.random.default_rng(seed)
    actions = rng.uniform(-1, 1, (num_rows, 2))
    edge = rng.random(num_rows) < saturated
    actions[edge] = np.sign(actions[edge])

    def floats(x):
        return torch.as_tensor(x, dtype=torch.float32)

    return {
        Columns.OBS: floats(rng.uniform(-1, 1, (num_rows, 3))),
        Columns.NEXT_OBS: floats(rng.uniform(-1, 1, (num_rows, 3))),
        Columns.ACTIONS: floats(actions),
        Columns.REWARDS: floats(rng.uniform(-1, 1, num_rows)),
        Columns.TERMINATEDS: torch.as_tensor(rng.random(num_rows) < 0.3),
    }


def saturating_behaviour(obs: np.ndarray) -> np.ndarray:
    return np.clip(2.0 * obs, -1.0, 1.0)


def fit_saturating_behaviour(loss_fn, updates=400) -> float:
    """Trains IQL's actor alone on `saturating_behaviour` (about half its
    actions at the bounds), with every advantage 0 (so: behaviour cloning)
    and `loss_fn` as the loss. Returns the mean absolute error of the
    deterministic action on fresh observations."""
    config, learner = build_learner(beta=1.0, hiddens=(64, 64), obs_dim=2)
    module = learner.module[DEFAULT_MODULE_ID]
    optimizer = torch.optim.Adam(
        list(module.pi_encoder.parameters()) + list(module.pi.parameters()), lr=3e-3
    )
    rng = np.random.default_rng(0)
    zeros = torch.zeros(256)
    for _ in range(updates):
        obs = rng.uniform(-1, 1, (256, 2)).astype(np.float32)
        batch = {
            Columns.OBS: torch.as_tensor(obs),
            Columns.ACTIONS: torch.as_tensor(saturating_behaviour(obs)),
            Columns.REWARDS: zeros,
            Columns.TERMINATEDS: torch.zeros(256, dtype=torch.bool),
        }
        fwd_out = dict.fromkeys(READ_BY_THE_LOSS, zeros)
        encoded = module.pi_encoder(batch)[ENCODER_OUT]
        fwd_out[Columns.ACTION_DIST_INPUTS] = module.pi(encoded)
        learner._temp_losses.clear()
        loss_fn(
            learner,
            module_id=DEFAULT_MODULE_ID,
            config=config,
            batch=batch,
            fwd_out=fwd_out,
        )
        actor_loss = learner._temp_losses[(DEFAULT_MODULE_ID, POLICY_LOSS_KEY)]
        optimizer.zero_grad()
        actor_loss.backward()
        optimizer.step()
    learner._temp_losses.clear()
    obs = rng.uniform(-1, 1, (1000, 2)).astype(np.float32)
    with torch.no_grad():
        logits = module.forward_inference({Columns.OBS: torch.as_tensor(obs)})[
            Columns.ACTION_DIST_INPUTS
        ]
        dist = module.get_inference_action_dist_cls().from_logits(logits)
        action = dist.to_deterministic().sample().numpy()
    return float(np.abs(action - saturating_behaviour(obs)).mean())
