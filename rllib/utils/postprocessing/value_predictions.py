"""Vectorized GAE value targets for numpy arrays and torch tensors.

Upstream's ``compute_value_targets`` walks the batch one timestep at a time in
Python. This version has the same signature and semantics, with no
per-timestep loop:

- ``terminateds[t]`` gates the bootstrap: no ``V(s_{t+1})`` after a terminal.
- ``truncateds[t]`` keeps the bootstrap but stops the backward propagation.

The GAE recursion ``A_t = delta_t + c_t * A_{t+1}`` has ``c_t = gamma * lambda_``
inside a segment and ``c_t = 0`` at a segment end. We first compute the
unsegmented discounted sum ``F_t = delta_t + c * F_{t+1}`` with a constant
``c`` (a C loop in numpy via ``scipy.signal.lfilter``, a blocked matmul scan in
torch), then remove what leaked in from beyond each segment end ``e_t``:
``A_t = F_t - c ** (e_t - t + 1) * F_{e_t + 1}``. Every power is at most 1, so
nothing overflows; the sums run in float64 to keep the subtraction exact
enough for long segments with ``c`` close to 1.
"""

import numpy as np
from ray.util.annotations import DeveloperAPI

# Block size of the torch scan: one (n / B, B) @ (B, B) matmul per level.
_SCAN_BLOCK = 64


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
        float32 value targets of shape ``(T,)``: a numpy array for numpy
        inputs, a tensor on the inputs' device for torch inputs.
    """
    if _is_torch_tensor(values):
        return _value_targets_torch(
            values, rewards, terminateds, truncateds, gamma, lambda_
        )
    return _value_targets_numpy(
        np.asarray(values),
        np.asarray(rewards),
        np.asarray(terminateds),
        np.asarray(truncateds),
        gamma,
        lambda_,
    )


def _is_torch_tensor(x) -> bool:
    torch = _torch_if_loaded()
    return torch is not None and isinstance(x, torch.Tensor)


def _torch_if_loaded():
    import sys

    return sys.modules.get("torch")


def _value_targets_numpy(values, rewards, terminateds, truncateds, gamma, lambda_):
    n = rewards.shape[0]
    if n == 0:
        return np.zeros(0, dtype=np.float32)
    values = values.astype(np.float64, copy=False)
    non_terminal = 1.0 - terminateds.astype(np.float64, copy=False)
    propagate = non_terminal * (1.0 - truncateds.astype(np.float64, copy=False))

    next_values = np.empty(n, dtype=np.float64)
    next_values[:-1] = values[1:]
    next_values[-1] = 0.0
    deltas = rewards + gamma * non_terminal * next_values - values

    c = float(gamma) * float(lambda_)
    discounted = _discounted_reverse_sum_numpy(deltas, c)
    advantages = _cut_at_segment_ends(discounted, propagate == 0.0, c, np)
    return (advantages + values).astype(np.float32)


def _discounted_reverse_sum_numpy(x, c):
    """``y_t = x_t + c * y_{t+1}`` over the whole array."""
    from scipy.signal import lfilter

    return lfilter([1.0], [1.0, -c], x[::-1])[::-1]


def _cut_at_segment_ends(discounted, is_end, c, xp):
    """Turns an unsegmented discounted sum into per-segment sums.

    ``is_end[t]`` marks the last step of a segment; the array's last step
    always ends one.
    """
    n = discounted.shape[0]
    if xp is np:
        index = np.arange(n)
        candidates = np.where(is_end, index, n - 1)
        segment_end = np.minimum.accumulate(candidates[::-1])[::-1]
        steps_to_end = (segment_end - index + 1).astype(discounted.dtype)
        padded = np.append(discounted, 0.0)
    else:
        index = xp.arange(n, device=discounted.device)
        candidates = xp.where(is_end, index, xp.full_like(index, n - 1))
        segment_end = xp.flip(xp.cummin(xp.flip(candidates, (0,)), 0).values, (0,))
        steps_to_end = (segment_end - index + 1).to(discounted.dtype)
        padded = xp.cat([discounted, discounted.new_zeros(1)])
    leak = c**steps_to_end * padded[segment_end + 1]
    return discounted - leak


def _value_targets_torch(values, rewards, terminateds, truncateds, gamma, lambda_):
    import torch

    n = rewards.shape[0]
    if n == 0:
        return values.new_zeros(0, dtype=torch.float32)
    values64 = values.to(torch.float64)
    non_terminal = 1.0 - terminateds.to(torch.float64)
    propagate = non_terminal * (1.0 - truncateds.to(torch.float64))

    next_values = torch.cat([values64[1:], values64.new_zeros(1)])
    deltas = rewards.to(torch.float64) + gamma * non_terminal * next_values - values64

    c = float(gamma) * float(lambda_)
    discounted = torch.flip(_discounted_scan_torch(torch.flip(deltas, (0,)), c), (0,))
    advantages = _cut_at_segment_ends(discounted, propagate == 0.0, c, torch)
    return (advantages + values64).to(torch.float32)


def _discounted_scan_torch(x, c):
    """``y_i = x_i + c * y_{i-1}`` (forward), blocked so no power exceeds 1.

    Each level multiplies ``(n / B, B)`` blocks by the ``(B, B)`` matrix of
    powers ``c ** (i - j)``; the per-block totals form a scan with coefficient
    ``c ** B`` that recurses on ``n / B`` elements.
    """
    import torch

    n = x.shape[0]
    block = _SCAN_BLOCK
    num_blocks = -(-n // block)
    padded = torch.nn.functional.pad(x, (0, num_blocks * block - n))
    exponents = torch.arange(block, device=x.device, dtype=x.dtype)
    powers = c**exponents
    # transfer[j, i] = c ** (i - j) for j <= i, else 0.
    lag = exponents[None, :] - exponents[:, None]
    transfer = torch.where(lag >= 0, c ** lag.clamp(min=0), torch.zeros_like(lag))
    within = padded.view(num_blocks, block) @ transfer
    if num_blocks > 1:
        block_ends = _discounted_scan_torch(within[:, -1].contiguous(), c**block)
        carry = torch.cat([block_ends.new_zeros(1), block_ends[:-1]])
        within = within + carry[:, None] * (c * powers)[None, :]
    return within.reshape(-1)[:n]


#: Upstream names in ``ray.rllib.utils.postprocessing.value_predictions`` that
#: this module replaces.
REPLACES = {
    "compute_value_targets": compute_value_targets,
}
