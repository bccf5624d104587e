"""The vectorized GAE kernel against a plain reference loop."""

import sys

import numpy as np
import pytest
import torch

from rllib.utils.postprocessing.value_predictions import compute_value_targets
from rllib.utils.tests.devices import DEVICES


def reference_value_targets(values, rewards, terminateds, truncateds, gamma, lambda_):
    """GAE one timestep at a time, written from the definition, in float64."""
    values = np.asarray(values, dtype=np.float64)
    rewards = np.asarray(rewards, dtype=np.float64)
    n = len(rewards)
    advantages = np.zeros(n)
    carry = 0.0
    for t in reversed(range(n)):
        bootstrap = 0.0 if (terminateds[t] or t == n - 1) else values[t + 1]
        delta = rewards[t] + gamma * bootstrap - values[t]
        keeps_going = not (terminateds[t] or truncateds[t])
        carry = delta + (gamma * lambda_ * carry if keeps_going else 0.0)
        advantages[t] = carry
    return (advantages + values).astype(np.float32)


def make_batch(segment_lengths, end_kind, seed):
    """Concatenated segments; each ends terminated, truncated, or mid-episode.

    ``end_kind="mixed"`` cycles through the three kinds; a mid-episode end sets
    no flag (the next segment simply continues the recursion).
    """
    rng = np.random.default_rng(seed)
    n = int(sum(segment_lengths))
    values = rng.normal(size=n).astype(np.float32)
    rewards = rng.normal(size=n).astype(np.float32)
    terminateds = np.zeros(n, dtype=np.float32)
    truncateds = np.zeros(n, dtype=np.float32)
    kinds = ["terminated", "truncated", "mid"]
    end = -1
    for i, length in enumerate(segment_lengths):
        end += length
        kind = kinds[i % 3] if end_kind == "mixed" else end_kind
        if kind == "terminated":
            terminateds[end] = 1.0
        elif kind == "truncated":
            truncateds[end] = 1.0
    return values, rewards, terminateds, truncateds


SEGMENTS = {
    "len1": [1] * 7,
    "len2": [2] * 5,
    "len3": [3] * 4,
    "len100": [100, 100],
    "mixed": [1, 2, 3, 100, 7, 1, 64, 65, 130],
}
GAMMA_LAMBDA = [(0.99, 0.95), (0.0, 0.95), (0.99, 0.0), (1.0, 1.0), (0.0, 0.0)]


@pytest.mark.parametrize("segments", list(SEGMENTS))
@pytest.mark.parametrize("end_kind", ["terminated", "truncated", "mid", "mixed"])
@pytest.mark.parametrize("gamma,lambda_", GAMMA_LAMBDA)
def test_numpy_matches_reference(segments, end_kind, gamma, lambda_):
    batch = make_batch(SEGMENTS[segments], end_kind, seed=len(segments))
    expected = reference_value_targets(*batch, gamma, lambda_)
    got = compute_value_targets(*batch, gamma=gamma, lambda_=lambda_)
    assert isinstance(got, np.ndarray)
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("segments", list(SEGMENTS))
@pytest.mark.parametrize("end_kind", ["terminated", "truncated", "mid", "mixed"])
@pytest.mark.parametrize("gamma,lambda_", GAMMA_LAMBDA)
def test_torch_matches_reference(device, segments, end_kind, gamma, lambda_):
    batch = make_batch(SEGMENTS[segments], end_kind, seed=len(segments))
    expected = reference_value_targets(*batch, gamma, lambda_)
    tensors = [torch.from_numpy(x).to(device) for x in batch]
    got = compute_value_targets(*tensors, gamma=gamma, lambda_=lambda_)
    assert isinstance(got, torch.Tensor)
    assert got.device.type == device
    assert got.dtype == torch.float32
    torch.testing.assert_close(got.cpu(), torch.from_numpy(expected))


def test_parameters_reach_the_kernel():
    batch = make_batch([5, 9], "mixed", seed=3)
    base = compute_value_targets(*batch, gamma=0.9, lambda_=0.8)
    assert not np.allclose(base, compute_value_targets(*batch, 0.5, 0.8))
    assert not np.allclose(base, compute_value_targets(*batch, 0.9, 0.3))
    values, rewards, terminateds, truncateds = batch
    flipped = terminateds.copy()
    flipped[2] = 1.0
    assert not np.allclose(
        base, compute_value_targets(values, rewards, flipped, truncateds, 0.9, 0.8)
    )
    flipped = truncateds.copy()
    flipped[2] = 1.0
    assert not np.allclose(
        base, compute_value_targets(values, rewards, terminateds, flipped, 0.9, 0.8)
    )


def test_long_segment_with_gamma_lambda_one_stays_exact():
    # 200k steps, no segment end: F grows large, the leak subtraction must not
    # lose the per-step targets.
    batch = make_batch([200_000], "truncated", seed=1)
    expected = reference_value_targets(*batch, 1.0, 1.0)
    np.testing.assert_allclose(
        compute_value_targets(*batch, 1.0, 1.0), expected, rtol=1e-5, atol=1e-3
    )
    tensors = [torch.from_numpy(x) for x in batch]
    torch.testing.assert_close(
        compute_value_targets(*tensors, 1.0, 1.0),
        torch.from_numpy(expected),
        rtol=1e-5,
        atol=1e-3,
    )


def test_bool_flags_and_empty_batch():
    values, rewards, terminateds, truncateds = make_batch([4, 6], "mixed", seed=0)
    np.testing.assert_allclose(
        compute_value_targets(
            values, rewards, terminateds.astype(bool), truncateds.astype(bool), 0.9, 0.9
        ),
        reference_value_targets(values, rewards, terminateds, truncateds, 0.9, 0.9),
        rtol=1e-5,
        atol=1e-5,
    )
    empty = np.zeros(0, dtype=np.float32)
    assert compute_value_targets(empty, empty, empty, empty, 0.9, 0.9).shape == (0,)
    empty_t = torch.zeros(0)
    assert compute_value_targets(
        empty_t, empty_t, empty_t, empty_t, 0.9, 0.9
    ).shape == (0,)


if __name__ == "__main__":
    sys.exit(pytest.main(["-v", __file__]))
