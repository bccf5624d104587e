"""An offline-only Algorithm (no EnvRunners) restores from its checkpoint and
returns its RLModule from `get_module`."""

import sys

import gymnasium as gym
import msgpack
import msgpack_numpy
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from ray.rllib.algorithms.algorithm import Algorithm
from ray.rllib.algorithms.bc import BCConfig
from ray.rllib.core import DEFAULT_MODULE_ID
from ray.rllib.env.single_agent_episode import SingleAgentEpisode


def _write_cartpole_episodes(directory, num_episodes=4, seed=0):
    """Random-action CartPole episodes, one msgpack'd episode state per row (the
    format of RLlib's offline recorder)."""
    env = gym.make("CartPole-v1")
    rng = np.random.default_rng(seed)
    payloads = []
    for index in range(num_episodes):
        obs, _ = env.reset(seed=seed + index)
        episode = SingleAgentEpisode(observations=[obs])
        terminated = truncated = False
        while not (terminated or truncated):
            action = int(rng.integers(2))
            obs, reward, terminated, truncated, _ = env.step(action)
            episode.add_env_step(
                obs, action, reward, terminated=terminated, truncated=truncated
            )
        payloads.append(
            msgpack.packb(episode.get_state(), default=msgpack_numpy.encode)
        )
    pq.write_table(pa.table({"item": payloads}), str(directory / "part0.parquet"))
    return str(directory)


def _bc(data_dir):
    env = gym.make("CartPole-v1")
    return (
        BCConfig()
        .environment(
            observation_space=env.observation_space, action_space=env.action_space
        )
        .rl_module(model_config={"fcnet_hiddens": [8]})
        .training(train_batch_size_per_learner=32)
        .offline_data(
            input_=[data_dir],
            input_read_episodes=True,
            dataset_num_iters_per_learner=1,
        )
        .debugging(seed=0)
    )


def _module_weights(module):
    return {k: v.detach().cpu().numpy() for k, v in module.state_dict().items()}


def _assert_same_weights(actual, expected):
    assert actual.keys() == expected.keys()
    for name, value in expected.items():
        np.testing.assert_array_equal(actual[name], value, err_msg=name)


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    directory = tmp_path_factory.mktemp("episodes")
    return _write_cartpole_episodes(directory)


@pytest.mark.timeout(300)
def test_get_module_returns_the_learners_module(ray_cluster, data_dir):
    algo = _bc(data_dir).build_algo()
    try:
        algo.train()
        assert algo.env_runner_group is None
        module = algo.get_module()
        assert module is not None
        _assert_same_weights(
            _module_weights(module),
            algo.learner_group.get_weights()[DEFAULT_MODULE_ID],
        )
    finally:
        algo.stop()


@pytest.mark.timeout(300)
def test_from_checkpoint_restores_the_trained_weights(ray_cluster, data_dir, tmp_path):
    algo = _bc(data_dir).build_algo()
    try:
        algo.train()
        trained = algo.learner_group.get_weights()[DEFAULT_MODULE_ID]
        checkpoint = algo.save_to_path(str(tmp_path / "checkpoint"))
    finally:
        algo.stop()

    restored = Algorithm.from_checkpoint(checkpoint)
    try:
        _assert_same_weights(
            restored.learner_group.get_weights()[DEFAULT_MODULE_ID], trained
        )
        restored.train()
    finally:
        restored.stop()


if __name__ == "__main__":
    sys.exit(pytest.main(["-v", __file__]))
