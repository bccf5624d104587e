"""The columnar buffer's rows carry the right value-target inputs.

Grid: episode lengths 1, 3 and 100, terminated and truncated episodes,
horizons None (episode end), 1, 3 and 100, two discounts. The reference walks
the recorded rewards of the row's own episode; the sampler draws rows from
several blocks at once.
"""

import numpy as np
import pytest

from rllib.offline.in_memory.columnar_buffer import sample_transitions
from rllib.offline.in_memory.columns import EpisodeBlock, EpisodeColumns

LENGTHS = (1, 3, 100, 3, 1, 100)


def _episode(index, length, terminated, rng):
    return EpisodeColumns(
        id_=f"episode{index}",
        observations={
            "pos": rng.normal(size=(length + 1, 2)).astype(np.float32),
            "t": np.arange(length + 1, dtype=np.int64),
        },
        actions=rng.integers(0, 3, size=length),
        rewards=rng.normal(size=length).astype(np.float32),
        is_terminated=terminated,
        is_truncated=not terminated,
    )


def _blocks(rng):
    episodes = [
        _episode(i, length, terminated=i % 2 == 0, rng=rng)
        for i, length in enumerate(LENGTHS)
    ]
    return episodes, [
        EpisodeBlock.from_episodes(episodes[:2]),
        EpisodeBlock.from_episodes(episodes[2:3]),
        EpisodeBlock.from_episodes(episodes[3:]),
    ]


def _reference(episode, t, gamma, horizon):
    length = len(episode)
    b = length if horizon is None else min(t + horizon, length)
    returns = sum(gamma ** (k - t) * float(episode.rewards[k]) for k in range(t, b))
    live = not (b == length and episode.is_terminated)
    discount = gamma ** (b - t) if live else 0.0
    bootstrap = {key: leaf[b] for key, leaf in episode.observations.items()}
    return returns, discount, bootstrap


@pytest.mark.parametrize("gamma", [0.99, 0.5])
@pytest.mark.parametrize("horizon", [None, 1, 3, 100])
def test_sampled_inputs_match_a_loop(gamma, horizon):
    rng = np.random.default_rng(1)
    episodes, blocks = _blocks(rng)
    by_id = {e.id_: e for e in episodes}
    sampled = sample_transitions(
        blocks, 2000, rng=rng, n_step_gamma=gamma, value_targets=(gamma, horizon)
    )
    inputs = sampled.value_target_inputs
    seen_terminal = seen_live_end = False
    for i in range(len(sampled)):
        episode = by_id[sampled.episode_ids[i]]
        t = int(sampled.timesteps[i])
        returns, discount, bootstrap = _reference(episode, t, gamma, horizon)
        np.testing.assert_allclose(inputs.returns_to_bootstrap[i], returns, rtol=1e-5)
        np.testing.assert_allclose(inputs.bootstrap_discount[i], discount, rtol=1e-6)
        np.testing.assert_array_equal(inputs.bootstrap_obs["pos"][i], bootstrap["pos"])
        assert inputs.bootstrap_obs["t"][i] == bootstrap["t"]
        # The row's own observation is its step's.
        np.testing.assert_array_equal(
            sampled.obs["pos"][i], episode.observations["pos"][t]
        )
        seen_terminal |= discount == 0.0
        seen_live_end |= discount > 0 and bootstrap["t"] == len(episode)
    assert seen_terminal and seen_live_end
    assert inputs.returns_to_bootstrap.dtype == np.float32
    assert inputs.bootstrap_discount.dtype == np.float32


def test_horizon_reaches_the_inputs():
    """Every horizon gives other inputs for the long episode's early steps."""
    rng = np.random.default_rng(2)
    _, blocks = _blocks(rng)
    outputs = {}
    for horizon in (None, 1, 3, 100):
        sampled = sample_transitions(
            blocks,
            500,
            rng=np.random.default_rng(3),
            n_step_gamma=0.9,
            value_targets=(0.9, horizon),
        )
        outputs[horizon] = sampled.value_target_inputs.returns_to_bootstrap
    keys = list(outputs)
    for a, b in zip(keys, keys[1:]):
        assert not np.allclose(outputs[a], outputs[b])


if __name__ == "__main__":
    import sys

    sys.exit(pytest.main(["-v", __file__]))
