"""The tree-aware conversion check, and TorchLearner's conversion passing it.

No Ray.
"""

import sys
import types
from collections.abc import Mapping

import numpy as np
import pytest
import torch
import tree
from ray.rllib.core.columns import Columns
from ray.rllib.core.learner.torch.torch_learner import TorchLearner
from ray.rllib.policy.sample_batch import MultiAgentBatch, SampleBatch

from rllib.core.learner.batch_conversion import _same_device, needs_conversion
from rllib.utils.tests.devices import DEVICES, requires_cuda


def _nested_obs(leaf_fn):
    """A Dict-of-Tuple observation column plus a flat column."""
    return {
        Columns.OBS: {
            "pos": leaf_fn((4, 2)),
            "pair": (leaf_fn((4, 1)), {"deep": (leaf_fn((4, 3)),)}),
        },
        Columns.ACTIONS: leaf_fn((4,)),
    }


def _np(shape):
    return np.zeros(shape, np.float32)


def _on(device):
    return lambda shape: torch.zeros(shape, device=device)


class _ExplodingMapping(Mapping):
    """A mapping whose values after the first must never be looked at."""

    def __init__(self, first):
        self._first = first

    def __getitem__(self, key):
        if key == "first":
            return self._first
        raise AssertionError("walked past the first leaf that needed conversion")

    def __iter__(self):
        return iter(["first", "second"])

    def __len__(self):
        return 2

    def values(self):
        yield self._first
        raise AssertionError("walked past the first leaf that needed conversion")


@pytest.mark.parametrize("device", DEVICES)
def test_numpy_leaves_need_conversion(device):
    assert needs_conversion(_nested_obs(_np), device)


@pytest.mark.parametrize("device", DEVICES)
def test_tensor_leaves_on_device_need_none(device):
    assert not needs_conversion(_nested_obs(_on(device)), device)


@pytest.mark.parametrize("device", DEVICES)
def test_one_numpy_leaf_deep_inside_tensors(device):
    batch = _nested_obs(_on(device))
    batch[Columns.OBS]["pair"][1]["deep"] = (_np((4, 3)),)
    assert needs_conversion(batch, device)


@pytest.mark.parametrize("device", DEVICES)
def test_wrong_device_tensor_needs_conversion(device):
    # A tensor on the `meta` device is on "another device" on every machine.
    batch = _nested_obs(_on(device))
    batch[Columns.OBS]["pair"] = (torch.zeros(4, 1, device="meta"), {"deep": ()})
    assert needs_conversion(batch, device)


@requires_cuda
def test_cpu_tensor_for_cuda_learner_and_back():
    assert needs_conversion(_nested_obs(_on("cpu")), "cuda")
    assert needs_conversion(_nested_obs(_on("cuda")), "cpu")
    # `cuda` without an index is the current device.
    assert not needs_conversion(_nested_obs(_on("cuda:0")), torch.device("cuda"))


@pytest.mark.parametrize(
    "a, b, same",
    [
        ("cpu", "cpu", True),
        ("cpu", "meta", False),
        ("cuda:0", "cuda:0", True),
        ("cuda:0", "cuda:1", False),
        ("cuda", "cpu", False),
    ],
)
def test_same_device(a, b, same):
    assert _same_device(torch.device(a), torch.device(b)) is same
    assert _same_device(torch.device(b), torch.device(a)) is same


@pytest.mark.parametrize(
    "batch",
    [{}, [], (), {"a": {}}, MultiAgentBatch({}, env_steps=0)],
    ids=["dict", "list", "tuple", "nested-empty", "multi-agent"],
)
def test_empty_needs_none(batch):
    assert not needs_conversion(batch, "cpu")


def test_device_none_accepts_any_tensor_but_not_numpy():
    assert not needs_conversion(_nested_obs(_on("meta")), None)
    assert needs_conversion(_nested_obs(_np), None)


def test_unconvertible_leaves_are_ignored():
    batch = {
        "infos": np.array([{"a": 1}, None], dtype=object),
        "names": np.array(["x", "y"]),
        "none": None,
        "scalar": 3,
    }
    assert not needs_conversion(batch, "cpu")
    batch["scalar"] = np.float32(3.0)
    assert needs_conversion(batch, "cpu")


def test_stops_at_first_leaf_needing_conversion():
    assert needs_conversion({"a": _ExplodingMapping(_np((2,)))}, "cpu")
    with pytest.raises(AssertionError, match="walked past"):
        needs_conversion({"a": _ExplodingMapping(torch.zeros(2))}, "cpu")


def test_deeply_nested():
    leaf = torch.zeros(2)
    deep = leaf
    for i in range(200):
        deep = {"k": deep} if i % 2 else (deep,)
    assert not needs_conversion(deep, "cpu")
    deep = np.zeros(2)
    for i in range(200):
        deep = {"k": deep} if i % 2 else (deep,)
    assert needs_conversion(deep, "cpu")


def test_multi_agent_batch_is_walked():
    batch = MultiAgentBatch(
        {
            "p0": SampleBatch(_nested_obs(_on("cpu"))),
            "p1": SampleBatch(_nested_obs(_np)),
        },
        env_steps=4,
    )
    assert needs_conversion(batch, "cpu")
    assert needs_conversion(batch.policy_batches, "cpu")


@pytest.mark.parametrize("device", DEVICES)
def test_torch_learner_conversion_keeps_structure_and_passes_the_check(device):
    # `needs_conversion` checks; `TorchLearner._convert_batch_type` converts.
    learner = types.SimpleNamespace(_device=torch.device(device))
    batch = MultiAgentBatch({"p0": SampleBatch(_nested_obs(_np))}, env_steps=7)
    assert needs_conversion(batch, device)
    out = TorchLearner._convert_batch_type(learner, batch)
    column = out.policy_batches["p0"][Columns.OBS]
    tree.assert_same_structure(column, _nested_obs(_np)[Columns.OBS], check_types=True)
    for leaf in tree.flatten(out.policy_batches):
        assert isinstance(leaf, torch.Tensor)
        assert leaf.device.type == torch.device(device).type
    assert out.env_steps() == 7
    assert not needs_conversion(out, device)


if __name__ == "__main__":
    sys.exit(pytest.main(["-v", __file__]))
