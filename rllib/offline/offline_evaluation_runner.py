"""The fork's changes to ``ray.rllib.offline.offline_evaluation_runner``.

- ``OfflineEvaluationRunner._convert_batch_type``: the fork's one conversion
  path, counting env steps as upstream does here (the longest module batch),
  :func:`rllib.core.learner.batch_conversion.convert_batch_type_counting_longest`.
- ``OfflineEvaluationRunner._create_batch_iterator``: every minibatch passes the
  same tree-aware check as the Learner's train batches before the RLModule
  sees it, so Dict, Tuple and nested observations are tensors on the runner's
  device at every leaf.
"""

from typing import Iterable, Iterator

from ray.rllib.policy.sample_batch import MultiAgentBatch
from ray.rllib.utils.minibatch_utils import MiniBatchRayDataIterator

from rllib.core.learner.batch_conversion import (
    convert_batch_type_counting_longest,
    needs_conversion,
)


def _create_batch_iterator(self, **kwargs) -> Iterable[MultiAgentBatch]:
    """Returns the minibatch iterator over the runner's dataset shard.

    Args:
        self: The ``OfflineEvaluationRunner``.
        **kwargs: Passed on to ``DataIterator.iter_torch_batches``.

    Returns:
        A re-iterable that yields ``MultiAgentBatch`` es with tensor leaves on
        ``self._device``.
    """
    return _DeviceCheckedBatches(
        MiniBatchRayDataIterator(
            iterator=self._dataset_iterator,
            device=self._device,
            minibatch_size=self.config.offline_eval_batch_size_per_runner,
            num_iters=self.config.dataset_num_iters_per_eval_runner,
            **kwargs,
        ),
        runner=self,
    )


class _DeviceCheckedBatches:
    """Converts the minibatches of an iterator whose leaves need conversion."""

    def __init__(self, batches: Iterable[MultiAgentBatch], runner):
        self._batches = batches
        self._runner = runner

    def __iter__(self) -> Iterator[MultiAgentBatch]:
        for batch in self._batches:
            if needs_conversion(batch.policy_batches, self._runner._device):
                batch = self._runner._convert_batch_type(batch)
            yield batch


#: Upstream names in ``ray.rllib.offline.offline_evaluation_runner`` that this
#: module replaces.
REPLACES = {
    "OfflineEvaluationRunner._convert_batch_type": (
        convert_batch_type_counting_longest
    ),
    "OfflineEvaluationRunner._create_batch_iterator": _create_batch_iterator,
}
