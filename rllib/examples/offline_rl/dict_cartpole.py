"""A Dict-observation CartPole, its scripted controller and a per-key module.

Shared by `train_with_dict_observations.py`, the release learning test and
the prelearner benchmark. Imports only modules RLlib 2.60 has, so the
benchmark also runs it on RLlib 2.60.
"""

import gymnasium as gym
import numpy as np
from ray.rllib.core.columns import Columns
from ray.rllib.core.rl_module.apis.value_function_api import ValueFunctionAPI
from ray.rllib.core.rl_module.torch import TorchRLModule
from ray.rllib.utils.annotations import override
from ray.rllib.utils.framework import try_import_torch

from rllib.examples.offline_rl.scripted_cartpole import balance_action

torch, nn = try_import_torch()


class DictCartPole(gym.ObservationWrapper):
    """CartPole whose observation is a dict of the cart's and the pole's state."""

    def __init__(self, config=None):
        super().__init__(gym.make("CartPole-v1"))
        box = self.env.observation_space
        self.observation_space = gym.spaces.Dict(
            {
                "cart": gym.spaces.Box(box.low[:2], box.high[:2], dtype=np.float32),
                "pole": gym.spaces.Box(box.low[2:], box.high[2:], dtype=np.float32),
            }
        )

    def observation(self, obs):
        return {"cart": obs[:2], "pole": obs[2:]}


class DictObsModule(TorchRLModule, ValueFunctionAPI):
    """Encodes `obs["cart"]` and `obs["pole"]` separately, then acts on both.

    Records the type and device of every observation leaf of its first call
    in `first_call_leaves`, so the script can show what the Learner passed in.
    """

    @override(TorchRLModule)
    def setup(self):
        hidden = self.model_config.get("hidden", 32)
        self._cart = nn.Sequential(nn.Linear(2, hidden), nn.Tanh())
        self._pole = nn.Sequential(nn.Linear(2, hidden), nn.Tanh())
        self._pi = nn.Linear(2 * hidden, self.action_space.n)
        self._vf = nn.Linear(2 * hidden, 1)
        self.first_call_leaves = None

    def _embed(self, batch):
        obs = batch[Columns.OBS]
        if self.first_call_leaves is None:
            self.first_call_leaves = {
                key: f"{type(value).__name__} on {getattr(value, 'device', '-')}"
                for key, value in obs.items()
            }
        return torch.cat([self._cart(obs["cart"]), self._pole(obs["pole"])], dim=-1)

    @override(TorchRLModule)
    def _forward(self, batch, **kwargs):
        return {Columns.ACTION_DIST_INPUTS: self._pi(self._embed(batch))}

    @override(ValueFunctionAPI)
    def compute_values(self, batch, embeddings=None):
        return self._vf(self._embed(batch)).squeeze(-1)


def scripted_action(obs: dict) -> int:
    """The scripted controller on the Dict observation."""
    angle, angular_velocity = obs["pole"]
    return balance_action(angle, angular_velocity)
