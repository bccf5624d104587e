"""The fork's changes to ``ray.rllib.utils``: batch flattening that keeps tuples.

``OfflinePreLearner`` flattens its nested per-module batch into one level of
``"/"``-joined keys for Ray Data, and the Learner side (``Learner``,
``DifferentiableLearner``, ``OfflineData``, offline evaluation runners)
rebuilds the nest with ``unflatten_dict``. Upstream writes a tuple position as
its plain index, so ``obs=(a, b)`` comes back as ``{"0": a, "1": b}`` and a
model that takes a Tuple observation gets a dict.

Both functions replace upstream's for every caller, so they do what upstream's
do for every input, with one change: a tuple (or list) position is written as
``"#<index>"``, and a level of the rebuilt nest whose keys are exactly
``"#0"`` ... ``"#<n-1>"`` comes back as a tuple. Everything else is as
upstream: the same keys in the same order (``dm-tree``'s: dict keys sorted),
keys are ``str(key)`` joined by ``sep`` (a key that contains ``sep`` is split
into levels when rebuilt, as upstream), empty dicts and tuples vanish, the
leaves are the same objects, and plain dicts come out.

The one input that rebuilds differently from upstream besides the fork's own
tuples: a dict whose keys are exactly ``"#0"`` ... ``"#<n-1>"`` (all of them,
nothing else) comes back as a tuple. Any text marker can collide with some
dict key, since upstream writes keys with ``str()``; this marker keeps the
collision to that one shape, and escaping instead would change upstream's
output for every key that starts with ``"#"``.

This module must not import ``ray.rllib`` at module level: it may be imported
while ``ray.rllib.utils`` is still loading.
"""

from collections.abc import Mapping, Sequence
from typing import Any, Dict

import tree

#: Marks a tuple position in a flattened key, e.g. ``"default_policy/obs/#0"``.
_SEQ_MARK = "#"

# Stands for a part of the nest that `flatten_dict` could not follow.
_UNKNOWN = object()


def flatten_dict(
    nested: Dict[str, Any], sep: str = "/", env_steps: int = 0
) -> Dict[str, Any]:
    """Flattens a nest of dicts and tuples into one dict with joined keys.

    Args:
        nested: A nest of mappings, tuples and lists with array leaves.
        sep: The separator between the key segments.
        env_steps: Unused; kept for callers that pass it.

    Returns:
        A flat dict from joined key paths to leaves, in ``dm-tree``'s order.
        Tuple and list positions become ``"#<index>"`` segments, so
        :func:`unflatten_dict` can rebuild tuples; every other segment is
        ``str(key)``.
    """
    return {
        sep.join(_segments(nested, path)): leaf
        for path, leaf in tree.flatten_with_path(nested)
    }


def _segments(nested: Any, path: tuple):
    """The key segments of one ``dm-tree`` path through ``nested``."""
    node = nested
    for step in path:
        is_position = (
            isinstance(step, int)
            and isinstance(node, Sequence)
            and not isinstance(node, (str, bytes))
        )
        yield f"{_SEQ_MARK}{step}" if is_position else str(step)
        node = _child(node, step)


def _child(node: Any, step: Any) -> Any:
    if node is _UNKNOWN:
        return node
    try:
        if isinstance(step, str) and not isinstance(node, Mapping):
            return getattr(node, step)  # A namedtuple's or attrs class's field.
        return node[step]
    except (AttributeError, IndexError, KeyError, TypeError):
        # A container dm-tree knows and this walk does not: its own keys.
        return _UNKNOWN


def unflatten_dict(flat: Dict[str, Any], sep: str = "/") -> Dict[str, Any]:
    """Rebuilds the nest that :func:`flatten_dict` flattened.

    Args:
        flat: A flat dict whose keys are ``sep``-joined paths.
        sep: The separator between the key segments.

    Returns:
        The nested dict (levels in the order their keys first appear), where
        each level this function created whose keys are exactly ``"#0"`` ...
        ``"#<n-1>"`` is a tuple.
    """
    nested = {}
    created = []  # (parent, key, level) for each level made here, outer first.
    for compound_key, value in flat.items():
        keys = compound_key.split(sep)
        current = nested
        for key in keys[:-1]:
            if key not in current:
                current[key] = {}
                created.append((current, key, current[key]))
            current = current[key]
        current[keys[-1]] = value
    # Inner levels first, so a tuple is built from finished items.
    for parent, key, level in reversed(created):
        if parent[key] is level and _is_positions(level):
            parent[key] = tuple(level[f"{_SEQ_MARK}{i}"] for i in range(len(level)))
    return nested


def _is_positions(level: dict) -> bool:
    """Whether the keys of ``level`` are exactly ``"#0"`` ... ``"#<n-1>"``."""
    return bool(level) and all(f"{_SEQ_MARK}{i}" in level for i in range(len(level)))


#: Upstream names in ``ray.rllib.utils`` that this module replaces.
REPLACES = {
    "flatten_dict": flatten_dict,
    "unflatten_dict": unflatten_dict,
}
