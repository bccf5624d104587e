"""Records and trains on episodes with a nested Dict/Tuple observation space.

Part of the "Training from external experiences" page. Writes a few episodes
whose observations are `{"cart": Box, "pole": Tuple(Box, Box)}` and trains
MARWIL one iteration with a custom RLModule that reads the structure as is.
Writes into the current working directory. Takes about a minute on 2 CPUs.
"""

import gc

# __nested_space_begin__
import gymnasium as gym
import numpy as np

observation_space = gym.spaces.Dict(
    {
        # Cart position and velocity.
        "cart": gym.spaces.Box(-np.inf, np.inf, (2,), np.float32),
        # Pole angle and angular velocity, as two separate sensors.
        "pole": gym.spaces.Tuple(
            (
                gym.spaces.Box(-np.pi, np.pi, (1,), np.float32),
                gym.spaces.Box(-np.inf, np.inf, (1,), np.float32),
            )
        ),
    }
)
action_space = gym.spaces.Discrete(2)


def to_nested(obs):
    """CartPole's flat observation in the nested layout above."""
    return {"cart": obs[:2], "pole": (obs[2:3], obs[3:4])}


# __nested_space_end__

# __nested_write_begin__
import os

from ray.rllib.env.single_agent_episode import SingleAgentEpisode
from ray.rllib.offline.episode_files.writer import write_episodes

env = gym.make("CartPole-v1", max_episode_steps=200)
episodes = []
for seed in range(8):
    obs, info = env.reset(seed=seed)
    episode = SingleAgentEpisode(observations=[to_nested(obs)], infos=[info])
    terminated = truncated = False
    while not (terminated or truncated):
        action = int(obs[2] + 0.5 * obs[3] > 0.0)
        obs, reward, terminated, truncated, info = env.step(action)
        episode.add_env_step(
            to_nested(obs),
            action,
            reward,
            infos=info,
            terminated=terminated,
            truncated=truncated,
        )
    episodes.append(episode)

data_dir = os.path.abspath("nested-episodes")
# Checks every observation against the space and stores the space with the
# files; Tuples come back as tuples when read.
write_episodes(
    episodes, data_dir, observation_space=observation_space, action_space=action_space
)
# __nested_write_end__

# __nested_module_begin__
import torch
from ray.rllib.core.columns import Columns
from ray.rllib.core.rl_module.apis.value_function_api import ValueFunctionAPI
from ray.rllib.core.rl_module.torch import TorchRLModule


class NestedObsModule(TorchRLModule, ValueFunctionAPI):
    """Encodes the cart and the pole separately; no flattening connector."""

    def setup(self):
        self.cart = torch.nn.Sequential(torch.nn.Linear(2, 32), torch.nn.Tanh())
        self.pole = torch.nn.Sequential(torch.nn.Linear(2, 32), torch.nn.Tanh())
        self.pi = torch.nn.Linear(64, self.action_space.n)
        self.vf = torch.nn.Linear(64, 1)
        self.seen_leaves = None

    def _embed(self, batch):
        obs = batch[Columns.OBS]  # {"cart": (B, 2), "pole": ((B, 1), (B, 1))}
        angle, angular_velocity = obs["pole"]
        if self.seen_leaves is None:
            self.seen_leaves = f"{type(angle).__name__} on {angle.device}"
        pole = torch.cat([angle, angular_velocity], dim=-1)
        return torch.cat([self.cart(obs["cart"]), self.pole(pole)], dim=-1)

    def _forward(self, batch, **kwargs):
        return {Columns.ACTION_DIST_INPUTS: self.pi(self._embed(batch))}

    # MARWIL (not BC) needs values; the Learner calls this for GAE.
    def compute_values(self, batch, embeddings=None):
        return self.vf(self._embed(batch)).squeeze(-1)


# __nested_module_end__

# __nested_train_begin__
import ray
from ray.data import ActorPoolStrategy
from ray.rllib.algorithms.marwil import MARWILConfig
from ray.rllib.core import DEFAULT_MODULE_ID
from ray.rllib.core.rl_module.rl_module import RLModuleSpec
from ray.rllib.offline.episode_files.reader import read_spaces
from ray.rllib.utils.metrics import LEARNER_RESULTS

ray.init(num_cpus=4, include_dashboard=False)

observation_space, action_space = read_spaces(data_dir)
config = (
    MARWILConfig()
    .environment(observation_space=observation_space, action_space=action_space)
    .rl_module(rl_module_spec=RLModuleSpec(module_class=NestedObsModule))
    .learners(num_learners=0)
    .training(beta=1.0, train_batch_size_per_learner=256, lr=0.003)
    .offline_data(
        input_=[data_dir],
        input_read_episodes=True,
        input_read_batch_size=4,
        dataset_num_iters_per_learner=2,
        map_batches_kwargs={"compute": ActorPoolStrategy(size=1), "num_cpus": 1},
    )
)
algo = config.build_algo()
result = algo.train()
loss = float(result[LEARNER_RESULTS][DEFAULT_MODULE_ID]["total_loss"])
leaves = [
    r.get()
    for r in algo.learner_group.foreach_learner(
        lambda learner: learner.module[DEFAULT_MODULE_ID].seen_leaves
    )
]
print(f"MARWIL on nested observations: loss {loss:.3f}; leaves: {leaves[0]}")
algo.stop()
# __nested_train_end__

assert leaves[0].startswith("Tensor on"), leaves
del algo
gc.collect()
ray.shutdown()
print("external_episodes_nested_obs: OK")
