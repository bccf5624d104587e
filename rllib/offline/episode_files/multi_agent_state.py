"""`MultiAgentEpisode`s as msgpack-able states, and back.

`MultiAgentEpisode.get_state()` holds Python objects msgpack cannot store
(the agent-to-module function, gymnasium spaces, lookback buffers, dicts
keyed by agent ids that msgpack maps would turn into strings). The episode
files store `multi_agent_episode_state(episode)` instead: the same content
with spaces serialized as RLlib serializes them, buffers as their states and
every agent-keyed mapping as a list of `[agent_id, value]` pairs, so int and
str agent ids come back as they went in. Each agent's data is its own
`SingleAgentEpisode.get_state()`, the layout single-agent rows use.

Only the agent-to-module *function* is not stored (it is code); the mapping
it produced while recording (`episode.module_for(agent_id)`) is.
"""

from collections import defaultdict
from typing import Any, Callable, Dict, Optional

import gymnasium as gym
from ray.rllib.core import DEFAULT_MODULE_ID
from ray.rllib.env.multi_agent_episode import MultiAgentEpisode
from ray.rllib.env.utils.infinite_lookback_buffer import InfiniteLookbackBuffer
from ray.rllib.utils.serialization import gym_space_from_dict, gym_space_to_dict

#: Key of the state entry that marks a multi-agent episode, and its value.
EPISODE_TYPE_KEY = "episode_type"
MULTI_AGENT_EPISODE = "MultiAgentEpisode"


def is_multi_agent_state(state: Any) -> bool:
    """Whether a decoded payload is a multi-agent episode state."""
    if not isinstance(state, dict):
        return False
    kind = state.get(EPISODE_TYPE_KEY, state.get(EPISODE_TYPE_KEY.encode()))
    return kind in (MULTI_AGENT_EPISODE, MULTI_AGENT_EPISODE.encode())


def _pairs(mapping: Optional[Dict[Any, Any]], value=lambda v: v) -> list:
    return [[key, value(item)] for key, item in (mapping or {}).items()]


def _agent_spaces(spaces: Any) -> Optional[list]:
    if spaces is None:
        return None
    if isinstance(spaces, gym.spaces.Dict):
        spaces = spaces.spaces
    return _pairs(spaces, gym_space_to_dict)


def multi_agent_episode_state(episode: MultiAgentEpisode) -> Dict[str, Any]:
    """The msgpack-able state of `episode` (see the module docstring)."""
    return {
        EPISODE_TYPE_KEY: MULTI_AGENT_EPISODE,
        "id_": episode.id_,
        "agent_to_module_mapping": _pairs(episode._agent_to_module_mapping),
        "observation_spaces": _agent_spaces(episode.observation_space),
        "action_spaces": _agent_spaces(episode.action_space),
        "env_t_started": episode.env_t_started,
        "env_t": episode.env_t,
        "agent_t_started": _pairs(episode.agent_t_started),
        "env_t_to_agent_t": _pairs(
            episode.env_t_to_agent_t, InfiniteLookbackBuffer.get_state
        ),
        "hanging_actions_end": _pairs(episode._hanging_actions_end),
        "hanging_extra_model_outputs_end": _pairs(
            episode._hanging_extra_model_outputs_end
        ),
        "hanging_rewards_end": _pairs(episode._hanging_rewards_end),
        "hanging_rewards_begin": _pairs(episode._hanging_rewards_begin),
        "is_terminated": episode.is_terminated,
        "is_truncated": episode.is_truncated,
        "agent_episodes": _pairs(
            episode.agent_episodes, lambda agent: agent.get_state()
        ),
        "start_time": episode._start_time,
        "last_step_time": episode._last_step_time,
        "custom_data": episode.custom_data,
    }


def default_module_for(agent_id: Any, episode: Any) -> str:
    """Maps every agent to the default module (RLlib's default mapping)."""
    return DEFAULT_MODULE_ID


def agent_key(agent_id: Any) -> Any:
    """An agent id as stored, back in its type."""
    # msgpack gives str keys back as str; only bytes need decoding.
    return agent_id.decode() if isinstance(agent_id, bytes) else agent_id


def _mapping(pairs: Optional[list], value=lambda v: v, factory=None) -> Dict:
    items = {agent_key(key): value(item) for key, item in (pairs or [])}
    return defaultdict(factory, items) if factory is not None else items


def episode_from_state_args(
    state: Dict[str, Any],
    agent_to_module_mapping_fn: Optional[Callable] = None,
) -> Dict[str, Any]:
    """Turns a stored state into what `MultiAgentEpisode.from_state` takes."""

    def spaces(pairs):
        return None if pairs is None else _mapping(pairs, gym_space_from_dict)

    return {
        "id_": state["id_"],
        "agent_to_module_mapping_fn": (
            agent_to_module_mapping_fn or default_module_for
        ),
        "_agent_to_module_mapping": _mapping(state["agent_to_module_mapping"]),
        "observation_space": spaces(state["observation_spaces"]),
        "action_space": spaces(state["action_spaces"]),
        "env_t_started": state["env_t_started"],
        "env_t": state["env_t"],
        "agent_t_started": _mapping(state["agent_t_started"], factory=int),
        "env_t_to_agent_t": _mapping(
            state["env_t_to_agent_t"],
            InfiniteLookbackBuffer.from_state,
            factory=InfiniteLookbackBuffer,
        ),
        "_hanging_actions_end": _mapping(state["hanging_actions_end"]),
        "_hanging_extra_model_outputs_end": _mapping(
            state["hanging_extra_model_outputs_end"], factory=dict
        ),
        "_hanging_rewards_end": _mapping(state["hanging_rewards_end"], factory=float),
        "_hanging_rewards_begin": _mapping(
            state["hanging_rewards_begin"], factory=float
        ),
        "is_terminated": state["is_terminated"],
        "is_truncated": state["is_truncated"],
        "agent_episodes": [
            [agent_key(agent_id), agent_state]
            for agent_id, agent_state in state["agent_episodes"]
        ],
        "_start_time": state["start_time"],
        "_last_step_time": state["last_step_time"],
        "custom_data": state.get("custom_data") or {},
    }


def multi_agent_episode_from_state(
    state: Dict[str, Any],
    agent_to_module_mapping_fn: Optional[Callable] = None,
) -> MultiAgentEpisode:
    """Rebuilds the episode stored by `multi_agent_episode_state`.

    Args:
        state: The decoded state (msgpack_numpy arrays decoded).
        agent_to_module_mapping_fn: The episode's mapping function for agents
            the recorded mapping does not cover; RLlib's default if None.
    """
    return MultiAgentEpisode.from_state(
        episode_from_state_args(state, agent_to_module_mapping_fn)
    )
