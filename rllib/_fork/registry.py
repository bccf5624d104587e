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
    "rllib.offline.offline_evaluation_runner",
    "rllib.offline.offline_policy_evaluation_runner",
    "rllib.offline.offline_env_runner",
    "rllib.algorithms.algorithm_config",
    "rllib.algorithms.algorithm",
    "rllib.algorithms.marwil.marwil",
    "rllib.algorithms.marwil.torch.marwil_torch_learner",
    "rllib.algorithms.cql.torch.cql_torch_learner",
    "rllib.algorithms.cql.torch.default_cql_torch_rl_module",
    "rllib.algorithms.iql.torch.iql_torch_learner",
    "rllib.core.distribution.torch.torch_distribution",
    "rllib.algorithms.iql.torch.default_iql_torch_rl_module",
    "rllib.algorithms.iql.iql",
    "rllib.algorithms.sac.sac_catalog",
    "rllib.algorithms.sac.torch.sac_torch_learner",
    "rllib.utils.torch_utils",
    "rllib.core.learner.torch.torch_learner",
    "rllib.utils.checkpoints",
)

#: Fork packages that are new upstream: each, and every module below it, is
#: importable as ``ray.<name>`` too (the same module objects).
NEW_PACKAGES = (
    "rllib.offline.episode_files",
    "rllib.offline.in_memory",
    "rllib.offline.tools",
    "rllib.offline.off_policy_estimation",
)

#: Single fork modules that are new upstream: importable as ``ray.<name>`` too.
NEW_MODULES = (
    "rllib.algorithms.marwil.torch.advantage_statistics",
    "rllib.core.learner.batch_conversion",
    "rllib.core.learner.optimizer_gradients",
    "rllib.core.learner.value_targets",
    "rllib.core.models.torch.concat_encoder",
    "rllib.offline.offline_settings",
    "rllib.offline.offline_multi_agent_env_runner",
    "rllib.utils.postprocessing.bootstrapped_returns",
    # The command `python -m ray.rllib.offline.episodes`.
    "rllib.offline.episodes",
    # Earlier paths of modules now in the packages above (kept for imports).
    "rllib.offline.episode_conversion",
    "rllib.offline.episode_inspection",
    "rllib.offline.episode_reader",
    "rllib.offline.episode_writer",
    "rllib.offline.minari_io",
)


def new_module_target(upstream: str):
    """The fork module served as ``upstream`` (``ray.`` + its name), or None."""
    if not upstream.startswith("ray."):
        return None
    name = upstream[len("ray.") :]
    if name in NEW_MODULES or any(
        name == package or name.startswith(package + ".") for package in NEW_PACKAGES
    ):
        return name
    return None


def upstream_name(fork_module: str) -> str:
    """Returns the upstream dotted path of a fork module."""
    return "ray." + fork_module
