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
enough for long segments with ``c`` close to 1. Torch inputs stay on their
device and cause no host sync.
"""

import sys

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
    # Only a loaded torch can have made `x`; never import torch for numpy input.
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(x, torch.Tensor)


def _value_targets_numpy(values, rewards, terminateds, truncateds, gamma, lambda_):
    from scipy.signal import lfilter

    n = rewards.shape[0]
    if n == 0:
        return np.zeros(0, dtype=np.float32)
    values = values.astype(np.float64)
    terminated = terminateds.astype(bool)
    # delta_t = r_t + gamma * V(s_{t+1}) * (1 - terminated_t) - V(s_t); the last
    # step has no next value in the batch (its delta is masked downstream).
    deltas = rewards - values
    deltas[:-1] += gamma * np.where(terminated[:-1], 0.0, values[1:])

    c = float(gamma) * float(lambda_)
    # Unsegmented F_t = delta_t + c * F_{t+1}, one C loop.
    discounted = lfilter([1.0], [1.0, -c], deltas[::-1])[::-1]

    # Segment ends: terminated or truncated steps, and the batch's last step.
    is_end = terminated | truncateds.astype(bool)
    is_end[-1] = True
    ends = np.flatnonzero(is_end)
    lengths = np.diff(ends, prepend=-1)
    after_end = np.append(discounted, 0.0)[ends + 1]
    steps_to_end = np.repeat(ends + 1, lengths) - np.arange(n)
    # c ** k as exp(k * log c): far cheaper than a vector pow; log(0) = -inf
    # gives exp(-inf) = 0 for c == 0.
    with np.errstate(divide="ignore"):
        log_c = np.log(c)
    leak = np.exp(steps_to_end * log_c) * np.repeat(after_end, lengths)
    return (discounted - leak + values).astype(np.float32)


def _cut_at_segment_ends(discounted, is_end, c):
    """Turns an unsegmented discounted sum into per-segment sums (torch).

    ``is_end[t]`` marks the last step of a segment; the batch's last step
    always ends one. Uses a reverse cummin, so no host sync is needed.
    """
    import torch

    n = discounted.shape[0]
    index = torch.arange(n, device=discounted.device)
    candidates = torch.where(is_end, index, torch.full_like(index, n - 1))
    segment_end = torch.flip(torch.cummin(torch.flip(candidates, (0,)), 0).values, (0,))
    steps_to_end = (segment_end - index + 1).to(discounted.dtype)
    padded = torch.cat([discounted, discounted.new_zeros(1)])
    return discounted - c**steps_to_end * padded[segment_end + 1]


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
    advantages = _cut_at_segment_ends(discounted, propagate == 0.0, c)
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
