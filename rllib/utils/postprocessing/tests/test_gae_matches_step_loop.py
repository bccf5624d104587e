"""`compute_value_targets` equals a plain step-by-step GAE loop (no Ray).

The reference below walks each batch backwards one timestep at a time:
`A_t = delta_t + gamma * lambda_ * A_{t+1}` inside an episode chunk, restarting
after a terminated or truncated step, with `delta_t = r_t + gamma * V(s_{t+1})
- V(s_t)` and no bootstrap after a terminated step or after the batch's last
step. It keeps `A_t` as a Python float (float64) and, as the function's
contract says, returns float32 targets `float32(A_t) + V(s_t)`.
"""

import sys

import numpy as np
import pytest
from ray.rllib.utils.postprocessing.value_predictions import compute_value_targets


def random_batch(rng, flag_dtype=bool, value_dtype=np.float32):
    """Episode chunks of random lengths (1 to 300 steps, some 1-3 steps long),
    each ending terminated, truncated or in the middle (no flag)."""
    lengths = []
    while sum(lengths) < rng.integers(1, 3000):
        short = rng.random() < 0.3
        lengths.append(int(rng.integers(1, 4 if short else 300)))
    n = sum(lengths)
    ends = np.cumsum(lengths) - 1
    kinds = rng.integers(0, 3, size=len(ends))
    terminateds = np.zeros(n, dtype=flag_dtype)
    truncateds = np.zeros(n, dtype=flag_dtype)
    terminateds[ends[kinds == 0]] = 1
    truncateds[ends[kinds == 1]] = 1
    values = (rng.normal(size=n) * 10).astype(value_dtype)
    rewards = rng.normal(size=n).astype(value_dtype)
    return values, rewards, terminateds, truncateds


def reference_value_targets(values, rewards, terminateds, truncateds, gamma, lambda_):
    """GAE value targets, one timestep at a time, backwards."""
    n = len(values)
    targets = np.zeros(n, dtype=np.float32)
    advantage = 0.0
    for t in reversed(range(n)):
        terminated, truncated = bool(terminateds[t]), bool(truncateds[t])
        next_value = 0.0 if terminated or t == n - 1 else float(values[t + 1])
        delta = float(rewards[t]) + gamma * next_value - float(values[t])
        if terminated or truncated:
            advantage = delta
        else:
            advantage = delta + gamma * lambda_ * advantage
        # The advantage is rounded to float32 before the value is added.
        targets[t] = np.float32(advantage) + values[t]
    return targets


def _assert_equal_to_reference(batch, gamma, lambda_):
    expected = reference_value_targets(*batch, gamma=gamma, lambda_=lambda_)
    got = compute_value_targets(*batch, gamma=gamma, lambda_=lambda_)
    assert got.dtype == np.float32
    assert got.shape == expected.shape
    mismatch = np.flatnonzero(got != expected)
    assert mismatch.size == 0, (
        f"{mismatch.size} of {got.size} targets differ, first at {mismatch[0]}: "
        f"{got[mismatch[0]]!r} vs reference {expected[mismatch[0]]!r}"
    )


def _random_settings(rng):
    gamma = float(rng.choice([0.99, 0.9, 1.0, 0.0, rng.random()]))
    lambda_ = float(rng.choice([0.95, 1.0, 0.0, rng.random()]))
    return gamma, lambda_


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("value_dtype", [np.float32, np.float64])
@pytest.mark.parametrize("flag_dtype", [bool, np.int64, np.float64])
def test_random_batches_equal_the_reference_loop(seed, value_dtype, flag_dtype):
    # With these flags numpy computes the TD residuals and the recursion in
    # float64, as the reference does: the targets are bit-identical.
    rng = np.random.default_rng(seed)
    gamma, lambda_ = _random_settings(rng)
    batch = random_batch(rng, flag_dtype, value_dtype)
    _assert_equal_to_reference(batch, gamma, lambda_)


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("value_dtype", [np.float32, np.float64])
def test_float32_flags_stay_close_to_the_reference_loop(seed, value_dtype):
    # float32 flags make `1.0 - terminateds` float32, so numpy rounds
    # `gamma * (1 - terminated)` and the recursion coefficient to float32 (and
    # with float32 values runs the residuals and the recursion in float32),
    # while the reference keeps float64: the targets (|target| < 40 here)
    # differ by a few float32 ulps, at most 1.2e-5 over these seeds.
    rng = np.random.default_rng(seed)
    gamma, lambda_ = _random_settings(rng)
    batch = random_batch(rng, np.float32, value_dtype)
    expected = reference_value_targets(*batch, gamma=gamma, lambda_=lambda_)
    got = compute_value_targets(*batch, gamma=gamma, lambda_=lambda_)
    assert got.dtype == np.float32 and got.shape == expected.shape
    np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-5)


@pytest.mark.parametrize("n", [1, 2, 3, 100, 5000])
@pytest.mark.parametrize("end", ["terminated", "truncated", "none"])
@pytest.mark.parametrize("value_dtype", [np.float32, np.float64])
def test_single_chunk_equals_the_reference_loop(n, end, value_dtype):
    rng = np.random.default_rng(n)
    values = rng.normal(size=n).astype(value_dtype)
    rewards = rng.normal(size=n).astype(value_dtype)
    terminateds = np.zeros(n, dtype=bool)
    truncateds = np.zeros(n, dtype=bool)
    if end == "terminated":
        terminateds[-1] = True
    elif end == "truncated":
        truncateds[-1] = True
    _assert_equal_to_reference((values, rewards, terminateds, truncateds), 0.99, 0.95)


def test_several_episodes_in_one_batch():
    # Terminated after 3 steps, truncated after 2 (the episode goes on), then
    # 2 steps that end the batch: the chunks must not leak into each other.
    values = np.array([1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0], np.float32)
    rewards = np.array([1.0, 0.0, 2.0, 1.0, 1.0, 0.5, 0.5], np.float32)
    terminateds = np.array([0, 0, 1, 0, 0, 0, 0], bool)
    truncateds = np.array([0, 0, 0, 0, 1, 0, 0], bool)
    batch = (values, rewards, terminateds, truncateds)
    _assert_equal_to_reference(batch, 0.9, 0.8)
    targets = compute_value_targets(*batch, gamma=0.9, lambda_=0.8)
    # The terminated step: its reward only. The truncated step bootstraps
    # from the next value, but no advantage flows back across it.
    assert targets[2] == np.float32(2.0)
    assert targets[4] == np.float32(1.0 + 0.9 * 6.0)
    # The first chunk alone gives the same targets.
    alone = compute_value_targets(
        values[:3], rewards[:3], terminateds[:3], truncateds[:3], 0.9, 0.8
    )
    np.testing.assert_array_equal(targets[:3], alone)


def test_lambda_one_gives_discounted_returns():
    # Worked by hand: gamma = 0.5, terminated at the end, so the targets are
    # the discounted returns 1 + 0.5 * (1 + 0.5 * 1), 1 + 0.5 * 1 and 1.
    targets = compute_value_targets(
        np.array([1.0, 2.0, 3.0], np.float32),
        np.ones(3, np.float32),
        np.array([0, 0, 1], bool),
        np.zeros(3, bool),
        0.5,
        1.0,
    )
    np.testing.assert_array_equal(targets, np.array([1.75, 1.5, 1.0], np.float32))


def test_flags_other_than_zero_and_one_equal_the_reference_loop():
    # Soft flags scale the bootstrap and the carried advantage step by step.
    rng = np.random.default_rng(0)
    values, rewards, _, _ = random_batch(rng, value_dtype=np.float64)
    n = len(values)
    soft = rng.random(n) * 0.5
    expected = np.zeros(n, np.float32)
    advantage = 0.0
    for t in reversed(range(n)):
        next_value = float(values[t + 1]) if t + 1 < n else 0.0
        delta = rewards[t] + 0.99 * (1.0 - soft[t]) * next_value - values[t]
        advantage = delta + 0.99 * 0.95 * (1.0 - soft[t]) * advantage
        expected[t] = np.float32(advantage) + values[t]
    got = compute_value_targets(values, rewards, soft, np.zeros(n), 0.99, 0.95)
    # The same float64 operations in the same order: the same bits.
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got, expected)


def test_parameters_reach_the_kernel():
    values, rewards, terminateds, truncateds = random_batch(
        np.random.default_rng(3), np.float32
    )
    base = compute_value_targets(values, rewards, terminateds, truncateds, 0.9, 0.8)
    assert not np.allclose(
        base, compute_value_targets(values, rewards, terminateds, truncateds, 0.5, 0.8)
    )
    assert not np.allclose(
        base, compute_value_targets(values, rewards, terminateds, truncateds, 0.9, 0.3)
    )
    step = int(np.flatnonzero((terminateds + truncateds) == 0)[3])
    for flags in (terminateds, truncateds):
        flipped = flags.copy()
        flipped[step] = 1.0
        other = (
            (flipped, truncateds) if flags is terminateds else (terminateds, flipped)
        )
        assert not np.allclose(
            base, compute_value_targets(values, rewards, *other, 0.9, 0.8)
        )


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_empty_batch(dtype):
    empty = np.zeros(0, dtype=dtype)
    got = compute_value_targets(empty, empty, empty, empty, 0.9, 0.9)
    assert got.shape == (0,) and got.dtype == np.float32
    assert reference_value_targets(empty, empty, empty, empty, 0.9, 0.9).shape == (0,)


if __name__ == "__main__":
    sys.exit(pytest.main(["-v", __file__]))
