"""The fork's changes to ``ray.rllib.core.learner.torch.torch_differentiable_learner``.

- ``TorchDifferentiableLearner._convert_batch_type``: the fork's one conversion
  path, counting env steps as upstream does here (the longest module batch),
  :func:`rllib.core.learner.batch_conversion.convert_batch_type_counting_longest`.
"""

from rllib.core.learner.batch_conversion import convert_batch_type_counting_longest

#: Upstream names in ``ray.rllib.core.learner.torch.torch_differentiable_learner``
#: that this module replaces.
REPLACES = {
    "TorchDifferentiableLearner._convert_batch_type": (
        convert_batch_type_counting_longest
    ),
}
