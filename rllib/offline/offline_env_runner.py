"""The fork's recorder: `OfflineSingleAgentEnvRunner` that loses no episodes.

Replaces `ray.rllib.offline.offline_env_runner.OfflineSingleAgentEnvRunner`
with a subclass that keeps upstream's output layout: under
`<output>/<env name>/`, one directory per write event, named
`run-<worker index:06d>-<sample() call:05d>` (`run-000001-00001`), holding
parquet files. Upstream's `sample()` writes only the last chunk of a
`output_max_rows_per_file` loop, logs write errors instead of raising, and
records unfinished episode chunks that training rejects. The fork:

- with `output_write_episodes=True`, streams every finished episode through an
  `EpisodeWriter` (atomic files; spaces in the metadata; the `item` column as
  upstream). Chunks of episodes still running are held and joined until the
  episode ends, so every row is a whole, trainable episode. Memory for them
  is bounded: a running episode that reaches `max_running_episode_steps` is
  written as a truncated segment and continues under a new id. At `stop()`,
  running episodes are written as truncated;
- with column output, writes every full chunk of rows, not just the last;
- raises on any write failure.

Recorder settings go into `config.offline_data(output_config={...})`; see
`RecorderSettings`.
"""

import copy
import dataclasses
import logging
import uuid
from pathlib import Path
from typing import Dict, List, Optional

import pyarrow.fs as pa_fs
import ray
from ray.rllib.algorithms.algorithm_config import AlgorithmConfig
from ray.rllib.env.env_runner import EnvRunner
from ray.rllib.env.single_agent_env_runner import SingleAgentEnvRunner
from ray.rllib.env.single_agent_episode import SingleAgentEpisode
from ray.rllib.offline import offline_env_runner as _upstream
from ray.rllib.offline.episode_writer import EpisodeWriter
from ray.rllib.utils.annotations import override
from ray.util.annotations import PublicAPI

logger = logging.getLogger(__name__)

#: Episode rows per file when `output_max_rows_per_file` is unset (each
#: `sample()` call commits its own file then).
_UNBOUNDED_ROWS = 1_000_000


@dataclasses.dataclass(frozen=True)
class RecorderSettings:
    """The fork recorder's settings, from `config.offline_data(output_config=...)`.

    `output_config` is the free-form dict for output settings; these keys are
    read by the recorder, other keys are left alone.

    Attributes:
        max_running_episode_steps: Most env steps held in memory for one
            running episode (`output_write_episodes=True`). An episode that
            reaches it is written as a truncated segment, its id suffixed
            with `-<segment number>`, and continues as the next segment. None
            holds running episodes whole, however long they get.
        write_running_episodes_at_stop: Whether `stop()` writes the episodes
            still running as truncated ones (otherwise they are dropped, with a
            warning).
    """

    max_running_episode_steps: Optional[int] = 10_000
    write_running_episodes_at_stop: bool = True

    @classmethod
    def from_config(cls, config: AlgorithmConfig) -> "RecorderSettings":
        """Reads and checks the settings in `config.output_config`.

        Raises:
            ValueError: If a setting has a wrong type or value.
        """
        output_config = getattr(config, "output_config", None) or {}
        defaults = cls()
        steps = output_config.get(
            "max_running_episode_steps", defaults.max_running_episode_steps
        )
        if steps is not None and (
            isinstance(steps, bool) or not isinstance(steps, int) or steps < 1
        ):
            raise ValueError(
                "`output_config['max_running_episode_steps']` must be a positive "
                f"int or None, got {steps!r}. Set it with `config.offline_data("
                "output_config={'max_running_episode_steps': 10000})`."
            )
        at_stop = output_config.get(
            "write_running_episodes_at_stop", defaults.write_running_episodes_at_stop
        )
        if not isinstance(at_stop, bool):
            raise ValueError(
                "`output_config['write_running_episodes_at_stop']` must be a bool, "
                f"got {at_stop!r}."
            )
        return cls(steps, at_stop)


class _RunNames:
    """Names output like upstream's recorder: one directory per write event.

    Holds no reference to the EnvRunner: the `EpisodeWriter` keeps its naming
    function alive until the writer is closed.
    """

    def __init__(self, worker_path: str):
        self.worker_path = worker_path
        #: The `sample()` call (or final write at `stop()`) being written.
        self.run = 0
        self._file_id = uuid.uuid4().hex

    def run_dir(self) -> str:
        """`run-<worker:06d>-<run:05d>`, as upstream names it."""
        return f"{self.worker_path}-{self.run:05d}"

    def file_name(self, index: int) -> str:
        """The episode file `index` of this EnvRunner, inside its run directory."""
        return f"{self.run_dir()}/{self._file_id}_{index:06d}.parquet"


@PublicAPI(stability="alpha")
class OfflineSingleAgentEnvRunner(_upstream.OfflineSingleAgentEnvRunner):
    """Records sampled experiences to files without dropping any.

    Output layout (as upstream): `<config.output>/<env name>/` holds one
    directory per write event, `run-<worker index:06d>-<n:05d>`, where `n`
    counts `sample()` calls (the final write at `stop()` counts as one more).
    Each holds parquet files.

    With `output_write_episodes=True` (the default), each row of a file is one
    episode (the `item` column, readable with `input_read_episodes=True` and
    `ray.rllib.offline.episode_reader.read_episodes`). Files hold up to
    `output_max_rows_per_file` episodes; without that setting, each `sample()`
    call commits its own file. A file goes into the directory of the
    `sample()` call that filled it. Running episodes are held (at most
    `max_running_episode_steps` steps each, see `RecorderSettings`) until they
    end; episodes cut off by an environment reset, and at `stop()` all
    running ones, are written as truncated. A crash loses the episodes held or
    pending in the file not yet committed.

    With `output_write_episodes=False`, rows are single timesteps, written
    with `output_write_method` in chunks of `output_max_rows_per_file`.
    """

    @override(_upstream.OfflineSingleAgentEnvRunner)
    def __init__(self, *, config: AlgorithmConfig, **kwargs):
        super().__init__(config=config, **kwargs)
        # Upstream names the directories of a runner built without
        # `worker_index` `run-00None-...`; such a runner is the local one.
        self.worker_path = f"run-{self.worker_index or 0:06d}"
        self.recorder_settings = RecorderSettings.from_config(self.config)
        self._run_names = _RunNames(self.worker_path)
        self._episode_writer: Optional[EpisodeWriter] = None
        # Copies of the chunks of episodes that are still running, joined, by
        # episode id.
        self._running_episodes: Dict[str, SingleAgentEpisode] = {}
        # Episodes written in segments: id -> number of the next segment.
        self._segments: Dict[str, int] = {}
        self._warned_long_episode = False

    @override(_upstream.OfflineSingleAgentEnvRunner)
    def sample(
        self,
        *,
        num_timesteps: int = None,
        num_episodes: int = None,
        explore: bool = None,
        random_actions: bool = False,
        force_reset: bool = False,
    ) -> List[SingleAgentEpisode]:
        """Samples like `SingleAgentEnvRunner.sample` and records the samples.

        Raises:
            OSError: (or the filesystem's error) if writing fails.
        """
        samples = SingleAgentEnvRunner.sample(
            self,
            num_timesteps=num_timesteps,
            num_episodes=num_episodes,
            explore=explore,
            random_actions=random_actions,
            force_reset=force_reset,
        )
        self._sample_counter += 1
        self._run_names.run = self._sample_counter
        if self.output_write_episodes:
            self._record_episodes(samples)
            self._write_abandoned_episodes()
            self._write_long_episodes()
            if not self.output_max_rows_per_file:
                self._get_episode_writer().flush()
            buffered = len(self._running_episodes)
        else:
            self._map_episodes_to_data(samples)
            self._write_rows(final=False)
            buffered = len(self._samples)
        self.metrics.log_value(key="recording_buffer_size", value=buffered)
        return samples

    @override(EnvRunner)
    def stop(self) -> None:
        """Writes what is held, commits pending files, then closes the env.

        Running episodes are written as truncated unless
        `write_running_episodes_at_stop=False`. With `output_max_rows_per_file`
        set, the last, partly filled file is committed only if
        `output_write_remaining_data=True` (as upstream). The final write goes
        into a run directory of its own, as upstream's.

        Raises:
            OSError: (or the filesystem's error) if writing fails.
        """
        try:
            self._sample_counter += 1
            self._run_names.run = self._sample_counter
            if self.output_write_episodes:
                self._stop_episodes()
            elif self._samples:
                if self.write_remaining_data or not self.output_max_rows_per_file:
                    self._write_rows(final=True)
                else:
                    logger.warning(
                        "Recorder: dropping the last %d row(s) at `stop()`, fewer "
                        "than `output_max_rows_per_file`=%d, because "
                        "`output_write_remaining_data=False`. Set it to True to "
                        "write them.",
                        len(self._samples),
                        self.output_max_rows_per_file,
                    )
                    self._samples = []
        finally:
            SingleAgentEnvRunner.stop(self)

    # -- episodes -----------------------------------------------------------

    def _stop_episodes(self) -> None:
        """Writes (or drops) the running episodes, then closes the writer.

        The writer is closed even if writing a running episode fails, so what
        was pending before is committed; the error still propagates.
        """
        try:
            self._stop_running_episodes()
        finally:
            writer = self._episode_writer
            if writer is not None:
                if (
                    self.output_max_rows_per_file
                    and not self.write_remaining_data
                    and writer.num_pending
                ):
                    logger.warning(
                        "Recorder: dropping the %d episode(s) of the last, partly "
                        "filled file at `stop()`, because "
                        "`output_write_remaining_data=False`. Set it to True to "
                        "write them.",
                        writer.num_pending,
                    )
                    writer.abort()
                writer.close()

    def _stop_running_episodes(self) -> None:
        if not self._running_episodes:
            return
        count = len(self._running_episodes)
        steps = sum(len(e) for e in self._running_episodes.values())
        if not self.recorder_settings.write_running_episodes_at_stop:
            logger.warning(
                "Recorder: dropping %d episode(s) still running at `stop()` (%d env "
                "steps), because `output_config['write_running_episodes_at_stop']` "
                "is False.",
                count,
                steps,
            )
            self._running_episodes.clear()
            return
        logger.info(
            "Recorder: writing %d episode(s) still running at `stop()` (%d env "
            "steps) as truncated.",
            count,
            steps,
        )
        while self._running_episodes:
            id_ = next(iter(self._running_episodes))
            self._write_episode(self._running_episodes.pop(id_), truncate=True)

    def _get_episode_writer(self) -> EpisodeWriter:
        if self._episode_writer is None:
            if self.output_write_method not in (None, "write_parquet"):
                raise ValueError(
                    "Recording episodes (`output_write_episodes=True`) writes "
                    "parquet, but `output_write_method` is "
                    f"{self.output_write_method!r}. Unset it or use "
                    "'write_parquet'."
                )
            kwargs = self.output_write_method_kwargs
            self._episode_writer = EpisodeWriter(
                (Path(self.output_path) / self.subdir_path).as_posix(),
                observation_space=getattr(self.env, "single_observation_space", None),
                action_space=getattr(self.env, "single_action_space", None),
                max_rows_per_file=self.output_max_rows_per_file or _UNBOUNDED_ROWS,
                parquet_compression=kwargs.get("compression") or "zstd",
                filesystem=self._pyarrow_filesystem(),
                file_name=self._run_names.file_name,
            )
        return self._episode_writer

    def _pyarrow_filesystem(self) -> Optional[pa_fs.FileSystem]:
        filesystem = self.filesystem_object
        if filesystem is None or isinstance(filesystem, pa_fs.FileSystem):
            return filesystem
        return pa_fs.PyFileSystem(pa_fs.FSSpecHandler(filesystem))

    def _record_episodes(self, samples: List[SingleAgentEpisode]) -> None:
        """Writes finished episodes; holds (copies of) chunks of running ones."""
        for chunk in samples:
            held = self._running_episodes.pop(chunk.id_, None)
            if held is not None:
                # The caller keeps using the sampled chunk: join a copy.
                held.concat_episode(copy.deepcopy(chunk))
                chunk = held
            if chunk.is_done:
                self._write_episode(chunk)
            else:
                self._running_episodes[chunk.id_] = (
                    chunk if held is not None else copy.deepcopy(chunk)
                )

    def _write_abandoned_episodes(self) -> None:
        """Writes held episodes the EnvRunner no longer steps, as truncated.

        An environment reset (`force_reset=True`, sampling by episodes, a
        re-created env) starts new episodes; the ones it cut off never end.
        """
        ongoing = {
            episode.id_
            for episode in self._ongoing_episodes
            if episode is not None and not episode.is_done
        }
        for id_ in [i for i in self._running_episodes if i not in ongoing]:
            episode = self._running_episodes.pop(id_)
            logger.info(
                "Recorder: episode `%s` was cut off by an environment reset after "
                "%d env steps; writing it as truncated.",
                id_,
                len(episode),
            )
            self._write_episode(episode, truncate=True)

    def _write_long_episodes(self) -> None:
        """Writes running episodes at `max_running_episode_steps` as segments."""
        limit = self.recorder_settings.max_running_episode_steps
        if limit is None:
            return
        for id_ in [i for i, e in self._running_episodes.items() if len(e) >= limit]:
            episode = self._running_episodes.pop(id_)
            segment = self._segments.get(id_, 0)
            if not self._warned_long_episode:
                self._warned_long_episode = True
                logger.warning(
                    "Recorder: running episode `%s` reached "
                    "`max_running_episode_steps`=%d (set in `config.offline_data("
                    "output_config=...)`). Writing its %d env steps as truncated "
                    "segment `%s-%d`; the episode continues as the next segment. "
                    "Episodes this long are written in segments from now on "
                    "(logged at INFO level).",
                    id_,
                    limit,
                    len(episode),
                    id_,
                    segment,
                )
            else:
                logger.info(
                    "Recorder: writing %d env steps of running episode `%s` as "
                    "truncated segment `%s-%d`.",
                    len(episode),
                    id_,
                    id_,
                    segment,
                )
            self._write_episode(episode, truncate=True, continues=True)

    def _write_episode(
        self,
        episode: SingleAgentEpisode,
        *,
        truncate: bool = False,
        continues: bool = False,
    ) -> None:
        """Writes an episode, or one segment of it.

        Args:
            episode: The (joined) episode; not modified.
            truncate: Write it as truncated (it did not end).
            continues: The episode goes on after this segment: write it under
                the next segment id. The last segment of an episode written in
                segments gets a segment id too.
        """
        original = episode.id_
        if continues:
            segment = self._segments.get(original, 0)
            self._segments[original] = segment + 1
        else:
            segment = self._segments.pop(original, None)
        if segment is not None or truncate:
            episode = copy.copy(episode)  # Shares the data; own id and flags.
            if segment is not None:
                episode.id_ = f"{original}-{segment}"
            if truncate:
                episode.is_truncated = True
        self._get_episode_writer().write(episode)

    # -- column rows --------------------------------------------------------

    def _write_rows(self, final: bool) -> None:
        """Writes buffered column rows: every full chunk (all rows if `final`).

        All chunks written by one `sample()` call go into its run directory.
        """
        chunk_size = self.output_max_rows_per_file or len(self._samples)
        path = Path(self.output_path) / self.subdir_path / self._run_names.run_dir()
        while self._samples and (final or len(self._samples) >= chunk_size):
            rows = self._samples[:chunk_size]
            getattr(ray.data.from_items(rows), self.output_write_method)(
                path.as_posix(), **self.output_write_method_kwargs
            )
            # Only drop rows from the buffer once they are on disk.
            self._samples = self._samples[chunk_size:]
            logger.info("Recorder wrote %d rows to %s.", len(rows), path)


#: Upstream names in `ray.rllib.offline.offline_env_runner` that this module
#: replaces.
REPLACES = {
    "OfflineSingleAgentEnvRunner": OfflineSingleAgentEnvRunner,
}
