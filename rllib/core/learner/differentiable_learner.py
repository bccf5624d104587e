"""The fork's changes to ``ray.rllib.core.learner.differentiable_learner``.

- ``DifferentiableLearner._make_batch_if_necessary``: the same tree-aware
  function as the fork's ``Learner`` (upstream keeps a copy that only looks at
  ``batch["obs"]`` and calls ``.device`` on it, which fails for Dict and Tuple
  observations).
"""

from rllib.core.learner.learner import _make_batch_if_necessary

#: Upstream names in ``ray.rllib.core.learner.differentiable_learner`` that this
#: module replaces.
REPLACES = {
    "DifferentiableLearner._make_batch_if_necessary": _make_batch_if_necessary,
}
