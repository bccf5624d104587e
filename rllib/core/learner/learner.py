"""The fork's changes to ``ray.rllib.core.learner.learner``.

- ``Learner._create_iterator_if_necessary``: takes the train batches from an
  in-memory data source that brings its own (the fork's offline data: an
  ``EpisodeShard`` of decoded episodes, whose ``learner_batches`` method
  documents the protocol), and adds value targets to every train batch whose
  rows carry their inputs, with the live module on the Learner's device
  (``rllib.core.learner.value_targets``). ``rllib.core`` never imports
  ``rllib.offline``: it recognises such a source by the method alone.
- ``Learner._make_batch_if_necessary``: converts whatever train batch it
  builds, not only a ``MultiAgentBatch`` passed in as is: upstream checks every
  leaf of such a batch too, but leaves a single-agent ``SampleBatch`` and the
  output of the Learner connector pipeline unconverted, so
  ``update(batch=SampleBatch(<numpy>))`` fails upstream in the module's first
  layer (as do episodes through a pipeline without ``NumpyToTensor``). The check
  is :func:`~rllib.core.learner.batch_conversion.needs_conversion`, over every
  leaf, so Dict, Tuple and nested observations reach the RLModule as tensors on
  the Learner's device. ``DifferentiableLearner`` uses the same function
  (upstream's copy there looks at ``batch["obs"]`` only).
"""

from ray.rllib.core.learner import learner as _upstream
from ray.rllib.core.learner.training_data import TrainingData
from ray.rllib.policy.sample_batch import MultiAgentBatch

from rllib.core.learner.batch_conversion import build_train_batch
from rllib.core.learner.value_targets import add_value_targets_to_batch

# --- Tree-aware batch checks -------------------------------------------------


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


# --- Offline train batches: in-memory sources and value targets -------------


_upstream_create_iterator_if_necessary = _upstream.Learner._create_iterator_if_necessary


def _create_iterator_if_necessary(self, *, training_data: TrainingData, **kwargs):
    """The Ray Data minibatch iterator, or an in-memory source's batches.

    - A data source in place of a Ray Data iterator: an object in
      ``training_data.data_iterators[0]`` with a method
      ``learner_batches(learner, minibatch_size, num_iters)`` that returns an
      iterator of train batches (``MultiAgentBatch``, numpy or tensors). The
      source keeps whatever state it needs per Learner. ``minibatch_size``
      defaults to ``train_batch_size_per_learner``; ``num_iters`` may be None
      (the source decides, the same on every Learner, so DDP Learners never
      wait for each other). Each batch is converted to tensors on the
      Learner's device.
    - Any batch whose rows carry value-target inputs gets its targets from
      the live module, per train batch, before minibatches are cut.
    """
    iterators = training_data.data_iterators
    source = iterators[0] if iterators else None
    learner_batches = getattr(source, "learner_batches", None)
    if learner_batches is not None:
        batches = learner_batches(
            self,
            kwargs.get("minibatch_size") or self.config.train_batch_size_per_learner,
            kwargs.get("num_iters"),
        )
        # `update()` logs the dataset iterations when `self.iterator` is set.
        self.iterator = batches
        return _with_value_targets(self, batches, convert=True)
    if iterators:
        batches = _upstream_create_iterator_if_necessary(
            self, training_data=training_data, **kwargs
        )
        return _with_value_targets(self, batches)
    # Batch path: targets for the whole train batch, then it is cut into
    # minibatches (a tensor batch on our device passes through unchanged).
    batch = self._make_batch_if_necessary(training_data=training_data)
    if batch is not None:
        add_value_targets_to_batch(self.module, batch)
    return _upstream_create_iterator_if_necessary(
        self, training_data=TrainingData(batch=batch), **kwargs
    )


def _with_value_targets(learner, batches, convert: bool = False):
    for batch in batches:
        if convert:
            batch = learner._make_batch_if_necessary(TrainingData(batch=batch))
        add_value_targets_to_batch(learner.module, batch)
        yield batch


#: Upstream names in ``ray.rllib.core.learner.learner`` that this module replaces.
REPLACES = {
    "Learner._make_batch_if_necessary": _make_batch_if_necessary,
    "Learner._create_iterator_if_necessary": _create_iterator_if_necessary,
}
