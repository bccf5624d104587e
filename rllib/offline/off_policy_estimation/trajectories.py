"""Recorded episodes as padded arrays, the input of every off-policy estimator.

An estimator sees one RLModule's data: `E` episodes padded to the longest
length `T`. A multi-agent episode contributes one trajectory per agent, to the
module that agent was mapped to, with that agent's own rewards.
"""

from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Sequence

import numpy as np
import tree
from ray.rllib.core import DEFAULT_MODULE_ID
from ray.rllib.core.columns import Columns
from ray.rllib.env.multi_agent_episode import MultiAgentEpisode
from ray.rllib.env.single_agent_episode import SingleAgentEpisode
from ray.rllib.utils.spaces.space_utils import batch
from ray.util.annotations import PublicAPI


@PublicAPI(stability="alpha")
@dataclass
class Trajectories:
    """`E` recorded trajectories of one module, padded to `T` steps.

    Attributes:
        observations: A nest of arrays with leading dims `(E, T + 1)`; row
            `lengths[e]` of episode `e` is its final observation.
        actions: A nest of arrays with leading dims `(E, T)`.
        rewards: `(E, T)` float64, zero past each episode's end.
        mask: `(E, T)` bool, True on recorded steps.
        lengths: `(E,)` int, steps per trajectory.
        terminated: `(E,)` bool, whether the trajectory ended in a terminal
            state (its final observation is then never bootstrapped).
        behavior_logp: `(E, T)` float64 recorded log-probabilities of the
            logged actions (`Columns.ACTION_LOGP`), or None when any
            trajectory lacks them.
    """

    observations: Any
    actions: Any
    rewards: np.ndarray
    mask: np.ndarray
    lengths: np.ndarray
    terminated: np.ndarray
    behavior_logp: Optional[np.ndarray]

    @property
    def num_episodes(self) -> int:
        return len(self.lengths)

    @property
    def num_steps(self) -> int:
        return int(self.lengths.sum())

    def select(self, indices: np.ndarray) -> "Trajectories":
        """Returns the trajectories at `indices` (repeats allowed)."""
        return Trajectories(
            observations=tree.map_structure(lambda x: x[indices], self.observations),
            actions=tree.map_structure(lambda x: x[indices], self.actions),
            rewards=self.rewards[indices],
            mask=self.mask[indices],
            lengths=self.lengths[indices],
            terminated=self.terminated[indices],
            behavior_logp=(
                None if self.behavior_logp is None else self.behavior_logp[indices]
            ),
        )

    def step_observations(self) -> Any:
        """The observations of the recorded steps, as one flat batch `(N, ...)`."""
        step_mask = np.concatenate(
            [self.mask, np.zeros((self.num_episodes, 1), bool)], axis=1
        )
        return tree.map_structure(lambda x: x[step_mask], self.observations)


def _pad(rows: Sequence[np.ndarray], length: int) -> np.ndarray:
    first = np.asarray(rows[0])
    out = np.zeros((len(rows), length) + first.shape[1:], dtype=first.dtype)
    for i, row in enumerate(rows):
        out[i, : len(row)] = row
    return out


def _as_arrays(episode: SingleAgentEpisode) -> Dict[str, Any]:
    length = len(episode)
    observations = episode.get_observations(slice(0, length + 1))
    actions = episode.get_actions(slice(0, length))
    if not episode.is_numpy:
        # Lists of per-step nests until `to_numpy()`; stack them here.
        observations, actions = batch(observations), batch(actions)
    rewards = np.asarray(episode.get_rewards(slice(0, length)), np.float64)
    logp = None
    if Columns.ACTION_LOGP in episode.extra_model_outputs:
        logp = np.asarray(
            episode.get_extra_model_outputs(Columns.ACTION_LOGP, slice(0, length)),
            np.float64,
        ).reshape(length)
    return dict(
        observations=observations,
        actions=actions,
        rewards=rewards,
        logp=logp,
        length=length,
        terminated=bool(episode.is_terminated),
    )


@PublicAPI(stability="alpha")
def trajectories_from_episodes(
    episodes: Sequence[SingleAgentEpisode],
) -> Trajectories:
    """Pads single-agent episodes into `Trajectories`.

    Args:
        episodes: Finished or cut-off episodes, each recorded from its first
            step (an estimate of a policy's value starts at the initial
            state).

    Raises:
        ValueError: If `episodes` is empty, an episode has no steps or no
            rewards, or does not start at its first step.
    """
    if not episodes:
        raise ValueError(
            "Off-policy estimation got no episodes; pass at least one recorded "
            "episode (check the `--data` path or the dataset's filter)."
        )
    arrays = []
    for index, episode in enumerate(episodes):
        if len(episode) == 0:
            raise ValueError(
                f"Episode {index} (id {episode.id_!r}) has no steps; off-policy "
                "estimation needs at least one action and reward per episode."
            )
        if episode.t_started != 0:
            raise ValueError(
                f"Episode {index} (id {episode.id_!r}) starts at step "
                f"{episode.t_started}, not 0: off-policy estimates need whole "
                "episodes from their initial state. Concatenate its chunks first."
            )
        arrays.append(_as_arrays(episode))
    lengths = np.array([a["length"] for a in arrays], np.int64)
    horizon = int(lengths.max())
    observations = tree.map_structure(
        lambda *rows: _pad(rows, horizon + 1), *[a["observations"] for a in arrays]
    )
    actions = tree.map_structure(
        lambda *rows: _pad(rows, horizon), *[a["actions"] for a in arrays]
    )
    mask = np.arange(horizon)[None, :] < lengths[:, None]
    has_logp = all(a["logp"] is not None for a in arrays)
    return Trajectories(
        observations=observations,
        actions=actions,
        rewards=_pad([a["rewards"] for a in arrays], horizon),
        mask=mask,
        lengths=lengths,
        terminated=np.array([a["terminated"] for a in arrays], bool),
        behavior_logp=(
            _pad([a["logp"] for a in arrays], horizon) if has_logp else None
        ),
    )


@PublicAPI(stability="alpha")
def episodes_by_module(
    episodes: Sequence[Any],
    policy_mapping_fn: Optional[Callable] = None,
) -> Dict[str, List[SingleAgentEpisode]]:
    """Groups episodes by the RLModule that acts in them.

    Single-agent episodes all belong to `DEFAULT_MODULE_ID`. Each agent of a
    `MultiAgentEpisode` goes to the module the episode recorded for it, or, if
    none was recorded, to `policy_mapping_fn(agent_id, episode)`.

    Args:
        episodes: `SingleAgentEpisode`s and/or `MultiAgentEpisode`s.
        policy_mapping_fn: The training config's mapping function.

    Raises:
        ValueError: If an agent's module is neither recorded nor mappable.
    """
    grouped: Dict[str, List[SingleAgentEpisode]] = {}
    for episode in episodes:
        if not isinstance(episode, MultiAgentEpisode):
            grouped.setdefault(DEFAULT_MODULE_ID, []).append(episode)
            continue
        for agent_id, agent_episode in episode.agent_episodes.items():
            module_id = episode.module_for(agent_id)
            if module_id is None and policy_mapping_fn is not None:
                module_id = policy_mapping_fn(agent_id, episode)
            if module_id is None:
                raise ValueError(
                    f"Agent {agent_id!r} of episode {episode.id_!r} has no recorded "
                    "module and no `policy_mapping_fn` was given; pass the "
                    "training config's `policy_mapping_fn`."
                )
            grouped.setdefault(module_id, []).append(agent_episode)
    return grouped
