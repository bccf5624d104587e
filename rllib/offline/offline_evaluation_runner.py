"""The fork's changes to ``ray.rllib.offline.offline_evaluation_runner``.

- ``OfflineEvaluationRunner._create_batch_iterator``: every minibatch passes the
  same tree-aware check as the Learner's train batches
  (:func:`rllib.core.learner.batch_conversion.needs_conversion`) and, if a leaf
  needs it, upstream's ``_convert_batch_type`` before the RLModule sees it, so
  Dict, Tuple and nested observations are tensors on the runner's device at
  every leaf; rows that carry value-target inputs get their targets
  from the runner's module (the prelearner leaves them to whoever
  computes the loss). The iterator is still a ``MiniBatchRayDataIterator``.
"""

from typing import Iterator

from ray.rllib.policy.sample_batch import MultiAgentBatch
from ray.rllib.utils.minibatch_utils import MiniBatchRayDataIterator

from rllib.core.learner.batch_conversion import needs_conversion
from rllib.core.learner.value_targets import add_value_targets_to_batch


def _create_batch_iterator(self, **kwargs) -> "EvaluationBatchIterator":
    """Returns the minibatch iterator over the runner's dataset shard.

    Args:
        self: The ``OfflineEvaluationRunner``.
        **kwargs: Passed on to ``DataIterator.iter_torch_batches``.
    """
    return EvaluationBatchIterator(
        runner=self,
        iterator=self._dataset_iterator,
        device=self._device,
        minibatch_size=self.config.offline_eval_batch_size_per_runner,
        num_iters=self.config.dataset_num_iters_per_eval_runner,
        **kwargs,
    )


class EvaluationBatchIterator(MiniBatchRayDataIterator):
    """`MiniBatchRayDataIterator`, with tensors and value targets checked.

    Args:
        runner: The ``OfflineEvaluationRunner`` (its device, conversion and
            module are used).
        **kwargs: As ``MiniBatchRayDataIterator``.
    """

    def __init__(self, *, runner, **kwargs):
        super().__init__(**kwargs)
        self._runner = runner

    def __iter__(self) -> Iterator[MultiAgentBatch]:
        for batch in super().__iter__():
            if needs_conversion(batch.policy_batches, self._runner._device):
                batch = self._runner._convert_batch_type(batch)
            if self._runner.module is not None:
                add_value_targets_to_batch(self._runner.module, batch)
            yield batch


#: Upstream names in ``ray.rllib.offline.offline_evaluation_runner`` that this
#: module replaces.
REPLACES = {
    "OfflineEvaluationRunner._create_batch_iterator": _create_batch_iterator,
}
