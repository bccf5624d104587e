"""The multi-agent recorder: `OfflineMultiAgentEnvRunner`.

This EnvRunner records `MultiAgentEpisode`s with the guarantees of the
single-agent recorder (`OfflineSingleAgentEnvRunner`), through the same
`EpisodeRecorder`: chunks of running episodes are held and joined until the
episode ends, episodes cut off by a reset, too long ones (in segments) and
those running at `stop()` are written as truncated, and write errors raise.
The layout is the single-agent recorder's:
`<output>/<env name>/run-<worker index:06d>-<sample() call:05d>/*.parquet`,
one episode per row in the `item` column, each agent's spaces in the file
metadata. `ray.rllib.offline.episode_files.reader.read_episodes` reads the episodes
back, with the agent-to-module mapping of the recording
(`episode.module_for(agent_id)`).

`AlgorithmConfig` validation selects this EnvRunner for a
multi-agent config with `output` set and no `env_runner_cls` of its own
(`EnvRunnerGroup` itself picks the single-agent recorder for `output` and
refuses a multi-agent config: "Multi-agent recording is not supported, yet.").
"""

import logging
from typing import Any, Dict, List, Optional

import gymnasium as gym
from ray.rllib.algorithms.algorithm_config import AlgorithmConfig
from ray.rllib.env.multi_agent_env_runner import MultiAgentEnvRunner
from ray.rllib.env.multi_agent_episode import MultiAgentEpisode
from ray.rllib.offline import offline_env_runner as _single_agent_recorder
from ray.rllib.utils.annotations import override
from ray.util.annotations import PublicAPI

from rllib.offline.episode_files.recorder import (
    EpisodeRecorder,
    output_filesystem,
)

logger = logging.getLogger("ray." + __name__)

#: Why column output (`output_write_episodes=False`) is refused.
COLUMN_OUTPUT_UNSUPPORTED = (
    "Multi-agent recording writes whole `MultiAgentEpisode`s only, but "
    "`output_write_episodes` is False (column rows, which RLlib has for "
    "single-agent data only). Set `config.offline_data("
    "output_write_episodes=True)`."
)


def _agent_spaces(spaces: Any) -> Optional[Dict[Any, gym.Space]]:
    """Per-agent spaces as a plain dict by agent id (None if unknown)."""
    if spaces is None:
        return None
    if isinstance(spaces, gym.spaces.Dict):
        return dict(spaces.spaces)
    return dict(spaces)


@PublicAPI(stability="alpha")
class OfflineMultiAgentEnvRunner(MultiAgentEnvRunner):
    """Records sampled `MultiAgentEpisode`s to files without dropping any.

    Output layout (as the single-agent recorder's): `<config.output>/<env
    name>/` holds one directory per write event, `run-<worker index:06d>-<n:05d>`,
    where `n` counts `sample()` calls (the final write at `stop()` counts as one
    more). Each row of a file is one episode. Files hold up to
    `output_max_rows_per_file` episodes; without that setting, each `sample()`
    call commits its own file. Running episodes are held (at most
    `max_running_episode_steps` env steps each, see `RecorderSettings`) until
    they end; episodes cut off by an environment reset, and at `stop()` all
    running ones, are written as truncated (with their running agents).

    Args:
        config: The `AlgorithmConfig`, with `output` set and
            `output_write_episodes=True`.
        **kwargs: Forwarded to `MultiAgentEnvRunner` (`worker_index`, ...).

    Raises:
        ValueError: If `config.output_write_episodes` is False, or a recorder
            setting in `config.output_config` is invalid.
    """

    @override(MultiAgentEnvRunner)
    def __init__(self, *, config: AlgorithmConfig, **kwargs):
        if not config.output_write_episodes:
            raise ValueError(COLUMN_OUTPUT_UNSUPPORTED)
        super().__init__(config=config, **kwargs)
        # Held chunks are joined with `concat_episode`: keep the sampled lists,
        # as the single-agent recorder does.
        self.episodes_to_numpy = False
        self.output_path = self.config.output
        self.subdir_path = self._get_subdir_path() if self.env else None
        # Counts `sample()` calls (and the final write at `stop()`).
        self._sample_counter = 0
        self.episode_recorder = EpisodeRecorder.for_env_runner(
            self,
            observation_space=_agent_spaces(
                getattr(self.env, "single_observation_spaces", None)
            ),
            action_space=_agent_spaces(getattr(self.env, "single_action_spaces", None)),
            filesystem=output_filesystem(self.config),
            logger=logger,
        )
        self.recorder_settings = self.episode_recorder.settings
        self._run_names = self.episode_recorder.run_names
        self.worker_path = self._run_names.worker_path

    def _get_subdir_path(self) -> str:
        """The env's directory name, as the single-agent recorder names it.

        `OfflineSingleAgentEnvRunner._get_subdir_path` reads only `self.env` (a
        vector env with `envs`) and `self.config`, which this EnvRunner has
        too: the class name of the (unwrapped) sub-environment, lower case.
        """
        return _single_agent_recorder.OfflineSingleAgentEnvRunner._get_subdir_path(self)

    @override(MultiAgentEnvRunner)
    def sample(
        self,
        *,
        num_timesteps: int = None,
        num_episodes: int = None,
        explore: bool = None,
        random_actions: bool = False,
        force_reset: bool = False,
    ) -> List[MultiAgentEpisode]:
        """Samples like `MultiAgentEnvRunner.sample` and records the samples.

        Raises:
            OSError: (or the filesystem's error) if writing fails.
        """
        samples = super().sample(
            num_timesteps=num_timesteps,
            num_episodes=num_episodes,
            explore=explore,
            random_actions=random_actions,
            force_reset=force_reset,
        )
        self._sample_counter += 1
        self._run_names.run = self._sample_counter
        self.episode_recorder.record(samples, self._ongoing_episodes)
        self.metrics.log_value(
            key="recording_buffer_size",
            value=len(self.episode_recorder.running_episodes),
        )
        return samples

    @override(MultiAgentEnvRunner)
    def stop(self) -> None:
        """Writes the running episodes, commits pending files, closes the env.

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
            self.episode_recorder.stop()
        finally:
            super().stop()
