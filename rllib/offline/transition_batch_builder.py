"""Builds the Learner connector's train batch from sampled transitions directly.

The OfflinePreLearner's general path turns each sampled transition into a
one-step `SingleAgentEpisode` and runs the Learner connector pipeline over
them, one episode at a time. For the pipelines BC, MARWIL and the like build,
the resulting batch is a fixed function of the sampled transitions, so
`TransitionBatchBuilder` computes it with array operations instead:

- `AddOneTsToEpisodesAndTruncate`: every item becomes two rows, the
  transition and a bootstrap row (the next observation repeated, action
  repeated, reward 0, loss mask False, no done flags); the transition row is
  marked truncated unless it is terminal.
- `AddObservationsFromEpisodesToBatch` (`obs`),
  `AddNextObservationsFromEpisodesToTrainBatch` (`new_obs`),
  `AddColumnsFromEpisodesToTrainBatch` (`actions`, `rewards`, `terminateds`,
  `truncateds` and the sampler's `n_step` and `weights`).
- `AddTimeDimToBatchAndZeroPad`, `AddStatesFromEpisodesToBatch`: no-ops for
  the stateless modules this path serves.
- `BatchIndividualItems`: rows are grouped by (possibly shared) episode id,
  in order of first appearance, as the connector's per-episode dict does.

Pieces after `BatchIndividualItems` that only transform the batch (e.g.
`NumpyToTensor`) run as they are. Any other piece, or an unexpected order,
makes `from_pipeline` return None with the reason, and the caller keeps the
general path.
"""

from typing import Any, Dict, List, Optional, Tuple

import numpy as np
import tree
from ray.rllib.connectors.common.add_observations_from_episodes_to_batch import (
    AddObservationsFromEpisodesToBatch,
)
from ray.rllib.connectors.common.add_states_from_episodes_to_batch import (
    AddStatesFromEpisodesToBatch,
)
from ray.rllib.connectors.common.add_time_dim_to_batch_and_zero_pad import (
    AddTimeDimToBatchAndZeroPad,
)
from ray.rllib.connectors.common.batch_individual_items import BatchIndividualItems
from ray.rllib.connectors.common.numpy_to_tensor import NumpyToTensor
from ray.rllib.connectors.learner.add_columns_from_episodes_to_train_batch import (
    AddColumnsFromEpisodesToTrainBatch,
)
from ray.rllib.connectors.learner.add_next_observations_from_episodes_to_train_batch import (  # noqa: E501
    AddNextObservationsFromEpisodesToTrainBatch,
)
from ray.rllib.connectors.learner.add_one_ts_to_episodes_and_truncate import (
    AddOneTsToEpisodesAndTruncate,
)
from ray.rllib.core import DEFAULT_MODULE_ID
from ray.rllib.core.columns import Columns

from rllib.utils.replay_buffers.columnar_episode_buffer import (
    ColumnarEpisodeBuffer,
    SampledTransitions,
)

#: Pieces that read episodes, with the columns they add.
_EPISODE_PIECES = {
    AddOneTsToEpisodesAndTruncate: (
        Columns.LOSS_MASK,
        Columns.TERMINATEDS,
        Columns.TRUNCATEDS,
    ),
    AddObservationsFromEpisodesToBatch: (Columns.OBS,),
    AddNextObservationsFromEpisodesToTrainBatch: (Columns.NEXT_OBS,),
    AddColumnsFromEpisodesToTrainBatch: (
        Columns.ACTIONS,
        Columns.REWARDS,
        Columns.TERMINATEDS,
        Columns.TRUNCATEDS,
        "n_step",
        "weights",
    ),
}
#: Pieces that add nothing for a stateless module.
_STATELESS_NO_OPS = (AddTimeDimToBatchAndZeroPad, AddStatesFromEpisodesToBatch)
#: Pieces that may follow `BatchIndividualItems`: they only transform the batch.
_BATCH_PIECES = (NumpyToTensor,)


class TransitionBatchBuilder:
    """The train batch of a supported Learner connector pipeline, vectorized.

    Build it with `from_pipeline`; call `build` once per sampled batch.
    """

    def __init__(
        self,
        *,
        columns: Tuple[str, ...],
        add_bootstrap_row: bool,
        batch_pieces: List[Any],
    ):
        self.columns = columns
        self.add_bootstrap_row = add_bootstrap_row
        self.batch_pieces = batch_pieces

    @classmethod
    def from_pipeline(
        cls, pipeline, rl_module
    ) -> Tuple[Optional["TransitionBatchBuilder"], str]:
        """Returns a builder for `pipeline`, or None and why it is not covered.

        Args:
            pipeline: The prelearner's Learner connector pipeline (GAE already
                removed by the fork, see `OfflinePreLearner`).
            rl_module: The prelearner's `MultiRLModule`.
        """
        if rl_module.is_stateful():
            return None, "the module is stateful"
        columns: List[str] = []
        batch_pieces = []
        add_bootstrap_row = False
        batched = False
        for position, piece in enumerate(pipeline.connectors):
            kind = type(piece)
            name = kind.__name__
            if batched:
                if kind not in _BATCH_PIECES:
                    return None, f"connector `{name}` after `BatchIndividualItems`"
                batch_pieces.append(piece)
            elif kind is BatchIndividualItems:
                if piece._multi_agent:
                    return None, "multi-agent batching"
                batched = True
            elif kind in _STATELESS_NO_OPS:
                continue
            elif kind is AddOneTsToEpisodesAndTruncate:
                if position != 0:
                    return None, f"`{name}` is not the first connector"
                add_bootstrap_row = True
                columns.extend(_EPISODE_PIECES[kind])
            elif kind is AddObservationsFromEpisodesToBatch:
                if not piece._as_learner_connector:
                    return None, f"`{name}` not built as a Learner connector"
                if columns and columns != list(
                    _EPISODE_PIECES[AddOneTsToEpisodesAndTruncate]
                ):
                    return None, f"`{name}` follows other column connectors"
                columns.extend(_EPISODE_PIECES[kind])
            elif kind in _EPISODE_PIECES:
                if Columns.OBS not in columns:
                    return None, f"`{name}` runs before the observations connector"
                columns.extend(_EPISODE_PIECES[kind])
            else:
                return None, f"connector `{name}`"
        if not batched:
            return None, "no `BatchIndividualItems` connector"
        # Keep the first occurrence of each column (later pieces skip columns
        # already in the batch).
        columns = tuple(dict.fromkeys(columns))
        return (
            cls(
                columns=columns,
                add_bootstrap_row=add_bootstrap_row,
                batch_pieces=batch_pieces,
            ),
            "",
        )

    def build(
        self,
        buffer: ColumnarEpisodeBuffer,
        transitions: SampledTransitions,
        *,
        rl_module,
    ) -> Dict[str, Dict[str, Any]]:
        """The per-module train batch for `transitions` sampled from `buffer`."""
        batch = self._rows(buffer, transitions)
        # `AddOneTsToEpisodesAndTruncate` gives every item an id of its own.
        if not self.add_bootstrap_row:
            order = _first_appearance_order(transitions.episode_ids)
            if order is not None:
                batch = tree.map_structure(lambda leaf: leaf[order], batch)
        module_batch = {DEFAULT_MODULE_ID: batch}
        for piece in self.batch_pieces:
            module_batch = piece(
                rl_module=rl_module,
                batch=module_batch,
                episodes=[],
                shared_data={},
                metrics=None,
            )
        return module_batch

    def _rows(
        self, buffer: ColumnarEpisodeBuffer, t: SampledTransitions
    ) -> Dict[str, Any]:
        """The columns, one row per item (two with bootstrap rows)."""
        num_items = len(t)
        weights = np.ones(num_items, dtype=np.float64)
        rewards = t.rewards
        terminateds, truncateds = t.terminateds, t.truncateds
        obs_rows, next_obs_rows = t.obs_rows, t.next_obs_rows
        action_rows, n_step = t.action_rows, t.n_step
        loss_mask = np.ones(num_items, dtype=bool)
        if self.add_bootstrap_row:
            # Row 2i: the transition; row 2i + 1: the bootstrap step.
            obs_rows = _interleave(obs_rows, next_obs_rows)
            next_obs_rows = _interleave(next_obs_rows, next_obs_rows)
            action_rows = _interleave(action_rows, action_rows)
            n_step = _interleave(n_step, n_step)
            weights = _interleave(weights, weights)
            rewards = _interleave(rewards, np.zeros(num_items))
            no = np.zeros(num_items, dtype=bool)
            truncateds = _interleave(truncateds | ~terminateds, no)
            terminateds = _interleave(terminateds, no)
            loss_mask = _interleave(loss_mask, no)
        values = {
            Columns.OBS: lambda: buffer.gather_observations(obs_rows),
            Columns.NEXT_OBS: lambda: buffer.gather_observations(next_obs_rows),
            Columns.ACTIONS: lambda: buffer.gather_actions(action_rows),
            Columns.REWARDS: lambda: rewards,
            Columns.TERMINATEDS: lambda: terminateds,
            Columns.TRUNCATEDS: lambda: truncateds,
            Columns.LOSS_MASK: lambda: loss_mask,
            "n_step": lambda: n_step,
            "weights": lambda: weights,
        }
        return {column: values[column]() for column in self.columns}


def _interleave(first: np.ndarray, second: np.ndarray) -> np.ndarray:
    """`[first[0], second[0], first[1], second[1], ...]` in their common dtype."""
    out = np.empty(2 * len(first), dtype=np.result_type(first, second))
    out[0::2] = first
    out[1::2] = second
    return out


def _first_appearance_order(episode_ids: np.ndarray) -> Optional[np.ndarray]:
    """Row order that groups items sharing an episode id, or None if all differ.

    Without a connector that makes ids unique, the connectors collect items in
    a dict keyed by episode id, so items of one episode come out together, at
    the position of the first one. Ids without `_` are made unique by
    `AddObservationsFromEpisodesToBatch` (it appends `_<index>`), so only ids
    with `_` can be shared (or collide with such a suffixed id).
    """
    if not any("_" in episode_id for episode_id in set(episode_ids)):
        return None
    groups: Dict[str, int] = {}
    keys = np.empty(len(episode_ids), dtype=np.int64)
    for i, episode_id in enumerate(episode_ids):
        key = episode_id if "_" in episode_id else f"{episode_id}_{i}"
        keys[i] = groups.setdefault(key, len(groups))
    if len(groups) == len(episode_ids):
        return None
    return np.argsort(keys, kind="stable")
