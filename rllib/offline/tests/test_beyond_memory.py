"""Episodes over the memory budget: each Learner samples a rotating cache.

The data here is a few hundred KiB of real CartPole episodes; the budget is
set to an eighth of their decoded size, so every Learner's cache holds part of
its shard at a time. Ray runs on the shared local cluster.
"""

import os

import gymnasium as gym
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import ray
from ray.rllib.algorithms.bc import BCConfig
from ray.rllib.core import DEFAULT_MODULE_ID

from rllib.examples.offline_rl.scripted_cartpole import write_hand_rolled_files
from rllib.offline.episode_files.reader import read_episodes
from rllib.offline.episode_files.writer import write_episodes
from rllib.offline.in_memory.block_cache import (
    PREFETCH,
    RANGES_PER_CACHE,
    RotatingBlockCache,
    plan_cached_shards,
)
from rllib.offline.in_memory.columnar_buffer import sample_transitions
from rllib.offline.in_memory.store import EpisodeStore, decoded_size
from rllib.offline.offline_data import list_input_episodes
from rllib.offline.tests.episode_factory import cartpole_episodes

ENV = gym.make("CartPole-v1")
SPACES = {"observation_space": ENV.observation_space, "action_space": ENV.action_space}


@pytest.fixture(scope="module")
def episode_dir(tmp_path_factory):
    """60 CartPole episodes of 10 to 80 steps, 4 files."""
    path = tmp_path_factory.mktemp("beyond_memory")
    _, episodes = cartpole_episodes(60, max_steps=80, seed=5)
    write_episodes(episodes, path, max_rows_per_file=15, **SPACES)
    return str(path)


def _files(path):
    config = BCConfig().offline_data(input_=[path], input_read_episodes=True)
    filesystem, files, _, _ = list_input_episodes(config)
    return filesystem, files


def _shards(path, num_shards, draws_per_timestep=1.0, factor=8):
    filesystem, files = _files(path)
    size = decoded_size(files, filesystem=filesystem, **SPACES)
    plan = EpisodeStore.plan(files, filesystem=filesystem)
    shards = plan_cached_shards(
        plan,
        estimated_bytes=size["nbytes"],
        estimated_timesteps=size["timesteps"],
        cache_bytes=int(size["nbytes"] / factor / num_shards),
        num_shards=num_shards,
        draws_per_timestep=draws_per_timestep,
        decode_kwargs={"filesystem": filesystem, **SPACES},
    )
    return shards, plan, size


def test_the_ranges_cover_every_row_once_and_fit_the_cache(episode_dir):
    # Caches of a quarter of the data each: ranges of several episodes.
    shards, plan, size = _shards(episode_dir, num_shards=2, factor=0.5)
    rows = [
        (path, row)
        for shard in shards
        for path, start, stop in shard.ranges
        for row in range(start, stop)
    ]
    expected = [
        (path, row)
        for path, (count, _) in plan.file_sizes.items()
        for row in range(count)
    ]
    assert sorted(rows) == sorted(expected)  # Every row, none twice.
    # Balanced by rows; enough ranges per Learner for the cache to rotate.
    counts = [sum(b - a for _, a, b in shard.ranges) for shard in shards]
    assert abs(counts[0] - counts[1]) <= max(b - a for _, a, b in shards[0].ranges)
    assert all(len(shard.ranges) >= 2 for shard in shards)
    # A range is about a tenth of a Learner's cache (by average bytes per row).
    per_row = size["nbytes"] / size["episodes"]
    target = size["nbytes"] / 0.5 / 2 / (RANGES_PER_CACHE + PREFETCH)
    lengths = [stop - start for shard in shards for _, start, stop in shard.ranges]
    assert max(lengths) == int(target // per_row) > 1


def test_bad_settings_are_refused(episode_dir):
    with pytest.raises(ValueError, match="cache_draws_per_timestep"):
        _shards(episode_dir, 1, draws_per_timestep=0)
    with pytest.raises(ValueError, match="60 episode.*100 Learners"):
        _shards(episode_dir, 100, factor=1000)


def _run_passes(cache, num_passes, batch_size, rng):
    """Samples until `num_passes` passes finished; draws per episode id."""
    drawn = {}
    bounds_held = True
    while len(cache.passes) < num_passes:
        (blocks,) = cache.module_blocks().values()
        counts = np.zeros(len(blocks), dtype=np.int64)
        batch = sample_transitions(
            blocks, batch_size, rng=rng, n_step_gamma=0.99, draw_counts=counts
        )
        assert counts.sum() == len(batch) == batch_size
        for episode_id in batch.episode_ids:
            drawn[episode_id] = drawn.get(episode_id, 0) + 1
        cache.drawn(DEFAULT_MODULE_ID, counts)
        cache.rotate()
        bounds_held &= len(cache._resident) <= cache.capacity
        bounds_held &= len(cache._decoding) == cache.prefetch
    return drawn, bounds_held


@pytest.mark.timeout(180)
def test_every_pass_draws_every_timestep_at_the_same_rate(ray_cluster, episode_dir):
    (shard,), _, size = _shards(episode_dir, 1, draws_per_timestep=2.0)
    cache = RotatingBlockCache(shard, np.random.default_rng(0))
    assert cache.capacity == RANGES_PER_CACHE
    drawn, bounds_held = _run_passes(cache, 3, 64, np.random.default_rng(1))
    assert bounds_held  # Never more than the cache and the prefetch held.
    # Every episode with steps was drawn: nothing of the shard is skipped.
    assert set(drawn) == {e.id_ for e in read_episodes(episode_dir)}
    for stats in cache.passes:
        rates = stats.draws_per_timestep
        assert stats.num_ranges == len(shard.ranges)
        # Each range leaves once it has given 2 draws per timestep: it
        # overshoots by at most one batch's share of it.
        assert np.all(rates >= 2.0)
        assert np.all(rates <= 2.0 + 64 / 8)
        assert abs(rates.mean() - 2.0) < 0.25
        # Far below the chi-square of a skewed pass, e.g. one where half of
        # the ranges were drawn 20% more often than the rest.
        skewed = np.where(np.arange(stats.num_ranges) % 2, 1.2, 1.0)
        skewed_counts = skewed * 1000
        skewed_chi2 = (
            (skewed_counts - skewed_counts.mean()) ** 2 / skewed_counts.mean()
        ).sum()
        assert stats.chi_square < min(skewed_chi2, 3 * stats.num_ranges)


@pytest.mark.timeout(300)
@pytest.mark.parametrize("num_learners", [0, 1, 2])
def test_bc_trains_beyond_memory_with_any_number_of_learners(
    ray_cluster, episode_dir, num_learners
):
    filesystem, files = _files(episode_dir)
    nbytes = decoded_size(files, filesystem=filesystem, **SPACES)["nbytes"]
    config = (
        BCConfig()
        .environment(**SPACES)
        .learners(num_learners=num_learners)
        .training(train_batch_size_per_learner=128, lr=1e-3)
        .offline_data(
            memory_budget=nbytes // 8,
            input_=[episode_dir],
            input_read_episodes=True,
            dataset_num_iters_per_learner=10,
        )
        .debugging(seed=0)
    )
    algo = config.build_algo()
    try:
        losses = [
            algo.train()["learners"][DEFAULT_MODULE_ID]["policy_loss"] for _ in range(4)
        ]
        assert algo.offline_data.mode == "beyond_memory"
        assert algo.offline_data._store is None  # Nothing decoded up front.
        shards = algo.offline_data.shards(max(1, num_learners))

        def cache_state(learner):
            cache = learner.__dict__["_episode_shard_sampler"].source
            return (
                len(cache._resident),
                cache.capacity,
                ray.get_runtime_context().get_node_id(),
            )

        if num_learners == 0:
            states = [cache_state(algo.learner_group._learner)]
        else:
            states = [r.get() for r in algo.learner_group.foreach_learner(cache_state)]
    finally:
        algo.stop()
    # BC's loss on scripted CartPole actions falls within a few dozen updates.
    assert all(np.isfinite(losses)) and losses[-1] < losses[0]
    # Each Learner cached its own part, at most its capacity at a time.
    assert len(states) == max(1, num_learners)
    assert all(0 < held <= capacity for held, capacity, _ in states)
    ranges = [r for shard in shards for r in shard.ranges]
    assert len(ranges) == len(set(ranges))


@pytest.mark.timeout(300)
def test_hand_rolled_payloads_train_beyond_memory(ray_cluster, tmp_path):
    """The seed report's per-step msgpack payloads (no spaces recorded)."""
    _, episodes = cartpole_episodes(30, max_steps=60, seed=2)
    write_hand_rolled_files(episodes, tmp_path, num_files=3)
    config = (
        BCConfig()
        .environment(**SPACES)
        .training(train_batch_size_per_learner=64)
        .offline_data(
            memory_budget=2_000,
            input_=[str(tmp_path)],
            input_read_episodes=True,
            dataset_num_iters_per_learner=5,
        )
    )
    algo = config.build_algo()
    try:
        result = algo.train()
        assert algo.offline_data.mode == "beyond_memory"
    finally:
        algo.stop()
    assert np.isfinite(result["learners"][DEFAULT_MODULE_ID]["policy_loss"])


@pytest.mark.timeout(300)
def test_an_undecodable_row_met_by_the_cache_names_its_file_and_row(
    ray_cluster, tmp_path, episode_dir
):
    """A row the driver's size sample never decodes fails when the cache
    reaches it, with the file and row, not a silent gap in the data."""
    for name in sorted(os.listdir(episode_dir)):
        source = os.path.join(episode_dir, name)
        if name.endswith(".parquet"):
            table = pq.read_table(source)
            if not os.listdir(tmp_path):
                # The last row of the first file: past the size sample.
                items = table.column("item").to_pylist()
                items[-1] = b"\x92not an episode"
                table = table.set_column(
                    table.schema.get_field_index("item"),
                    "item",
                    pa.array(items, pa.binary()),
                )
                pq.write_table(table, os.path.join(tmp_path, name))
                bad = name
            else:
                pq.write_table(table, os.path.join(tmp_path, name))
    config = (
        BCConfig()
        .environment(**SPACES)
        .training(train_batch_size_per_learner=256)
        .offline_data(
            memory_budget=10_000,
            input_=[str(tmp_path)],
            input_read_episodes=True,
            dataset_num_iters_per_learner=20,
        )
    )
    algo = config.build_algo()
    try:
        with pytest.raises(ValueError, match=rf"row 14 of file `.*{bad}`"):
            for _ in range(20):
                algo.train()
    finally:
        algo.stop()


@pytest.mark.timeout(300)
def test_multi_agent_episodes_train_every_module_beyond_memory(ray_cluster, tmp_path):
    from rllib.examples.offline_rl import train_multi_agent_offline as example

    files = example.record_and_write(str(tmp_path), 8, 0.3, 0)
    nbytes = decoded_size(files)["nbytes"]
    config = example.build_config("bc", str(tmp_path), updates_per_iteration=4)
    config = config.offline_data(memory_budget=nbytes // 8).evaluation(
        evaluation_interval=None
    )
    algo = config.build_algo()
    try:
        learners = algo.train()["learners"]
        assert algo.offline_data.mode == "beyond_memory"
        cache = algo.learner_group._learner.__dict__["_episode_shard_sampler"].source
        held = set(cache.module_blocks())
    finally:
        algo.stop()
    assert held == {"p0", "p1"}
    for module_id in ("p0", "p1"):
        assert np.isfinite(learners[module_id]["policy_loss"])
        batch_size = config.train_batch_size_per_learner
        assert learners[module_id]["num_module_steps_trained"] == 4 * batch_size


if __name__ == "__main__":
    import sys

    sys.exit(pytest.main(["-v", __file__]))
