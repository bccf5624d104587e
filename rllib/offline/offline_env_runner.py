"""The fork's recorder: `OfflineSingleAgentEnvRunner` that loses no episodes.

Replaces `ray.rllib.offline.offline_env_runner.OfflineSingleAgentEnvRunner`
with a subclass. Upstream's `sample()` writes only the last chunk of a
`output_max_rows_per_file` loop and logs write errors instead of raising. The
fork:

- with `output_write_episodes=True`, streams every finished episode through an
  `EpisodeWriter` (atomic, uniquely named files; spaces in the metadata).
  Chunks of episodes still running are held and joined until the episode
  ends, so every recorded row is a whole, trainable episode;
- with column output, writes every full chunk of rows, not just the last;
- raises on any write failure.
"""

import copy
import logging
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


@PublicAPI(stability="alpha")
class OfflineSingleAgentEnvRunner(_upstream.OfflineSingleAgentEnvRunner):
    """Records sampled experiences to files without dropping any.

    With `output_write_episodes=True` (the default), each finished episode
    becomes one row of the parquet files under
    `<config.output>/<env name>/`, readable with `input_read_episodes=True`
    and `ray.rllib.offline.episode_reader.read_episodes`. Files hold up to
    `output_max_rows_per_file` episodes; without that setting, each
    `sample()` call commits its own file. Episodes still running when the
    EnvRunner stops are not written (they cannot be trained on).
    """

    @override(_upstream.OfflineSingleAgentEnvRunner)
    def __init__(self, *, config: AlgorithmConfig, **kwargs):
        super().__init__(config=config, **kwargs)
        self._episode_writer: Optional[EpisodeWriter] = None
        # Chunks of episodes that are still running, by episode id.
        self._running_episodes: Dict[str, SingleAgentEpisode] = {}
        self._column_chunk_counter = 0

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
        if self.output_write_episodes:
            self._record_episodes(samples)
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
        """Commits pending files, then closes the environment.

        With `output_max_rows_per_file` set, the last, partly filled file is
        committed only if `output_write_remaining_data=True` (as upstream).
        """
        try:
            if self._episode_writer is not None:
                writer = self._episode_writer
                if self.output_max_rows_per_file and not self.write_remaining_data:
                    logger.info(
                        "Recorder: `output_write_remaining_data=False`, dropping "
                        "%d episode(s) of the last, partly filled file.",
                        writer.num_pending,
                    )
                    writer.abort()
                writer.close()
            elif self._samples and self.write_remaining_data:
                self._write_rows(final=True)
            if self._running_episodes:
                logger.info(
                    "Recorder: %d episode(s) still running at `stop()` were not "
                    "written.",
                    len(self._running_episodes),
                )
        finally:
            SingleAgentEnvRunner.stop(self)

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
                max_rows_per_file=self.output_max_rows_per_file or 1_000_000,
                parquet_compression=kwargs.get("compression") or "zstd",
                filesystem=self._pyarrow_filesystem(),
                file_prefix=f"run-{self.worker_index or 0:06d}",
            )
        return self._episode_writer

    def _pyarrow_filesystem(self) -> Optional[pa_fs.FileSystem]:
        filesystem = self.filesystem_object
        if filesystem is None or isinstance(filesystem, pa_fs.FileSystem):
            return filesystem
        return pa_fs.PyFileSystem(pa_fs.FSSpecHandler(filesystem))

    def _record_episodes(self, samples: List[SingleAgentEpisode]) -> None:
        """Writes finished episodes; holds chunks of running ones."""
        writer = self._get_episode_writer()
        for chunk in samples:
            previous = self._running_episodes.pop(chunk.id_, None)
            if previous is not None:
                previous.concat_episode(copy.deepcopy(chunk))
                chunk = previous
            if chunk.is_done:
                writer.write(chunk)
            else:
                # The caller keeps using the sampled chunk; hold a copy.
                self._running_episodes[chunk.id_] = (
                    chunk if previous is not None else copy.deepcopy(chunk)
                )

    def _write_rows(self, final: bool) -> None:
        """Writes buffered column rows: every full chunk (all rows if `final`)."""
        chunk_size = self.output_max_rows_per_file or len(self._samples)
        while self._samples and (final or len(self._samples) >= chunk_size):
            rows = self._samples[:chunk_size]
            self._column_chunk_counter += 1
            path = (
                Path(self.output_path)
                / self.subdir_path
                / (
                    f"{self.worker_path}-{self._sample_counter:06d}"
                    f"-{self._column_chunk_counter:06d}"
                )
            )
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
