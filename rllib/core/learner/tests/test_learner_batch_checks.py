"""`_make_batch_if_necessary` converts by the whole nested batch (no Ray).

Ray 2.60's `Learner` leaves a single-agent `SampleBatch` unconverted (the
`sample_batch` cases here) and its `DifferentiableLearner` looks at `obs` only.
"""

import sys
import types

import gymnasium as gym
import numpy as np
import pytest
import torch
import tree
from ray.rllib.algorithms.bc import BCConfig
from ray.rllib.core import DEFAULT_MODULE_ID
from ray.rllib.core.columns import Columns
from ray.rllib.core.learner.differentiable_learner import DifferentiableLearner
from ray.rllib.core.learner.learner import Learner
from ray.rllib.core.learner.torch.torch_learner import TorchLearner
from ray.rllib.core.learner.training_data import TrainingData
from ray.rllib.policy.sample_batch import MultiAgentBatch, SampleBatch

from rllib.utils.tests.devices import DEVICES


def _stub_learner(device):
    """The attributes `_make_batch_if_necessary` uses, nothing else."""
    stub = types.SimpleNamespace(
        _device=torch.device(device),
        module={DEFAULT_MODULE_ID: None},
        _learner_connector=None,
        metrics=None,
        conversions=0,
    )

    def convert(batch):
        stub.conversions += 1
        return TorchLearner._convert_batch_type(stub, batch)

    stub._convert_batch_type = convert
    return stub


def _tuple_batch(leaf_fn):
    return SampleBatch(
        {
            Columns.OBS: (leaf_fn((4, 2)), {"deep": leaf_fn((4, 1))}),
            Columns.ACTIONS: leaf_fn((4,)),
        }
    )


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("wrap", ["sample_batch", "multi_agent"])
def test_numpy_tuple_obs_is_converted_with_structure(device, wrap):
    stub = _stub_learner(device)
    batch = _tuple_batch(lambda s: np.zeros(s, np.float32))
    if wrap == "multi_agent":
        batch = MultiAgentBatch({DEFAULT_MODULE_ID: batch}, env_steps=4)
    out = Learner._make_batch_if_necessary(stub, TrainingData(batch=batch))
    assert stub.conversions == 1
    obs = out.policy_batches[DEFAULT_MODULE_ID][Columns.OBS]
    assert isinstance(obs, tuple)
    for leaf in tree.flatten(out.policy_batches):
        assert isinstance(leaf, torch.Tensor)
        assert leaf.device.type == torch.device(device).type


@pytest.mark.parametrize("device", DEVICES)
def test_tensor_batch_on_device_is_passed_through(device):
    stub = _stub_learner(device)
    batch = MultiAgentBatch(
        {DEFAULT_MODULE_ID: _tuple_batch(lambda s: torch.zeros(s, device=device))},
        env_steps=4,
    )
    out = Learner._make_batch_if_necessary(stub, TrainingData(batch=batch))
    assert out is batch
    assert stub.conversions == 0


def test_numpy_leaf_outside_obs_triggers_conversion():
    # Ray 2.60's DifferentiableLearner only looked at `obs`.
    stub = _stub_learner("cpu")
    sample = _tuple_batch(torch.zeros)
    sample[Columns.ACTIONS] = np.zeros(4)
    batch = MultiAgentBatch({DEFAULT_MODULE_ID: sample}, env_steps=4)
    out = Learner._make_batch_if_necessary(stub, TrainingData(batch=batch))
    assert stub.conversions == 1
    assert isinstance(
        out.policy_batches[DEFAULT_MODULE_ID][Columns.ACTIONS], torch.Tensor
    )


def test_wrong_device_leaf_triggers_conversion():
    stub = _stub_learner("cpu")
    sample = _tuple_batch(torch.zeros)
    sample[Columns.OBS] = (
        torch.zeros(4, 2, device="meta"),
        {"deep": torch.zeros(4, 1)},
    )
    batch = MultiAgentBatch({DEFAULT_MODULE_ID: sample}, env_steps=4)
    seen = []
    stub._convert_batch_type = lambda b: seen.append(b) or b
    Learner._make_batch_if_necessary(stub, TrainingData(batch=batch))
    assert seen == [batch]


def test_single_agent_numpy_sample_batch_trains():
    # Ray 2.60 wraps the `SampleBatch` without converting it; the module's
    # first layer then gets numpy arrays and raises a TypeError.
    space = gym.spaces.Box(-1.0, 1.0, (4,), np.float32)
    config = BCConfig().environment(
        observation_space=space, action_space=gym.spaces.Discrete(2)
    )
    learner = config.learner_class(
        config=config,
        module_spec=config.get_multi_rl_module_spec(
            spaces={DEFAULT_MODULE_ID: (space, config.action_space)}
        ),
    )
    learner.build()
    rng = np.random.default_rng(0)
    batch = SampleBatch(
        {
            Columns.OBS: rng.random((8, 4), dtype=np.float32),
            Columns.ACTIONS: rng.integers(0, 2, 8),
        }
    )
    before = [
        p.detach().clone() for p in learner.module[DEFAULT_MODULE_ID].parameters()
    ]
    results = learner.update(batch=batch)
    assert np.isfinite(float(results[DEFAULT_MODULE_ID][Learner.TOTAL_LOSS_KEY].peek()))
    after = list(learner.module[DEFAULT_MODULE_ID].parameters())
    assert any(not torch.equal(b, a) for b, a in zip(before, after))


def test_sample_batch_for_multi_module_learner_is_rejected():
    stub = _stub_learner("cpu")
    stub.module = {"a": None, "b": None}
    with pytest.raises(ValueError, match="has 2 sub-modules"):
        Learner._make_batch_if_necessary(
            stub, TrainingData(batch=_tuple_batch(np.zeros))
        )


def test_episodes_without_connector_are_rejected():
    stub = _stub_learner("cpu")
    with pytest.raises(ValueError, match="no LearnerConnector pipeline"):
        Learner._make_batch_if_necessary(stub, TrainingData(episodes=[]))


def test_differentiable_learner_builds_batches_as_the_learner_does():
    """Same tuple structure, same values, same device, one conversion each."""
    obs = (np.arange(6, dtype=np.float32).reshape(3, 2), np.arange(3))
    made = []
    for method in (
        Learner._make_batch_if_necessary,
        DifferentiableLearner._make_batch_if_necessary,
    ):
        stub = _stub_learner("cpu")
        batch = SampleBatch({Columns.OBS: obs, Columns.ACTIONS: np.zeros(3)})
        made.append(method(stub, TrainingData(batch=batch)))
        assert stub.conversions == 1
    for out in made:
        leaves = out.policy_batches[DEFAULT_MODULE_ID][Columns.OBS]
        assert isinstance(leaves, tuple)
        assert all(isinstance(leaf, torch.Tensor) for leaf in leaves)
    torch.testing.assert_close(
        made[0].policy_batches[DEFAULT_MODULE_ID][Columns.OBS],
        made[1].policy_batches[DEFAULT_MODULE_ID][Columns.OBS],
    )
    # The conversion itself is the TorchLearner's own.
    assert TorchLearner._convert_batch_type.__module__ == (
        "ray.rllib.core.learner.torch.torch_learner"
    )


if __name__ == "__main__":
    sys.exit(pytest.main(["-v", __file__]))
