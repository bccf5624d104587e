"""The doubly robust estimator on a fitted Q-function (per-decision form).

For one trajectory, with `rho_{0:t}` the cumulative importance ratio
(`rho_{0:-1} = 1`), `Q` and `V` from FQE:

    DR = sum_t gamma^t [rho_{0:t} (r_t - Q(s_t, a_t)) + rho_{0:t-1} V(s_t)]

It is unbiased when either the ratios or the Q-function are right, and
needs the target policy's probabilities of the logged actions (like IS).
The estimate is the mean of the per-trajectory values.
"""

import numpy as np


def doubly_robust_values(
    rewards: np.ndarray,
    mask: np.ndarray,
    log_weights: np.ndarray,
    q_logged: np.ndarray,
    state_values: np.ndarray,
    gamma: float,
) -> np.ndarray:
    """Each trajectory's doubly robust value, `(E,)`.

    Args:
        rewards: `(E, T)`, zero past each trajectory's end.
        mask: `(E, T)` bool, True on recorded steps.
        log_weights: `(E, T)` cumulative log ratios `log rho_{0:t}`.
        q_logged: `(E, T)` `Q(s_t, a_t)` of the logged actions.
        state_values: `(E, T)` `V(s_t)` under the target policy.
        gamma: The discount.
    """
    discounts = gamma ** np.arange(rewards.shape[1], dtype=np.float64)
    with np.errstate(over="ignore"):
        weights = np.exp(log_weights)
    previous = np.concatenate([np.ones_like(weights[:, :1]), weights[:, :-1]], axis=1)
    terms = weights * (rewards - q_logged) + previous * state_values
    return np.where(mask, terms, 0.0) @ discounts
