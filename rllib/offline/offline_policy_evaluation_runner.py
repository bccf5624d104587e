"""The fork's changes to ``ray.rllib.offline.offline_policy_evaluation_runner``.

- ``OfflinePolicyEvaluationRunner._convert_batch_type``: the same conversion
  path as the offline evaluation runner's (upstream keeps a copy),
  :func:`rllib.core.learner.batch_conversion.convert_batch_type_counting_longest`.
"""

from rllib.core.learner.batch_conversion import convert_batch_type_counting_longest

#: Upstream names in ``ray.rllib.offline.offline_policy_evaluation_runner`` that
#: this module replaces.
REPLACES = {
    "OfflinePolicyEvaluationRunner._convert_batch_type": (
        convert_batch_type_counting_longest
    ),
}
