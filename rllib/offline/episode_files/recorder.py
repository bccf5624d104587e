"""Holds the chunks of running episodes and writes whole episodes; no losses.

`EpisodeRecorder` is the episode half of the recorders
(`OfflineSingleAgentEnvRunner`, `OfflineMultiAgentEnvRunner`): an EnvRunner
composes one and hands it every `sample()` result. It works the same for
`SingleAgentEpisode`s and `MultiAgentEpisode`s:

- a finished episode goes to an `EpisodeWriter` (atomic parquet files, spaces
  in the metadata, the `item` column `OfflinePreLearner` reads);
- a copy of each chunk of a running episode is held and joined with the next
  chunk (`concat_episode`), until the episode ends;
- an episode the EnvRunner stopped stepping (cut off by an environment reset)
  is written as truncated;
- a running episode that reaches `max_running_episode_steps` is written as a
  truncated segment, its id suffixed `-<segment number>`, and continues as the
  next segment;
- at `stop()`, running episodes are written as truncated (or dropped, if the
  settings say so) and the last file is committed.

Write errors propagate; nothing is swallowed into a log line.
"""

import copy
import dataclasses
import logging
import uuid
from pathlib import Path
from typing import Any, Dict, Iterable, List, Optional

from ray.rllib.algorithms.algorithm_config import AlgorithmConfig
from ray.rllib.env.multi_agent_episode import MultiAgentEpisode
from ray.util.annotations import PublicAPI

from rllib.offline.episode_files.action_units import (
    NORMALIZED,
    module_action_units,
)
from rllib.offline.episode_files.filesystem import (
    CLOUD_FILESYSTEMS,
    as_pyarrow,
    cloud_filesystem,
)
from rllib.offline.episode_files.payload import Episode
from rllib.offline.episode_files.writer import EpisodeWriter

#: Episode rows per file when `output_max_rows_per_file` is unset (each
#: `sample()` call commits its own file then).
_UNBOUNDED_ROWS = 1_000_000


@dataclasses.dataclass(frozen=True)
class RecorderSettings:
    """The recorder's settings, from `config.offline_data(output_config=...)`.

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


class RunNames:
    """Names the output files: one directory per write event.

    Holds no reference to the EnvRunner: the `EpisodeWriter` keeps its naming
    function alive until the writer is closed.

    Args:
        worker_path: `run-<worker index:06d>`.
    """

    def __init__(self, worker_path: str):
        self.worker_path = worker_path
        #: The `sample()` call (or final write at `stop()`) being written.
        self.run = 0
        self._file_id = uuid.uuid4().hex

    def run_dir(self) -> str:
        """`run-<worker:06d>-<run:05d>`."""
        return f"{self.worker_path}-{self.run:05d}"

    def file_name(self, index: int) -> str:
        """The episode file `index` of this EnvRunner, inside its run directory."""
        return f"{self.run_dir()}/{self._file_id}_{index:06d}.parquet"


def output_filesystem(config: AlgorithmConfig) -> Optional[Any]:
    """The filesystem `config.output_filesystem` names.

    Returns:
        None for the filesystem of the output path, else a `gcsfs`, pyarrow S3
        or `adlfs` filesystem built with `config.output_filesystem_kwargs`.

    Raises:
        ValueError: If `config.output_filesystem` is none of "gcs", "s3", "abs".
    """
    name = config.output_filesystem
    if name is None:
        return None
    if name in CLOUD_FILESYSTEMS:
        return cloud_filesystem(name, config.output_filesystem_kwargs)
    raise ValueError(
        f"Unknown `output_filesystem`: {name!r}. Use 'gcs' (GCS), 's3' (S3), "
        "'abs' (Azure Blob Storage), or None for the filesystem of `output`."
    )


def _write_copy(episode: Episode, *, id_: str, truncate: bool) -> Episode:
    """A copy of `episode` that shares its data, with its own id and end flag.

    A truncated multi-agent episode gets its agents that are still running
    truncated too, as RLlib marks them when an environment truncates
    `__all__`; its agents carry the new id as `multi_agent_episode_id`.
    """
    episode = copy.copy(episode)
    episode.id_ = id_
    if truncate:
        episode.is_truncated = True
    if isinstance(episode, MultiAgentEpisode):
        agents = {}
        for agent_id, agent_episode in episode.agent_episodes.items():
            agent_episode = copy.copy(agent_episode)
            agent_episode.multi_agent_episode_id = id_
            if truncate and not agent_episode.is_done:
                agent_episode.is_truncated = True
            agents[agent_id] = agent_episode
        episode.agent_episodes = agents
    return episode


@PublicAPI(stability="alpha")
class EpisodeRecorder:
    """Records the episodes of an EnvRunner's `sample()` calls without losses.

    Args:
        directory: Where the files go (`<output>/<env subdir>`); None for an
            EnvRunner without an env, which never records.
        run_names: Names the files (`run-<worker>-<run>/...`); the EnvRunner
            sets `run_names.run` before each `record()` and `stop()`.
        observation_space: Recorded in the files' metadata and checked for
            each step: one space, or for `MultiAgentEpisode`s a dict of spaces
            by agent id. None: taken from the first episode written.
        action_space: Same for actions.
        settings: The recorder settings (`RecorderSettings.from_config`).
        max_rows_per_file: `output_max_rows_per_file`: episodes per file.
            None: each `record()` call commits its own file.
        write_remaining_data: `output_write_remaining_data`: whether `stop()`
            commits a last, partly filled file (with `max_rows_per_file`).
        write_method: `output_write_method`; episodes are written as parquet.
        write_method_kwargs: `output_write_method_kwargs` (`compression`
            sets the parquet compression).
        filesystem: A pyarrow or fsspec filesystem, or None for the one of
            `directory`.
        logger: Where the recorder logs (the EnvRunner's module logger).
        action_units: The units of the recorded actions, recorded in the
            files: an EnvRunner's episodes hold its module's actions, in
            [-1, 1] with `normalize_actions=True` ("normalized"), in the
            environment's units without ("env").
    """

    def __init__(
        self,
        directory: Optional[str],
        *,
        run_names: RunNames,
        observation_space: Optional[Any],
        action_space: Optional[Any],
        settings: RecorderSettings,
        max_rows_per_file: Optional[int],
        write_remaining_data: bool,
        write_method: Optional[str],
        write_method_kwargs: Optional[Dict[str, Any]],
        filesystem: Optional[Any],
        logger: logging.Logger,
        action_units: str = NORMALIZED,
    ):
        self.directory = directory
        self.action_units = action_units
        self.run_names = run_names
        self.observation_space = observation_space
        self.action_space = action_space
        self.settings = settings
        self.max_rows_per_file = max_rows_per_file
        self.write_remaining_data = write_remaining_data
        self.write_method = write_method
        self.write_method_kwargs = write_method_kwargs or {}
        self.filesystem = filesystem
        self.logger = logger
        #: The writer, created with the first write.
        self.writer: Optional[EpisodeWriter] = None
        #: Copies of the chunks of episodes still running, joined, by id.
        self.running_episodes: Dict[str, Episode] = {}
        # Episodes written in segments: id -> number of the next segment.
        self._segments: Dict[str, int] = {}
        self._warned_long_episode = False

    @classmethod
    def for_env_runner(
        cls,
        runner: Any,
        *,
        observation_space: Optional[Any],
        action_space: Optional[Any],
        filesystem: Optional[Any],
        logger: logging.Logger,
    ) -> "EpisodeRecorder":
        """The recorder of an EnvRunner with `output` set in its config.

        Files go to `<config.output>/<runner.subdir_path>/` (None without an
        env); runs are named after the runner's `worker_index` (0 for a
        runner built without one, where RLlib 2.60 wrote `run-00None`).

        Args:
            runner: The EnvRunner (its `config`, `env`, `subdir_path` and
                `worker_index` are read).
            observation_space: Recorded in the files (a dict by agent id for
                multi-agent episodes).
            action_space: Same for actions.
            filesystem: The output filesystem (None: from the path).
            logger: Where the recorder logs.

        Raises:
            ValueError: If a setting in `config.output_config` is invalid.
        """
        config = runner.config
        directory = None
        if runner.env:
            directory = (Path(config.output) / runner.subdir_path).as_posix()
        return cls(
            directory,
            run_names=RunNames(f"run-{runner.worker_index or 0:06d}"),
            observation_space=observation_space,
            action_space=action_space,
            settings=RecorderSettings.from_config(config),
            max_rows_per_file=config.output_max_rows_per_file,
            write_remaining_data=config.output_write_remaining_data,
            write_method=config.output_write_method,
            write_method_kwargs=config.output_write_method_kwargs,
            filesystem=filesystem,
            logger=logger,
            action_units=module_action_units(config.normalize_actions),
        )

    def record(
        self,
        samples: List[Episode],
        ongoing_episodes: Iterable[Optional[Episode]],
    ) -> None:
        """Records the episodes (chunks) one `sample()` call returned.

        Writes finished episodes, holds copies of running ones, writes held
        episodes the EnvRunner no longer steps and those that got too long,
        then commits the file unless `max_rows_per_file` is set.

        Args:
            samples: What `sample()` returned; not modified.
            ongoing_episodes: The EnvRunner's `_ongoing_episodes` after the
                call: the episodes it goes on stepping.

        Raises:
            OSError: (or the filesystem's error) if writing fails.
        """
        self._hold_or_write(samples)
        self._write_abandoned(ongoing_episodes)
        self._write_long()
        if not self.max_rows_per_file:
            self._get_writer().flush()

    def stop(self) -> None:
        """Writes (or drops) the running episodes, then closes the writer.

        The writer is closed even if writing a running episode fails, so what
        was pending before is committed; the error still propagates.

        Raises:
            OSError: (or the filesystem's error) if writing fails.
        """
        try:
            self._stop_running_episodes()
        finally:
            writer = self.writer
            if writer is not None:
                if (
                    self.max_rows_per_file
                    and not self.write_remaining_data
                    and writer.num_pending
                ):
                    self.logger.warning(
                        "Recorder: dropping the %d episode(s) of the last, partly "
                        "filled file at `stop()`, because "
                        "`output_write_remaining_data=False`. Set it to True to "
                        "write them.",
                        writer.num_pending,
                    )
                    writer.abort()
                writer.close()

    # -- internals ------------------------------------------------------------

    def _hold_or_write(self, samples: List[Episode]) -> None:
        """Writes finished episodes; holds (copies of) chunks of running ones."""
        for chunk in samples:
            held = self.running_episodes.pop(chunk.id_, None)
            if held is not None:
                # The caller keeps using the sampled chunk: join a copy.
                held.concat_episode(copy.deepcopy(chunk))
                chunk = held
            if chunk.is_done:
                self._write(chunk)
            else:
                self.running_episodes[chunk.id_] = (
                    chunk if held is not None else copy.deepcopy(chunk)
                )

    def _write_abandoned(self, ongoing_episodes: Iterable[Optional[Episode]]) -> None:
        """Writes held episodes the EnvRunner no longer steps, as truncated.

        An environment reset (`force_reset=True`, sampling by episodes, a
        re-created env, a failed env step) starts new episodes; the ones it
        cut off never end.
        """
        ongoing = {
            episode.id_
            for episode in ongoing_episodes
            if episode is not None and not episode.is_done
        }
        for id_ in [i for i in self.running_episodes if i not in ongoing]:
            episode = self.running_episodes.pop(id_)
            self.logger.info(
                "Recorder: episode `%s` was cut off by an environment reset after "
                "%d env steps; writing it as truncated.",
                id_,
                len(episode),
            )
            self._write(episode, truncate=True)

    def _write_long(self) -> None:
        """Writes running episodes at `max_running_episode_steps` as segments."""
        limit = self.settings.max_running_episode_steps
        if limit is None:
            return
        for id_ in [i for i, e in self.running_episodes.items() if len(e) >= limit]:
            episode = self.running_episodes.pop(id_)
            segment = self._segments.get(id_, 0)
            if not self._warned_long_episode:
                self._warned_long_episode = True
                self.logger.warning(
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
                self.logger.info(
                    "Recorder: writing %d env steps of running episode `%s` as "
                    "truncated segment `%s-%d`.",
                    len(episode),
                    id_,
                    id_,
                    segment,
                )
            self._write(episode, truncate=True, continues=True)

    def _stop_running_episodes(self) -> None:
        if not self.running_episodes:
            return
        count = len(self.running_episodes)
        steps = sum(len(e) for e in self.running_episodes.values())
        if not self.settings.write_running_episodes_at_stop:
            self.logger.warning(
                "Recorder: dropping %d episode(s) still running at `stop()` (%d env "
                "steps), because `output_config['write_running_episodes_at_stop']` "
                "is False.",
                count,
                steps,
            )
            self.running_episodes.clear()
            return
        self.logger.info(
            "Recorder: writing %d episode(s) still running at `stop()` (%d env "
            "steps) as truncated.",
            count,
            steps,
        )
        while self.running_episodes:
            id_ = next(iter(self.running_episodes))
            self._write(self.running_episodes.pop(id_), truncate=True)

    def _write(
        self, episode: Episode, *, truncate: bool = False, continues: bool = False
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
            id_ = original if segment is None else f"{original}-{segment}"
            episode = _write_copy(episode, id_=id_, truncate=truncate)
        self._get_writer().write(episode)

    def _get_writer(self) -> EpisodeWriter:
        if self.writer is None:
            if self.write_method not in (None, "write_parquet"):
                raise ValueError(
                    "Recording episodes (`output_write_episodes=True`) writes "
                    "parquet, but `output_write_method` is "
                    f"{self.write_method!r}. Unset it or use 'write_parquet'."
                )
            if self.directory is None:
                raise ValueError(
                    "This EnvRunner has no env, so it has no output directory "
                    "(`<output>/<env name>`) to record into. Record with an "
                    "EnvRunner that has an env."
                )
            self.writer = EpisodeWriter(
                self.directory,
                observation_space=self.observation_space,
                action_space=self.action_space,
                max_rows_per_file=self.max_rows_per_file or _UNBOUNDED_ROWS,
                parquet_compression=(
                    self.write_method_kwargs.get("compression") or "zstd"
                ),
                filesystem=as_pyarrow(self.filesystem),
                file_name=self.run_names.file_name,
                action_units=self.action_units,
            )
        return self.writer
