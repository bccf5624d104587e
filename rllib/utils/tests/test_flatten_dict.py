"""`flatten_dict` and `unflatten_dict` keep tuples tuples (no Ray).

`flatten_dict` joins the key path of every leaf with `sep`, in dm-tree's
order, and writes a tuple (or list) position as a `"#<index>"` segment;
`unflatten_dict` rebuilds the nest, turning each level it creates whose keys
are exactly `"#0"` ... `"#<n-1>"` into a tuple.
"""

import sys
from collections import namedtuple

import numpy as np
import pytest
import tree
from ray.rllib.utils import flatten_dict, unflatten_dict


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


class _Leaf:
    """A leaf compared by identity (and not iterable, like many array types)."""

    def __repr__(self):
        return f"<leaf {id(self):x}>"


def _assert_same(actual, expected, path="root"):
    """Same types, same dict key order, same leaf objects."""
    assert type(actual) is type(expected), (path, actual, expected)
    if isinstance(expected, dict):
        assert list(actual) == list(expected), path
        for key in expected:
            _assert_same(actual[key], expected[key], f"{path}/{key}")
    elif isinstance(expected, tuple):
        assert len(actual) == len(expected), path
        for i, (a, e) in enumerate(zip(actual, expected)):
            _assert_same(a, e, f"{path}/#{i}")
    else:
        assert actual is expected, path


def test_top_level_stays_a_dict():
    flat = flatten_dict({"#0": 1})
    assert unflatten_dict(flat) == {"#0": 1}


def test_round_trip_keeps_tuples_and_leaves():
    batch = _batch()
    out = unflatten_dict(flatten_dict(batch))
    tree.assert_same_structure(out, batch, check_types=True)
    for a, b in zip(tree.flatten(out), tree.flatten(batch)):
        assert a is b


def test_tuple_positions_are_marked():
    flat = flatten_dict(_batch())
    assert "default_policy/tuple_obs/#0" in flat
    assert "default_policy/obs/pair/#1/deep/#0" in flat


def test_lists_come_back_as_tuples():
    out = unflatten_dict(flatten_dict({"p": {"obs": [np.zeros(2), np.ones(2)]}}))
    assert isinstance(out["p"]["obs"], tuple)


def test_plain_index_keys_still_unflatten_to_dicts():
    # Keys that write a position as its plain index (as ray 2.60 did) stay
    # dict keys.
    out = unflatten_dict({"p/obs/0": 1, "p/obs/1": 2})
    assert out == {"p": {"obs": {"0": 1, "1": 2}}}


def test_custom_separator():
    batch = {"p": {"obs": (np.zeros(1), np.ones(1))}}
    flat = flatten_dict(batch, sep=".")
    assert list(flat) == ["p.obs.#0", "p.obs.#1"]
    assert isinstance(unflatten_dict(flat, sep=".")["p"]["obs"], tuple)


def _round_trip(nest):
    return unflatten_dict(flatten_dict(nest))


def test_tuple_round_trip():
    a, b, c = _Leaf(), _Leaf(), _Leaf()
    nest = {"obs": (a, b, c), "single": (a,)}
    flat = flatten_dict(nest)
    assert list(flat) == ["obs/#0", "obs/#1", "obs/#2", "single/#0"]
    assert list(flat.values()) == [a, b, c, a]
    _assert_same(_round_trip(nest), nest)


def test_nested_tuple_inside_a_dict_round_trip():
    a, b, c, d = _Leaf(), _Leaf(), _Leaf(), _Leaf()
    nest = {"p": {"obs": (a, (b, c)), "x": d}}
    flat = flatten_dict(nest)
    assert list(flat) == ["p/obs/#0", "p/obs/#1/#0", "p/obs/#1/#1", "p/x"]
    assert list(flat.values()) == [a, b, c, d]
    _assert_same(_round_trip(nest), nest)


def test_dict_inside_a_tuple_round_trip():
    a, b, c = _Leaf(), _Leaf(), _Leaf()
    nest = {"p": ({"b": b, "a": a}, c)}
    flat = flatten_dict(nest)
    # dm-tree's order: dict keys sorted.
    assert list(flat) == ["p/#0/a", "p/#0/b", "p/#1"]
    assert list(flat.values()) == [a, b, c]
    _assert_same(_round_trip(nest), {"p": ({"a": a, "b": b}, c)})


def test_a_dict_keyed_exactly_like_positions_comes_back_as_a_tuple():
    # Documented: a dict whose keys are exactly "#0" ... "#<n-1>" (all of
    # them, nothing else) is rebuilt as a tuple; its flat keys are as usual.
    nest = {"p": {"#0": 1, "#1": 2}}
    assert flatten_dict(nest) == {"p/#0": 1, "p/#1": 2}
    assert _round_trip(nest) == {"p": (1, 2)}
    assert unflatten_dict({"p/#1": 2, "p/#0": 1}) == {"p": (1, 2)}


@pytest.mark.parametrize(
    "flat, expected",
    [
        ({"p/#0": 1, "p/#2": 2}, {"p": {"#0": 1, "#2": 2}}),
        ({"p/#0": 1, "p/x": 2}, {"p": {"#0": 1, "x": 2}}),
        ({"p/#1": 1}, {"p": {"#1": 1}}),
        ({"p/#00": 1}, {"p": {"#00": 1}}),
    ],
    ids=["gap", "other-key", "no-zero", "padded"],
)
def test_any_other_key_set_stays_a_dict(flat, expected):
    out = unflatten_dict(flat)
    assert out == expected
    assert type(out["p"]) is dict


def test_key_with_the_separator_is_split_into_levels():
    flat = flatten_dict({"p": {"a/b": 1}})
    assert flat == {"p/a/b": 1}
    assert unflatten_dict(flat) == {"p": {"a": {"b": 1}}}


def test_namedtuple_fields_are_named_and_inner_tuples_kept():
    Pair = namedtuple("Pair", ["left", "right"])
    nest = {"p": Pair(left=1, right=(2, 3))}
    assert flatten_dict(nest) == {"p/left": 1, "p/right/#0": 2, "p/right/#1": 3}
    assert unflatten_dict(flatten_dict(nest)) == {"p": {"left": 1, "right": (2, 3)}}


def test_empty_dicts_and_tuples_vanish():
    leaf = _Leaf()
    assert flatten_dict({"p": {}, "q": {"r": ()}, "s": leaf}) == {"s": leaf}


if __name__ == "__main__":
    sys.exit(pytest.main(["-v", __file__]))
