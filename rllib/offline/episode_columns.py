"""Recorded episodes as columns of arrays, for the OfflinePreLearner's fast path.

`decode_episode_columns` turns one `item` payload (msgpack + msgpack_numpy of
`SingleAgentEpisode.get_state()`, optionally compressed by `EpisodeWriter`)
straight into arrays, without building a `SingleAgentEpisode` (whose
`from_state` spends most of its time rebuilding gymnasium spaces).
`episode_columns_from_episode` does the same for an episode object.

Only what the train batch can contain is kept: observations, actions,
rewards and the done flags. Infos and recorded extra model outputs are
dropped, as upstream's prelearner sampling drops them.
"""

from dataclasses import dataclass
from typing import Any, Dict, Optional

import gymnasium as gym
import numpy as np
import tree
from ray.rllib.env.single_agent_episode import SingleAgentEpisode
from ray.rllib.offline.episode_reader import decode_episode_state
from ray.rllib.utils.spaces.space_utils import batch

from rllib.env.utils.infinite_lookback_buffer import restore_buffer_data


@dataclass
class EpisodeColumns:
    """One finished episode of `T` steps as arrays.

    Attributes:
        id_: The episode id.
        observations: A nest (the observation space's structure) of arrays
            with `T + 1` rows, the final observation included.
        actions: A nest of arrays with `T` rows (None if `T` is 0).
        rewards: Array of `T` rewards, in the recorded dtype.
        is_terminated: Whether the episode ended in a terminal state.
        is_truncated: Whether it was cut off (time limit, end of recording).
    """

    id_: str
    observations: Any
    actions: Any
    rewards: np.ndarray
    is_terminated: bool
    is_truncated: bool

    def __len__(self) -> int:
        return len(self.rewards)

    @property
    def is_done(self) -> bool:
        return self.is_terminated or self.is_truncated


def _buffer_rows(
    state: Dict[str, Any], space: Optional[gym.Space], expected: int, name: str
) -> Any:
    """The rows of a stored `InfiniteLookbackBuffer` state after its lookback.

    None for an empty buffer (the actions of an episode with no steps).
    """
    if expected == 0:
        return None
    lookback = state["lookback"]
    data = restore_buffer_data(state["data"], state["finalized"], space)
    if state["finalized"]:
        rows = tree.map_structure(lambda leaf: np.asarray(leaf)[lookback:], data)
    else:
        rows = batch(list(data)[lookback:])
    for leaf in tree.flatten(rows):
        if len(leaf) != expected:
            raise ValueError(
                f"`{name}` holds {len(leaf)} rows after its lookback, expected "
                f"{expected}"
            )
    return rows


def episode_columns_from_state(
    state: Dict[str, Any],
    *,
    observation_space: Optional[gym.Space] = None,
    action_space: Optional[gym.Space] = None,
) -> EpisodeColumns:
    """Builds `EpisodeColumns` from a decoded `SingleAgentEpisode` state.

    Args:
        state: The dict `SingleAgentEpisode.get_state()` returned, after a
            msgpack round trip (tuples may have become lists).
        observation_space: Restores the tuples of Tuple observations.
        action_space: Same for actions.

    Raises:
        ValueError: If the stored buffers have inconsistent lengths.
    """
    reward_state = state["rewards"]
    num_steps = len(reward_state["data"]) - reward_state["lookback"]
    rewards = _buffer_rows(reward_state, None, num_steps, "rewards")
    if rewards is None:
        rewards = np.zeros(0)
    return EpisodeColumns(
        id_=state["id_"],
        observations=_buffer_rows(
            state["observations"], observation_space, num_steps + 1, "observations"
        ),
        actions=_buffer_rows(state["actions"], action_space, num_steps, "actions"),
        rewards=rewards,
        is_terminated=bool(state["is_terminated"]),
        is_truncated=bool(state["is_truncated"]),
    )


def decode_episode_columns(
    payload: bytes,
    *,
    observation_space: Optional[gym.Space] = None,
    action_space: Optional[gym.Space] = None,
) -> EpisodeColumns:
    """Decodes one `item` payload (compressed or not) into `EpisodeColumns`."""
    return episode_columns_from_state(
        decode_episode_state(payload),
        observation_space=observation_space,
        action_space=action_space,
    )


def episode_columns_from_episode(episode: SingleAgentEpisode) -> EpisodeColumns:
    """Builds `EpisodeColumns` from an episode object (numpy-ized or not)."""
    num_steps = len(episode)
    observations = episode.get_observations(slice(0, num_steps + 1))
    actions = episode.get_actions(slice(0, num_steps))
    rewards = episode.get_rewards(slice(0, num_steps))
    if not episode.is_numpy:
        observations = batch(observations)
        actions = batch(actions) if num_steps else None
    return EpisodeColumns(
        id_=episode.id_,
        observations=observations,
        actions=actions,
        rewards=np.asarray(rewards),
        is_terminated=bool(episode.is_terminated),
        is_truncated=bool(episode.is_truncated),
    )
