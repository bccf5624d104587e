"""The fork's changes to ``ray.rllib.utils``: structure-preserving batch flattening.

``OfflinePreLearner`` flattens its nested per-module batch into one level of
``"/"``-joined keys for Ray Data, and the Learner side (``Learner``,
``DifferentiableLearner``, ``OfflineData``, offline evaluation runners)
rebuilds the nest with ``unflatten_dict``. Upstream writes a tuple position as
its plain index, so ``obs=(a, b)`` comes back as ``{"0": a, "1": b}`` and a
model that takes a Tuple observation gets a dict.

Here a tuple (or list) position is written as ``"#<index>"`` and comes back as
a tuple; a dict key that itself starts with ``"#"`` is escaped by one more
``"#"``. Keys of plain dicts of arrays flatten exactly as upstream's do.

This module must not import ``ray.rllib`` at module level: it may be imported
while ``ray.rllib.utils`` is still loading.
"""

from collections.abc import Mapping
from typing import Any, Dict

#: Marks a tuple position in a flattened key, e.g. ``"default_policy/obs/#0"``.
_SEQ_MARK = "#"


def flatten_dict(nested: Dict[str, Any], sep: str = "/", env_steps: int = 0):
    """Flattens a nest of dicts and tuples into one dict with joined keys.

    Args:
        nested: A nest of mappings, tuples and lists with array leaves.
        sep: The separator between the key segments.
        env_steps: Unused; kept for upstream's signature.

    Returns:
        A flat dict from joined key paths to leaves. Tuple and list positions
        become ``"#<index>"`` segments, so :func:`unflatten_dict` can rebuild
        tuples.

    Raises:
        ValueError: If a dict key contains ``sep``.
    """
    flat = {}
    stack = [((), nested)]
    while stack:
        path, node = stack.pop()
        if isinstance(node, Mapping):
            for key, value in node.items():
                stack.append((path + (_escape_key(key, sep),), value))
        elif isinstance(node, (tuple, list)):
            for index, value in enumerate(node):
                stack.append((path + (f"{_SEQ_MARK}{index}",), value))
        else:
            flat[sep.join(path)] = node
    return flat


def unflatten_dict(flat: Dict[str, Any], sep: str = "/") -> Dict[str, Any]:
    """Rebuilds the nest that :func:`flatten_dict` flattened.

    Args:
        flat: A flat dict whose keys are ``sep``-joined paths.
        sep: The separator between the key segments.

    Returns:
        The nested dict, with tuples where ``"#<index>"`` segments were.

    Raises:
        ValueError: If the tuple positions under one key are not ``0..n-1``, or
            one path mixes tuple positions and dict keys at the same level.
    """
    root = {}
    for compound_key, value in flat.items():
        *parents, last = compound_key.split(sep)
        node = root
        for segment in parents:
            node = node.setdefault(_SegmentKey.parse(segment), {})
        node[_SegmentKey.parse(last)] = value
    return _materialize(root, compound_path="")


class _SegmentKey(tuple):
    """A parsed key segment: ``(is_position, key_or_index)``."""

    @classmethod
    def parse(cls, segment: str) -> "_SegmentKey":
        if segment.startswith(_SEQ_MARK + _SEQ_MARK):
            return cls((False, segment[1:]))
        if segment.startswith(_SEQ_MARK) and segment[1:].isdigit():
            return cls((True, int(segment[1:])))
        return cls((False, segment))


def _materialize(node: Any, compound_path: str) -> Any:
    if not isinstance(node, dict):
        return node
    positions = [k for k in node if k[0]]
    if not positions:
        return {
            k[1]: _materialize(v, f"{compound_path}/{k[1]}") for k, v in node.items()
        }
    indices = sorted(k[1] for k in positions)
    if len(positions) != len(node) or indices != list(range(len(indices))):
        raise ValueError(
            f"Cannot rebuild a tuple under `{compound_path or '/'}`: its keys "
            f"{sorted(_unparse(k) for k in node)} must be exactly "
            f"'{_SEQ_MARK}0'..'{_SEQ_MARK}{len(node) - 1}'. The flat batch was "
            "not produced by `flatten_dict`, or columns were dropped from it."
        )
    return tuple(
        _materialize(node[_SegmentKey((True, i))], f"{compound_path}/#{i}")
        for i in indices
    )


def _unparse(key: "_SegmentKey") -> str:
    return f"{_SEQ_MARK}{key[1]}" if key[0] else str(key[1])


def _escape_key(key: Any, sep: str) -> str:
    key = str(key)
    if sep in key:
        raise ValueError(
            f"Cannot flatten a batch with the dict key {key!r}: it contains the "
            f"separator {sep!r}. Rename the key (e.g. in your connector or "
            "observation space)."
        )
    return _SEQ_MARK + key if key.startswith(_SEQ_MARK) else key


#: Upstream names in ``ray.rllib.utils`` that this module replaces.
REPLACES = {
    "flatten_dict": flatten_dict,
    "unflatten_dict": unflatten_dict,
}
