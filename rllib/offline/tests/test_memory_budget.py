"""The memory budget: per node, checked before decoding, bounded decoding."""

import logging

import pytest
import ray
from ray.rllib.algorithms.bc import BCConfig

from rllib.offline.episode_files.writer import write_episodes
from rllib.offline.in_memory import store as episode_store
from rllib.offline.in_memory.memory_budget import allowed_bytes
from rllib.offline.in_memory.store import EpisodeStore
from rllib.offline.offline_data import list_input_episodes
from rllib.offline.tests.episode_factory import cartpole_episodes


@pytest.fixture(scope="module")
def episode_dir(tmp_path_factory):
    """16 CartPole episodes of 100 steps in 8 files."""
    path = tmp_path_factory.mktemp("episodes")
    env, episodes = cartpole_episodes(16, max_steps=100)
    write_episodes(
        episodes,
        path,
        observation_space=env.observation_space,
        action_space=env.action_space,
        max_rows_per_file=2,
    )
    return str(path), env


def _config(path, env, num_learners=0, budget=None):
    config = (
        BCConfig()
        .environment(
            observation_space=env.observation_space, action_space=env.action_space
        )
        .learners(num_learners=num_learners)
        .training(train_batch_size_per_learner=32)
        .offline_data(
            input_=[path], input_read_episodes=True, dataset_num_iters_per_learner=1
        )
    )
    if budget is not None:
        config.offline_data(memory_budget=budget)
    return config


@pytest.mark.timeout(120)
def test_the_estimate_is_close_to_the_decoded_size(ray_cluster, episode_dir):
    path, env = episode_dir
    filesystem, files, _, _ = list_input_episodes(_config(path, env))
    kwargs = {
        "filesystem": filesystem,
        "observation_space": env.observation_space,
        "action_space": env.action_space,
    }
    plan = EpisodeStore.plan(files, filesystem=filesystem)
    estimate = plan.estimate_decoded_bytes(**kwargs)
    store = EpisodeStore.start(files, plan=plan, **kwargs)
    assert store.wait(10**9)
    assert store.num_episodes == 16
    assert 0.8 * store.nbytes <= estimate <= 1.25 * store.nbytes


@pytest.mark.timeout(120)
def test_decoding_tasks_in_flight_are_bounded(ray_cluster, episode_dir, monkeypatch):
    path, env = episode_dir
    filesystem, files, _, _ = list_input_episodes(_config(path, env))
    # Decode in Ray tasks even though the data is small.
    monkeypatch.setattr(episode_store, "DRIVER_DECODE_BYTES", 0)
    store = EpisodeStore.start(
        files,
        filesystem=filesystem,
        observation_space=env.observation_space,
        action_space=env.action_space,
        max_in_flight=2,
    )
    assert len(store._size_refs) == 2  # Of 8 ranges, one per file.
    assert store.wait(10**9)
    assert (store.num_episodes, store.num_timesteps) == (16, 1600)


@pytest.mark.timeout(120)
def test_over_the_budget_nothing_is_decoded_up_front(ray_cluster, episode_dir, caplog):
    path, env = episode_dir
    config = _config(path, env, budget=50_000)
    with caplog.at_level(logging.WARNING, logger="ray.rllib.offline.offline_data"):
        algo = config.build_algo()
    try:
        # Nothing was decoded beyond the size sample.
        assert algo.offline_data._store is None
    finally:
        algo.stop()
    (message,) = [r.getMessage() for r in caplog.records if "MiB" in r.getMessage()]
    node = ray.get_runtime_context().get_node_id()
    assert f"on node {node}" in message
    assert "over its memory budget of 0.05 MiB (configured)" in message
    assert "`config.offline_data(memory_budget=...)` (bytes)" in message


@pytest.mark.timeout(60)
def test_the_budget_is_per_node(ray_cluster, episode_dir):
    path, env = episode_dir
    node = ray.get_runtime_context().get_node_id()
    store = ray.nodes()[0]["Resources"]["object_store_memory"]
    # A local Learner: the driver's node holds everything, half its store.
    local = allowed_bytes(_config(path, env))
    assert (local.node_id, local.total_bytes) == (node, int(0.5 * store))
    # Two Learners on one node: that node holds both shards.
    two = _config(path, env, num_learners=2, budget=1000)
    assert allowed_bytes(two, [node, node]).total_bytes == 1000
    # On two nodes: each holds half, so twice the budget fits in all.
    assert allowed_bytes(two, [node, "other-node"]).total_bytes == 2000


if __name__ == "__main__":
    import sys

    sys.exit(pytest.main(["-v", __file__]))
