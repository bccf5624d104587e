"""Importance-sampling estimators of a policy's discounted return.

All four work on one module's padded `Trajectories` and per-step log ratios
`log pi(a_t|s_t) - log mu(a_t|s_t)` of the logged actions:

- ``is``: per-episode IS, mean over episodes of `rho_{0:T-1} * G`, where
  `G = sum_t gamma^t r_t` and `rho_{0:t}` the product of the ratios up to t.
- ``wis``: its weighted (self-normalized) form, `sum_i w_i G_i / sum_i w_i`.
- ``pdis``: per-decision IS, `sum_t gamma^t mean_i(rho_{i,0:t} r_{i,t})`;
  each reward is weighted by the ratios of the decisions before it only.
- ``wpdis``: per-decision weighted IS; step t normalizes by `sum_i rho_{i,0:t}`.

Products are taken as sums of logs. An episode that ended before step t is
treated as sitting in an absorbing state with reward 0 and ratio 1 (its
cumulative ratio stays where it ended), the usual convention for episodes of
different lengths. The weighted forms normalize in log space (softmax over
episodes), so they never overflow; the unweighted forms can, on long episodes
with large ratios, and report `inf` then. `max_weight` clips every cumulative
ratio at that value (a biased, lower-variance estimate; off by default).
"""

from typing import Dict, Optional

import numpy as np
from scipy.special import logsumexp

IMPORTANCE_SAMPLING_ESTIMATORS = ("is", "wis", "pdis", "wpdis")


def cumulative_log_weights(
    log_ratios: np.ndarray, mask: np.ndarray, max_weight: Optional[float] = None
) -> np.ndarray:
    """`log rho_{0:t}` for every step, `(E, T)`; padding keeps the last value.

    Args:
        log_ratios: `(E, T)` per-step log ratios (ignored where `mask` is off).
        mask: `(E, T)` bool, True on recorded steps.
        max_weight: If given, clip each cumulative ratio at this value.

    Raises:
        ValueError: If a recorded step has a NaN or `+inf` log ratio (the
            behaviour policy gave its logged action probability 0).
    """
    recorded = np.where(mask, log_ratios, 0.0)
    if np.isnan(recorded).any() or np.isposinf(recorded).any():
        step = np.argwhere(np.isnan(recorded) | np.isposinf(recorded))[0]
        raise ValueError(
            f"Episode {step[0]}, step {step[1]}: the importance ratio is not finite "
            "(the behaviour log-probability of the logged action is -inf or NaN). "
            "Check the recorded `action_logp`, or drop it to fit a behaviour model."
        )
    cumulative = np.cumsum(recorded, axis=1)
    if max_weight is not None:
        cumulative = np.minimum(cumulative, np.log(max_weight))
    return cumulative


def _discounts(horizon: int, gamma: float) -> np.ndarray:
    return gamma ** np.arange(horizon, dtype=np.float64)


def episode_terms(
    rewards: np.ndarray, log_weights: np.ndarray, gamma: float
) -> Dict[str, np.ndarray]:
    """Each episode's term of each estimator, `(E,)`; their means are the
    estimates.

    For the weighted forms the term is `E` times the episode's share of the
    normalized sum, so every estimator is a mean over episodes (bootstrap
    and the runner's per-episode metrics rely on it).

    Args:
        rewards: `(E, T)` rewards, zero past each episode's end.
        log_weights: `(E, T)` cumulative log ratios `log rho_{0:t}`.
        gamma: The discount.
    """
    num_episodes = rewards.shape[0]
    discounts = _discounts(rewards.shape[1], gamma)
    returns = rewards @ discounts
    # Unclipped products can overflow to inf; the estimate is then inf.
    with np.errstate(over="ignore", invalid="ignore"):
        weights = np.exp(log_weights)
        terms = {
            "is": weights[:, -1] * returns,
            "pdis": (weights * rewards) @ discounts,
        }
        # Self-normalized over episodes, per step; a step where every weight
        # is 0 gives NaN.
        shares = np.exp(log_weights - logsumexp(log_weights, axis=0))
    terms["wis"] = num_episodes * shares[:, -1] * returns
    terms["wpdis"] = num_episodes * (shares * rewards) @ discounts
    return terms


def importance_sampling_estimates(
    rewards: np.ndarray,
    mask: np.ndarray,
    log_ratios: np.ndarray,
    gamma: float,
    max_weight: Optional[float] = None,
) -> Dict[str, float]:
    """The ``is``, ``wis``, ``pdis`` and ``wpdis`` estimates.

    Args:
        rewards: `(E, T)` rewards, zero past each episode's end.
        mask: `(E, T)` bool, True on recorded steps.
        log_ratios: `(E, T)` per-step log importance ratios.
        gamma: The discount.
        max_weight: Optional clip of the cumulative ratios.

    Returns:
        A dict from estimator name to the estimated discounted return.
    """
    log_weights = cumulative_log_weights(log_ratios, mask, max_weight)
    terms = episode_terms(rewards, log_weights, gamma)
    return {name: float(values.mean()) for name, values in terms.items()}


def effective_sample_size(log_weights: np.ndarray) -> float:
    """Kish's effective number of episodes for final weights `(E,)`."""
    if np.all(np.isneginf(log_weights)):
        return 0.0
    return float(np.exp(2 * logsumexp(log_weights) - logsumexp(2 * log_weights)))
