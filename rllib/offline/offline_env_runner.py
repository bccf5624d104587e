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
  running episodes are written as truncated. This episode logic is
  `rllib.offline.episode_files.recorder.EpisodeRecorder`, which the multi-agent
  recorder (`rllib.offline.offline_multi_agent_env_runner`) shares;
- with column output, writes every full chunk of rows, not just the last;
- raises on any write failure.

Recorder settings go into `config.offline_data(output_config={...})`; see
`RecorderSettings`.
"""

import logging
from pathlib import Path
from typing import List, Optional

import ray
from ray.rllib.algorithms.algorithm_config import AlgorithmConfig
from ray.rllib.env.env_runner import EnvRunner
from ray.rllib.env.single_agent_env_runner import SingleAgentEnvRunner
from ray.rllib.env.single_agent_episode import SingleAgentEpisode
from ray.rllib.offline import offline_env_runner as _upstream
from ray.rllib.utils.annotations import override
from ray.util.annotations import PublicAPI

# `RecorderSettings` was defined here before the multi-agent recorder shared
# it; the re-export keeps `offline_env_runner.RecorderSettings` importable.
from rllib.offline.episode_files.recorder import EpisodeRecorder
from rllib.offline.episode_files.recorder import RecorderSettings as RecorderSettings
from rllib.offline.episode_files.writer import EpisodeWriter

logger = logging.getLogger("ray." + __name__)


@PublicAPI(stability="alpha")
class OfflineSingleAgentEnvRunner(_upstream.OfflineSingleAgentEnvRunner):
    """Records sampled experiences to files without dropping any.

    Output layout: `<config.output>/<env name>/` holds one
    directory per write event, `run-<worker index:06d>-<n:05d>`, where `n`
    counts `sample()` calls (the final write at `stop()` counts as one more).
    Each holds parquet files.

    With `output_write_episodes=True` (the default), each row of a file is one
    episode (the `item` column, readable with `input_read_episodes=True` and
    `ray.rllib.offline.episode_files.reader.read_episodes`). Files hold up to
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
        self.episode_recorder = EpisodeRecorder.for_env_runner(
            self,
            observation_space=getattr(self.env, "single_observation_space", None),
            action_space=getattr(self.env, "single_action_space", None),
            filesystem=self.filesystem_object,
            logger=logger,
        )
        self.recorder_settings = self.episode_recorder.settings
        self._run_names = self.episode_recorder.run_names
        self.worker_path = self._run_names.worker_path

    @property
    def _running_episodes(self):
        """The running episodes held, by id (`episode_recorder.running_episodes`)."""
        return self.episode_recorder.running_episodes

    @property
    def _episode_writer(self) -> Optional[EpisodeWriter]:
        """The episode writer, once created (`episode_recorder.writer`)."""
        return self.episode_recorder.writer

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
            self.episode_recorder.record(samples, self._ongoing_episodes)
            buffered = len(self.episode_recorder.running_episodes)
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
        `output_write_remaining_data=True`. The final write goes into a run
        directory of its own.

        Raises:
            OSError: (or the filesystem's error) if writing fails.
        """
        try:
            self._sample_counter += 1
            self._run_names.run = self._sample_counter
            if self.output_write_episodes:
                self.episode_recorder.stop()
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
