"""The fork's `OfflinePreLearner`: columnar episodes and self-contained rows.

Replaces `ray.rllib.offline.offline_prelearner.OfflinePreLearner` with a
subclass. It runs where Ray Data streams the data (data larger than the
memory budget, offline evaluation, tabular data) and when a user calls it
directly.

- Episode data: payloads are decoded to columns
  (`rllib.offline.in_memory.columns`), held and sampled as arrays
  (`rllib.offline.in_memory.columnar_buffer`) and turned into the
  train batch (`rllib.offline.in_memory.batch_builder`: vectorized for the
  default connector pieces, through the connector pipeline otherwise). No
  `SingleAgentEpisode` objects on the way, except where the general builder
  needs them.
- Value targets: where the pipeline ends in GAE (MARWIL, offline PPO), each
  row carries the inputs of its value target
  (`rllib.utils.postprocessing.bootstrapped_returns`) instead of relying on
  a bootstrap row next to it, so Ray Data may cut, shuffle and split the rows
  freely. Inside the training pipeline the Learner computes the targets with
  its live module (`compute_value_targets=False`); called directly, the
  prelearner computes them with its own module, as upstream's batches carry
  them. The inputs mean the same on every path: the recorded rewards
  discounted with `config.gamma` up to the horizon
  (`config.offline_data(value_horizon=...)`; the episode's end if
  unset), whatever `n_step` the rows were sampled with. The per-episode
  path computes them on the whole episodes it buffers; only tabular rows
  (one-step episodes) bootstrap one step ahead.
- Multi-agent episodes: each agent's steps go to the buffer of the module
  `config.multi_agent(policy_mapping_fn=...)` maps it to, and every module
  with data gets a batch of `train_batch_size_per_learner` rows (upstream's
  prelearner has no multi-agent support).
- n-step rewards (`config.n_step` > 1) are discounted with `config.gamma`
  on every path (upstream's prelearner passes no `gamma` to its buffer,
  whose sampler then discounts with its default 0.99).
- Stateful modules and custom prelearner buffers keep upstream's path
  (single-agent only).
"""

import inspect
import logging
from collections.abc import Mapping
from typing import Any, Callable, Dict, List, Optional

import numpy as np
import tree
from ray.rllib.core import DEFAULT_MODULE_ID
from ray.rllib.core.columns import Columns
from ray.rllib.env.single_agent_episode import SingleAgentEpisode
from ray.rllib.env.utils.infinite_lookback_buffer import InfiniteLookbackBuffer
from ray.rllib.offline import offline_prelearner as _upstream
from ray.rllib.utils import flatten_dict
from ray.rllib.utils.annotations import override
from ray.rllib.utils.replay_buffers.episode_replay_buffer import EpisodeReplayBuffer
from ray.rllib.utils.spaces.space_utils import batch as batch_items
from ray.util.annotations import PublicAPI

from rllib._fork.cluster_check import ForkStamp, check_fork
from rllib.core.learner.value_targets import add_value_targets_to_batch
from rllib.offline.episode_files.action_units import action_rescaling
from rllib.offline.episode_files.payload import ITEM_COLUMN
from rllib.offline.episode_files.reader import cannot_decode_error
from rllib.offline.in_memory.batch_builder import (
    find_gae_piece,
    make_batch_builder,
    pieces_for_offline_batches,
)
from rllib.offline.in_memory.columnar_buffer import (
    ColumnarEpisodeBuffer,
    ValueTargetInputs,
    value_target_inputs_at,
)
from rllib.offline.in_memory.columns import (
    EpisodeBlock,
    EpisodeColumns,
    agent_to_module_fn,
    check_modules_known,
    decode_episode_columns,
    decode_module_columns,
    episode_columns_from_episode,
)
from rllib.offline.offline_settings import (
    MEMORY_BUDGET,
    VALUE_HORIZON,
    get_offline_setting,
)
from rllib.utils.postprocessing.bootstrapped_returns import (
    BOOTSTRAP_DISCOUNT,
    BOOTSTRAP_OBS,
    RETURNS_TO_BOOTSTRAP,
    returns_to_go,
)

logger = logging.getLogger("ray." + __name__)

#: Column Ray Data adds with `read_parquet(..., include_paths=True)`.
_PATH_COLUMN = "path"

#: Reasons already logged in this process (each note appears once).
_LOGGED = set()


def log_once(message: str) -> None:
    if message not in _LOGGED:
        _LOGGED.add(message)
        logger.warning(message)


@PublicAPI(stability="alpha")
class OfflinePreLearner(_upstream.OfflinePreLearner):
    """Maps raw offline data to train batches whose rows stand alone.

    Args:
        compute_value_targets: Whether to add value targets (and advantages)
            with this prelearner's module copy where the pipeline needs them.
            `OfflineData` passes False: its Learners compute them
            with their live module. Calling a prelearner directly keeps the
            default, so its batches carry targets as the base class's do.
        fork_stamp: The `fork_stamp()` of the process that set up the data
            pipeline; a Ray Data worker without the same fork refuses to
            run (`rllib._fork.cluster_check`).
        args: Positional arguments, as the base class takes them.
        kwargs: Keyword arguments, as the base class takes them.
    """

    def __init__(
        self,
        *args,
        compute_value_targets: bool = True,
        fork_stamp: Optional[ForkStamp] = None,
        **kwargs,
    ):
        if fork_stamp is not None:
            check_fork(fork_stamp, what="the OfflinePreLearner of a Ray Data worker")
        super().__init__(*args, **kwargs)
        self.compute_value_targets = compute_value_targets
        self.columnar_buffer: Optional[ColumnarEpisodeBuffer] = None
        # Multi-agent data: one buffer per module, made as modules appear.
        self.module_buffers: Dict[str, ColumnarEpisodeBuffer] = {}
        self._batch_builder = None
        self._rows_carry_value_target_inputs = False
        # Per-episode path: value-target inputs of the buffered whole episodes.
        self._whole_episode_inputs: Dict[str, ValueTargetInputs] = {}
        if find_gae_piece(self._learner_connector) is not None:
            if self._module.is_stateful():
                log_once(
                    "Stateful module; GAE stays in the OfflinePreLearner "
                    "(value targets from the prelearner's module copy, "
                    "one-step bootstraps)."
                )
            else:
                self._rows_carry_value_target_inputs = True
        #: Maps recorded actions to the units the module acts in (None: as
        #: recorded); the driver put the files' units into the config.
        self.action_rescaling = action_rescaling(
            getattr(self.config, "input_action_units", None),
            normalize_actions=self.config.normalize_actions,
            action_space=self.action_space,
        )
        self._set_up_columnar_path()
        if self._rows_carry_value_target_inputs and self._batch_builder is None:
            # The general path builds rows without GAE or bootstrap rows; each
            # sampled episode carries its value-target inputs.
            pieces, _ = pieces_for_offline_batches(self._learner_connector)
            self._learner_connector.connectors = pieces

    def _set_up_columnar_path(self) -> None:
        """Decodes and samples episode data as columns where it can.

        Stateful modules (they sample sequences), custom prelearner buffers,
        subclasses that override the per-episode methods and configs without
        an observation space keep the per-episode path (the base class's
        `EpisodeReplayBuffer` sampling); the reason is logged once.
        """
        if not self.config.input_read_episodes:
            return
        reason = self._columnar_path_blocker()
        if reason is not None and self.config.is_multi_agent:
            raise ValueError(
                "Multi-agent episodes stream only through the columnar "
                f"path, which cannot run here: {reason}. Hold the episodes in "
                f"memory instead (`{MEMORY_BUDGET.argument()}`)."
            )
        if reason is not None:
            log_once(
                "The OfflinePreLearner samples episode objects "
                f"(the per-episode path): {reason}."
            )
            return
        self._batch_builder, builder_reason = make_batch_builder(
            self._learner_connector, self._module
        )
        if builder_reason:
            log_once(
                "Train batches are built through the connector "
                f"pipeline ({builder_reason})."
            )
        # The default capacity of the base class's `episode_buffer`.
        capacity = self.config.prelearner_buffer_kwargs.get(
            "capacity", self.config.train_batch_size_per_learner * 10
        )
        self.columnar_buffer = ColumnarEpisodeBuffer(capacity)
        if self.config.is_multi_agent:
            # The env-level spaces of multi-agent data are `Dict`s by agent id
            # (any other space restores nothing per agent).
            self._agent_spaces = tuple(
                space if isinstance(space, Mapping) else None
                for space in (self.observation_space, self.action_space)
            )
            self._policy_mapping_fn = agent_to_module_fn(self.config)

    def _columnar_path_blocker(self) -> Optional[str]:
        """Why episodes cannot be sampled as columns, or None if they can."""
        config = self.config
        if self._module.is_stateful():
            return "the module is stateful"
        if config.prelearner_buffer_class not in (None, EpisodeReplayBuffer):
            return f"custom `prelearner_buffer_class` {config.prelearner_buffer_class}"
        if self.observation_space is None and not config.is_multi_agent:
            # (Multi-agent rows restore structure from their recorded spaces.)
            return "no observation space given to the prelearner"
        for name in ("_postprocess_and_sample", "_validate_episodes"):
            if getattr(type(self), name) is not getattr(OfflinePreLearner, name):
                return f"`{type(self).__name__}` overrides `{name}`"
        return None

    @property
    def uses_columnar_path(self) -> bool:
        """Whether episode batches are sampled from `columnar_buffer`."""
        return self.columnar_buffer is not None

    @override(_upstream.OfflinePreLearner)
    def __call__(self, batch: Dict[str, np.ndarray]) -> Dict[str, np.ndarray]:
        if self.uses_columnar_path:
            module_batch = self._columnar_batch(batch)
        else:
            module_batch = self._run_learner_connector(self._batch_to_episodes(batch))
        for module_id in list(module_batch):
            if not self._should_module_be_updated(module_id, module_batch):
                del module_batch[module_id]
        if self._rows_carry_value_target_inputs and self.compute_value_targets:
            add_value_targets_to_batch(self._module, module_batch)
        return flatten_dict(module_batch)

    def _columnar_batch(self, batch: Dict[str, np.ndarray]) -> Dict[str, Any]:
        """Decodes, buffers and samples episodes as arrays; builds the batch."""
        if self.config.is_multi_agent:
            return self._multi_agent_columnar_batch(batch)
        self._add_to_columnar_buffer(
            self.columnar_buffer, self._decode_episode_columns(batch)
        )
        return self._sample_and_build(self.columnar_buffer, DEFAULT_MODULE_ID)

    def _multi_agent_columnar_batch(
        self, batch: Dict[str, np.ndarray]
    ) -> Dict[str, Any]:
        """Each module's batch from the buffered steps of the agents mapped to it.

        Every module with buffered data gets `train_batch_size_per_learner`
        rows, as the in-memory sampler gives (`EpisodeShardSampler`).
        """
        by_module: Dict[str, List[EpisodeColumns]] = {}
        for pairs in self._decode_items(batch, self._decode_module_columns):
            for module_id, columns in pairs:
                by_module.setdefault(module_id, []).append(columns)
        check_modules_known(by_module, self._module)
        for module_id, episodes in by_module.items():
            if module_id not in self.module_buffers:
                self.module_buffers[module_id] = ColumnarEpisodeBuffer(
                    self.columnar_buffer.capacity
                )
            self._add_to_columnar_buffer(self.module_buffers[module_id], episodes)
        module_batch = {}
        for module_id, buffer in self.module_buffers.items():
            module_batch.update(self._sample_and_build(buffer, module_id))
        return module_batch

    def _decode_module_columns(self, payload: bytes, **_) -> list:
        """`_decode_items`' decoder for multi-agent rows (spaces by agent)."""
        observation_space, action_space = self._agent_spaces
        return decode_module_columns(
            payload,
            observation_space=observation_space,
            action_space=action_space,
            policy_mapping_fn=self._policy_mapping_fn,
            action_rescaling=self.action_rescaling,
        )

    def _sample_and_build(
        self, buffer: ColumnarEpisodeBuffer, module_id: str
    ) -> Dict[str, Any]:
        value_targets = None
        if self._rows_carry_value_target_inputs:
            value_targets = (self.config.gamma, self._value_horizon())
        transitions = buffer.sample(
            self.config.train_batch_size_per_learner,
            n_step=self.config.get("n_step", 1),
            gamma=self.config.gamma,
            value_targets=value_targets,
        )
        return self._batch_builder.build(
            transitions, rl_module=self._module, module_id=module_id
        )

    def _value_horizon(self) -> Optional[int]:
        return get_offline_setting(self.config, VALUE_HORIZON)

    def _decode_episode_columns(
        self, batch: Dict[str, np.ndarray]
    ) -> List[EpisodeColumns]:
        """Decodes the `item` column; an undecodable row's error names it."""
        return self._decode_items(batch, decode_episode_columns)

    def _add_to_columnar_buffer(
        self, buffer: ColumnarEpisodeBuffer, episodes: List[EpisodeColumns]
    ) -> None:
        """Adds done episodes not yet held; any unfinished episode is an error.

        Raises:
            ValueError: If an episode is neither terminated nor truncated.
        """
        for row, episode in enumerate(episodes):
            if not episode.is_done:
                raise ValueError(
                    f"The episode in batch row {row} (episode id `{episode.id_}`) "
                    "is not done. When sampling from episodes "
                    "(`input_read_episodes=True`) every recorded episode must be "
                    "terminated or truncated; record whole episodes (e.g. "
                    "`EpisodeWriter` checks this) or mark the last step "
                    "`truncated=True`."
                )
        buffer.add(episodes)

    def _batch_to_episodes(
        self, batch: Dict[str, np.ndarray]
    ) -> List[SingleAgentEpisode]:
        """Converts one raw Ray Data batch into episodes for the connector."""
        if self.config.input_read_episodes:
            return self._buffer_and_sample(self._decode_episodes(batch))
        if self.config.input_read_sample_batches:
            episodes = self._map_sample_batch_to_episode(batch, to_numpy=True)
            return self._buffer_and_sample(self._rescale_actions(episodes["episodes"]))
        # Tabular rows: each row is a one-step episode, bootstrapping at its
        # next observation (there is no episode to look further into).
        episodes = self._map_to_episodes(batch, to_numpy=False)["episodes"]
        episodes = self._rescale_actions(episodes)
        if self._rows_carry_value_target_inputs:
            for episode in episodes:
                _add_slice_value_target_inputs(episode, self.config.gamma)
        return episodes

    def _rescale_actions(
        self, episodes: List[SingleAgentEpisode]
    ) -> List[SingleAgentEpisode]:
        """Column data: maps the actions to the module's units in place, as
        `config.offline_data(input_action_units=...)` states them."""
        if self.action_rescaling is not None:
            for episode in episodes:
                self.action_rescaling.apply_to_episode(episode, self.action_space)
        return episodes

    def _buffer_and_sample(
        self, episodes: List[SingleAgentEpisode]
    ) -> List[SingleAgentEpisode]:
        """`_postprocess_and_sample`; with value targets, every
        sampled step gets the inputs of its step in the whole episode
        (`config.gamma`, the horizon), the same as on the columnar path."""
        if not self._rows_carry_value_target_inputs:
            return self._postprocess_and_sample(episodes)
        gamma, horizon = self.config.gamma, self._value_horizon()
        for episode in episodes:
            if len(episode) and episode.id_ not in self._whole_episode_inputs:
                self._whole_episode_inputs[episode.id_] = _whole_episode_inputs(
                    episode, gamma, horizon
                )
        sampled = self._postprocess_and_sample(episodes)
        held = getattr(self.episode_buffer, "episode_id_to_index", None)
        if held is not None:  # Forget episodes the buffer evicted.
            for episode_id in set(self._whole_episode_inputs) - set(held):
                del self._whole_episode_inputs[episode_id]
        for episode in sampled:
            inputs = self._whole_episode_inputs.get(episode.id_)
            if inputs is None:
                log_once(
                    "Sampled episodes the prelearner did not buffer "
                    "(a custom `_postprocess_and_sample`?) bootstrap at the end "
                    "of each sampled slice."
                )
                _add_slice_value_target_inputs(episode, gamma)
            else:
                rows = slice(episode.t_started, episode.t_started + len(episode))
                _set_value_target_inputs(episode, inputs, rows)
        return sampled

    @override(_upstream.OfflinePreLearner)
    def _postprocess_and_sample(
        self, episodes: List[SingleAgentEpisode]
    ) -> List[SingleAgentEpisode]:
        """As the base class samples, except that n-step rewards are discounted
        with `config.gamma` (the base class passes no `gamma`, so the buffer's
        default 0.99 applies), as on the columnar path."""
        episodes = self._validate_episodes(episodes)
        if (
            self._module.is_stateful()
            and not self.config.prelearner_use_recorded_module_states
        ):
            for episode in episodes:
                for column in (Columns.STATE_OUT, Columns.STATE_IN):
                    if column in episode.extra_model_outputs:
                        del episode.extra_model_outputs[column]
        self.episode_buffer.add(episodes)
        batch_length_T = (
            self.config.model_config.get("max_seq_len", 0)
            if self._module.is_stateful()
            else None
        )
        kwargs = {}
        if _accepts_keyword(self.episode_buffer.sample, "gamma"):
            kwargs["gamma"] = self.config.gamma
        return self.episode_buffer.sample(
            num_items=self.config.train_batch_size_per_learner,
            batch_length_T=batch_length_T,
            n_step=self.config.get("n_step", 1),
            sample_episodes=True,
            to_numpy=True,
            lookback=self.config.episode_lookback_horizon,
            min_batch_length_T=getattr(self.config, "burnin_len", 0),
            **kwargs,
        )

    def _decode_episodes(
        self, batch: Dict[str, np.ndarray]
    ) -> List[SingleAgentEpisode]:
        """Decodes the `item` column of a batch into episode objects."""
        from rllib.offline.episode_files.reader import decode_episode

        return self._decode_items(batch, decode_episode)

    def _decode_items(self, batch: Dict[str, np.ndarray], decode: Callable) -> list:
        """Applies `decode` to each `item` payload; a failure names its row."""
        self._require_item_column(batch)
        ids = batch.get("eps_id")
        paths = batch.get(_PATH_COLUMN)
        decoded = []
        for row, payload in enumerate(batch[ITEM_COLUMN]):
            try:
                decoded.append(
                    decode(
                        payload,
                        observation_space=self.observation_space,
                        action_space=self.action_space,
                        action_rescaling=self.action_rescaling,
                    )
                )
            except Exception as error:
                raise cannot_decode_error(
                    _describe_batch_row(row, ids, paths), error, _path_hint(paths)
                ) from error
        return decoded

    def _require_item_column(self, batch: Dict[str, np.ndarray]) -> None:
        if ITEM_COLUMN not in batch:
            raise ValueError(
                f"`input_read_episodes=True` needs an `{ITEM_COLUMN}` column of "
                f"serialized episodes, but the data has columns {sorted(batch)}. "
                "Write episodes with `ray.rllib.offline.episode_files.writer`, or set "
                "`input_read_episodes=False` for tabular data."
            )

    def _run_learner_connector(
        self, episodes: List[SingleAgentEpisode]
    ) -> Dict[str, Any]:
        """Runs the Learner connector pipeline on the sampled episodes."""
        return self._learner_connector(
            rl_module=self._module,
            batch={},
            episodes=episodes,
            shared_data={},
            metrics=None,
        )


def _accepts_keyword(function: Callable, name: str) -> bool:
    """Whether `function` takes a keyword argument `name` (or `**kwargs`)."""
    try:
        parameters = inspect.signature(function).parameters.values()
    except (TypeError, ValueError):
        return False
    return any(
        p.name == name or p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters
    )


def _whole_episode_inputs(
    episode: SingleAgentEpisode, gamma: float, horizon: Optional[int]
) -> ValueTargetInputs:
    """The value-target inputs of every step of a whole episode."""
    block = EpisodeBlock.from_episodes([episode_columns_from_episode(episode)])
    steps = np.arange(len(episode), dtype=np.int64)
    return value_target_inputs_at(
        block, np.zeros_like(steps), steps, gamma=gamma, horizon=horizon
    )


def _set_value_target_inputs(
    episode: SingleAgentEpisode, inputs: ValueTargetInputs, rows: slice
) -> None:
    """Puts rows `rows` of `inputs` into the episode's extra model outputs."""
    for column, values in (
        (RETURNS_TO_BOOTSTRAP, inputs.returns_to_bootstrap),
        (BOOTSTRAP_DISCOUNT, inputs.bootstrap_discount),
        (BOOTSTRAP_OBS, inputs.bootstrap_obs),
    ):
        episode.extra_model_outputs[column] = InfiniteLookbackBuffer(
            data=tree.map_structure(lambda leaf: leaf[rows], values), lookback=0
        )


def _add_slice_value_target_inputs(episode: SingleAgentEpisode, gamma: float):
    """Value-target inputs of an episode slice's steps, bootstrapping at its end.

    For tabular rows (one-step episodes) and slices of episodes the
    prelearner does not hold whole: `r_t + gamma * V(s_{t+1})` for a
    one-step slice, as `GeneralAdvantageEstimation` over such slices gives.
    """
    length = len(episode)
    if not length:
        return
    rewards = np.asarray(episode.get_rewards(slice(0, length)), dtype=np.float64)
    returns = returns_to_go(rewards, np.array([length]), gamma)[:length]
    discount = np.power(gamma, np.arange(length, 0, -1, dtype=np.float64))
    if episode.is_terminated:
        discount[:] = 0.0
    last_obs = episode.get_observations(-1)
    for column, values in (
        (RETURNS_TO_BOOTSTRAP, returns.astype(np.float32)),
        (BOOTSTRAP_DISCOUNT, discount.astype(np.float32)),
        (BOOTSTRAP_OBS, batch_items([last_obs] * length)),
    ):
        episode.extra_model_outputs[column] = InfiniteLookbackBuffer(
            data=values, lookback=0
        )


def _describe_batch_row(row, ids, paths) -> str:
    found = []
    if ids is not None:
        found.append(f"episode id `{ids[row]}`")
    if paths is not None:
        found.append(f"file `{paths[row]}`")
    where = f"the episode in batch row {row}"
    if found:
        where += f" ({', '.join(found)})"
    return where


def _path_hint(paths) -> str:
    if paths is not None:
        return ""
    return (
        " To see its file, read with `config.offline_data("
        'input_read_method_kwargs={"include_paths": True})`.'
    )


#: Upstream names in `ray.rllib.offline.offline_prelearner` that this module
#: replaces.
REPLACES = {
    "OfflinePreLearner": OfflinePreLearner,
}
