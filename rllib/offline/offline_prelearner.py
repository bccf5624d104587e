"""The fork's `OfflinePreLearner`: episode decoding, spaces and row checks.

Replaces `ray.rllib.offline.offline_prelearner.OfflinePreLearner` with a
subclass. Each step of `__call__` is a small method so that other changes
(output flattening, the connector pipeline) stay local:

- `_batch_to_episodes`: raw Ray Data batch -> `SingleAgentEpisode`s.
- `_run_learner_connector`: episodes -> per-module batch.
- `_flatten_batch`: per-module batch -> flat dict for Ray Data.

For episode data the fast path skips the episode objects: payloads are decoded
to columns (`rllib.offline.episode_columns`), held and sampled as arrays
(`rllib.utils.replay_buffers.columnar_episode_buffer`) and turned into the
train batch the connector pipeline would build
(`rllib.offline.transition_batch_builder`). It serves the pipelines it can
reproduce exactly and falls back to the general path otherwise, saying why
once in the log.
"""

import logging
from typing import Any, Dict, List, Optional

import gymnasium as gym
import numpy as np
import pyarrow.fs as pa_fs
from gymnasium.vector.utils import batch_space
from ray.rllib.core.columns import Columns
from ray.rllib.env.single_agent_episode import SingleAgentEpisode
from ray.rllib.offline import offline_prelearner as _upstream
from ray.rllib.offline.episode_reader import (
    cannot_decode_error,
    decode_episode,
    list_episode_files,
    read_file_metadata,
    spaces_from_metadata,
)
from ray.rllib.offline.episode_writer import ITEM_COLUMN
from ray.rllib.utils import flatten_dict
from ray.rllib.utils.annotations import override
from ray.rllib.utils.replay_buffers.episode_replay_buffer import EpisodeReplayBuffer
from ray.util.annotations import PublicAPI

from rllib.connectors.learner.general_advantage_estimation import find_gae_piece
from rllib.offline.episode_columns import (
    EpisodeColumns,
    decode_episode_columns,
    episode_columns_from_episode,
)
from rllib.offline.transition_batch_builder import TransitionBatchBuilder
from rllib.utils.replay_buffers.columnar_episode_buffer import ColumnarEpisodeBuffer

logger = logging.getLogger(__name__)

#: Column Ray Data adds with `read_parquet(..., include_paths=True)`.
_PATH_COLUMN = "path"

#: `learner_config_dict` key that turns the fast path off (True by default).
FAST_PATH_KEY = "offline_prelearner_fast_path"

#: Methods of the general path; a subclass overriding one keeps that path.
_GENERAL_PATH_METHODS = (
    "_batch_to_episodes",
    "_decode_episodes",
    "_postprocess_and_sample",
    "_validate_episodes",
    "_run_learner_connector",
)

#: `prelearner_buffer_kwargs` keys the columnar buffer honours (only the
#: capacity changes what `EpisodeReplayBuffer` samples for the prelearner).
_FAST_PATH_BUFFER_KWARGS = {
    "capacity",
    "batch_size_B",
    "batch_length_T",
    "metrics_num_episodes_for_smoothing",
}

#: Reasons already logged in this process (the note appears once each).
_LOGGED_FALLBACKS = set()


def _log_once(message: str) -> None:
    if message not in _LOGGED_FALLBACKS:
        _LOGGED_FALLBACKS.add(message)
        logger.warning(message)


@PublicAPI(stability="alpha")
class OfflinePreLearner(_upstream.OfflinePreLearner):
    """Maps raw offline data to episodes and runs the Learner connector.

    Same behaviour as upstream for tabular columns and old `SampleBatch`
    recordings. For `input_read_episodes=True` it also decodes compressed
    episode payloads (see `ray.rllib.offline.episode_writer`), checks the
    spaces recorded in the files against the config's spaces, and names the
    row of any payload that cannot be decoded.

    Episode data takes the fast path when `uses_fast_path` is True: the same
    train batches as the general path, from `columnar_buffer` instead of
    upstream's `episode_buffer` (which then stays empty).
    """

    #: Length of the contiguous episode segments to sample when GAE is
    #: deferred to the Learner; `None` samples one-step slices as upstream does.
    #: Set it with `config.training(learner_config_dict=
    #: {"offline_gae_segment_length": T})`.
    default_gae_segment_length = None

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._gae_segment_length = None
        self._defer_gae_to_learner()
        self.columnar_buffer: Optional[ColumnarEpisodeBuffer] = None
        self._batch_builder: Optional[TransitionBatchBuilder] = None
        self._set_up_fast_path()

    def _set_up_fast_path(self) -> None:
        """Enables the fast path for episode data if it reproduces the batches.

        The general path is kept (and the reason logged once) for anything
        the fast path does not cover: tabular or `SampleBatch` input,
        multi-agent, stateful modules, contiguous GAE segments, a custom
        prelearner buffer, connector pieces other than the defaults, a
        subclass that overrides a general-path method, or no observation
        space in the config.
        """
        if not self.config.input_read_episodes:
            return
        reason = self._fast_path_blocker()
        if reason is None:
            self._batch_builder, reason = TransitionBatchBuilder.from_pipeline(
                self._learner_connector, self._module
            )
        if self._batch_builder is None:
            _log_once(
                "rllib-fork: the OfflinePreLearner uses the general (per-episode) "
                f"path: {reason}."
            )
            return
        # Upstream's default capacity for the prelearner's buffer.
        capacity = self.config.prelearner_buffer_kwargs.get(
            "capacity", self.config.train_batch_size_per_learner * 10
        )
        self.columnar_buffer = ColumnarEpisodeBuffer(capacity)

    def _fast_path_blocker(self) -> Optional[str]:
        """Why the fast path cannot serve this config, or None if it can."""
        config = self.config
        if not config.learner_config_dict.get(FAST_PATH_KEY, True):
            return f"`learner_config_dict[{FAST_PATH_KEY!r}]` is False"
        if config.is_multi_agent:
            return "multi-agent config"
        if self._module.is_stateful():
            return "the module is stateful"
        if self._gae_segment_length:
            return "`offline_gae_segment_length` samples contiguous segments"
        if config.prelearner_buffer_class not in (None, EpisodeReplayBuffer):
            return f"custom `prelearner_buffer_class` {config.prelearner_buffer_class}"
        unknown = set(config.prelearner_buffer_kwargs) - _FAST_PATH_BUFFER_KWARGS
        if unknown:
            return f"`prelearner_buffer_kwargs` {sorted(unknown)}"
        if self.observation_space is None:
            return "no observation space given to the prelearner"
        for name in _GENERAL_PATH_METHODS:
            if getattr(type(self), name) is not getattr(OfflinePreLearner, name):
                return f"`{type(self).__name__}` overrides `{name}`"
        return None

    @property
    def uses_fast_path(self) -> bool:
        """Whether episode batches take the fast (columnar) path."""
        return self._batch_builder is not None

    def _defer_gae_to_learner(self) -> None:
        """Drops the GAE piece: the Learner runs it with its live module.

        Upstream runs the value pass here, on CPU, with a module copy that is
        never re-synced, so value targets come from the initial weights. The
        fork's Learner computes them on its device instead (see
        `rllib.core.learner.learner`). Stateful modules keep upstream's path:
        their zero-padded train batches carry no episode lengths for the
        Learner to undo the padding.
        """
        gae = find_gae_piece(self._learner_connector)
        if gae is None:
            return
        if self._module.is_stateful():
            logger.warning(
                "rllib-fork: stateful module; GAE stays in the OfflinePreLearner "
                "(upstream behaviour, value targets from the prelearner's module "
                "copy)."
            )
            return
        self._learner_connector.remove(type(gae))
        segment_length = self.config.learner_config_dict.get(
            "offline_gae_segment_length", self.default_gae_segment_length
        )
        if segment_length and self.config.get("n_step", 1) == 1:
            self._gae_segment_length = int(segment_length)

    @override(_upstream.OfflinePreLearner)
    def _postprocess_and_sample(
        self, episodes: List[SingleAgentEpisode]
    ) -> List[SingleAgentEpisode]:
        """Samples contiguous episode segments when the Learner runs GAE.

        Upstream samples one-step slices, so GAE can only form one-step
        targets ``r + gamma * V(s')``. Segments of up to
        ``offline_gae_segment_length`` steps let the Learner's GAE use the
        recorded rewards along the segment and bootstrap with its live value
        function only at the segment end. The batch holds about as many
        timesteps as upstream's (``train_batch_size_per_learner``, bootstrap
        steps included).
        """
        if not self._gae_segment_length:
            return super()._postprocess_and_sample(episodes)
        self.episode_buffer.add(self._validate_episodes(episodes))
        return self.episode_buffer.sample(
            num_items=self.config.train_batch_size_per_learner,
            batch_length_T=self._gae_segment_length,
            n_step=1,
            sample_episodes=True,
            to_numpy=True,
            lookback=self.config.episode_lookback_horizon,
        )

    @override(_upstream.OfflinePreLearner)
    def __call__(self, batch: Dict[str, np.ndarray]) -> Dict[str, np.ndarray]:
        if self.uses_fast_path:
            module_batch = self._fast_path_batch(batch)
        else:
            episodes = self._batch_to_episodes(batch)
            module_batch = self._run_learner_connector(episodes)
        return self._flatten_batch(module_batch)

    def _fast_path_batch(self, batch: Dict[str, np.ndarray]) -> Dict[str, Any]:
        """Decodes, buffers and samples episodes as arrays; builds the batch."""
        self._add_to_columnar_buffer(self._decode_episode_columns(batch))
        transitions = self.columnar_buffer.sample(
            self.config.train_batch_size_per_learner,
            n_step=self.config.get("n_step", 1),
        )
        module_batch = self._batch_builder.build(
            self.columnar_buffer, transitions, rl_module=self._module
        )
        for module_id in list(module_batch):
            if not self._should_module_be_updated(module_id, module_batch):
                del module_batch[module_id]
        return module_batch

    def _decode_episode_columns(
        self, batch: Dict[str, np.ndarray]
    ) -> List[EpisodeColumns]:
        """Decodes the `item` column into `EpisodeColumns`.

        A payload the columnar decoder cannot read sends the batch through
        `_decode_episodes`, which either reads it (e.g. an unusual layout) or
        raises the error that names the row.
        """
        self._require_item_column(batch)
        self._check_recorded_spaces(batch)
        try:
            return [
                decode_episode_columns(
                    payload,
                    observation_space=self.observation_space,
                    action_space=self.action_space,
                )
                for payload in batch[ITEM_COLUMN]
            ]
        except Exception as error:
            episodes = self._decode_episodes(batch)
            _log_once(
                "rllib-fork: the columnar decoder could not read a payload "
                f"({type(error).__name__}: {error}); such batches are decoded "
                "through `SingleAgentEpisode` objects."
            )
            return [episode_columns_from_episode(e) for e in episodes]

    def _add_to_columnar_buffer(self, episodes: List[EpisodeColumns]) -> None:
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
        self.columnar_buffer.add(episodes)

    def _batch_to_episodes(
        self, batch: Dict[str, np.ndarray]
    ) -> List[SingleAgentEpisode]:
        """Converts one raw Ray Data batch into episodes for the connector."""
        if self.config.input_read_episodes:
            episodes = self._decode_episodes(batch)
            return self._postprocess_and_sample(episodes)
        if self.config.input_read_sample_batches:
            episodes = self._map_sample_batch_to_episode(batch, to_numpy=True)
            return self._postprocess_and_sample(episodes["episodes"])
        return self._map_to_episodes(batch, to_numpy=False)["episodes"]

    def _decode_episodes(
        self, batch: Dict[str, np.ndarray]
    ) -> List[SingleAgentEpisode]:
        """Decodes the `item` column of a batch of recorded episodes.

        Plain and compressed payloads (see `EpisodeWriter(compression=...)`)
        are told apart by their first bytes.

        Raises:
            ValueError: If the batch has no `item` column, the files record
                spaces that contradict the config's, or a row cannot be
                decoded (the message names the row, its episode id and, with
                `input_read_method_kwargs={"include_paths": True}`, its file).
        """
        self._require_item_column(batch)
        self._check_recorded_spaces(batch)
        ids = batch.get(Columns.EPS_ID)
        paths = batch.get(_PATH_COLUMN)
        episodes = []
        for row, payload in enumerate(batch[ITEM_COLUMN]):
            try:
                episodes.append(
                    decode_episode(
                        payload,
                        observation_space=self.observation_space,
                        action_space=self.action_space,
                    )
                )
            except Exception as error:
                found = []
                if ids is not None:
                    found.append(f"episode id `{ids[row]}`")
                if paths is not None:
                    found.append(f"file `{paths[row]}`")
                where = f"the episode in batch row {row}"
                if found:
                    where += f" ({', '.join(found)})"
                hint = (
                    ""
                    if paths is not None
                    else " To see its file, read with `config.offline_data("
                    'input_read_method_kwargs={"include_paths": True})`.'
                )
                raise cannot_decode_error(where, error, hint) from error
        return episodes

    def _require_item_column(self, batch: Dict[str, np.ndarray]) -> None:
        if ITEM_COLUMN not in batch:
            raise ValueError(
                f"`input_read_episodes=True` needs an `{ITEM_COLUMN}` column of "
                f"serialized episodes, but the data has columns {sorted(batch)}. "
                "Write episodes with `ray.rllib.offline.episode_writer`, or set "
                "`input_read_episodes=False` for tabular data."
            )

    def _check_recorded_spaces(self, batch: Dict[str, np.ndarray]) -> None:
        """Fails if the input files record spaces other than the config's.

        Each file's metadata is read once per process: the files named in the
        batch's `path` column if present, else every file under
        `config.input_` (on the first batch).
        """
        if self.observation_space is None and self.action_space is None:
            return
        checked = self.__dict__.setdefault("_checked_space_files", set())
        filesystem = self._input_filesystem()
        if filesystem is False:
            return
        if _PATH_COLUMN in batch:
            files = {str(p) for p in batch[_PATH_COLUMN]} - checked
        elif not self.__dict__.get("_checked_input_files"):
            self._checked_input_files = True
            inputs = self.config.input_
            try:
                filesystem, files = list_episode_files(
                    inputs if isinstance(inputs, list) else str(inputs),
                    filesystem=filesystem,
                )
            except FileNotFoundError:
                # Not a layout we can list (Ray Data read it all the same):
                # nothing recorded to check against.
                logger.debug("rllib-fork: no episode files listed under %s.", inputs)
                return
        else:
            return
        for file in sorted(files):
            recorded = spaces_from_metadata(
                read_file_metadata(file, filesystem=filesystem)
            )
            configured = (self.observation_space, self.action_space)
            names = ("observation_space", "action_space")
            for name, rec, conf in zip(names, recorded, configured):
                if (
                    rec is not None
                    and conf is not None
                    and not self._same_space(rec, conf)
                ):
                    raise ValueError(
                        f"The episodes in `{file}` were recorded with `{name}` "
                        f"{rec}, but the config's `{name}` is {conf}. Train with "
                        "the spaces the data was recorded with (the matching env, "
                        f"or `config.environment({name}=...)`); "
                        "`ray.rllib.offline.episode_reader.read_spaces(path)` "
                        "returns them."
                    )
            checked.add(file)

    def _same_space(self, recorded: gym.Space, configured: gym.Space) -> bool:
        """Whether a recorded space equals the configured one.

        The prelearner receives the vector env's spaces, i.e. the single
        space batched `num_envs_per_env_runner` times; both forms match.
        """
        if recorded == configured:
            return True
        try:
            batched = batch_space(recorded, self.config.num_envs_per_env_runner)
        except Exception:  # A space gymnasium cannot batch: not a match.
            return False
        return batched == configured

    def _input_filesystem(self):
        """The pyarrow filesystem of the input; None: infer; False: unknown."""
        filesystem = self.config.input_filesystem
        if filesystem is None:
            return None
        if isinstance(filesystem, pa_fs.FileSystem):
            return filesystem
        if filesystem == "s3":
            return pa_fs.S3FileSystem(**self.config.input_filesystem_kwargs)
        logger.debug("rllib-fork: no spaces check for filesystem %r.", filesystem)
        return False

    def _run_learner_connector(
        self, episodes: List[SingleAgentEpisode]
    ) -> Dict[str, Any]:
        """Runs the Learner connector pipeline and drops modules not trained."""
        batch = self._learner_connector(
            rl_module=self._module,
            batch={},
            episodes=episodes,
            shared_data={},
            metrics=None,
        )
        for module_id in list(batch):
            if not self._should_module_be_updated(module_id, batch):
                del batch[module_id]
        return batch

    def _flatten_batch(self, batch: Dict[str, Any]) -> Dict[str, np.ndarray]:
        """Flattens the per-module batch into one level of keys for Ray Data."""
        return flatten_dict(batch)


#: Upstream names in `ray.rllib.offline.offline_prelearner` that this module
#: replaces.
REPLACES = {
    "OfflinePreLearner": OfflinePreLearner,
}
