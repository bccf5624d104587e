"""The fork's changes to ``ray.rllib.offline.offline_policy_evaluation_runner``.

- ``OfflinePolicyEvaluationRunner._convert_batch_type``: the same conversion
  path as the offline evaluation runner's (upstream keeps a copy).
"""

from rllib.offline.offline_evaluation_runner import _convert_batch_type

#: Upstream names in ``ray.rllib.offline.offline_policy_evaluation_runner`` that
#: this module replaces.
REPLACES = {
    "OfflinePolicyEvaluationRunner._convert_batch_type": _convert_batch_type,
}
