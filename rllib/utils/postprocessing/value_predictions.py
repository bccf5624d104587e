"""GAE value targets without a per-timestep Python loop, bit-identical to upstream.

Upstream's ``compute_value_targets`` runs the GAE recursion
``A_t = delta_t + (gamma * lambda_ * propagate_t) * A_{t+1}`` one timestep at a
time in Python, in float64. ``propagate_t`` is 0 at a segment end (terminated
or truncated step), so the recursion restarts there; inside a segment the
coefficient is the constant ``k = gamma * lambda_``. This version runs each
segment's recursion as a first-order IIR filter (``scipy.signal.lfilter`` with
``a = [1, -k]``) over the reversed deltas, which evaluates ``delta + k * y``
per step in float64, the same operations in the same order as upstream's
loop, so the results are the same bits. Segments are grouped by length (each
group padded to at most twice its shortest segment) and each group is filtered
row-wise in one C call.

The TD residuals and the float32 rounding of the result use upstream's
expressions, so dtype promotion matches for any numpy input. Flags other
than 0/1 (a coefficient that varies inside a segment) take a plain loop.
"""

import numpy as np
from ray.util.annotations import DeveloperAPI


@DeveloperAPI
def compute_value_targets(
    values,
    rewards,
    terminateds,
    truncateds,
    gamma: float,
    lambda_: float,
):
    """Computes GAE value targets (``advantages + values``) for a flat batch.

    Args:
        values: Value predictions ``V(s_t)``, shape ``(T,)``. ``values[t + 1]``
            is the bootstrap of step ``t`` unless ``t`` is terminated.
        rewards: Rewards ``r_t``, shape ``(T,)``.
        terminateds: 1 (or True) where step ``t`` ends the episode for good.
        truncateds: 1 (or True) where step ``t`` ends a chunk of an episode
            that goes on (its ``V(s_{t+1})`` stays a valid bootstrap).
        gamma: The discount factor.
        lambda_: The GAE lambda.

    Returns:
        float32 numpy value targets of shape ``(T,)``, equal bit for bit to
        those of the step-by-step recursion (up to the sign of zero).
        Advantages are these targets minus ``values``. The recursion never
        crosses a terminated or truncated step, so no advantage flows from
        one episode (or chunk) into the one before it.
    """
    values = np.asarray(values)
    rewards = np.asarray(rewards)
    terminateds = np.asarray(terminateds)
    truncateds = np.asarray(truncateds)

    # TD residuals and recursion coefficients, in the step-by-step loop's dtypes.
    non_terminal = 1.0 - terminateds
    coefficients = gamma * lambda_ * (non_terminal * (1.0 - truncateds))
    next_values = np.append(values[1:], 0.0)
    deltas = rewards + gamma * non_terminal * next_values - values

    advantages = np.zeros_like(rewards, dtype=np.float32)
    if deltas.shape[0]:
        advantages[:] = _backward_discounted_sums(deltas, coefficients)
    return (advantages + values).astype(np.float32)


def _backward_discounted_sums(deltas, coefficients):
    """``y_t = deltas_t + coefficients_t * y_{t+1}``, ``y_T = 0``, in float64."""
    inside = coefficients[:-1] != 0
    constant = np.unique(coefficients[:-1][inside])
    if deltas.dtype != np.float64 or constant.size > 1:
        return _backward_loop(deltas, coefficients)
    # A segment ends where the coefficient is 0, and at the batch's last step.
    ends = np.flatnonzero(np.append(~inside, True))
    if constant.size == 0:
        return deltas.copy()
    return _filter_segments(deltas, ends, float(constant[0]))


def _filter_segments(deltas, ends, k):
    """Runs ``y = delta + k * y_next`` within each segment ending at ``ends``."""
    from scipy.signal import lfilter

    lengths = np.diff(ends, prepend=-1)
    out = np.empty_like(deltas)
    # Length classes [2^j, 2^(j+1)): padding at most doubles a group's cells.
    length_class = np.floor(np.log2(lengths)).astype(np.int64)
    for cls in np.unique(length_class):
        members = np.flatnonzero(length_class == cls)
        seg_ends, seg_lens = ends[members], lengths[members]
        width = int(seg_lens.max())
        rows = np.repeat(np.arange(members.size), seg_lens)
        # Column j of a row holds the step j before the segment's end.
        offsets = np.cumsum(seg_lens) - seg_lens
        cols = np.arange(rows.size) - np.repeat(offsets, seg_lens)
        steps = np.repeat(seg_ends, seg_lens) - cols
        grid = np.zeros((members.size, width))
        grid[rows, cols] = deltas[steps]
        # Trailing zero padding comes after each row's data: it cannot leak in.
        out[steps] = lfilter([1.0], [1.0, -k], grid, axis=1)[rows, cols]
    return out


def _backward_loop(deltas, coefficients):
    """The recursion one step at a time (coefficients that vary per step)."""
    out = np.empty_like(deltas)
    carry = 0.0
    for t in range(deltas.shape[0] - 1, -1, -1):
        carry = deltas[t] + coefficients[t] * carry
        out[t] = carry
    return out


#: Upstream names in ``ray.rllib.utils.postprocessing.value_predictions`` that
#: this module replaces.
REPLACES = {
    "compute_value_targets": compute_value_targets,
}
