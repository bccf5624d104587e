"""Observation and action spaces as JSON, for the episode files' metadata.

`EpisodeWriter` stores the spaces it was given in the parquet schema
metadata; `read_spaces` rebuilds them. Box, Discrete, MultiDiscrete,
MultiBinary, Dict and Tuple are encoded recursively (Dict as an object of
sub-spaces, Tuple as a list), with non-finite Box bounds written as strings so
the result stays plain JSON.
"""

from typing import Any, Dict, Tuple

import gymnasium as gym
import numpy as np
import tree
from ray.util.annotations import PublicAPI


def _json_number(value: Any) -> Any:
    """A JSON-safe scalar: non-finite floats become the strings 'inf', 'nan'."""
    if isinstance(value, float) and not np.isfinite(value):
        return "nan" if np.isnan(value) else ("inf" if value > 0 else "-inf")
    return value


def _encode_bound(bound: np.ndarray) -> Any:
    """Encodes a Box bound as one scalar when uniform, else as nested lists."""
    bound = np.asarray(bound)
    if bound.dtype.kind == "f":
        bound = bound.astype(np.float64)
    flat = bound.reshape(-1)
    if flat.size and (
        np.all(flat == flat[0]) or (bound.dtype.kind == "f" and np.all(np.isnan(flat)))
    ):
        return _json_number(flat[0].item())
    return tree.map_structure(_json_number, bound.tolist())


def _decode_bound(value: Any, dtype: np.dtype, shape: Tuple[int, ...]) -> np.ndarray:
    if np.dtype(dtype).kind == "f":
        as_float = np.frompyfunc(float, 1, 1)
        array = np.asarray(as_float(np.array(value, dtype=object)), dtype=np.float64)
    else:
        array = np.array(value)
    return np.broadcast_to(array.astype(dtype), shape).copy()


@PublicAPI(stability="alpha")
def space_to_json(space: gym.Space) -> Dict[str, Any]:
    """Encodes a gymnasium space as a JSON-serializable dict, recursively.

    Args:
        space: A `Box`, `Discrete`, `MultiDiscrete`, `MultiBinary`, or a `Dict`
            or `Tuple` of these (nested to any depth).

    Returns:
        A dict with a `type` key; composite spaces nest their children.

    Raises:
        TypeError: If `space` (or a child of it) is of another type.
    """
    spaces = gym.spaces
    if isinstance(space, spaces.Box):
        return {
            "type": "Box",
            "shape": list(space.shape),
            "dtype": np.dtype(space.dtype).name,
            "low": _encode_bound(space.low),
            "high": _encode_bound(space.high),
        }
    if isinstance(space, spaces.Discrete):
        return {
            "type": "Discrete",
            "n": int(space.n),
            "start": int(space.start),
            "dtype": np.dtype(space.dtype).name,
        }
    if isinstance(space, spaces.MultiDiscrete):
        return {
            "type": "MultiDiscrete",
            "nvec": np.asarray(space.nvec).tolist(),
            "start": np.asarray(space.start).tolist(),
            "dtype": np.dtype(space.dtype).name,
        }
    if isinstance(space, spaces.MultiBinary):
        return {"type": "MultiBinary", "n": np.asarray(space.n).tolist()}
    if isinstance(space, spaces.Dict):
        return {
            "type": "Dict",
            "spaces": {str(k): space_to_json(v) for k, v in space.spaces.items()},
        }
    if isinstance(space, spaces.Tuple):
        return {"type": "Tuple", "spaces": [space_to_json(s) for s in space.spaces]}
    raise TypeError(
        f"Cannot record the space {space!r} (type `{type(space).__name__}`): "
        "supported are Box, Discrete, MultiDiscrete, MultiBinary, and Dict or "
        "Tuple spaces of these. Pass `observation_space=None` / "
        "`action_space=None` to write episodes without a recorded space."
    )


@PublicAPI(stability="alpha")
def space_from_json(spec: Dict[str, Any]) -> gym.Space:
    """Rebuilds a gymnasium space from the output of `space_to_json`.

    Args:
        spec: The dict written by `space_to_json`.

    Returns:
        An equal gymnasium space.

    Raises:
        ValueError: If `spec` names an unknown space type.
    """
    spaces = gym.spaces
    kind = spec.get("type")
    if kind == "Box":
        shape = tuple(spec["shape"])
        dtype = np.dtype(spec["dtype"])
        return spaces.Box(
            low=_decode_bound(spec["low"], dtype, shape),
            high=_decode_bound(spec["high"], dtype, shape),
            shape=shape,
            dtype=dtype,
        )
    if kind == "Discrete":
        return spaces.Discrete(
            spec["n"], start=spec.get("start", 0), dtype=spec.get("dtype", "int64")
        )
    if kind == "MultiDiscrete":
        return spaces.MultiDiscrete(
            np.asarray(spec["nvec"]),
            start=np.asarray(spec["start"]),
            dtype=spec.get("dtype", "int64"),
        )
    if kind == "MultiBinary":
        return spaces.MultiBinary(spec["n"])
    if kind == "Dict":
        return spaces.Dict({k: space_from_json(v) for k, v in spec["spaces"].items()})
    if kind == "Tuple":
        return spaces.Tuple([space_from_json(s) for s in spec["spaces"]])
    raise ValueError(
        f"Unknown space type {kind!r} in recorded episode metadata: {spec!r}. "
        "The file was written by a newer or foreign writer; upgrade rllib-fork."
    )
