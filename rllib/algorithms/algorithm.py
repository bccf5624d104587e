"""The fork's changes to ``ray.rllib.algorithms.algorithm.Algorithm``.

An offline Algorithm (BC, MARWIL, ...) trains from files and has no
``EnvRunnerGroup`` unless it evaluates in an environment. Two methods assume
one exists:

- ``Algorithm.restore_from_path`` (behind ``Algorithm.from_checkpoint``)
  failed with ``AttributeError: 'NoneType' object has no attribute
  'sync_weights'``. Without env runners the fork restores the components and
  syncs the restored weights to evaluation env runners, if there are any.
- ``Algorithm.get_module`` failed the same way. Without env runners the fork
  returns the module of the local Learner (``num_learners=0``), else of an
  evaluation env runner, else None.
"""

import pathlib

from ray.rllib.algorithms import algorithm as _upstream
from ray.rllib.core import COMPONENT_LEARNER_GROUP, DEFAULT_MODULE_ID
from ray.rllib.utils.checkpoints import Checkpointable

_upstream_restore_from_path = _upstream.Algorithm.restore_from_path
_upstream_get_module = _upstream.Algorithm.get_module


def restore_from_path(self, path, *args, **kwargs):
    """Restores the Algorithm's state from a checkpoint directory."""
    if self.env_runner_group is not None:
        return _upstream_restore_from_path(self, path, *args, **kwargs)
    Checkpointable.restore_from_path(self, path, *args, **kwargs)
    if self.eval_env_runner_group is not None and self.learner_group is not None:
        if (pathlib.Path(path) / COMPONENT_LEARNER_GROUP).is_dir():
            self.eval_env_runner_group.sync_weights(
                from_worker_or_learner_group=self.learner_group,
                inference_only=True,
            )


def get_module(self, module_id=DEFAULT_MODULE_ID):
    """The RLModule with ``module_id`` (None if there is none)."""
    if self.env_runner is not None or self.env_runner_group is not None:
        return _upstream_get_module(self, module_id)
    learner = getattr(self.learner_group, "_learner", None)
    if learner is not None:
        return learner.module.get(module_id)
    if self.eval_env_runner is not None:
        return self.eval_env_runner.module.get(module_id)
    return None


#: Upstream names in ``ray.rllib.algorithms.algorithm`` that this module
#: replaces.
REPLACES = {
    "Algorithm.restore_from_path": restore_from_path,
    "Algorithm.get_module": get_module,
}
