"""Learners on different nodes: shards decoded where they train, DDP across nodes.

Runs on Ray's own test cluster (`ray.cluster_utils.Cluster`): a head node and
two worker nodes on this machine, each with its own raylet and object store.
Only the worker nodes have a `learner_slot`, so the two Learners of each test
land on different worker nodes, never on the driver's. Objects above 1 KiB
go to the object store (Ray inlines smaller ones into their owner, which
would hide where the blocks live), so `ray.experimental.get_object_locations`
shows on which node each decoded block is.

The module shuts the session's local Ray down for its cluster and starts it
again afterwards.
"""

import math

import gymnasium as gym
import numpy as np
import pytest
import ray
from ray.cluster_utils import Cluster
from ray.rllib.algorithms.bc import BCConfig
from ray.rllib.algorithms.marwil import MARWILConfig
from ray.rllib.core import COMPONENT_RL_MODULE, DEFAULT_MODULE_ID

from rllib.conftest import start_local_ray
from rllib.examples.offline_rl import train_multi_agent_offline as example
from rllib.examples.offline_rl.scripted_cartpole import record_multi_agent_episodes
from rllib.offline.episode_files.writer import write_episodes
from rllib.offline.tests.episode_factory import cartpole_episodes
from rllib.offline.tests.test_multi_agent_training import _running

ENV = gym.make("CartPole-v1")
SPACES = {"observation_space": ENV.observation_space, "action_space": ENV.action_space}
LEARNER_SLOT = "learner_slot"
NODE_STORE = 80 * 2**20


@pytest.fixture(scope="module")
def cluster():
    """A head node (the driver's) and two worker nodes for the Learners."""
    was_running = ray.is_initialized()
    ray.shutdown()
    test_cluster = Cluster(
        initialize_head=True,
        head_node_args={
            "num_cpus": 2,
            "object_store_memory": NODE_STORE,
            "_system_config": {"max_direct_call_object_size": 1024},
        },
    )
    for _ in range(2):
        test_cluster.add_node(
            num_cpus=2, resources={LEARNER_SLOT: 1}, object_store_memory=NODE_STORE
        )
    test_cluster.wait_for_nodes()
    ray.init(address=test_cluster.address, log_to_driver=False)
    yield test_cluster
    ray.shutdown()
    test_cluster.shutdown()
    if was_running:
        start_local_ray()


@pytest.fixture(scope="module")
def episode_dir(tmp_path_factory):
    path = tmp_path_factory.mktemp("multi_node")
    _, episodes = cartpole_episodes(40, max_steps=100, seed=7)
    write_episodes(episodes, path, max_rows_per_file=5, **SPACES)
    return str(path)


@pytest.fixture(scope="module")
def two_agent_dir(tmp_path_factory):
    path = tmp_path_factory.mktemp("multi_node_two_agents")
    episodes = record_multi_agent_episodes(
        example.make_env(), 16, example.scripted_action, epsilon=0.3, seed=4
    )
    write_episodes(episodes, path, max_rows_per_file=2)
    return str(path)


def _on_two_worker_nodes(config, budget=None):
    if budget is not None:
        config = config.offline_data(memory_budget=budget)
    return config.learners(
        num_learners=2, custom_resources_per_learner={LEARNER_SLOT: 1}
    ).debugging(seed=0)


def _single_agent_config(algo_config, path, budget=None):
    config = (
        algo_config.environment(**SPACES)
        .training(train_batch_size_per_learner=128)
        .offline_data(
            input_=[path], input_read_episodes=True, dataset_num_iters_per_learner=5
        )
    )
    return _on_two_worker_nodes(config, budget)


def _node_of_each_learner(algo):
    def node(_):
        return ray.get_runtime_context().get_node_id()

    return [result.get() for result in algo.learner_group.foreach_learner(node)]


def _module_weights(algo, module_id):
    """Every Learner's weights of `module_id`, as numpy arrays."""

    def weights(learner):
        state = learner.get_state(components=COMPONENT_RL_MODULE)
        module_state = state[COMPONENT_RL_MODULE][module_id]
        return {k: np.asarray(v) for k, v in module_state.items()}

    return [result.get() for result in algo.learner_group.foreach_learner(weights)]


def _assert_same_weights(per_learner):
    first, *others = per_learner
    for other in others:
        assert first.keys() == other.keys()
        for key in first:
            np.testing.assert_array_equal(first[key], other[key])


def _assert_each_shard_lives_on_its_learners_node(algo, cluster):
    """Each shard's blocks are in its own Learner's object store and nowhere
    else: decoded there, never moved; no node holds all of the data."""
    learner_nodes = _node_of_each_learner(algo)
    worker_nodes = {node.node_id for node in cluster.worker_nodes}
    assert len(set(learner_nodes)) == 2 and set(learner_nodes) <= worker_nodes
    shards = algo.offline_data.shards(2)
    assert [shard.index for shard in shards] == [0, 1]
    everywhere = {}
    for shard, node in zip(shards, learner_nodes):
        locations = ray.experimental.get_object_locations(shard.block_refs)
        for ref in shard.block_refs:
            assert locations[ref]["node_ids"] == [node], (shard.index, locations[ref])
            everywhere.setdefault(node, set()).add(ref)
    all_blocks = {ref for shard in shards for ref in shard.block_refs}
    assert all(held < all_blocks for held in everywhere.values())
    assert cluster.head_node.node_id not in everywhere


@pytest.mark.timeout(300)
@pytest.mark.parametrize("algo_config", [BCConfig, MARWILConfig])
def test_two_learners_train_on_shards_decoded_on_their_own_nodes(
    cluster, episode_dir, algo_config
):
    config = _single_agent_config(algo_config(), episode_dir)
    with _running(config) as algo:
        results = [algo.train()["learners"][DEFAULT_MODULE_ID] for _ in range(2)]
        assert algo.offline_data.mode == "in_memory"
        _assert_each_shard_lives_on_its_learners_node(algo, cluster)
        # DDP across the nodes: both Learners hold the same weights.
        _assert_same_weights(_module_weights(algo, DEFAULT_MODULE_ID))
    assert all(math.isfinite(r["policy_loss"]) for r in results)
    # Both Learners' rows count: 5 updates x 128 rows x 2 Learners.
    assert results[-1]["num_module_steps_trained"] == 5 * 128 * 2
    if algo_config is MARWILConfig:
        assert all(math.isfinite(r["vf_loss"]) for r in results)


@pytest.mark.timeout(300)
@pytest.mark.parametrize("algo_name", ["bc", "marwil"])
def test_multi_agent_modules_train_on_two_nodes(cluster, two_agent_dir, algo_name):
    config = example.build_config(algo_name, two_agent_dir, updates_per_iteration=3)
    config = _on_two_worker_nodes(
        config.training(train_batch_size_per_learner=64).evaluation(
            evaluation_interval=None
        )
    )
    with _running(config) as algo:
        learners = algo.train()["learners"]
        assert algo.offline_data.mode == "in_memory"
        _assert_each_shard_lives_on_its_learners_node(algo, cluster)
        for shard in algo.offline_data.shards(2):
            assert {block.module_id for block in shard.blocks()} == {"p0", "p1"}
        for module_id in ("p0", "p1"):
            _assert_same_weights(_module_weights(algo, module_id))
            assert math.isfinite(learners[module_id]["policy_loss"])
            assert learners[module_id]["num_module_steps_trained"] == 3 * 64 * 2


@pytest.mark.timeout(300)
def test_beyond_memory_each_learner_decodes_its_cache_on_its_node(cluster, episode_dir):
    config = _single_agent_config(BCConfig(), episode_dir, budget=20_000)
    with _running(config) as algo:
        for _ in range(3):
            result = algo.train()["learners"][DEFAULT_MODULE_ID]
        assert algo.offline_data.mode == "beyond_memory"

        def cached_blocks(learner):
            cache = learner.__dict__["_episode_shard_sampler"].source
            refs = [visit.blocks_ref for visit in cache._resident]
            locations = ray.experimental.get_object_locations(refs)
            node = ray.get_runtime_context().get_node_id()
            return node, [locations[ref]["node_ids"] for ref in refs]

        states = [r.get() for r in algo.learner_group.foreach_learner(cached_blocks)]
        _assert_same_weights(_module_weights(algo, DEFAULT_MODULE_ID))
    assert math.isfinite(result["policy_loss"])
    for node, block_nodes in states:
        assert block_nodes and all(nodes == [node] for nodes in block_nodes)
    assert states[0][0] != states[1][0]


@pytest.mark.timeout(300)
def test_a_learner_node_that_dies_fails_the_next_train_call(cluster, episode_dir):
    """Never a silent loss: the surviving Learner's all-reduce (or the dead
    Learner's call) raises, and `train()` raises it."""
    config = _single_agent_config(BCConfig(), episode_dir)
    with _running(config) as algo:
        algo.train()
        victim = _node_of_each_learner(algo)[1]
        (node,) = [n for n in cluster.worker_nodes if n.node_id == victim]
        cluster.remove_node(node)
        with pytest.raises(ray.exceptions.RayError):
            algo.train()
    # The module's cluster gets its second worker node back.
    cluster.add_node(
        num_cpus=2, resources={LEARNER_SLOT: 1}, object_store_memory=NODE_STORE
    )


if __name__ == "__main__":
    import sys

    sys.exit(pytest.main(["-v", __file__]))
