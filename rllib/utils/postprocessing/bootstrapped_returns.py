"""What a training row needs for its value target, computed from whole episodes.

Offline, the value target of a step ``t`` is a discounted sum of the recorded
rewards up to a bootstrap step ``b`` plus the discounted value of the
observation there:

    target_t = sum_{k=t}^{b-1} gamma^(k-t) r_k + gamma^(b-t) * V(o_b) * [o_b live]

``b = min(t + horizon, T)`` for an episode of ``T`` steps; ``o_b`` is live
unless the episode terminated at ``b = T``. A row carries the three inputs
that do not depend on the value function (:data:`RETURNS_TO_BOOTSTRAP`,
:data:`BOOTSTRAP_OBS`, :data:`BOOTSTRAP_DISCOUNT`, the liveness folded into
the discount), so the Learner can compute the target with its current module
whatever Ray Data does to the row order: nothing depends on the next row.

With ``horizon=None`` (the default) every step bootstraps at the end of its
episode: Monte-Carlo returns for terminated episodes, as old-stack MARWIL
used, and one bootstrap at the last observation of a truncated one.
"""

from typing import Optional, Tuple

import numpy as np

#: Discounted sum of the recorded rewards from the row's step up to (not
#: including) its bootstrap step.
RETURNS_TO_BOOTSTRAP = "returns_to_bootstrap"
#: The observation at the bootstrap step (same structure as ``obs``).
BOOTSTRAP_OBS = "bootstrap_obs"
#: ``gamma ** (b - t)``, or 0.0 where the episode terminated at ``b``.
BOOTSTRAP_DISCOUNT = "bootstrap_discount"

#: The columns a row needs for its value target.
CONTEXT_COLUMNS = (RETURNS_TO_BOOTSTRAP, BOOTSTRAP_OBS, BOOTSTRAP_DISCOUNT)

#: The deprecated `learner_config_dict` key of `offline_data(value_horizon=...)`:
#: steps to the bootstrap (None: the episode end).
HORIZON_KEY = "offline_value_horizon"


def returns_to_go(rewards: np.ndarray, lengths: np.ndarray, gamma: float) -> np.ndarray:
    """Per-step discounted return to the end of its episode.

    Args:
        rewards: The rewards of consecutive episodes, concatenated.
        lengths: The number of steps of each episode (they sum to
            ``len(rewards)``).
        gamma: The discount factor.

    Returns:
        float64 array of ``len(rewards) + len(lengths)`` entries: each
        episode's ``T`` returns followed by a 0.0 for its end (the return
        from the final observation), so an episode's entries start at
        ``step_start + episode_index``, as its observations do.
    """
    # Imported here: scipy.signal takes about 0.6 s to import, and every
    # Learner process imports this module.
    from scipy.signal import lfilter

    out = np.zeros(len(rewards) + len(lengths), dtype=np.float64)
    start = 0
    for index, length in enumerate(lengths.tolist()):
        if length:
            reversed_rewards = np.asarray(
                rewards[start : start + length], dtype=np.float64
            )[::-1]
            discounted = lfilter([1.0], [1.0, -gamma], reversed_rewards)
            out[start + index : start + index + length] = discounted[::-1]
        start += length
    return out


def value_target_inputs(
    *,
    returns_at_t: np.ndarray,
    returns_at_bootstrap: np.ndarray,
    steps_to_bootstrap: np.ndarray,
    terminal_at_bootstrap: np.ndarray,
    gamma: float,
) -> Tuple[np.ndarray, np.ndarray]:
    """The reward sum and discount a row carries for its value target.

    Args:
        returns_at_t: Return-to-go (from :func:`returns_to_go`) at each row's
            step ``t``.
        returns_at_bootstrap: Return-to-go at each row's bootstrap step ``b``.
        steps_to_bootstrap: ``b - t`` of each row.
        terminal_at_bootstrap: Whether the episode terminated at ``b``.
        gamma: The discount factor.

    Returns:
        float32 ``(returns_to_bootstrap, bootstrap_discount)``.
    """
    discount = np.power(float(gamma), steps_to_bootstrap.astype(np.float64))
    returns = returns_at_t - discount * returns_at_bootstrap
    discount = np.where(terminal_at_bootstrap, 0.0, discount)
    return returns.astype(np.float32), discount.astype(np.float32)


def bootstrap_steps(
    timesteps: np.ndarray, episode_lengths: np.ndarray, horizon: Optional[int]
) -> np.ndarray:
    """The bootstrap step ``b = min(t + horizon, T)`` of each row (int64)."""
    if horizon is None:
        return episode_lengths.astype(np.int64)
    if int(horizon) < 1:
        raise ValueError(
            f"`value_horizon` must be a positive number of steps or None (bootstrap "
            f"at the end of each episode), got {horizon!r}."
        )
    return np.minimum(timesteps + int(horizon), episode_lengths).astype(np.int64)
