"""The fork's changes to ``ray.rllib.env.utils.infinite_lookback_buffer``.

- ``InfiniteLookbackBuffer.from_state``: rebuilds the tuples of a Tuple space
  from the buffer's recorded space. Serializers such as msgpack (the format
  ``input_read_episodes=True`` reads) store tuples as arrays and give lists
  back, so a decoded episode with Tuple observations held lists; batching then
  stacked them into one array and the model never saw the tuple.
"""

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Dict, Optional

import gymnasium as gym
from ray.rllib.utils.serialization import gym_space_from_dict

if TYPE_CHECKING:
    from ray.rllib.env.utils.infinite_lookback_buffer import InfiniteLookbackBuffer


def _from_state(state: Dict[str, Any]) -> "InfiniteLookbackBuffer":
    """Creates an ``InfiniteLookbackBuffer`` from a state dict.

    Args:
        state: The state, as returned by ``InfiniteLookbackBuffer.get_state``
            and possibly passed through a serializer that turns tuples into
            lists.

    Returns:
        A new buffer. When the state records a space, the data has the
        space's structure again: tuples where the space has a Tuple.
    """
    # Imported here: this module is loaded by the upstream module's import hook.
    from ray.rllib.env.utils.infinite_lookback_buffer import InfiniteLookbackBuffer

    buffer = InfiniteLookbackBuffer()
    buffer.lookback = state["lookback"]
    buffer.finalized = state["finalized"]
    buffer.space = gym_space_from_dict(state["space"]) if state["space"] else None
    buffer.data = restore_buffer_data(state["data"], buffer.finalized, buffer.space)
    return buffer


def restore_buffer_data(data: Any, finalized: bool, space: Optional[gym.Space]) -> Any:
    """A buffer's data with the tuples of ``space`` restored.

    Args:
        data: The buffer's data: one batched structure if ``finalized``, else
            a list of per-step items.
        finalized: Whether the buffer was finalized (numpy-ized).
        space: The space of one item; None (or a space without a Tuple or
            Dict) leaves ``data`` as it is.
    """
    if not isinstance(space, (gym.spaces.Tuple, gym.spaces.Dict)):
        return data  # No Tuple inside: nothing msgpack could have changed.
    if finalized:
        return restore_space_structure(data, space)
    if isinstance(data, list):
        return [restore_space_structure(item, space) for item in data]
    return data


def restore_space_structure(data: Any, space: gym.Space) -> Any:
    """Turns the lists in ``data`` back into tuples where ``space`` has a Tuple.

    Works the same for one item and for a batch of items (a batched Tuple is a
    tuple of batched components).

    Args:
        data: A nest of dicts, lists/tuples and leaves.
        space: The space ``data`` (or each row of it) belongs to.

    Returns:
        ``data`` with tuples in place of lists at the space's Tuple nodes;
        anything that does not line up with the space is returned unchanged.
    """
    if isinstance(space, gym.spaces.Tuple):
        if isinstance(data, (list, tuple)) and len(data) == len(space.spaces):
            return tuple(
                restore_space_structure(d, s) for d, s in zip(data, space.spaces)
            )
        return data
    if isinstance(space, gym.spaces.Dict) and isinstance(data, Mapping):
        return {
            key: (
                restore_space_structure(value, space.spaces[key])
                if key in space.spaces
                else value
            )
            for key, value in data.items()
        }
    return data


#: Upstream names in ``ray.rllib.env.utils.infinite_lookback_buffer`` that this
#: module replaces.
REPLACES = {
    "InfiniteLookbackBuffer.from_state": staticmethod(_from_state),
}
