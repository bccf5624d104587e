"""Recorded episodes as columns of arrays, for sampling train batches from them.

`decode_episode_columns` turns one `item` payload (msgpack + msgpack_numpy of
`SingleAgentEpisode.get_state()`, optionally compressed by `EpisodeWriter`)
straight into arrays, without building a `SingleAgentEpisode` (whose
`from_state` spends most of its time rebuilding gymnasium spaces).
`episode_columns_from_episode` does the same for an episode object.
`decode_module_columns` serves both kinds of rows: a `MultiAgentEpisode`
becomes one `EpisodeColumns` per agent (each agent's data is stored in the
single-agent layout, so the same fast path decodes it), labeled with the
module the training config's `policy_mapping_fn` maps the agent to (the
function gets the row's `MultiAgentEpisode`, decoded for it).

Only what the train batch can contain is kept: observations, actions,
rewards and the done flags. Infos and recorded extra model outputs are
dropped, as the `OfflinePreLearner`'s per-episode sampling drops them.
"""

import functools
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterable, List, Optional, Tuple

import gymnasium as gym
import msgpack
import msgpack_numpy as mnp
import numpy as np
import tree
from ray.rllib.core import DEFAULT_MODULE_ID
from ray.rllib.env.single_agent_episode import SingleAgentEpisode
from ray.rllib.utils.serialization import gym_space_from_dict
from ray.rllib.utils.spaces.space_utils import batch

from rllib.env.utils.infinite_lookback_buffer import restore_space_structure
from rllib.offline.episode_files.action_units import ActionRescaling
from rllib.offline.episode_files.multi_agent_state import (
    agent_key,
    is_multi_agent_state,
)
from rllib.offline.episode_files.payload import decompress_payload
from rllib.offline.episode_files.reader import decode_episode
from rllib.utils.postprocessing.bootstrapped_returns import returns_to_go


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
    state: Dict[str, Any], space: Optional[gym.Space], name: str
) -> Optional[Any]:
    """All rows of a stored `InfiniteLookbackBuffer` state after its lookback.

    The state's leaves may still be msgpack_numpy's raw array maps (see
    :func:`decode_episode_columns`) or decoded arrays. None for an empty
    buffer (the actions of an episode with no steps).
    """
    lookback = state["lookback"]
    data = state["data"]
    if state["finalized"]:
        rows = _decode_nest(data)
        rows = tree.map_structure(lambda leaf: np.asarray(leaf)[lookback:], rows)
    else:
        items = list(data)[lookback:]
        if not items:
            return None
        rows = _stack(items)
    if isinstance(space, (gym.spaces.Tuple, gym.spaces.Dict)):
        rows = restore_space_structure(rows, space)
    lengths = {len(leaf) for leaf in tree.flatten(rows)}
    if len(lengths) > 1:
        raise ValueError(f"`{name}` holds leaves of different lengths {lengths}")
    return rows


def _is_array_map(value: Any) -> bool:
    """Whether `value` is msgpack_numpy's undecoded map of an array or scalar."""
    return isinstance(value, dict) and (b"nd" in value or b"complex" in value)


def _decode_nest(value: Any) -> Any:
    """Decodes the raw array maps in a nest of dicts and lists."""
    if _is_array_map(value):
        return mnp.decode(value)
    if isinstance(value, dict):
        return {key: _decode_nest(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_decode_nest(item) for item in value]
    return value


def _stack(items: list) -> Any:
    """Stacks per-step items (nests of arrays, raw array maps or scalars).

    Per-step arrays of one dtype and shape, the usual content of hand-written
    payloads, are joined byte-wise and read with one `np.frombuffer`, instead
    of building one array per step.
    """
    first = items[0]
    if _is_array_map(first):
        if _uniform_arrays(items):
            dtype = np.dtype(first[b"type"])
            joined = b"".join(item[b"data"] for item in items)
            return np.frombuffer(joined, dtype=dtype).reshape(
                (len(items), *first[b"shape"])
            )
        return np.stack([np.asarray(mnp.decode(item)) for item in items])
    if isinstance(first, dict):
        return {key: _stack([item[key] for item in items]) for key in first}
    if isinstance(first, (list, tuple)):
        return [_stack([item[i] for item in items]) for i in range(len(first))]
    if isinstance(first, np.ndarray):
        return np.stack(items)
    return np.asarray(items)


def _uniform_arrays(items: list) -> bool:
    first = items[0]
    if first.get(b"nd") is not True or first.get(b"kind", b"") not in (b"", ""):
        return False
    kind, shape = first[b"type"], first[b"shape"]
    return all(
        item.get(b"nd") is True and item[b"type"] == kind and item[b"shape"] == shape
        for item in items
    )


def episode_flag(value: Any) -> bool:
    """A done flag of a state unpacked without msgpack_numpy's hook.

    Episodes whose env returned numpy booleans hold `np.bool_` flags, which
    msgpack_numpy packs as a map (`{"nd": False, "type": "|b1", ...}`):
    `bool()` of that map is True whatever the flag.
    """
    if isinstance(value, dict):
        value = mnp.decode(value)
    return bool(value)


def episode_columns_from_state(
    state: Dict[str, Any],
    *,
    observation_space: Optional[gym.Space] = None,
    action_space: Optional[gym.Space] = None,
    action_rescaling: Optional[ActionRescaling] = None,
) -> EpisodeColumns:
    """Builds `EpisodeColumns` from a `SingleAgentEpisode` state.

    Args:
        state: The dict `SingleAgentEpisode.get_state()` returned, after a
            msgpack round trip (tuples may have become lists, arrays may
            still be msgpack_numpy's raw maps).
        observation_space: Restores the tuples of Tuple observations.
        action_space: Same for actions.
        action_rescaling: Maps the actions to the units the module acts in
            (with `action_space`, or the one the state records); None keeps
            them as recorded.

    Raises:
        ValueError: If the stored buffers have inconsistent lengths.
    """
    rewards = _buffer_rows(state["rewards"], None, "rewards")
    rewards = np.zeros(0) if rewards is None else np.asarray(rewards)
    num_steps = len(rewards)
    observations = _buffer_rows(
        state["observations"], observation_space, "observations"
    )
    actions = _buffer_rows(state["actions"], action_space, "actions")
    for name, rows, expected in (
        ("observations", observations, num_steps + 1),
        ("actions", actions, num_steps),
    ):
        found = 0 if rows is None else len(tree.flatten(rows)[0])
        if found != expected:
            raise ValueError(
                f"`{name}` holds {found} rows after its lookback, expected "
                f"{expected} for {num_steps} rewards"
            )
    if action_rescaling is not None:
        if action_space is None and state.get("_action_space"):
            action_space = _space_from_packed(msgpack.packb(state["_action_space"]))
        actions = action_rescaling(actions, action_space)
    return EpisodeColumns(
        id_=state["id_"],
        observations=observations,
        actions=actions,
        rewards=rewards,
        is_terminated=episode_flag(state["is_terminated"]),
        is_truncated=episode_flag(state["is_truncated"]),
    )


def decode_episode_columns(
    payload: bytes,
    *,
    observation_space: Optional[gym.Space] = None,
    action_space: Optional[gym.Space] = None,
    action_rescaling: Optional[ActionRescaling] = None,
) -> EpisodeColumns:
    """Decodes one `item` payload (compressed or not) into `EpisodeColumns`.

    The payload is unpacked without msgpack_numpy's per-map hook; arrays are
    decoded afterwards, per buffer (see `_stack`). Arguments as
    `episode_columns_from_state`.
    """
    state = msgpack.unpackb(decompress_payload(payload), strict_map_key=False)
    return episode_columns_from_state(
        state,
        observation_space=observation_space,
        action_space=action_space,
        action_rescaling=action_rescaling,
    )


def decode_module_columns(
    payload: bytes,
    *,
    observation_space: Optional[Any] = None,
    action_space: Optional[Any] = None,
    policy_mapping_fn: Optional[Callable] = None,
    action_rescaling: Optional[ActionRescaling] = None,
) -> List[Tuple[str, EpisodeColumns]]:
    """Decodes one `item` payload into `(module_id, EpisodeColumns)` pairs.

    A `SingleAgentEpisode` gives one pair for the default module. A
    `MultiAgentEpisode` gives one pair per agent with steps, its id
    `<episode id>/<agent id>`; an agent whose own episode is not done ends
    as the whole episode ends (truncated, unless the episode terminated).

    Args:
        payload: The bytes of one `item` cell.
        observation_space: Restores Tuple observations; for multi-agent rows
            a dict of spaces by agent id.
        action_space: Same for actions.
        policy_mapping_fn: `(agent_id, episode) -> module_id` for multi-agent
            rows, called with the row's `MultiAgentEpisode` (decoded once per
            row, only when a function is given); None maps every agent to
            the default module.
        action_rescaling: Maps each agent's actions to the units its module
            acts in, with the agent's action space; None keeps them.
    """
    state = msgpack.unpackb(decompress_payload(payload), strict_map_key=False)
    if not is_multi_agent_state(state):
        columns = episode_columns_from_state(
            state,
            observation_space=observation_space,
            action_space=action_space,
            action_rescaling=action_rescaling,
        )
        return [(DEFAULT_MODULE_ID, columns)]
    episode = None
    if policy_mapping_fn is not None:
        # The function may read anything of the episode: it gets the real one.
        episode = decode_episode(
            payload, observation_space=observation_space, action_space=action_space
        )
    episode_done = episode_flag(state["is_terminated"]) or episode_flag(
        state["is_truncated"]
    )
    pairs = []
    for agent_id, agent_state in state["agent_episodes"]:
        agent_id = agent_key(agent_id)
        columns = episode_columns_from_state(
            agent_state,
            observation_space=_agent_space(
                observation_space, agent_id, agent_state["_observation_space"]
            ),
            action_space=_agent_space(
                action_space, agent_id, agent_state["_action_space"]
            ),
            action_rescaling=action_rescaling,
        )
        if len(columns) == 0:
            continue
        columns.id_ = f"{state['id_']}/{agent_id}"
        if not columns.is_done and episode_done:
            columns.is_terminated = episode_flag(state["is_terminated"])
            columns.is_truncated = not columns.is_terminated
        module_id = (
            policy_mapping_fn(agent_id, episode)
            if policy_mapping_fn is not None
            else DEFAULT_MODULE_ID
        )
        pairs.append((module_id, columns))
    return pairs


def agent_to_module_fn(config) -> Optional[Callable]:
    """The config's `policy_mapping_fn` for multi-agent data, else None.

    RLlib's old-stack default needs a `worker` argument; it maps every agent
    to the default module, as None does.
    """
    mapping_fn = config.policy_mapping_fn
    if (
        not config.is_multi_agent
        or mapping_fn is type(config).DEFAULT_POLICY_MAPPING_FN
    ):
        return None
    return mapping_fn


def check_modules_known(module_ids: Iterable[str], rl_module) -> None:
    """Raises if the data maps agents to modules the `MultiRLModule` lacks."""
    unknown = sorted(set(module_ids) - set(rl_module.keys()), key=repr)
    if unknown:
        raise ValueError(
            f"The recorded episodes map agents to the module(s) {unknown} (through "
            "`config.multi_agent(policy_mapping_fn=...)`), but the RLModule has "
            f"only {sorted(rl_module.keys(), key=repr)}. Map every recorded agent "
            "to a module in `config.multi_agent(policies=...)`."
        )


def _agent_space(
    spaces: Optional[Dict[Any, gym.Space]], agent_id: Any, recorded: Optional[dict]
) -> Optional[gym.Space]:
    """The space that restores an agent's Tuple data: given, else recorded.

    Only Tuple and Dict spaces change how rows come back, so only those are
    rebuilt from the row's serialized copy (once per distinct space).
    """
    space = (spaces or {}).get(agent_id)
    if space is not None or not recorded:
        return space
    if recorded.get("space") not in ("tuple", "dict"):
        return None
    return _space_from_packed(msgpack.packb(recorded))


@functools.lru_cache(maxsize=64)
def _space_from_packed(packed: bytes) -> gym.Space:
    return gym_space_from_dict(msgpack.unpackb(packed, strict_map_key=False))


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


@dataclass
class EpisodeBlock:
    """Finished episodes concatenated into columns: the unit samplers draw from.

    Episode ``i`` of ``T_i`` steps has its steps (actions, rewards) at rows
    ``step_starts[i] .. step_starts[i] + T_i - 1`` and its ``T_i + 1``
    observations at ``step_starts[i] + i ..``: row ``r`` of a step's
    observation is its step row plus the episode index.

    Blocks are immutable once built and pickle as plain arrays, so the object
    store can hold them and every process on a node reads them without a copy.

    Fields: ``observations`` (a nest of arrays with ``sum(T_i + 1)`` rows),
    ``actions`` (a nest with ``sum(T_i)`` rows), ``rewards`` (``sum(T_i)``, in
    the recorded dtype), and per episode ``lengths`` (int64), ``terminated``,
    ``truncated`` and ``ids`` (object array of str). ``module_id`` names the
    module whose agents' episodes these are (the default module for
    single-agent data).
    """

    observations: Any
    actions: Any
    rewards: np.ndarray
    lengths: np.ndarray
    terminated: np.ndarray
    truncated: np.ndarray
    ids: np.ndarray
    module_id: str = DEFAULT_MODULE_ID
    _returns_to_go: Dict[float, np.ndarray] = field(
        default_factory=dict, repr=False, compare=False
    )

    @classmethod
    def from_episodes(
        cls, episodes: List[EpisodeColumns], module_id: str = DEFAULT_MODULE_ID
    ) -> "EpisodeBlock":
        """Concatenates episodes (with at least one step each) into a block."""
        episodes = [e for e in episodes if len(e)]
        if not episodes:
            raise ValueError("An `EpisodeBlock` needs at least one episode with steps.")
        return cls(
            observations=_concatenate([e.observations for e in episodes]),
            actions=_concatenate([e.actions for e in episodes]),
            rewards=np.concatenate([e.rewards for e in episodes]),
            lengths=np.array([len(e) for e in episodes], dtype=np.int64),
            terminated=np.array([e.is_terminated for e in episodes], dtype=bool),
            truncated=np.array([e.is_truncated for e in episodes], dtype=bool),
            ids=np.array([e.id_ for e in episodes], dtype=object),
            module_id=module_id,
        )

    @property
    def num_timesteps(self) -> int:
        return len(self.rewards)

    @property
    def num_episodes(self) -> int:
        return len(self.lengths)

    @property
    def step_starts(self) -> np.ndarray:
        """The row of each episode's first step."""
        starts = self.__dict__.get("_step_starts")
        if starts is None:
            starts = np.concatenate([[0], np.cumsum(self.lengths)[:-1]]).astype(
                np.int64
            )
            self.__dict__["_step_starts"] = starts
        return starts

    @property
    def nbytes(self) -> int:
        """Bytes held by the block's arrays."""
        leaves = tree.flatten([self.observations, self.actions])
        arrays = [self.rewards, self.lengths, self.terminated, self.truncated]
        return sum(leaf.nbytes for leaf in leaves + arrays) + 64 * len(self.ids)

    def returns_to_go(self, gamma: float) -> np.ndarray:
        """Discounted return-to-go, indexed like the observations (0 at ends)."""
        key = float(gamma)
        if key not in self._returns_to_go:
            self._returns_to_go[key] = returns_to_go(self.rewards, self.lengths, key)
        return self._returns_to_go[key]

    def __reduce__(self):
        # Only the data crosses processes; caches are rebuilt where needed.
        return (
            type(self),
            (
                self.observations,
                self.actions,
                self.rewards,
                self.lengths,
                self.terminated,
                self.truncated,
                self.ids,
                self.module_id,
            ),
        )


def _concatenate(nests: list) -> Any:
    return tree.map_structure(lambda *leaves: np.concatenate(leaves), *nests)
