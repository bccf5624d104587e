"""The fork's changes to ``ray.rllib.core.learner.differentiable_learner``.

- ``DifferentiableLearner._make_batch_if_necessary``: builds and converts the
  train batch with the function ``Learner._make_batch_if_necessary`` uses,
  checking every leaf of a nested batch. Upstream keeps a copy that only looks at
  ``batch["obs"]`` and calls ``.device`` on it, which fails for Dict and Tuple
  observations.
"""

from ray.rllib.core.learner.training_data import TrainingData
from ray.rllib.policy.sample_batch import MultiAgentBatch

from rllib.core.learner.batch_conversion import build_train_batch


def _make_batch_if_necessary(self, training_data: TrainingData) -> MultiAgentBatch:
    """Builds a ``MultiAgentBatch`` of tensors on ``self._device`` from the input.

    See :func:`~rllib.core.learner.batch_conversion.build_train_batch`.
    """
    return build_train_batch(
        training_data,
        module=self.module,
        learner_connector=self._learner_connector,
        device=self._device,
        convert=self._convert_batch_type,
        metrics=self.metrics,
        owner=self,
    )


#: Upstream names in ``ray.rllib.core.learner.differentiable_learner`` that this
#: module replaces.
REPLACES = {
    "DifferentiableLearner._make_batch_if_necessary": _make_batch_if_necessary,
}
