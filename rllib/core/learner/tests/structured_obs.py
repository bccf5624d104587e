"""Test support: structured observation spaces, a module that consumes them, data.

The module here takes its observation as the nested structure the space
defines (no flattening connector) and refuses anything else: a leaf that is not
a torch tensor on the module's device, or a structure that differs from the
space's (for example a Tuple that arrives as one stacked array or as a dict
keyed "0", "1"), raises a ``TypeError`` naming what it got.
"""

import os
from typing import Any, Dict, List

import gymnasium as gym
import numpy as np
import tree
from ray.rllib.core.columns import Columns
from ray.rllib.core.rl_module.apis.value_function_api import ValueFunctionAPI
from ray.rllib.core.rl_module.torch import TorchRLModule
from ray.rllib.env.single_agent_episode import SingleAgentEpisode
from ray.rllib.utils.annotations import override
from ray.rllib.utils.framework import try_import_torch

torch, nn = try_import_torch()

#: Every space flattens to 4 features, so one network shape serves them all.
OBS_SPACES = {
    "dict": gym.spaces.Dict(
        {
            "a": gym.spaces.Box(-1.0, 1.0, (2,), np.float32),
            "b": gym.spaces.Box(-1.0, 1.0, (2,), np.float32),
        }
    ),
    "tuple": gym.spaces.Tuple(
        (
            gym.spaces.Box(-1.0, 1.0, (2,), np.float32),
            gym.spaces.Box(-1.0, 1.0, (2,), np.float32),
        )
    ),
    "nested": gym.spaces.Dict(
        {
            "pos": gym.spaces.Box(-1.0, 1.0, (2,), np.float32),
            "pair": gym.spaces.Tuple(
                (
                    gym.spaces.Box(-1.0, 1.0, (1,), np.float32),
                    gym.spaces.Box(-1.0, 1.0, (1,), np.float32),
                )
            ),
        }
    ),
}
ACTION_SPACE = gym.spaces.Discrete(2)


def expert_action(obs: Any) -> int:
    """The action the data was recorded with: a linear rule on the leaves."""
    flat = np.concatenate([np.ravel(leaf) for leaf in tree.flatten(obs)])
    return int(flat[0] - flat[3] > 0.0)


class StructuredObsModule(TorchRLModule, ValueFunctionAPI):
    """Concatenates the leaves of a structured observation; checks what it gets.

    ``seen`` records, for each of the first calls, ``(type name, device)`` of
    every observation leaf. ``model_config["check_structure"] = False`` turns
    off the structure check (leaves are still concatenated in ``tree`` order),
    which is how a lenient user model behaves.
    """

    @override(TorchRLModule)
    def setup(self):
        hidden = self.model_config.get("hidden", 64)
        in_size = sum(
            int(np.prod(s.shape))
            for s in tree.flatten(_space_structure(self.observation_space))
        )
        self._pi = nn.Sequential(
            nn.Linear(in_size, hidden),
            nn.Tanh(),
            nn.Linear(hidden, self.action_space.n),
        )
        self._vf = nn.Sequential(
            nn.Linear(in_size, hidden), nn.Tanh(), nn.Linear(hidden, 1)
        )
        self.seen: List[Dict[str, Any]] = []

    def _features(self, batch):
        obs = batch[Columns.OBS]
        device = next(self.parameters()).device
        leaves = tree.flatten(obs)
        if len(self.seen) < 8:
            self.seen.append(
                {
                    "leaves": [
                        (type(x).__name__, str(getattr(x, "device", None)))
                        for x in leaves
                    ],
                    "module_device": str(device),
                }
            )
        try:
            if self.model_config.get("check_structure", True):
                tree.assert_same_structure(
                    obs, _space_structure(self.observation_space), check_types=True
                )
        except (TypeError, ValueError) as e:
            raise TypeError(
                "StructuredObsModule: observation structure does not match "
                f"{self.observation_space}; got {tree.map_structure(_describe, obs)}"
            ) from e
        for leaf in leaves:
            if not isinstance(leaf, torch.Tensor) or leaf.device != device:
                raise TypeError(
                    "StructuredObsModule: every observation leaf must be a torch "
                    f"tensor on {device}; got {tree.map_structure(_describe, obs)}"
                )
        # Every leaf space is 1-D: a (batch, n) tensor per leaf.
        return torch.cat([x.float() for x in leaves], dim=-1)

    @override(TorchRLModule)
    def _forward(self, batch, **kwargs):
        return {Columns.ACTION_DIST_INPUTS: self._pi(self._features(batch))}

    @override(ValueFunctionAPI)
    def compute_values(self, batch, embeddings=None):
        return self._vf(self._features(batch)).squeeze(-1)


def _space_structure(space: gym.Space):
    """The space as a nest of leaf spaces: dicts for Dict, tuples for Tuple."""
    if isinstance(space, gym.spaces.Dict):
        return {k: _space_structure(s) for k, s in space.spaces.items()}
    if isinstance(space, gym.spaces.Tuple):
        return tuple(_space_structure(s) for s in space.spaces)
    return space


def _describe(x):
    if torch is not None and isinstance(x, torch.Tensor):
        return f"Tensor{tuple(x.shape)}@{x.device}"
    if isinstance(x, np.ndarray):
        return f"ndarray{x.shape}"
    return type(x).__name__


def make_episodes(
    obs_space: gym.Space,
    num_episodes: int = 16,
    length: int = 16,
    seed: int = 0,
    to_numpy: bool = True,
) -> List[SingleAgentEpisode]:
    """Expert episodes: actions from :func:`expert_action`, mostly reward 1.

    Args:
        obs_space: The observation space to sample observations from.
        num_episodes: How many episodes to make.
        length: The number of steps of each episode.
        seed: Seeds the space and the rewards.
        to_numpy: Whether to finalize the episodes (batched numpy data, as
            EnvRunners hand them out) or keep per-step lists.

    Returns:
        Terminated episodes.
    """
    obs_space.seed(seed)
    rng = np.random.default_rng(seed)
    episodes = []
    for _ in range(num_episodes):
        observations = [obs_space.sample() for _ in range(length + 1)]
        actions = [expert_action(o) for o in observations[:-1]]
        rewards = [float(rng.random() < 0.9) for _ in actions]
        episode = SingleAgentEpisode(
            observations=observations,
            actions=actions,
            rewards=rewards,
            terminated=True,
            observation_space=obs_space,
            action_space=ACTION_SPACE,
            len_lookback_buffer=0,
        )
        episodes.append(episode.to_numpy() if to_numpy else episode)
    return episodes


def write_episodes_for_test(
    episodes: List[SingleAgentEpisode],
    path: str,
    obs_space: gym.Space,
    use_episode_writer: bool = True,
) -> str:
    """Writes episodes where `input_read_episodes=True` reads them; returns the dir.

    Uses RLlib's `write_episodes` when `use_episode_writer` and it exists, else
    the plain msgpack format (a parquet file with one msgpack'd episode state
    per row in `item`), which ray 2.60 reads too.
    """
    os.makedirs(path, exist_ok=True)
    write_episodes = None
    if use_episode_writer:
        try:
            from rllib.offline.episode_files.writer import write_episodes
        except ImportError:
            pass
    if write_episodes is not None:
        write_episodes(
            episodes, path, observation_space=obs_space, action_space=ACTION_SPACE
        )
        return path
    import msgpack
    import msgpack_numpy
    import pyarrow as pa
    import pyarrow.parquet as pq

    items = [
        msgpack.packb(ep.get_state(), default=msgpack_numpy.encode) for ep in episodes
    ]
    pq.write_table(
        pa.table({"item": pa.array(items, type=pa.binary())}),
        os.path.join(path, "episodes.parquet"),
    )
    return path
