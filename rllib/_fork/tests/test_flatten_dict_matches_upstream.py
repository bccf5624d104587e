"""Flattening keeps tuples tuples and otherwise matches upstream exactly (no Ray).

Compares with upstream's functions as the overlay found them, so it is a
fork-only test; `rllib/utils/tests/test_flatten_dict.py` checks the
documented behaviour on its own.
"""

import random
import sys
from collections import namedtuple

import pytest
from ray.rllib.utils import flatten_dict as ray_flatten_dict
from ray.rllib.utils import unflatten_dict as ray_unflatten_dict
from ray.rllib.utils.minibatch_utils import unflatten_dict as minibatch_unflatten

from rllib._fork import overlay
from rllib.utils import flatten_dict, unflatten_dict
from rllib.utils.tests.test_flatten_dict import _assert_same, _Leaf

# Upstream's functions, as the overlay found them before replacing them.
upstream_flatten = overlay.ORIGINALS[("ray.rllib.utils", "flatten_dict")]
upstream_unflatten = overlay.ORIGINALS[("ray.rllib.utils", "unflatten_dict")]


def _outcome(fn, *args):
    try:
        return "ok", fn(*args)
    except Exception as e:  # Compared by type with upstream's outcome.
        return "raised", type(e)


# --- Dict-only nests: exactly upstream's output. -----------------------------

# Keys that upstream handles in its own way: separators, digits, marks, "".
_STR_KEYS = ["a", "b", "obs", "a/b", "b/", "/x", "", "0", "1", "10", "#", "#a"]
_STR_KEYS += ["#1", "##0", "#0x", "x/#0", "#00", "é"]
_INT_KEYS = [0, 1, 2, 10, -1]


def _dict_nest(rng, depth):
    keys = rng.choice([_STR_KEYS, _INT_KEYS])
    nest = {}
    for key in rng.sample(keys, rng.randint(0, 4)):
        deeper = depth > 0 and rng.random() < 0.5
        nest[key] = _dict_nest(rng, depth - 1) if deeper else _Leaf()
    return nest


def _positions_to_tuples(nest, root=True):
    """Upstream's rebuilt nest with the levels the fork turns into tuples."""
    if not isinstance(nest, dict):
        return nest
    out = {k: _positions_to_tuples(v, root=False) for k, v in nest.items()}
    if not root and out and set(out) == {f"#{i}" for i in range(len(out))}:
        return tuple(out[f"#{i}"] for i in range(len(out)))
    return out


@pytest.mark.parametrize("seed", range(300))
def test_flatten_matches_upstream_on_dict_nests(seed):
    nest = _dict_nest(random.Random(seed), depth=3)
    expected = upstream_flatten(nest)
    actual = flatten_dict(nest)
    assert type(actual) is dict
    assert list(actual) == list(expected)  # Same keys, same order.
    for key in expected:
        assert actual[key] is expected[key], key


@pytest.mark.parametrize("seed", range(300))
def test_unflatten_matches_upstream_on_flat_dicts(seed):
    rng = random.Random(seed)
    flat = upstream_flatten(_dict_nest(rng, depth=3))
    # Also flat dicts in any order and with clashing paths ("a" and "a/b").
    items = list(flat.items()) + [(rng.choice(_STR_KEYS), _Leaf())]
    rng.shuffle(items)
    for candidate in (flat, dict(items)):
        expected = _outcome(upstream_unflatten, candidate)
        actual = _outcome(unflatten_dict, candidate)
        assert actual[0] == expected[0], (candidate, actual, expected)
        if expected[0] == "raised":
            assert actual[1] is expected[1]
        else:
            _assert_same(actual[1], _positions_to_tuples(expected[1]))


@pytest.mark.parametrize(
    "nest",
    [
        {"p": {"a/b": 1, "a": {"c": 2}}},
        {"p": {"#0": 1, "#x": 2, "##1": 3}},
        {10: {"b": 1}, 2: {"a": 2}},
        {"p": {}, "q": {"r": {}}, "s": 1},
        {},
    ],
    ids=["separator", "marks", "int-keys", "empty", "nothing"],
)
def test_corner_cases_as_upstream(nest):
    assert list(flatten_dict(nest).items()) == list(upstream_flatten(nest).items())
    flat = upstream_flatten(nest)
    _assert_same(unflatten_dict(flat), upstream_unflatten(flat))


def test_key_with_separator_is_split_as_upstream():
    flat = flatten_dict({"p": {"a/b": 1}})
    assert flat == {"p/a/b": 1}
    assert unflatten_dict(flat) == upstream_unflatten(flat) == {"p": {"a": {"b": 1}}}


def test_unsortable_keys_raise_as_upstream():
    with pytest.raises(TypeError, match="sortable keys"):
        upstream_flatten({"p": {1: 1, "a": 2}})
    with pytest.raises(TypeError, match="sortable keys"):
        flatten_dict({"p": {1: 1, "a": 2}})


def test_namedtuple_fields_flatten_as_upstream():
    Pair = namedtuple("Pair", ["left", "right"])
    nest = {"p": Pair(left=1, right=(2, 3))}
    assert list(upstream_flatten(nest)) == ["p/left", "p/right/0", "p/right/1"]
    # Field names as upstream; the tuple inside is a tuple again.
    assert flatten_dict(nest) == {"p/left": 1, "p/right/#0": 2, "p/right/#1": 3}
    assert unflatten_dict(flatten_dict(nest)) == {"p": {"left": 1, "right": (2, 3)}}


def test_the_one_colliding_shape_is_a_dict_keyed_like_positions():
    # Documented: a dict with exactly the keys "#0".."#<n-1>" comes back as a
    # tuple. Its flat keys are upstream's; only the rebuilt level differs.
    nest = {"p": {"#0": 1, "#1": 2}}
    assert flatten_dict(nest) == upstream_flatten(nest) == {"p/#0": 1, "p/#1": 2}
    assert unflatten_dict(flatten_dict(nest)) == {"p": (1, 2)}
    # Any other key set, or a gap, stays a dict, as upstream.
    for flat in ({"p/#0": 1, "p/#2": 2}, {"p/#0": 1, "p/x": 2}, {"p/#1": 1}):
        _assert_same(unflatten_dict(flat), upstream_unflatten(flat))


# --- Nests with tuples and lists: differ from upstream only at positions. ----


def _seq_nest(rng, depth, top=False):
    kind = "dict" if top else rng.choice(["dict", "tuple", "list", "leaf"])
    if depth == 0 or kind == "leaf":
        return _Leaf()
    if kind == "dict":
        keys = rng.choice([["obs", "a", "b", "0", "10", "é"], [0, 2, 10]])
        return {
            k: _seq_nest(rng, depth - 1) for k in rng.sample(keys, rng.randint(1, 3))
        }
    items = [_seq_nest(rng, depth - 1) for _ in range(rng.randint(1, 3))]
    return tuple(items) if kind == "tuple" else items


def _normalized(nest):
    """What a lossless round trip gives: tuples, str keys in dm-tree's order."""
    if isinstance(nest, dict):
        return {str(k): _normalized(nest[k]) for k in sorted(nest)}
    if isinstance(nest, (tuple, list)):
        return tuple(_normalized(v) for v in nest)
    return nest


def _unmark(key):
    return "/".join(s[1:] if s[:1] == "#" else s for s in key.split("/"))


@pytest.mark.parametrize("seed", range(300))
def test_sequence_nests_differ_from_upstream_only_at_positions(seed):
    nest = _seq_nest(random.Random(seed), depth=4, top=True)
    fork, upstream = flatten_dict(nest), upstream_flatten(nest)
    assert [_unmark(k) for k in fork] == list(upstream)
    assert list(fork.values()) == list(upstream.values())
    _assert_same(unflatten_dict(fork), _normalized(nest))


def test_upstream_names_are_the_fork_functions():
    assert ray_flatten_dict is flatten_dict
    assert ray_unflatten_dict is unflatten_dict
    assert minibatch_unflatten is unflatten_dict


if __name__ == "__main__":
    sys.exit(pytest.main(["-v", __file__]))
