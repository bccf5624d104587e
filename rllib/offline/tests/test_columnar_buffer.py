"""The columnar buffer samples and keeps what `EpisodeReplayBuffer` does.

Sampling: both buffers, each with its own seeded generator, sample many
batches from the same episodes; the frequencies of (episode, timestep) starts,
of n-steps and of items per batch must agree (chi-square / z tests) and match
the uniform expectation. Buffer semantics (capacity, duplicates, done-only)
are compared through the two prelearner paths fed the same batches.
"""

import collections

import gymnasium as gym
import numpy as np
import pytest
from ray.rllib.algorithms.bc import BCConfig
from ray.rllib.core import DEFAULT_MODULE_ID
from ray.rllib.env.single_agent_episode import SingleAgentEpisode
from ray.rllib.offline.offline_prelearner import OfflinePreLearner
from ray.rllib.utils.replay_buffers.episode_replay_buffer import EpisodeReplayBuffer
from scipy import stats

from rllib.examples.offline_rl.scripted_cartpole import balance_action, record_episodes
from rllib.offline.episode_files.payload import encode_episode
from rllib.offline.in_memory.columnar_buffer import ColumnarEpisodeBuffer
from rllib.offline.in_memory.columns import (
    EpisodeColumns,
    episode_columns_from_episode,
)

#: Below this p-value two samples are called different. With fixed seeds the
#: tests are deterministic; the threshold only sets how strict they are.
P_MIN = 1e-3


def _episodes(num_episodes, max_steps, seed=0):
    env = gym.make("CartPole-v1", max_episode_steps=max_steps)
    episodes = record_episodes(
        env, num_episodes, lambda o: balance_action(o[2], o[3]), epsilon=0.5, seed=seed
    )
    return env, [e.to_numpy() for e in episodes]


def _episode_buffer_items(episodes, n_step, batches, batch_size):
    buffer = EpisodeReplayBuffer(capacity=10**6)
    buffer.add(episodes)
    buffer.rng = np.random.default_rng(1)
    starts, n_steps, counts = [], [], []
    for _ in range(batches):
        sampled = buffer.sample(
            num_items=batch_size,
            n_step=n_step,
            sample_episodes=True,
            to_numpy=True,
            lookback=1,
        )
        counts.append(len(sampled))
        for episode in sampled:
            starts.append((episode.id_, episode.t_started))
            n_steps.append(int(episode.get_extra_model_outputs("n_step")[0]))
    return starts, n_steps, counts


def _columnar_buffer_items(episodes, n_step, batches, batch_size):
    buffer = ColumnarEpisodeBuffer(capacity=10**6, seed=2)
    buffer.add([episode_columns_from_episode(e) for e in episodes])
    starts, n_steps, counts = [], [], []
    for _ in range(batches):
        sampled = buffer.sample(batch_size, n_step=n_step, gamma=0.99)
        counts.append(len(sampled))
        starts.extend(zip(sampled.episode_ids, sampled.timesteps.tolist()))
        n_steps.extend(sampled.n_step.tolist())
    return starts, n_steps, counts


def _same_distribution(first, second, cells):
    table = np.array(
        [
            [collections.Counter(first)[c] for c in cells],
            [collections.Counter(second)[c] for c in cells],
        ]
    )
    return stats.chi2_contingency(table).pvalue


@pytest.mark.parametrize("n_step", [1, (1, 6)])
def test_sampling_frequencies_match_the_episode_buffer(n_step):
    _, episodes = _episodes(num_episodes=5, max_steps=15)
    batches, batch_size = 30, 256
    ep_starts, ep_n, ep_counts = _episode_buffer_items(
        episodes, n_step, batches, batch_size
    )
    col_starts, col_n, col_counts = _columnar_buffer_items(
        episodes, n_step, batches, batch_size
    )
    cells = [(e.id_, t) for e in episodes for t in range(len(e))]
    assert set(ep_starts) <= set(cells) and set(col_starts) <= set(cells)

    # Starts: the same distribution, and each uniform over all timesteps.
    assert _same_distribution(ep_starts, col_starts, cells) > P_MIN
    for starts in (ep_starts, col_starts):
        counts = collections.Counter(starts)
        assert stats.chisquare([counts[c] for c in cells]).pvalue > P_MIN

    # n-steps: the same values with the same frequencies.
    values = sorted(set(ep_n) | set(col_n))
    expected = [1] if n_step == 1 else list(range(*n_step))
    assert values == expected
    if len(values) > 1:
        assert _same_distribution(ep_n, col_n, values) > P_MIN

    # Items per batch: exactly the batch size for n_step=1; with overshooting
    # n-steps `EpisodeReplayBuffer`'s counter can step back, so more items,
    # equally often.
    if n_step == 1:
        assert ep_counts == col_counts == [batch_size] * batches
    else:
        assert min(ep_counts) >= batch_size and min(col_counts) >= batch_size
        assert stats.ttest_ind(ep_counts, col_counts).pvalue > P_MIN
        assert max(col_counts) > batch_size


class _EpisodeObjectBuffer(EpisodeReplayBuffer):
    pass


def _prelearner(observation_space, action_space, fast, capacity):
    config = (
        BCConfig()
        .environment(observation_space=observation_space, action_space=action_space)
        .training(train_batch_size_per_learner=32)
        .offline_data(
            input_="/nonexistent",
            input_read_episodes=True,
            prelearner_buffer_kwargs={"capacity": capacity},
            # A custom buffer class keeps the per-episode path.
            prelearner_buffer_class=None if fast else _EpisodeObjectBuffer,
        )
    )
    spec = config.get_multi_rl_module_spec(
        spaces={DEFAULT_MODULE_ID: (observation_space, action_space)},
        inference_only=False,
    )
    return OfflinePreLearner(
        config=config, spaces=(observation_space, action_space), module_spec=spec
    )


def test_capacity_and_duplicates_match_the_per_episode_path():
    """Same episodes held after each batch: eviction by timesteps, no repeats.

    Each batch brings at most one new episode (plus repeats), so the order in
    which the per-episode path adds a batch's set of episodes cannot matter.
    """
    env, episodes = _episodes(num_episodes=8, max_steps=40, seed=3)
    capacity = 90
    fast = _prelearner(env.observation_space, env.action_space, True, capacity)
    general = _prelearner(env.observation_space, env.action_space, False, capacity)
    assert fast.uses_columnar_path and not general.uses_columnar_path
    e = episodes
    batches = [[e[0]], [e[1], e[1]], [e[0], e[2]], [e[3]], [e[3], e[4], e[2]]]
    batches += [[e[5]], [e[0]], [e[6], e[6], e[0]], [e[7]]]
    evicted = 0
    for number, batch in enumerate(batches):
        payloads = np.array([encode_episode(x) for x in batch], dtype=object)
        fast({"item": payloads})
        general({"item": payloads})
        held = [ep.id_ for ep in fast.columnar_buffer.episodes]
        assert held == [ep.id_ for ep in general.episode_buffer.episodes]
        assert len(set(held)) == len(held)
        assert (
            fast.columnar_buffer.get_num_timesteps()
            == general.episode_buffer.get_num_timesteps()
        )
        assert fast.columnar_buffer.get_num_timesteps() <= capacity or len(held) == 1
        if number == 6:
            # Evicted by then, episode 0 comes back when it is read again.
            assert held[-1] == e[0].id_
        evicted = fast.columnar_buffer.get_num_episodes_evicted()
    assert evicted > 0  # The capacity did bite.


def test_unfinished_episodes_are_rejected_on_both_paths():
    env, episodes = _episodes(num_episodes=2, max_steps=20)
    episodes[0].is_terminated = episodes[0].is_truncated = False
    payloads = np.array([encode_episode(x) for x in episodes], dtype=object)
    for fast in (True, False):
        prelearner = _prelearner(env.observation_space, env.action_space, fast, 100)
        with pytest.raises(ValueError, match="must be"):
            prelearner({"item": payloads})


def test_blocks_are_sampled_uniformly_over_every_transition():
    """The Learner's sampler over a shard of several blocks: each recorded
    transition is drawn with the same probability, none is left out."""
    from rllib.offline.in_memory.columnar_buffer import (
        sample_transitions,
    )
    from rllib.offline.in_memory.columns import EpisodeBlock

    _, episodes = _episodes(num_episodes=9, max_steps=25, seed=4)
    columns = [episode_columns_from_episode(e) for e in episodes]
    blocks = [
        EpisodeBlock.from_episodes(columns[:2]),
        EpisodeBlock.from_episodes(columns[2:3]),
        EpisodeBlock.from_episodes(columns[3:]),
    ]
    cells = [(e.id_, t) for e in episodes for t in range(len(e))]
    rng = np.random.default_rng(5)
    counts = collections.Counter()
    for _ in range(40):
        sampled = sample_transitions(blocks, 256, rng=rng, n_step_gamma=0.99)
        counts.update(zip(sampled.episode_ids, sampled.timesteps.tolist()))
    assert set(counts) == set(cells)
    assert stats.chisquare([counts[c] for c in cells]).pvalue > P_MIN
    # The observations drawn are the recorded ones at those steps.
    sampled = sample_transitions(blocks, 64, rng=rng, n_step_gamma=0.99)
    by_id = {e.id_: e for e in episodes}
    for i, (episode_id, t) in enumerate(
        zip(sampled.episode_ids, sampled.timesteps.tolist())
    ):
        recorded = by_id[episode_id]
        np.testing.assert_array_equal(sampled.obs[i], recorded.get_observations(t))
        np.testing.assert_array_equal(
            sampled.next_obs[i], recorded.get_observations(t + 1)
        )


def test_empty_buffer_cannot_be_sampled():
    with pytest.raises(ValueError, match="empty"):
        ColumnarEpisodeBuffer(capacity=10).sample(4, gamma=0.99)


#: Rewards of a 5-step terminated episode, and the 3-step rewards of each
#: start `t` discounted with gamma = 0.5, by hand: `r_t + r_t+1 / 2 + r_t+2 / 4`
#: over the steps left (t = 3 covers 2 steps, t = 4 one).
HAND_REWARDS = [1.0, 2.0, 4.0, 8.0, 16.0]
HAND_3_STEP_HALF = {0: 3.0, 1: 6.0, 2: 12.0, 3: 16.0, 4: 16.0}


def hand_episode() -> EpisodeColumns:
    """Five terminated steps with rewards `HAND_REWARDS`; observation `t` is t."""
    return EpisodeColumns(
        id_="hand",
        observations=np.arange(6, dtype=np.float32)[:, None],
        actions=np.zeros(5, dtype=np.int64),
        rewards=np.array(HAND_REWARDS, dtype=np.float32),
        is_terminated=True,
        is_truncated=False,
    )


def test_n_step_rewards_are_discounted_with_the_given_gamma():
    """gamma = 0.5, not the 0.99 `EpisodeReplayBuffer` applies when given none."""
    buffer = ColumnarEpisodeBuffer(capacity=100, seed=0)
    buffer.add([hand_episode()])
    sampled = buffer.sample(200, n_step=3, gamma=0.5)
    assert set(sampled.timesteps.tolist()) == set(HAND_3_STEP_HALF)
    expected = [HAND_3_STEP_HALF[t] for t in sampled.timesteps.tolist()]
    np.testing.assert_array_equal(sampled.rewards, expected)
    # The next observation is 3 steps on, or the last one; only t + 3 == T
    # carries the terminal flag.
    np.testing.assert_array_equal(
        sampled.next_obs[:, 0], np.minimum(sampled.timesteps + 3, 5)
    )
    np.testing.assert_array_equal(sampled.terminateds, sampled.timesteps == 2)


@pytest.mark.parametrize("terminated", [False, True])
def test_numpy_bool_done_flags_keep_their_value(terminated):
    """Envs often return `np.bool_` flags; the seed's hand-rolled payloads
    (`msgpack.packb(state, default=msgpack_numpy.encode)`) store them as maps,
    which the columnar decoder unpacks without msgpack_numpy's hook."""
    import msgpack
    import msgpack_numpy

    from rllib.offline.in_memory.columns import decode_episode_columns

    episode = SingleAgentEpisode(observations=[np.zeros(2, np.float32)])
    for t in range(3):
        done = t == 2
        episode.add_env_step(
            np.full(2, t + 1, np.float32),
            0,
            1.0,
            terminated=np.bool_(done and terminated),
            truncated=np.bool_(done and not terminated),
        )
    state = episode.get_state()
    assert isinstance(state["is_terminated"], np.bool_)
    payload = msgpack.packb(state, default=msgpack_numpy.encode)
    columns = decode_episode_columns(payload)
    assert columns.is_terminated is terminated
    assert columns.is_truncated is (not terminated)


if __name__ == "__main__":
    import sys

    sys.exit(pytest.main(["-v", __file__]))
