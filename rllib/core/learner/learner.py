"""The fork's changes to ``ray.rllib.core.learner.learner``.

- ``Learner._create_iterator_if_necessary``: runs the GAE that the fork's
  ``OfflinePreLearner`` deferred, on the Learner's device with its live
  module, once per train batch and before any minibatch split.
- ``Learner._make_batch_if_necessary``: decides whether the train batch still
  needs converting by looking at every leaf of the nested batch (through
  :func:`~rllib.core.learner.batch_conversion.needs_conversion`), not only at
  ``batch["obs"]``, so Dict, Tuple and nested observations reach the RLModule
  as tensors on the Learner's device. ``DifferentiableLearner`` uses the same
  function.
"""

from ray.rllib.core.learner import learner as _upstream
from ray.rllib.core.learner.training_data import TrainingData
from ray.rllib.policy.sample_batch import MultiAgentBatch, SampleBatch

from rllib.connectors.learner.general_advantage_estimation import (
    add_deferred_advantages,
    find_gae_piece,
)
from rllib.core.learner.batch_conversion import needs_conversion

# --- Tree-aware batch checks -------------------------------------------------


def _make_batch_if_necessary(self, training_data: TrainingData) -> MultiAgentBatch:
    """Builds a ``MultiAgentBatch`` of tensors on ``self._device`` from the input.

    Episodes go through the Learner connector pipeline; a single-agent
    ``SampleBatch`` is wrapped for the Learner's only RLModule. Whatever comes
    out is converted (once, through ``self._convert_batch_type``) if any leaf
    of any column is a numpy array or a tensor on another device.

    Args:
        self: The ``Learner`` (or ``DifferentiableLearner``).
        training_data: The data passed to ``update()``.

    Returns:
        The train batch, or ``None`` if ``training_data`` holds neither a batch
        nor episodes.

    Raises:
        ValueError: If episodes are given but the Learner has no connector
            pipeline, or a ``SampleBatch`` is given to a multi-module Learner.
    """
    batch = training_data.batch
    if training_data.episodes is not None:
        batch = _run_learner_connector(self, training_data)
    elif isinstance(batch, SampleBatch):
        if len(self.module) != 1:
            raise ValueError(
                "`training_data.batch` is a single-agent `SampleBatch`, but this "
                f"Learner's RLModule has {len(self.module)} sub-modules "
                f"({list(self.module.keys())}). Pass a `MultiAgentBatch` mapping "
                "each ModuleID to its data instead."
            )
        batch = MultiAgentBatch(
            {next(iter(self.module.keys())): batch}, env_steps=len(batch)
        )

    if (
        isinstance(batch, MultiAgentBatch)
        and batch.policy_batches
        and needs_conversion(batch.policy_batches, self._device)
    ):
        batch = self._convert_batch_type(batch)
    return batch


def _run_learner_connector(self, training_data: TrainingData) -> MultiAgentBatch:
    """Runs the Learner connector pipeline on ``training_data.episodes``."""
    if self._learner_connector is None:
        raise ValueError(
            f"`update()` got episodes, but the Learner ({self}) has no "
            "LearnerConnector pipeline to turn them into a train batch. Build the "
            "Learner from an `AlgorithmConfig`, or pass a `batch` instead."
        )
    shared_data = {}
    module_batches = self._learner_connector(
        rl_module=self.module,
        batch=training_data.batch if training_data.batch is not None else {},
        episodes=training_data.episodes,
        shared_data=shared_data,
        metrics=self.metrics,
    )
    return MultiAgentBatch(
        {
            module_id: SampleBatch(
                module_data,
                _zero_padded=bool(shared_data.get(f"_zero_padded_for_mid={module_id}")),
            )
            for module_id, module_data in module_batches.items()
        },
        env_steps=sum(len(e) for e in training_data.episodes),
    )


# --- Learner-side GAE (deferred by the OfflinePreLearner) -------------------


_upstream_create_iterator_if_necessary = _upstream.Learner._create_iterator_if_necessary


def _create_iterator_if_necessary(self, *, training_data: TrainingData, **kwargs):
    if find_gae_piece(self._learner_connector) is None:
        return _upstream_create_iterator_if_necessary(
            self, training_data=training_data, **kwargs
        )
    if training_data.data_iterators:
        batches = _upstream_create_iterator_if_necessary(
            self, training_data=training_data, **kwargs
        )
        return _with_deferred_advantages(self, batches)
    # Batch path: add advantages to the whole train batch, then let upstream
    # split it into minibatches (a tensor batch on our device passes through).
    batch = self._make_batch_if_necessary(training_data=training_data)
    if batch is not None:
        add_deferred_advantages(self, batch)
    return _upstream_create_iterator_if_necessary(
        self, training_data=TrainingData(batch=batch), **kwargs
    )


def _with_deferred_advantages(learner, batches):
    for batch in batches:
        add_deferred_advantages(learner, batch)
        yield batch


#: Upstream names in ``ray.rllib.core.learner.learner`` that this module replaces.
REPLACES = {
    "Learner._make_batch_if_necessary": _make_batch_if_necessary,
    "Learner._create_iterator_if_necessary": _create_iterator_if_necessary,
}
