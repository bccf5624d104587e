"""The fork's change to ``ray.rllib.algorithms.algorithm_config``.

- ``AlgorithmConfig._validate_offline_settings``: for recorded episodes
  (``input_read_episodes=True``) it first looks at the input on the driver:
  a missing or empty ``input_`` fails with the fork's message, a space the
  config leaves unset is taken from the files (``EpisodeWriter`` records
  both spaces; the log says so), and a configured space that contradicts the
  recorded one fails, all at ``build_algo()`` rather than minutes into
  ``train()``. For recorded multi-agent episodes, modules without spaces
  take those recorded for the agents mapped to them. For a multi-agent
  config on the new API stack that records (``output`` set) with no
  ``env_runner_cls`` of its own, it selects the
  fork's ``OfflineMultiAgentEnvRunner``, where upstream's ``EnvRunnerGroup``
  would refuse ("Multi-agent recording is not supported, yet."). Then
  upstream's checks run.
"""

import logging

from ray.rllib.algorithms import algorithm_config as _upstream

logger = logging.getLogger("ray." + __name__)

_upstream_validate_offline_settings = (
    _upstream.AlgorithmConfig._validate_offline_settings
)


def _validate_offline_settings(self) -> None:
    if self.is_offline and self.input_read_episodes:
        from rllib.offline.offline_data import (
            recorded_spaces_of_input,
            take_recorded_agent_spaces,
        )

        # One listing of the input serves both kinds of episodes.
        recorded = recorded_spaces_of_input(self)
        per_agent = recorded is not None and any(
            isinstance(space, dict) for space in recorded
        )
        if per_agent and self.is_multi_agent:
            take_recorded_agent_spaces(self, recorded)
        elif recorded is not None and not per_agent:
            _take_or_check_recorded_spaces(self, recorded)
    _select_multi_agent_recorder(self)
    _upstream_validate_offline_settings(self)


def _select_multi_agent_recorder(config) -> None:
    """Sets `env_runner_cls` to the multi-agent recorder where it applies.

    `EnvRunnerGroup` picks the single-agent recorder when `output` is set and
    `env_runner_cls` is None, and raises for multi-agent configs.
    """
    if not (
        config.output
        and config.is_multi_agent
        and config.enable_env_runner_and_connector_v2
        and config.env_runner_cls is None
    ):
        return
    from rllib.offline.offline_multi_agent_env_runner import (
        COLUMN_OUTPUT_UNSUPPORTED,
        OfflineMultiAgentEnvRunner,
    )

    if not config.output_write_episodes:
        config._value_error(COLUMN_OUTPUT_UNSUPPORTED)
        return
    config.env_runner_cls = OfflineMultiAgentEnvRunner


def _take_or_check_recorded_spaces(config, recorded) -> None:
    from rllib.offline.offline_data import check_recorded_spaces

    taken = []
    for name, space in zip(("observation_space", "action_space"), recorded):
        if space is not None and getattr(config, name) is None:
            setattr(config, name, space)
            taken.append(name)
    if taken:
        logger.info(
            "%s taken from the episode files under %s.",
            " and ".join(f"`{name}`" for name in taken),
            config.input_,
        )
    check_recorded_spaces(
        recorded, (config.observation_space, config.action_space), config
    )


#: Upstream names in ``ray.rllib.algorithms.algorithm_config`` that this module
#: replaces.
REPLACES = {
    "AlgorithmConfig._validate_offline_settings": _validate_offline_settings,
}
