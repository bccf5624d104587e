"""The fork's changes to ``ray.rllib.core.learner.torch.torch_learner``.

- ``TorchLearner._convert_batch_type``: the fork's one conversion path,
  :func:`rllib.core.learner.batch_conversion.convert_batch_type`.
"""

from rllib.core.learner.batch_conversion import convert_batch_type

#: Upstream names in ``ray.rllib.core.learner.torch.torch_learner`` that this
#: module replaces.
REPLACES = {
    "TorchLearner._convert_batch_type": convert_batch_type,
}
