"""Turns sampled transitions into the Learner connector's train batch.

The per-episode path (`EpisodeReplayBuffer` sampling in the
`OfflinePreLearner`) turns each sampled transition into a one-step
`SingleAgentEpisode` and runs the Learner connector pipeline over them, one
episode at a time. For
the pipelines BC, MARWIL and the like build, the batch is a fixed function of
the sampled transitions, so `TransitionBatchBuilder` computes it with array
operations instead:

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
- `BatchIndividualItems`: rows stay in the order the items were sampled.
  The connectors collect items in a dict keyed by episode id, so where
  sampled items share an id (ids with `_`, which
  `AddObservationsFromEpisodesToBatch` does not make unique) they group that
  episode's rows at its first item; the builder does not copy that: the
  rows are i.i.d. draws, offline Learners update on each batch as a whole
  and every row carries what its loss needs, so only the order differs.
- `AgentToModuleMapping` (multi-agent): the transitions come sampled per
  module already (`EpisodeBlock.module_id`), so the builder labels the
  batch with that module.

Pieces after `BatchIndividualItems` that only transform the batch (e.g.
`NumpyToTensor`) run as they are.

Value targets: where the pipeline ends in `GeneralAdvantageEstimation`
(MARWIL, offline PPO), the Learner computes the targets from inputs
each row carries (`rllib.utils.postprocessing.bootstrapped_returns`). The
builders then add those columns and drop the GAE piece and the bootstrap
rows of `AddOneTsToEpisodesAndTruncate`, which only served GAE's value pass.

`ConnectorBatchBuilder` is the fallback for any other pipeline: it builds the
one-step episodes the per-episode path builds (with the value-target inputs as
extra model outputs) and runs the connector pipeline on them. `make_batch_builder` picks
the builder and says why the fast one does not apply.
"""

from typing import Any, Dict, List, Optional, Tuple, Union

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
from ray.rllib.connectors.common.agent_to_module_mapping import AgentToModuleMapping
from ray.rllib.connectors.common.batch_individual_items import BatchIndividualItems
from ray.rllib.connectors.common.numpy_to_tensor import NumpyToTensor
from ray.rllib.connectors.connector_pipeline_v2 import ConnectorPipelineV2
from ray.rllib.connectors.learner.add_columns_from_episodes_to_train_batch import (
    AddColumnsFromEpisodesToTrainBatch,
)
from ray.rllib.connectors.learner.add_next_observations_from_episodes_to_train_batch import (  # noqa: E501
    AddNextObservationsFromEpisodesToTrainBatch,
)
from ray.rllib.connectors.learner.add_one_ts_to_episodes_and_truncate import (
    AddOneTsToEpisodesAndTruncate,
)
from ray.rllib.connectors.learner.general_advantage_estimation import (
    GeneralAdvantageEstimation,
)
from ray.rllib.core import DEFAULT_MODULE_ID
from ray.rllib.core.columns import Columns
from ray.rllib.env.single_agent_episode import SingleAgentEpisode

from rllib.offline.in_memory.columnar_buffer import SampledTransitions
from rllib.utils.postprocessing.bootstrapped_returns import (
    BOOTSTRAP_DISCOUNT,
    BOOTSTRAP_OBS,
    RETURNS_TO_BOOTSTRAP,
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
#: Pieces that add nothing for a stateless module (or, for the module mapping,
#: for transitions sampled per module).
_STATELESS_NO_OPS = (
    AddTimeDimToBatchAndZeroPad,
    AddStatesFromEpisodesToBatch,
    AgentToModuleMapping,
)
#: Pieces that may follow `BatchIndividualItems`: they only transform the batch.
_BATCH_PIECES = (NumpyToTensor,)
#: The columns that carry each row's value-target inputs.
_VALUE_TARGET_COLUMNS = (RETURNS_TO_BOOTSTRAP, BOOTSTRAP_OBS, BOOTSTRAP_DISCOUNT)


def find_gae_piece(pipeline) -> Optional[GeneralAdvantageEstimation]:
    """The GAE piece of a connector pipeline (`GeneralAdvantageEstimation` or a
    subclass), or None."""
    for piece in getattr(pipeline, "connectors", []) if pipeline else []:
        if isinstance(piece, GeneralAdvantageEstimation):
            return piece
    return None


def pieces_for_offline_batches(pipeline) -> Tuple[List[Any], bool]:
    """The pipeline's pieces that build offline train batches, and whether the
    rows need value-target inputs.

    With a GAE piece, the Learner computes targets from inputs each row
    carries, so GAE and the bootstrap rows of `AddOneTsToEpisodesAndTruncate`
    are left out.
    """
    pieces = list(getattr(pipeline, "connectors", []))
    gae = find_gae_piece(pipeline)
    if gae is None:
        return pieces, False
    return [
        piece
        for piece in pieces
        if piece is not gae and not isinstance(piece, AddOneTsToEpisodesAndTruncate)
    ], True


class TransitionBatchBuilder:
    """The train batch of a supported Learner connector pipeline, vectorized.

    Build it with `from_pipeline`; call `build` once per sampled batch.
    """

    def __init__(
        self,
        *,
        columns: Tuple[str, ...],
        add_bootstrap_row: bool,
        value_targets: bool,
        batch_pieces: List[Any],
    ):
        self.columns = columns
        self.add_bootstrap_row = add_bootstrap_row
        self.value_targets = value_targets
        self.batch_pieces = batch_pieces

    @classmethod
    def from_pipeline(
        cls, pipeline, rl_module
    ) -> Tuple[Optional["TransitionBatchBuilder"], str]:
        """Returns a builder for `pipeline`, or None and why it is not covered.

        Args:
            pipeline: A Learner connector pipeline (GAE may be in it).
            rl_module: The `MultiRLModule` the batches are for.
        """
        if rl_module.is_stateful():
            return None, "the module is stateful"
        pieces, value_targets = pieces_for_offline_batches(pipeline)
        columns: List[str] = []
        batch_pieces = []
        add_bootstrap_row = False
        batched = False
        for position, piece in enumerate(pieces):
            kind = type(piece)
            name = kind.__name__
            if batched:
                if kind not in _BATCH_PIECES:
                    return None, f"connector `{name}` after `BatchIndividualItems`"
                batch_pieces.append(piece)
            elif kind is BatchIndividualItems:
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
        if value_targets and AddColumnsFromEpisodesToTrainBatch not in map(
            type, pieces
        ):
            return None, "no `AddColumnsFromEpisodesToTrainBatch` connector"
        # Keep the first occurrence of each column (later pieces skip columns
        # already in the batch); the value-target inputs come last, as the
        # extra model outputs that carry them on the general path do.
        if value_targets:
            columns.extend(_VALUE_TARGET_COLUMNS)
        columns = tuple(dict.fromkeys(columns))
        return (
            cls(
                columns=columns,
                add_bootstrap_row=add_bootstrap_row,
                value_targets=value_targets,
                batch_pieces=batch_pieces,
            ),
            "",
        )

    def build(
        self,
        transitions: SampledTransitions,
        *,
        rl_module,
        module_id: str = DEFAULT_MODULE_ID,
    ) -> Dict[str, Dict[str, Any]]:
        """The train batch of `module_id` for `transitions`, keyed by module."""
        module_batch = {module_id: self._rows(transitions)}
        for piece in self.batch_pieces:
            module_batch = piece(
                rl_module=rl_module,
                batch=module_batch,
                episodes=[],
                shared_data={},
                metrics=None,
            )
        return module_batch

    def _rows(self, t: SampledTransitions) -> Dict[str, Any]:
        """The columns, one row per item (two with bootstrap rows)."""
        num_items = len(t)
        weights = np.ones(num_items, dtype=np.float64)
        rewards = t.rewards
        terminateds, truncateds = t.terminateds, t.truncateds
        obs, next_obs, actions, n_step = t.obs, t.next_obs, t.actions, t.n_step
        loss_mask = np.ones(num_items, dtype=bool)
        if self.add_bootstrap_row:
            # Row 2i: the transition; row 2i + 1: the bootstrap step.
            obs = _interleave(obs, next_obs)
            next_obs = _interleave(next_obs, next_obs)
            actions = _interleave(actions, actions)
            n_step = _interleave(n_step, n_step)
            weights = _interleave(weights, weights)
            rewards = _interleave(rewards, np.zeros(num_items))
            no = np.zeros(num_items, dtype=bool)
            truncateds = _interleave(truncateds | ~terminateds, no)
            terminateds = _interleave(terminateds, no)
            loss_mask = _interleave(loss_mask, no)
        values = {
            Columns.OBS: obs,
            Columns.NEXT_OBS: next_obs,
            Columns.ACTIONS: actions,
            Columns.REWARDS: rewards,
            Columns.TERMINATEDS: terminateds,
            Columns.TRUNCATEDS: truncateds,
            Columns.LOSS_MASK: loss_mask,
            "n_step": n_step,
            "weights": weights,
        }
        if self.value_targets:
            inputs = _require_value_target_inputs(t)
            values[RETURNS_TO_BOOTSTRAP] = inputs.returns_to_bootstrap
            values[BOOTSTRAP_OBS] = inputs.bootstrap_obs
            values[BOOTSTRAP_DISCOUNT] = inputs.bootstrap_discount
        return {column: values[column] for column in self.columns}


class ConnectorBatchBuilder:
    """The general path: one-step episodes through the connector pipeline.

    Args:
        pipeline: The Learner connector pipeline the batches are for.
    """

    def __init__(self, pipeline, reason: str = ""):
        self.reason = reason
        pieces, self.value_targets = pieces_for_offline_batches(pipeline)
        self.multi_agent = any(isinstance(p, AgentToModuleMapping) for p in pieces)
        self.pipeline = ConnectorPipelineV2(
            connectors=pieces,
            input_observation_space=pipeline.input_observation_space,
            input_action_space=pipeline.input_action_space,
        )

    def build(
        self,
        transitions: SampledTransitions,
        *,
        rl_module,
        module_id: str = DEFAULT_MODULE_ID,
    ) -> Dict[str, Dict[str, Any]]:
        """Runs the pipeline on the episodes `transitions` stand for.

        Raises:
            NotImplementedError: For a multi-agent pipeline: it would need
                multi-agent episodes.
        """
        if self.multi_agent:
            raise NotImplementedError(
                "Multi-agent offline training builds its train batches with "
                "the vectorized builder, which does not cover this "
                f"Learner connector pipeline ({self.reason}). Use the "
                "algorithm's default Learner connectors (BC, MARWIL), or train "
                "each module on its agents' episodes as single-agent data."
            )
        return self.pipeline(
            rl_module=rl_module,
            batch={},
            episodes=episodes_from_transitions(
                transitions, with_value_target_inputs=self.value_targets
            ),
            shared_data={},
            metrics=None,
        )


def make_batch_builder(
    pipeline, rl_module
) -> Tuple[Union[TransitionBatchBuilder, ConnectorBatchBuilder], str]:
    """The vectorized builder where it covers `pipeline`, else the general one.

    Returns:
        `(builder, reason)`; `reason` says why the general builder was chosen
        ("" for the vectorized one).
    """
    builder, reason = TransitionBatchBuilder.from_pipeline(pipeline, rl_module)
    if builder is not None:
        return builder, ""
    return ConnectorBatchBuilder(pipeline, reason), reason


def episodes_from_transitions(
    transitions: SampledTransitions, *, with_value_target_inputs: bool
) -> List[SingleAgentEpisode]:
    """The one-step episodes `EpisodeReplayBuffer`'s sampler returns for these
    transitions.

    Each holds `o_t` and the next observation, `a_t`, the n-step reward, the
    done flags, and `n_step` and `weights` as extra model outputs (plus the
    value-target inputs if asked for).
    """
    t = transitions
    extra = {"n_step": t.n_step, "weights": np.ones(len(t), dtype=np.float64)}
    if with_value_target_inputs:
        inputs = _require_value_target_inputs(t)
        extra[RETURNS_TO_BOOTSTRAP] = inputs.returns_to_bootstrap
        extra[BOOTSTRAP_OBS] = inputs.bootstrap_obs
        extra[BOOTSTRAP_DISCOUNT] = inputs.bootstrap_discount
    episodes = []
    for i in range(len(t)):
        episodes.append(
            SingleAgentEpisode(
                id_=str(t.episode_ids[i]),
                observations=[_row(t.obs, i), _row(t.next_obs, i)],
                actions=[_row(t.actions, i)],
                rewards=[t.rewards[i]],
                terminated=bool(t.terminateds[i]),
                truncated=bool(t.truncateds[i]),
                extra_model_outputs=_row(extra, slice(i, i + 1)),
                t_started=int(t.timesteps[i]),
                len_lookback_buffer=0,
            ).to_numpy()
        )
    return episodes


def _row(nest: Any, index) -> Any:
    """`nest`'s entry (or slice) at `index`, per leaf."""
    return tree.map_structure(lambda leaf: leaf[index], nest)


def _require_value_target_inputs(transitions: SampledTransitions):
    if transitions.value_target_inputs is None:
        raise ValueError(
            "The pipeline needs each row's value-target inputs, but the "
            "transitions were sampled without them; sample with "
            "`value_targets=(gamma, horizon)`."
        )
    return transitions.value_target_inputs


def _interleave(first: Any, second: Any) -> Any:
    """`[first[0], second[0], first[1], second[1], ...]` per leaf."""

    def leaf(a, b):
        out = np.empty((2 * len(a),) + a.shape[1:], dtype=np.result_type(a, b))
        out[0::2] = a
        out[1::2] = b
        return out

    return tree.map_structure(leaf, first, second)
