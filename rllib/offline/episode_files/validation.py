"""Checks an episode against the spaces it is written with, before it is written.

Every error names the episode, the step and the field, and says why the
value is outside the space.
"""

from typing import Any, Dict, Optional

import gymnasium as gym
import numpy as np
import tree
from ray.rllib.core.columns import Columns
from ray.rllib.env.multi_agent_episode import MultiAgentEpisode
from ray.rllib.env.single_agent_episode import SingleAgentEpisode
from ray.util.annotations import PublicAPI

# Public through this module too: `episode_writer.space_to_json`.
from rllib.offline.episode_files.payload import Episode, episode_label


def _explain_violation(space: gym.Space, value: Any, where: str = "") -> str:
    """Says why `value` is not in `space` (descending into Dict/Tuple)."""
    spaces = gym.spaces
    if isinstance(space, spaces.Dict):
        if not isinstance(value, dict) or set(value) != set(space.spaces):
            keys = sorted(value) if isinstance(value, dict) else type(value).__name__
            return f"{where or 'value'} has keys {keys}, expected {sorted(space)}"
        for key, sub in space.spaces.items():
            if not sub.contains(value[key]):
                return _explain_violation(sub, value[key], f"{where}[{key!r}]")
    elif isinstance(space, spaces.Tuple):
        if not isinstance(value, (tuple, list)) or len(value) != len(space):
            return f"{where or 'value'} is not a sequence of length {len(space)}"
        for i, (sub, item) in enumerate(zip(space.spaces, value)):
            if not sub.contains(item):
                return _explain_violation(sub, item, f"{where}[{i}]")
    elif isinstance(space, spaces.Box):
        array = np.asarray(value)
        if array.shape != space.shape:
            return f"{where or 'value'} has shape {array.shape}, expected {space.shape}"
        if not np.can_cast(array.dtype, space.dtype):
            return (
                f"{where or 'value'} has dtype {array.dtype}, which does not cast "
                f"safely to {space.dtype}"
            )
    label = where or "value"
    return f"{label} {np.asarray(value).tolist()!r:.200} is not in {space}"


def _first_violation_batched(space: gym.Space, array: np.ndarray) -> Optional[int]:
    """Vectorized check for a stacked Box/Discrete column; first bad index."""
    spaces = gym.spaces
    if isinstance(space, spaces.Box):
        if array.shape[1:] != space.shape or not np.can_cast(array.dtype, space.dtype):
            return 0
        axes = tuple(range(1, array.ndim))
        inside = np.all((array >= space.low) & (array <= space.high), axis=axes)
    else:  # Discrete
        if array.ndim != 1 or array.dtype.kind not in "iu":
            return 0
        inside = (array >= space.start) & (array < space.start + space.n)
    bad = np.flatnonzero(~inside)
    return int(bad[0]) if bad.size else None


def _num_steps(values: Any) -> int:
    """Timesteps in a field: a list of steps, or a batched (nested) array."""
    if isinstance(values, list):
        return len(values)
    leaves = tree.flatten(values)
    return len(leaves[0]) if leaves else 0


def _step(batched: Any, t: int) -> Any:
    """Slices timestep `t` out of a batched (nested) numpy structure."""
    return tree.map_structure(lambda x: x[t], batched)


def _check_field(
    label: str,
    field: str,
    space: gym.Space,
    values: Any,
    agent_id: Any = None,
) -> None:
    """Raises if any timestep of `values` lies outside `space`.

    `label` names the episode (and agent) in the error; `agent_id` is given for
    an agent of a multi-agent episode.
    """
    num_steps = len(values) if isinstance(values, list) else None
    first_bad = None
    if isinstance(space, (gym.spaces.Box, gym.spaces.Discrete)):
        try:
            array = np.asarray(values)
        except ValueError:  # Ragged: let the step-wise check explain it.
            array = None
        # Like `Box.contains`, only numpy inputs must cast safely to the dtype.
        strict = not isinstance(values, list) or (
            len(values) > 0 and isinstance(values[0], (np.ndarray, np.generic))
        )
        if array is not None and array.dtype != object and array.ndim >= 1:
            if not strict and isinstance(space, gym.spaces.Box):
                array = array.astype(space.dtype)
            first_bad = _first_violation_batched(space, array)
            if first_bad is None:
                return
            values = list(array)
    if first_bad is None:
        if num_steps is None:  # A numpy episode: one array (or tree) per field.
            values = [_step(values, t) for t in range(_num_steps(values))]
        for t, value in enumerate(values):
            if not space.contains(value):
                first_bad = t
                break
        else:
            return
    value = values[first_bad]
    space_arg = "observation_space" if field == Columns.OBS else "action_space"
    declared, how = f"`{space_arg}`", f"`EpisodeWriter({space_arg}=...)`"
    if agent_id is not None:
        declared = f"`{space_arg}` of agent `{agent_id!r}`"
        how = f"`EpisodeWriter({space_arg}={{{agent_id!r}: ...}})`"
    raise ValueError(
        f"{label}, timestep {first_bad}, field `{field}`: "
        f"{_explain_violation(space, value)}. The declared {declared} is "
        f"{space}. Fix the data, or declare the space the data was collected "
        f"with ({how}), or pass `validate=False`."
    )


@PublicAPI(stability="alpha")
def validate_episode(
    episode: Episode,
    observation_space: Optional[Any] = None,
    action_space: Optional[Any] = None,
) -> None:
    """Checks that an episode can be written and trained on.

    Args:
        episode: The `SingleAgentEpisode` or `MultiAgentEpisode` to check.
        observation_space: If given, every observation must lie in it. For a
            `MultiAgentEpisode`, a dict of spaces by agent id; agents it does
            not name are not checked.
        action_space: Same for actions.

    Raises:
        TypeError: If `episode` is of another type, or a multi-agent episode
            is checked against a single space (or the reverse).
        ValueError: If the episode is not done, has no steps, its fields have
            inconsistent lengths, or an observation or action lies outside
            its space. The message names the episode id, the agent (in a
            multi-agent episode), the timestep and the field.
    """
    if isinstance(episode, MultiAgentEpisode):
        _validate_multi_agent_episode(episode, observation_space, action_space)
        return
    if not isinstance(episode, SingleAgentEpisode):
        raise TypeError(
            "`EpisodeWriter.write()` takes a `SingleAgentEpisode` or a "
            f"`MultiAgentEpisode`, got `{type(episode).__name__}`."
        )
    _check_done(episode, len(episode))
    _check_steps(episode_label(episode), episode, observation_space, action_space)


def _check_done(episode: Episode, num_steps: int) -> None:
    if not episode.is_done:
        raise ValueError(
            f"Episode `{episode.id_}` is not done (is_terminated=False, "
            f"is_truncated=False) after {num_steps} steps. Only finished "
            "episodes can be written: pass `terminated=True` or `truncated=True` "
            "with the last `add_env_step()`, or set `episode.is_truncated = True` "
            "for an episode you stop early."
        )
    if num_steps == 0:
        raise ValueError(
            f"Episode `{episode.id_}` has no steps. An episode built from lists "
            "needs `len_lookback_buffer=0` (otherwise the lists become its "
            "lookback buffer); one built with `add_env_reset()`/`add_env_step()` "
            "needs at least one step."
        )


def _check_steps(
    label: str,
    episode: SingleAgentEpisode,
    observation_space: Optional[gym.Space],
    action_space: Optional[gym.Space],
    agent_id: Any = None,
) -> None:
    """Checks the field lengths and spaces of one (agent's) episode."""
    num_obs = _num_steps(episode.get_observations())
    lengths = {
        Columns.ACTIONS: _num_steps(episode.get_actions()),
        Columns.REWARDS: _num_steps(episode.get_rewards()),
    }
    for field, length in lengths.items():
        if length != num_obs - 1:
            raise ValueError(
                f"{label}, field `{field}`: has {length} entries but the "
                f"episode has {num_obs} observations; a finished episode needs "
                "one observation more than actions and rewards."
            )
    if observation_space is not None:
        observations = episode.get_observations()
        _check_field(label, Columns.OBS, observation_space, observations, agent_id)
    if action_space is not None:
        _check_field(
            label, Columns.ACTIONS, action_space, episode.get_actions(), agent_id
        )


def _validate_multi_agent_episode(
    episode: MultiAgentEpisode,
    observation_spaces: Optional[Dict[Any, gym.Space]],
    action_spaces: Optional[Dict[Any, gym.Space]],
) -> None:
    for name, spaces in (
        ("observation_space", observation_spaces),
        ("action_space", action_spaces),
    ):
        if spaces is not None and not isinstance(spaces, dict):
            raise TypeError(
                f"Episode `{episode.id_}` is a `MultiAgentEpisode`: `{name}` must "
                f"be a dict of spaces by agent id, got {spaces}."
            )
    _check_done(episode, len(episode))
    for agent_id, agent_episode in episode.agent_episodes.items():
        # An agent that only received its first observation has no steps.
        if _num_steps(agent_episode.get_observations()) == 0:
            continue
        _check_steps(
            episode_label(episode, agent_id),
            agent_episode,
            (observation_spaces or {}).get(agent_id),
            (action_spaces or {}).get(agent_id),
            agent_id,
        )
