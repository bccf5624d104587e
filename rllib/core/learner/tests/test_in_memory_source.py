"""The Learner takes batches from any in-memory source by its method (no Ray).

The Learner knows the in-memory offline data only through the duck-typed
`learner_batches(learner, minibatch_size, num_iters)` method; it imports
nothing of `rllib.offline` for it.
"""

import sys
import types

import numpy as np
import pytest
import torch
import tree
from ray.rllib.core import DEFAULT_MODULE_ID
from ray.rllib.core.columns import Columns
from ray.rllib.core.learner.learner import Learner
from ray.rllib.core.learner.training_data import TrainingData
from ray.rllib.policy.sample_batch import MultiAgentBatch, SampleBatch


class _Source:
    """Records its calls; yields `num_iters` numpy batches of `minibatch_size`."""

    def __init__(self):
        self.calls = []

    def learner_batches(self, learner, minibatch_size, num_iters):
        self.calls.append((learner, minibatch_size, num_iters))
        for i in range(num_iters or 2):
            rows = SampleBatch(
                {
                    Columns.OBS: {
                        "a": np.full((minibatch_size, 2), i, np.float32),
                        "b": (np.zeros((minibatch_size, 1), np.float32),),
                    },
                    Columns.ACTIONS: np.arange(minibatch_size),
                }
            )
            yield MultiAgentBatch({DEFAULT_MODULE_ID: rows}, minibatch_size)


def _stub_learner():
    stub = types.SimpleNamespace(
        _device=torch.device("cpu"),
        module={DEFAULT_MODULE_ID: None},
        _learner_connector=None,
        metrics=None,
        config=types.SimpleNamespace(train_batch_size_per_learner=32),
        iterator=None,
    )
    stub._convert_batch_type = lambda batch: MultiAgentBatch(
        tree.map_structure(torch.from_numpy, batch.policy_batches),
        env_steps=batch.env_steps(),
    )
    stub._make_batch_if_necessary = lambda training_data: (
        Learner._make_batch_if_necessary(stub, training_data)
    )
    return stub


@pytest.mark.parametrize(
    "kwargs, expected",
    [({}, (32, None)), ({"minibatch_size": 8, "num_iters": 3}, (8, 3))],
)
def test_learner_calls_the_source_and_converts_its_batches(kwargs, expected):
    learner, source = _stub_learner(), _Source()
    batches = Learner._create_iterator_if_necessary(
        learner, training_data=TrainingData(data_iterators=[source]), **kwargs
    )
    assert learner.iterator is not None  # The Learner logs dataset iterations.
    out = list(batches)
    assert source.calls == [(learner, *expected)]
    minibatch_size, num_iters = expected
    assert len(out) == (num_iters or 2)
    for i, batch in enumerate(out):
        rows = batch.policy_batches[DEFAULT_MODULE_ID]
        assert len(rows) == minibatch_size
        assert isinstance(rows[Columns.OBS]["b"], tuple)
        for leaf in tree.flatten(batch.policy_batches):
            assert isinstance(leaf, torch.Tensor) and leaf.device.type == "cpu"
        assert torch.equal(
            rows[Columns.OBS]["a"], torch.full((minibatch_size, 2), float(i))
        )


if __name__ == "__main__":
    sys.exit(pytest.main(["-v", __file__]))
