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
  would refuse ("Multi-agent recording is not supported, yet."). The
  action units the files record (`EpisodeWriter(action_units=...)`) become
  ``input_action_units``, which every process that maps actions reads. Then
  upstream's checks run.
- ``AlgorithmConfig.offline_data`` takes ``input_action_units``: the units of
  the actions in files that do not record them. ``actions_in_input_normalized
  =True`` (old API stack) counts as ``input_action_units="normalized"``. It
  also takes the fork's offline settings as typed arguments
  (``rllib.offline.offline_settings``): ``memory_budget``,
  ``cache_draws_per_timestep`` and ``value_horizon``, before read from
  ``learner_config_dict`` keys (still read, with a deprecation warning).
"""

import logging
from typing import Optional

from ray.rllib.algorithms import algorithm_config as _upstream
from ray.rllib.utils.from_config import NotProvided

from rllib.offline.offline_settings import (
    check_cache_draws_per_timestep,
    check_memory_budget,
    check_value_horizon,
)

logger = logging.getLogger("ray." + __name__)

_upstream_validate_offline_settings = (
    _upstream.AlgorithmConfig._validate_offline_settings
)
_upstream_offline_data = _upstream.AlgorithmConfig.offline_data


def offline_data(
    self,
    *,
    input_action_units: Optional[str] = NotProvided,
    memory_budget: Optional[int] = NotProvided,
    cache_draws_per_timestep: Optional[float] = NotProvided,
    value_horizon: Optional[int] = NotProvided,
    **kwargs,
) -> "_upstream.AlgorithmConfig":
    """Sets the config's offline data settings.

    Takes every argument of ray's `AlgorithmConfig.offline_data`, and:

    Args:
        input_action_units: The units the actions in `input_` are in, for data that does
            not record them (files written by `EpisodeWriter` do; hand-rolled episode
            files, ray 2.60's recorder and column data, `input_read_episodes=False`, do
            not): "env" for the environment's own units (what `env.step()` takes: a
            controller's or a robot's log), "normalized" for [-1, 1] on each bounded
            `Box` leaf (what a module with `normalize_actions=True` outputs). Training
            maps the actions to the units the module acts in: with
            `normalize_actions=True` (the default), "env" actions are scaled to [-1, 1].
            None (the default) follows the files and otherwise takes the actions as they
            are, warning when they fall outside [-1, 1]. Setting units that contradict
            the files' record fails at `build_algo()`.
        memory_budget: Bytes of decoded episodes (`input_read_episodes=True`) one
            node may hold in memory. Within it, the episodes are decoded once and
            every train batch is sampled from memory; beyond it, each Learner
            samples a rotating cache of its share. 0 always streams through Ray
            Data. None (the default): half the object store of the node that holds
            the episodes.
        cache_draws_per_timestep: Beyond the memory budget, the draws per timestep
            a cached row range gives before the cache replaces it (more: less
            decoding per update, more reuse). None (the default): 1.
        value_horizon: For value targets from recorded rewards (MARWIL, offline
            PPO): the steps from a row to the state its target bootstraps from.
            None (the default): the episode's end.
        **kwargs: The other arguments of `AlgorithmConfig.offline_data`.

    Returns:
        This updated AlgorithmConfig object.
    """
    if input_action_units is not NotProvided:
        from rllib.offline.episode_files.action_units import check_action_units

        self.input_action_units = check_action_units(
            input_action_units, "input_action_units"
        )
    if memory_budget is not NotProvided:
        self.memory_budget = check_memory_budget(memory_budget)
    if cache_draws_per_timestep is not NotProvided:
        self.cache_draws_per_timestep = check_cache_draws_per_timestep(
            cache_draws_per_timestep
        )
    if value_horizon is not NotProvided:
        self.value_horizon = check_value_horizon(value_horizon)
    return _upstream_offline_data(self, **kwargs)


def _validate_offline_settings(self) -> None:
    _honour_actions_in_input_normalized(self)
    if self.is_offline and self.input_read_episodes:
        from rllib.offline.offline_data import (
            recorded_input_metadata,
            take_recorded_agent_spaces,
        )

        # One listing of the input serves both kinds of episodes.
        recorded, action_units = recorded_input_metadata(self) or (None, None)
        _take_recorded_action_units(self, action_units)
        per_agent = recorded is not None and any(
            isinstance(space, dict) for space in recorded
        )
        if per_agent and self.is_multi_agent:
            take_recorded_agent_spaces(self, recorded)
        elif recorded is not None and not per_agent:
            _take_or_check_recorded_spaces(self, recorded)
    _select_multi_agent_recorder(self)
    _upstream_validate_offline_settings(self)


def _honour_actions_in_input_normalized(config) -> None:
    """The old API stack's `actions_in_input_normalized=True` (the new stack
    ignores it in ray 2.60) states normalized input actions where
    `input_action_units` is unset. Its default, False, states nothing: it
    cannot tell unknown units from environment units."""
    if not config.is_offline or not config.actions_in_input_normalized:
        return
    from rllib.offline.episode_files.action_units import NORMALIZED

    if getattr(config, "input_action_units", None) is None:
        config.input_action_units = NORMALIZED


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


def _take_recorded_action_units(config, recorded) -> None:
    """Sets `input_action_units` to the units the files record, so that every
    process that maps the actions (Learners, Ray Data workers, evaluation
    runners) reads them from the config; fails if the config says otherwise."""
    from rllib.offline.episode_files.action_units import input_action_units

    configured = getattr(config, "input_action_units", None)
    units = input_action_units(recorded, configured, config.input_)
    if units != configured:
        config.input_action_units = units
        logger.info(
            "`input_action_units=%r` taken from the episode files under %s.",
            units,
            config.input_,
        )


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
    "AlgorithmConfig.offline_data": offline_data,
}
