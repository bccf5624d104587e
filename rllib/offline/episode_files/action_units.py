"""The units of recorded actions, and their mapping to the units a module acts in.

With `normalize_actions=True` (RLlib's default) a module acts in [-1, 1] on
each bounded float `Box` action, and the EnvRunner scales its actions to the
action space before the env sees them. RLlib's recorder stores the module's
actions, so its files hold normalized actions. Logs of a controller, a robot or
a simulator hold the environment's units (a Pendulum torque in [-2, 2]).

`EpisodeWriter` records which in the file metadata under `action_units`:
`"env"` (the default for data users write) or `"normalized"` (the recorder with
`normalize_actions=True`). Training maps recorded actions to the units its
module acts in (`ActionRescaling`); for files that record nothing,
`config.offline_data(input_action_units=...)` states the units.

Bounded integer `Box` leaves follow RLlib's EnvRunner too: the module acts
in `[0, high - low]`, the env in `[low, high]`. Discrete and unbounded leaves
are never changed.
"""

from dataclasses import dataclass
from typing import Any, Optional

import gymnasium as gym
import numpy as np
import tree
from ray.rllib.utils.spaces.space_utils import get_base_struct_from_space

#: Actions in the environment's own units (what `env.step()` takes).
ENV_UNITS = "env"
#: Actions as a module with `normalize_actions=True` outputs them.
NORMALIZED = "normalized"
ACTION_UNITS = (ENV_UNITS, NORMALIZED)
#: The file metadata key.
ACTION_UNITS_KEY = "action_units"


def check_action_units(units: Optional[str], argument: str) -> Optional[str]:
    """Returns `units` if it is None or one of `ACTION_UNITS`.

    Raises:
        ValueError: Naming `argument`, if it is anything else.
    """
    if units is None or units in ACTION_UNITS:
        return units
    raise ValueError(
        f"`{argument}` must be {ENV_UNITS!r} (actions in the environment's units, "
        f"as `env.step()` takes them), {NORMALIZED!r} (in [-1, 1], as RLlib's "
        f"recorder stores them with `normalize_actions=True`) or None, got "
        f"{units!r}."
    )


def module_action_units(normalize_actions: bool) -> str:
    """The units a module acts in under `config.normalize_actions`."""
    return NORMALIZED if normalize_actions else ENV_UNITS


def is_rescaled(space: gym.Space) -> bool:
    """Whether the EnvRunner rescales this (leaf) space's normalized actions."""
    if not isinstance(space, gym.spaces.Box):
        return False
    if not (np.all(space.bounded_below) and np.all(space.bounded_above)):
        return False
    return np.issubdtype(space.dtype, np.floating) or np.issubdtype(
        space.dtype, np.integer
    )


def has_rescaled_leaves(space: Optional[gym.Space]) -> bool:
    """Whether any leaf of `space` has units that `ActionRescaling` changes."""
    if space is None:
        return False
    return any(
        is_rescaled(leaf) for leaf in tree.flatten(get_base_struct_from_space(space))
    )


def _normalize_leaf(actions: Any, space: gym.Space) -> Any:
    if not is_rescaled(space):
        return actions
    actions = np.asarray(actions)
    if np.issubdtype(space.dtype, np.integer):
        return (actions - space.low).astype(actions.dtype, copy=False)
    scaled = (actions - space.low) * 2.0 / (space.high - space.low) - 1.0
    return np.clip(scaled, -1.0, 1.0).astype(actions.dtype, copy=False)


def _unsquash_leaf(actions: Any, space: gym.Space) -> Any:
    if not is_rescaled(space):
        return actions
    actions = np.asarray(actions)
    if np.issubdtype(space.dtype, np.integer):
        return (actions + space.low).astype(actions.dtype, copy=False)
    scaled = space.low + (actions + 1.0) * (space.high - space.low) / 2.0
    return np.clip(scaled, space.low, space.high).astype(actions.dtype, copy=False)


@dataclass(frozen=True)
class ActionRescaling:
    """Maps recorded actions from `source` units to `target` units.

    Env units to normalized clips to [-1, 1], as the environment clips what
    it gets to its action space; normalized to env units clips to the space,
    as RLlib's EnvRunner does.

    Attributes:
        source: The units the recorded actions are in (`ACTION_UNITS`).
        target: The units the module acts in.
    """

    source: str
    target: str

    def __call__(self, actions: Any, space: Optional[gym.Space]) -> Any:
        """Rescales a nest of action rows (or one action) of `space`.

        Raises:
            ValueError: If `space` is None while the actions need rescaling.
        """
        if self.source == self.target or actions is None:
            return actions
        if space is None:
            raise ValueError(
                f"Cannot map actions from {self.source!r} to {self.target!r} "
                "units without the action space. Set `config.environment("
                "action_space=...)` or record it with `EpisodeWriter(action_space="
                "...)`."
            )
        leaf = _normalize_leaf if self.target == NORMALIZED else _unsquash_leaf
        return tree.map_structure(leaf, actions, get_base_struct_from_space(space))

    def inverse(self) -> "ActionRescaling":
        """The mapping back, from `target` to `source` units."""
        return ActionRescaling(self.target, self.source)

    def log_jacobian(self, space: Optional[gym.Space]) -> float:
        """`log |d target / d source|` summed over the float `Box` dimensions
        (a constant: the maps are affine inside the box). Adding it to a
        log-density in `target` units gives the log-density in `source`
        units."""
        if self.source == self.target or space is None:
            return 0.0
        total = 0.0
        for leaf in tree.flatten(get_base_struct_from_space(space)):
            if not is_rescaled(leaf) or not np.issubdtype(leaf.dtype, np.floating):
                continue
            width = np.asarray(leaf.high, np.float64) - np.asarray(leaf.low, np.float64)
            scale = 2.0 / width if self.target == NORMALIZED else width / 2.0
            total += float(np.sum(np.log(np.broadcast_to(scale, leaf.shape))))
        return total

    def apply_to_episode(self, episode: Any, space: Optional[gym.Space]) -> None:
        """Rescales a `SingleAgentEpisode`'s actions in place (its lookback
        included), whether its buffers hold arrays or per-step lists."""
        buffer = episode.actions
        space = space or episode.action_space
        if buffer.finalized:
            buffer.data = self(buffer.data, space)
        else:
            buffer.data = [self(action, space) for action in buffer.data]


def action_rescaling(
    data_units: Optional[str],
    *,
    normalize_actions: bool,
    action_space: Optional[Any],
) -> Optional[ActionRescaling]:
    """The mapping training applies to recorded actions, None for none.

    Args:
        data_units: The units the data is in; None if nobody knows (then
            the actions are taken as they are, as ray 2.60 takes them).
        normalize_actions: The training config's `normalize_actions`.
        action_space: The action space (a dict by agent id for multi-agent
            data); without a `Box` leaf nothing is mapped.
    """
    target = module_action_units(normalize_actions)
    if data_units is None or data_units == target:
        return None
    spaces = action_space.values() if isinstance(action_space, dict) else [action_space]
    if not any(has_rescaled_leaves(space) for space in spaces):
        return None
    return ActionRescaling(data_units, target)


def actions_outside_normalized_range(
    actions: Any, space: Optional[gym.Space], tolerance: float = 1e-3
) -> Optional[float]:
    """The largest absolute action value beyond [-1, 1] on a rescaled float
    leaf whose bounds are not [-1, 1], or None if there is none.

    Used for files that record no units: env-unit actions read as normalized
    ones show up here (for example a Pendulum torque of 1.8).
    """
    if space is None or actions is None:
        return None
    worst = None
    for rows, leaf in zip(
        tree.flatten(actions), tree.flatten(get_base_struct_from_space(space))
    ):
        if not is_rescaled(leaf) or not np.issubdtype(leaf.dtype, np.floating):
            continue
        if np.allclose(leaf.low, -1.0) and np.allclose(leaf.high, 1.0):
            continue
        rows = np.asarray(rows, dtype=np.float64)
        if rows.size == 0:
            continue
        largest = float(np.max(np.abs(rows)))
        if largest > 1.0 + tolerance and (worst is None or largest > worst):
            worst = largest
    return worst


def input_action_units(
    recorded: Optional[str], configured: Optional[str], input_: Any
) -> Optional[str]:
    """The units of the input's actions: recorded in its files, else as
    `config.offline_data(input_action_units=...)` states, else None.

    Raises:
        ValueError: If the files record other units than the config states.
    """
    configured = check_action_units(configured, "input_action_units")
    if recorded is not None and configured is not None and recorded != configured:
        raise ValueError(
            f"`config.offline_data(input_action_units={configured!r})` "
            f"contradicts the episode files under `{input_}`, which record "
            f"{recorded!r} action units (`EpisodeWriter(action_units=...)`). "
            "Unset `input_action_units` to follow the files, or re-write the "
            "files with the units their actions are in."
        )
    return recorded if recorded is not None else configured
