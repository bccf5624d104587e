"""Flattening the prelearner's output keeps tuples tuples (no Ray)."""

import sys

import numpy as np
import pytest
import tree
from ray.rllib.utils import flatten_dict as ray_flatten_dict
from ray.rllib.utils import unflatten_dict as ray_unflatten_dict
from ray.rllib.utils.minibatch_utils import unflatten_dict as minibatch_unflatten

from rllib.utils import flatten_dict, unflatten_dict


def _batch():
    return {
        "default_policy": {
            "obs": {
                "pos": np.zeros((3, 2)),
                "pair": (np.ones((3, 1)), {"deep": (np.full((3,), 2.0),)}),
            },
            "tuple_obs": (np.zeros((3, 2)), np.ones((3, 2))),
            "actions": np.arange(3),
        },
        "other": {"obs": np.zeros((3, 4))},
    }


def test_round_trip_keeps_tuples_and_leaves():
    batch = _batch()
    out = unflatten_dict(flatten_dict(batch))
    tree.assert_same_structure(out, batch, check_types=True)
    for a, b in zip(tree.flatten(out), tree.flatten(batch)):
        assert a is b


def test_plain_dict_keys_flatten_as_upstream():
    batch = {"p": {"obs": np.zeros(2), "actions": np.zeros(2), "x": {"y": 1}}}
    assert sorted(flatten_dict(batch)) == ["p/actions", "p/obs", "p/x/y"]


def test_tuple_positions_are_marked():
    flat = flatten_dict(_batch())
    assert "default_policy/tuple_obs/#0" in flat
    assert "default_policy/obs/pair/#1/deep/#0" in flat


def test_lists_come_back_as_tuples():
    out = unflatten_dict(flatten_dict({"p": {"obs": [np.zeros(2), np.ones(2)]}}))
    assert isinstance(out["p"]["obs"], tuple)


def test_dict_keys_starting_with_mark_are_escaped():
    batch = {"p": {"#0": np.zeros(1), "##x": np.ones(1), "#y": np.ones(2)}}
    flat = flatten_dict(batch)
    assert sorted(flat) == ["p/###x", "p/##0", "p/##y"]
    out = unflatten_dict(flat)
    assert sorted(out["p"]) == ["##x", "#0", "#y"]


def test_upstream_keys_still_unflatten():
    out = unflatten_dict({"p/obs/0": 1, "p/obs/1": 2})
    assert out == {"p": {"obs": {"0": 1, "1": 2}}}


def test_key_with_separator_is_rejected():
    with pytest.raises(ValueError, match=r"dict key 'a/b'.*separator '/'"):
        flatten_dict({"p": {"a/b": np.zeros(1)}})


@pytest.mark.parametrize(
    "flat",
    [{"p/#0": 1, "p/#2": 2}, {"p/#0": 1, "p/x": 2}],
    ids=["gap", "mixed"],
)
def test_broken_tuple_positions_raise(flat):
    with pytest.raises(ValueError, match="Cannot rebuild a tuple under `/p`"):
        unflatten_dict(flat)


def test_custom_separator():
    batch = {"p": {"obs": (np.zeros(1), np.ones(1))}}
    flat = flatten_dict(batch, sep=".")
    assert sorted(flat) == ["p.obs.#0", "p.obs.#1"]
    assert isinstance(unflatten_dict(flat, sep=".")["p"]["obs"], tuple)


def test_upstream_names_are_the_fork_functions():
    assert ray_flatten_dict is flatten_dict
    assert ray_unflatten_dict is unflatten_dict
    assert minibatch_unflatten is unflatten_dict


if __name__ == "__main__":
    sys.exit(pytest.main(["-v", __file__]))
