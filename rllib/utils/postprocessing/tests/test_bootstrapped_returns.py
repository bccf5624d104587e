"""Value-target inputs from whole episodes against a plain loop over steps.

Grid: episode lengths 1, 3 and 100, terminated and truncated episodes,
horizons None (episode end), 1, 3 and 100, two discounts.
"""

import numpy as np
import pytest

from rllib.utils.postprocessing.bootstrapped_returns import (
    bootstrap_steps,
    returns_to_go,
    value_target_inputs,
)

LENGTHS = np.array([1, 3, 100, 3, 1, 100])
TERMINATED = np.arange(len(LENGTHS)) % 2 == 0


@pytest.mark.parametrize("gamma", [0.99, 0.5])
def test_returns_to_go_match_a_loop(gamma):
    rng = np.random.default_rng(0)
    lengths = np.array(LENGTHS)
    rewards = rng.normal(size=lengths.sum())
    out = returns_to_go(rewards, lengths, gamma)
    assert out.shape == (lengths.sum() + len(lengths),)
    start = 0
    for index, length in enumerate(lengths):
        row = start + index
        running = 0.0
        expected = np.zeros(length + 1)
        for t in reversed(range(length)):
            running = rewards[start + t] + gamma * running
            expected[t] = running
        np.testing.assert_allclose(out[row : row + length + 1], expected, rtol=1e-12)
        start += length


@pytest.mark.parametrize("gamma", [0.99, 0.5])
@pytest.mark.parametrize("horizon", [None, 1, 3, 100])
def test_inputs_of_every_step_match_a_loop(gamma, horizon):
    """`returns_to_go`, `bootstrap_steps` and `value_target_inputs` together
    give each step the reward sum to its bootstrap step and the discount
    there (0 where the episode terminated at that step)."""
    rng = np.random.default_rng(1)
    rewards = rng.normal(size=LENGTHS.sum())
    returns = returns_to_go(rewards, LENGTHS, gamma)
    # Each episode's entries start at its first step + its index.
    starts = np.concatenate([[0], np.cumsum(LENGTHS)[:-1]])
    episode = np.repeat(np.arange(len(LENGTHS)), LENGTHS)
    t = np.arange(LENGTHS.sum()) - starts[episode]
    b = bootstrap_steps(t, LENGTHS[episode], horizon)
    entry = starts[episode] + episode
    summed, discount = value_target_inputs(
        returns_at_t=returns[entry + t],
        returns_at_bootstrap=returns[entry + b],
        steps_to_bootstrap=b - t,
        terminal_at_bootstrap=TERMINATED[episode] & (b == LENGTHS[episode]),
        gamma=gamma,
    )
    assert summed.dtype == np.float32 and discount.dtype == np.float32
    for row in range(len(t)):
        e, step, end = episode[row], t[row], b[row]
        expected = sum(
            gamma ** (k - step) * rewards[starts[e] + k] for k in range(step, end)
        )
        live = not (TERMINATED[e] and end == LENGTHS[e])
        assert end == (
            LENGTHS[e] if horizon is None else min(step + horizon, LENGTHS[e])
        )
        np.testing.assert_allclose(summed[row], expected, rtol=1e-5, atol=1e-5)
        assert discount[row] == pytest.approx(gamma ** (end - step) if live else 0.0)


def test_bootstrap_steps_rejects_a_bad_horizon():
    with pytest.raises(ValueError, match="value_horizon"):
        bootstrap_steps(np.array([0]), np.array([5]), 0)


if __name__ == "__main__":
    import sys

    sys.exit(pytest.main(["-v", __file__]))
