"""The fork's changes to ``ray.rllib.core.learner.differentiable_learner``.

- ``DifferentiableLearner._make_batch_if_necessary``: builds and converts the
  train batch as ``Learner._make_batch_if_necessary`` does, checking every
  leaf of a nested batch. Upstream keeps a copy that only looks at
  ``batch["obs"]`` and calls ``.device`` on it, which fails for Dict and Tuple
  observations.
"""

from ray.rllib.core.learner.learner import Learner
from ray.rllib.core.learner.training_data import TrainingData
from ray.rllib.policy.sample_batch import MultiAgentBatch


def _make_batch_if_necessary(self, training_data: TrainingData) -> MultiAgentBatch:
    """The train batch, built and converted as the ``Learner`` builds its own."""
    return Learner._make_batch_if_necessary(self, training_data)


#: Upstream names in ``ray.rllib.core.learner.differentiable_learner`` that this
#: module replaces.
REPLACES = {
    "DifferentiableLearner._make_batch_if_necessary": _make_batch_if_necessary,
}
