"""Learners sample their shards: equal update counts, `policies_to_train`.

The training tests use the shared local Ray cluster (`ray_cluster` fixture).
"""

import contextlib
import gc

import gymnasium as gym
import numpy as np
import pytest
from ray.rllib.algorithms.marwil import MARWILConfig
from ray.rllib.core import ALL_MODULES, DEFAULT_MODULE_ID
from ray.rllib.core.learner.training_data import TrainingData
from ray.rllib.utils.metrics import DATASET_NUM_ITERS_TRAINED

from rllib.examples.offline_rl import train_multi_agent_offline as example
from rllib.examples.offline_rl.scripted_cartpole import (
    balance_action,
    record_episodes,
    record_multi_agent_episodes,
)
from rllib.offline.episode_files.writer import write_episodes
from rllib.offline.in_memory.shard_sampler import (
    DEFAULT_MAX_UPDATES,
    default_num_updates,
)

BATCH_SIZE = 64


@contextlib.contextmanager
def _running(config):
    algo = config.build_algo()
    try:
        yield algo
    finally:
        algo.stop()
        gc.collect()


def test_default_updates_are_one_pass_over_all_data_capped():
    # 1000 timesteps, 2 Learners x 64 rows: ceil(1000 / 128) = 8 updates each.
    assert default_num_updates(1000, 2, BATCH_SIZE) == 8
    # Two modules take 2 x 64 rows per update on each Learner.
    assert default_num_updates(1000, 2, BATCH_SIZE, num_modules=2) == 4
    assert default_num_updates(10, 2, BATCH_SIZE) == 1
    assert default_num_updates(10**9, 2, BATCH_SIZE) == DEFAULT_MAX_UPDATES


@pytest.fixture(scope="module")
def unequal_files(tmp_path_factory):
    """One 200-step episode and six short ones, one episode per file.

    Dealt out by timesteps, one Learner gets the long episode (200 steps),
    the other the short ones (far fewer): a pass over its own shard would
    take 4 updates of 64 rows on one Learner and 1 or 2 on the other.
    """
    path = tmp_path_factory.mktemp("unequal_shards")
    policy = lambda obs: balance_action(obs[2], obs[3])  # noqa: E731
    long_env = gym.make("CartPole-v1", max_episode_steps=200)
    short_env = gym.make("CartPole-v1", max_episode_steps=12)
    episodes = record_episodes(long_env, 1, policy, seed=0)
    episodes += record_episodes(short_env, 6, policy, seed=1)
    write_episodes(
        episodes,
        path,
        observation_space=long_env.observation_space,
        action_space=long_env.action_space,
        max_rows_per_file=1,
    )
    return str(path), [len(e) for e in episodes]


def _update_on_own_shard(learner):
    shard = learner._episode_shard_sampler.shard
    return learner.update(
        training_data=TrainingData(data_iterators=[shard]),
        minibatch_size=BATCH_SIZE,
        num_iters=None,
    )


# A regression hangs in a DDP all-reduce, where the default signal method
# never fires: the thread method ends the test process instead.
@pytest.mark.timeout(240, method="thread")
def test_two_learners_on_unequal_shards_run_equal_default_updates(
    ray_cluster, unequal_files
):
    """`dataset_num_iters_per_learner` unset: no hang, the same count each."""
    path, lengths = unequal_files
    env = gym.make("CartPole-v1")
    config = (
        MARWILConfig()
        .environment(
            observation_space=env.observation_space, action_space=env.action_space
        )
        .rl_module(model_config={"fcnet_hiddens": [16]})
        .learners(num_learners=2)
        .training(train_batch_size_per_learner=BATCH_SIZE)
        .offline_data(input_=[path], input_read_episodes=True)
    )
    with _running(config) as algo:
        results = [algo.train() for _ in range(2)]
        shard_sizes = sorted(s.num_timesteps for s in algo.offline_data.shards(2))
        # One more update() on each Learner, with its own shard, to read
        # what each one reports (train() sums the Learners' counts).
        per_learner = [
            call.get()[ALL_MODULES][DATASET_NUM_ITERS_TRAINED]
            for call in algo.learner_group.foreach_learner(_update_on_own_shard)
        ]
    total = sum(lengths)
    # The shards differ: a pass over each one's own would differ in updates.
    assert shard_sizes == [total - 200, 200]
    assert -(-shard_sizes[0] // BATCH_SIZE) < -(-shard_sizes[1] // BATCH_SIZE)
    # Every Learner ran one pass over all data per train(): ceil(total / 128).
    expected = -(-total // (2 * BATCH_SIZE))
    assert per_learner == [expected, expected]
    stats = results[-1]["learners"]
    assert stats[ALL_MODULES]["dataset_num_iters_trained"] == 2 * expected
    assert stats[DEFAULT_MODULE_ID]["num_module_steps_trained"] == (
        2 * expected * BATCH_SIZE
    )
    assert np.isfinite(stats[DEFAULT_MODULE_ID]["vf_loss"])


@pytest.fixture(scope="module")
def two_agent_data(tmp_path_factory):
    data_dir = tmp_path_factory.mktemp("two_agent_frozen")
    episodes = record_multi_agent_episodes(
        example.make_env(), 12, example.scripted_action, epsilon=0.5, seed=3
    )
    write_episodes(episodes, data_dir, max_rows_per_file=4)
    return data_dir


def _weights(algo):
    return {
        module_id: {name: np.array(value) for name, value in state.items()}
        for module_id, state in algo.learner_group.get_weights().items()
    }


@pytest.mark.timeout(240)
def test_modules_left_out_of_policies_to_train_stay_frozen(ray_cluster, two_agent_data):
    """Multi-agent MARWIL in memory trains only `p0` (BC samples the same way)."""
    config = (
        example.build_config("marwil", two_agent_data, updates_per_iteration=2)
        .learners(num_learners=1)
        .training(train_batch_size_per_learner=256)
        .evaluation(evaluation_interval=None)
        .multi_agent(policies_to_train=["p0"])
    )
    with _running(config) as algo:
        before = _weights(algo)
        learners = algo.train()["learners"]
        after = _weights(algo)
        assert algo.offline_data.mode == "in_memory"
    for name, value in after["p1"].items():
        np.testing.assert_array_equal(value, before["p1"][name], err_msg=name)
    assert any(
        not np.array_equal(value, before["p0"][name])
        for name, value in after["p0"].items()
    )
    assert learners["p0"]["num_module_steps_trained"] == 2 * 256
    assert "num_module_steps_trained" not in learners.get("p1", {})


if __name__ == "__main__":
    import sys

    sys.exit(pytest.main(["-v", __file__]))
