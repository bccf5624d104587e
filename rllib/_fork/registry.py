"""Which fork modules exist. Strings only: this file is read at start-up.

Every fork module lives at its upstream path with ``rllib.`` in place of
``ray.rllib.`` and declares the upstream names it replaces in a module-level
``REPLACES`` dict (``"name"`` or ``"Class.method"`` -> fork object).
"""

#: The ray release line the fork is written against.
SUPPORTED_RAY_VERSIONS = "2.60.*"
SUPPORTED_RAY_PREFIX = "2.60."

#: Fork modules that replace names inside an existing upstream module.
REPLACING_MODULES = (
    "rllib.utils.postprocessing.value_predictions",
    "rllib.core.learner.learner",
    "rllib.offline.offline_prelearner",
    "rllib.offline.offline_data",
    "rllib.utils",
    "rllib.env.utils.infinite_lookback_buffer",
    "rllib.core.learner.differentiable_learner",
    "rllib.core.learner.torch.torch_learner",
    "rllib.core.learner.torch.torch_differentiable_learner",
    "rllib.offline.offline_evaluation_runner",
    "rllib.offline.offline_policy_evaluation_runner",
    "rllib.offline.offline_env_runner",
    "rllib.algorithms.algorithm_config",
    "rllib.algorithms.algorithm",
    "rllib.algorithms.marwil.torch.marwil_torch_learner",
)

#: Fork modules that are new upstream: importable as ``ray.<name>`` too.
NEW_MODULES = (
    "rllib.offline.episode_writer",
    "rllib.offline.episode_reader",
    "rllib.core.learner.batch_conversion",
    "rllib.offline.episode_inspection",
    "rllib.offline.episode_conversion",
    "rllib.offline.episodes",
    "rllib.offline.minari_io",
    "rllib.offline.offline_multi_agent_env_runner",
)


def upstream_name(fork_module: str) -> str:
    """Returns the upstream dotted path of a fork module."""
    return "ray." + fork_module
