"""The vectorized GAE kernel returns exactly what upstream's loop returns.

Compares with upstream's `compute_value_targets` as the overlay found it, so
it is a fork-only test; `rllib/utils/postprocessing/tests/
test_gae_matches_step_loop.py` checks the function against a reference loop.
"""

import sys

import numpy as np
import pytest
from ray.rllib.utils.postprocessing import value_predictions as ray_value_predictions

from rllib._fork import overlay
from rllib.utils.postprocessing.tests.test_gae_matches_step_loop import random_batch
from rllib.utils.postprocessing.value_predictions import compute_value_targets

# Upstream's function, as the overlay found it before replacing it.
upstream_value_targets = overlay.ORIGINALS[
    (ray_value_predictions.__name__, "compute_value_targets")
]


def assert_identical(batch, gamma, lambda_):
    expected = upstream_value_targets(*batch, gamma=gamma, lambda_=lambda_)
    got = compute_value_targets(*batch, gamma=gamma, lambda_=lambda_)
    assert got.dtype == expected.dtype == np.float32
    assert got.shape == expected.shape
    mismatch = np.flatnonzero(got != expected)
    assert mismatch.size == 0, (
        f"{mismatch.size} of {got.size} targets differ, first at {mismatch[0]}: "
        f"{got[mismatch[0]]!r} vs upstream {expected[mismatch[0]]!r}"
    )


def test_upstream_function_is_upstreams():
    # The comparison below would be vacuous against the fork's own function.
    assert upstream_value_targets.__module__ == ray_value_predictions.__name__
    assert upstream_value_targets is not compute_value_targets


@pytest.mark.parametrize("seed", range(40))
def test_random_batches_match_upstream_bit_for_bit(seed):
    rng = np.random.default_rng(seed)
    gamma = float(rng.choice([0.99, 0.9, 1.0, 0.0, rng.random()]))
    lambda_ = float(rng.choice([0.95, 1.0, 0.0, rng.random()]))
    flag_dtype = [bool, np.float32, np.int64, np.float64][seed % 4]
    value_dtype = np.float64 if seed % 5 == 0 else np.float32
    assert_identical(random_batch(rng, flag_dtype, value_dtype), gamma, lambda_)


@pytest.mark.parametrize("n", [1, 2, 3, 100, 5000])
@pytest.mark.parametrize("end", ["terminated", "truncated", "none"])
def test_single_segment_lengths_match_upstream(n, end):
    rng = np.random.default_rng(n)
    values = rng.normal(size=n).astype(np.float32)
    rewards = rng.normal(size=n).astype(np.float32)
    terminateds = np.zeros(n, dtype=bool)
    truncateds = np.zeros(n, dtype=bool)
    if end == "terminated":
        terminateds[-1] = True
    elif end == "truncated":
        truncateds[-1] = True
    assert_identical((values, rewards, terminateds, truncateds), 0.99, 0.95)


def test_flags_other_than_zero_and_one_match_upstream():
    # A coefficient that varies inside a segment takes the plain loop.
    rng = np.random.default_rng(0)
    values, rewards, _, _ = random_batch(rng)
    n = len(values)
    soft = rng.random(n).astype(np.float32)
    assert_identical((values, rewards, soft * 0.5, np.zeros(n)), 0.99, 0.95)


if __name__ == "__main__":
    sys.exit(pytest.main(["-v", __file__]))
