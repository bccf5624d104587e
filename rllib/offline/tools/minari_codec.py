"""Converts one episode between Minari's layout and a `SingleAgentEpisode`.

Minari stores an episode of `T` steps as batched columns: `T + 1`
observations (the reset observation first), `T` actions, rewards,
terminations and truncations, and `infos` as a dict of columns with `T + 1`
rows (the reset info first). A `Dict` space is a dict of batched children, a
`Tuple` space a tuple of them. A `SingleAgentEpisode` holds the same columns,
with the done flags as two booleans for the episode's last step and the
infos as one dict per step.

Both directions walk the gym space recursively. Nothing here imports
`minari`: `ray.rllib.offline.tools.minari_io` does the I/O.
"""

import uuid
from collections.abc import Mapping
from typing import Any, Dict, List, Optional, Tuple

import gymnasium as gym
import numpy as np
from ray.rllib.env.single_agent_episode import SingleAgentEpisode

#: Spaces Minari keeps as one numpy array per leaf (`T` rows).
_ARRAY_SPACES = (
    gym.spaces.Box,
    gym.spaces.Discrete,
    gym.spaces.MultiBinary,
    gym.spaces.MultiDiscrete,
)
#: Key of the Minari provenance in `SingleAgentEpisode.custom_data`.
CUSTOM_DATA_KEY = "minari"
#: Namespace of the episode ids `episode_id` derives.
_ID_NAMESPACE = uuid.uuid5(uuid.NAMESPACE_URL, "https://minari.farama.org/")


def episode_id(dataset_id: str, index: int) -> str:
    """The `SingleAgentEpisode.id_` of episode `index` of a Minari dataset.

    Deterministic, so converting a dataset twice gives the same ids (RLlib's
    episode buffers keep one copy of an id), and free of `_`, which RLlib's
    connectors treat as an agent-suffix separator.
    """
    return uuid.uuid5(_ID_NAMESPACE, f"{dataset_id}:{int(index)}").hex


def to_python(value: Any) -> Any:
    """Numpy scalars and arrays in (nested) metadata as Python values."""
    if isinstance(value, Mapping):
        return {str(k): to_python(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_python(v) for v in value]
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    return value


# ---------------------------------------------------------------------------
# Minari -> SingleAgentEpisode.
# ---------------------------------------------------------------------------


def _leading_length(space: gym.Space, values: Any, name: str, where: str) -> int:
    """Rows of a batched column; raises if its leaves disagree."""
    lengths = {}

    def visit(sub_space, sub_values, path):
        if isinstance(sub_space, gym.spaces.Dict):
            for key, child in sub_space.spaces.items():
                if not isinstance(sub_values, Mapping) or key not in sub_values:
                    raise ValueError(
                        f"{where}: field `{path}` has no key {key!r} although the "
                        f"dataset's space is {sub_space}. The dataset is "
                        "inconsistent with its recorded space; re-create it."
                    )
                visit(child, sub_values[key], f"{path}[{key!r}]")
        elif isinstance(sub_space, gym.spaces.Tuple):
            if not isinstance(sub_values, (tuple, list)) or len(sub_values) != len(
                sub_space.spaces
            ):
                raise ValueError(
                    f"{where}: field `{path}` is not a sequence of "
                    f"{len(sub_space.spaces)} columns although the dataset's space "
                    f"is {sub_space}. Re-create the dataset."
                )
            for i, (child, item) in enumerate(zip(sub_space.spaces, sub_values)):
                visit(child, item, f"{path}[{i}]")
        else:
            lengths[path] = len(sub_values)

    visit(space, values, name)
    if len(set(lengths.values())) > 1:
        raise ValueError(
            f"{where}: the leaves of field `{name}` have different lengths "
            f"{lengths}. Re-create the dataset."
        )
    return next(iter(lengths.values()))


def _restructure(space: gym.Space, values: Any) -> Any:
    """A batched column in the space's structure: dict keys in space order,
    tuples for Tuple spaces, numpy arrays for array leaves."""
    if isinstance(space, gym.spaces.Dict):
        return {
            key: _restructure(sub, values[key]) for key, sub in space.spaces.items()
        }
    if isinstance(space, gym.spaces.Tuple):
        return tuple(_restructure(sub, item) for sub, item in zip(space.spaces, values))
    if isinstance(space, _ARRAY_SPACES):
        return np.asarray(values)
    return list(values)


def _info_at(infos: Mapping, t: int) -> Dict[str, Any]:
    """The info dict of step `t` of a batched Minari `infos` dict."""
    step = {}
    for key, column in infos.items():
        if isinstance(column, Mapping):
            step[key] = _info_at(column, t)
        else:
            step[key] = column[t]
    return step


def _info_lengths(infos: Mapping, prefix: str = "") -> Dict[str, int]:
    lengths = {}
    for key, column in infos.items():
        if isinstance(column, Mapping):
            lengths.update(_info_lengths(column, f"{prefix}{key}."))
        else:
            lengths[f"{prefix}{key}"] = len(column)
    return lengths


def unbatch_infos(infos: Optional[Mapping], num_rows: int, where: str) -> List[dict]:
    """Minari's batched `infos` as one dict per observation.

    Args:
        infos: A dict of columns (nested dicts allowed), or None/empty.
        num_rows: The number of observations, `T + 1`.
        where: Words that locate the episode, for errors.

    Returns:
        `num_rows` dicts; empty dicts when the episode has no infos.

    Raises:
        ValueError: If a column does not have `num_rows` rows.
    """
    if not infos:
        return [{} for _ in range(num_rows)]
    wrong = {k: n for k, n in _info_lengths(infos).items() if n != num_rows}
    if wrong:
        raise ValueError(
            f"{where}: the infos {wrong} do not have one row per observation "
            f"({num_rows}). Read without infos (`read_infos=False`)."
        )
    return [_info_at(infos, t) for t in range(num_rows)]


def _check_lengths(lengths: Dict[str, int], num_steps: int, where: str) -> None:
    """Raises unless there is one row per step, and one more observation."""
    expected = {"observations": num_steps + 1}
    for name, length in lengths.items():
        if length != expected.get(name, num_steps):
            raise ValueError(
                f"{where}: field `{name}` has {length} rows, expected "
                f"{expected.get(name, num_steps)} for an episode with {num_steps} "
                "rewards (one observation more than steps). Re-create the dataset."
            )


def _done_flags(
    terminations: np.ndarray,
    truncations: np.ndarray,
    where: str,
    truncate_unfinished: bool,
) -> Tuple[bool, bool]:
    """`(terminated, truncated)` of an episode from its per-step done flags.

    Raises if the episode ends before its last step, or if it is unfinished
    and not `truncate_unfinished`.
    """
    num_steps = len(terminations)
    ends = np.flatnonzero(terminations[:-1] | truncations[:-1])
    if ends.size:
        raise ValueError(
            f"{where}: step {int(ends[0])} is terminated or truncated but the "
            f"episode goes on to step {num_steps - 1}. A Minari episode must "
            "end at its first terminated/truncated step; re-create the dataset "
            "with one episode per reset."
        )
    terminated, truncated = bool(terminations[-1]), bool(truncations[-1])
    if not (terminated or truncated):
        if not truncate_unfinished:
            raise ValueError(
                f"{where}: the last step is neither terminated nor truncated, so "
                "the episode is unfinished; RLlib trains on finished episodes "
                "only. Pass `truncate_unfinished=True` to mark such episodes "
                "truncated (the data ended, the task did not)."
            )
        truncated = True
    return terminated, truncated


def episode_from_minari(
    *,
    observations: Any,
    actions: Any,
    rewards: np.ndarray,
    terminations: np.ndarray,
    truncations: np.ndarray,
    infos: Optional[Mapping],
    observation_space: gym.Space,
    action_space: gym.Space,
    id_: str,
    where: str,
    custom_data: Optional[Dict[str, Any]] = None,
    truncate_unfinished: bool = False,
) -> SingleAgentEpisode:
    """Builds a numpy-ized `SingleAgentEpisode` from one Minari episode.

    Args:
        observations: `T + 1` batched observations in `observation_space`.
        actions: `T` batched actions in `action_space`.
        rewards: `T` rewards.
        terminations: `T` booleans; only the last one may be True.
        truncations: `T` booleans; only the last one may be True.
        infos: Batched infos with `T + 1` rows, or None.
        observation_space: The dataset's observation space.
        action_space: The dataset's action space.
        id_: The episode id.
        where: Words that locate the episode, for errors.
        custom_data: Put into `episode.custom_data`.
        truncate_unfinished: Mark an episode whose last step is neither
            terminated nor truncated as truncated instead of raising.

    Returns:
        The episode, done and numpy-ized (`episode.is_numpy`), with the spaces.

    Raises:
        ValueError: If the columns have inconsistent lengths, an episode ends
            in the middle, or an episode is unfinished.
    """
    rewards = np.asarray(rewards)
    terminations = np.asarray(terminations, dtype=bool).reshape(-1)
    truncations = np.asarray(truncations, dtype=bool).reshape(-1)
    num_steps = len(rewards)
    if num_steps == 0:
        raise ValueError(
            f"{where} has no steps. RLlib trains on episodes with at least one "
            "step; drop the episode (`episode_indices=`)."
        )
    lengths = {
        "observations": _leading_length(
            observation_space, observations, "observations", where
        ),
        "actions": _leading_length(action_space, actions, "actions", where),
        "terminations": len(terminations),
        "truncations": len(truncations),
    }
    _check_lengths(lengths, num_steps, where)
    terminated, truncated = _done_flags(
        terminations, truncations, where, truncate_unfinished
    )
    episode = SingleAgentEpisode(
        id_=id_,
        observations=_restructure(observation_space, observations),
        observation_space=observation_space,
        infos=unbatch_infos(infos, num_steps + 1, where),
        actions=_restructure(action_space, actions),
        action_space=action_space,
        rewards=rewards,
        terminated=terminated,
        truncated=truncated,
        len_lookback_buffer=0,
    )
    if custom_data:
        episode.custom_data.update(custom_data)
    return episode


# ---------------------------------------------------------------------------
# SingleAgentEpisode -> Minari.
# ---------------------------------------------------------------------------


def _batched(space: gym.Space, values: Any) -> Any:
    """One field of an episode as Minari's batched column.

    `values` is either a list of per-step items (an episode that is not
    numpy-ized) or a batched structure (a numpy-ized one).
    """
    if isinstance(values, list) and not isinstance(space, _ARRAY_SPACES):
        if isinstance(space, gym.spaces.Dict):
            return {
                key: _batched(sub, [item[key] for item in values])
                for key, sub in space.spaces.items()
            }
        if isinstance(space, gym.spaces.Tuple):
            return tuple(
                _batched(sub, [item[i] for item in values])
                for i, sub in enumerate(space.spaces)
            )
        return list(values)
    if isinstance(space, gym.spaces.Dict):
        return {key: _batched(sub, values[key]) for key, sub in space.spaces.items()}
    if isinstance(space, gym.spaces.Tuple):
        return tuple(_batched(sub, values[i]) for i, sub in enumerate(space.spaces))
    if isinstance(space, _ARRAY_SPACES):
        return np.asarray(values, dtype=space.dtype)
    return list(values)


def _stack_infos(infos: List[dict], where: str, prefix: str = "") -> Dict[str, Any]:
    """Per-step info dicts as Minari's batched `infos` (lists of values).

    Every step must have the same keys, and an array value the same shape at
    every step: Minari stores each key as one column.
    """
    keys = list(infos[0])
    columns = {}
    for t, info in enumerate(infos):
        if not isinstance(info, Mapping) or set(info) != set(keys):
            got = sorted(info) if isinstance(info, Mapping) else type(info).__name__
            raise ValueError(
                f"{where}: the info of timestep {t} has keys {got} at "
                f"`infos{prefix}`, but timestep 0 has {sorted(keys)}. Minari "
                "stores each info key as a column, so every step (the reset "
                "included) needs the same keys. Make the infos uniform, or pass "
                "`record_infos=False` to leave them out."
            )
    for key in keys:
        values = [info[key] for info in infos]
        path = f"{prefix}[{key!r}]"
        if isinstance(values[0], Mapping):
            columns[key] = _stack_infos(values, where, path)
            continue
        shapes = {np.shape(v) for v in values}
        if len(shapes) > 1 or any(isinstance(v, Mapping) for v in values):
            raise ValueError(
                f"{where}: the info `infos{path}` changes shape or type between "
                f"timesteps (shapes {sorted(shapes)}). Minari stores it as one "
                "array column; make it uniform, or pass `record_infos=False`."
            )
        columns[key] = values
    return columns


def episode_to_minari(
    episode: SingleAgentEpisode,
    observation_space: gym.Space,
    action_space: gym.Space,
    *,
    record_infos: bool,
    where: str,
) -> Dict[str, Any]:
    """The fields of Minari's `EpisodeBuffer` for one finished episode.

    The episode must have been checked with `validate_episode` against both
    spaces (done, consistent lengths, every value in its space).

    Args:
        episode: A done `SingleAgentEpisode`, numpy-ized or not.
        observation_space: The dataset's observation space.
        action_space: The dataset's action space.
        record_infos: Whether to include the infos (left out when all empty).
        where: Words that locate the episode, for errors.

    Returns:
        A dict with `observations`, `actions`, `rewards`, `terminations`,
        `truncations`, `infos`, `seed` and `options`.
    """
    num_steps = len(episode)
    terminations = np.zeros(num_steps, dtype=bool)
    truncations = np.zeros(num_steps, dtype=bool)
    terminations[-1] = episode.is_terminated
    truncations[-1] = episode.is_truncated
    infos = None
    if record_infos:
        step_infos = list(episode.get_infos())
        if any(step_infos):
            infos = _stack_infos(step_infos, where)
    provenance = episode.custom_data.get(CUSTOM_DATA_KEY) or {}
    metadata = provenance.get("metadata") or {}
    return {
        "observations": _batched(observation_space, episode.get_observations()),
        "actions": _batched(action_space, episode.get_actions()),
        "rewards": np.asarray(episode.get_rewards(), dtype=np.float64).reshape(-1),
        "terminations": terminations,
        "truncations": truncations,
        "infos": infos,
        "seed": metadata.get("seed"),
        "options": metadata.get("options"),
    }
