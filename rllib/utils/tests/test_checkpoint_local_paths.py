"""Checkpoints save and load at local paths as users type them: relative,
``./``-prefixed and ``~``-prefixed (ray 2.60 fails on each with
``ArrowInvalid: URI has empty scheme``). URIs and paths on a given
filesystem keep their meaning."""

import os
import sys

import gymnasium as gym
import pyarrow.fs
import pytest
import torch
from ray.rllib.algorithms.algorithm import Algorithm
from ray.rllib.algorithms.ppo import PPOConfig
from ray.rllib.algorithms.ppo.torch.default_ppo_torch_rl_module import (
    DefaultPPOTorchRLModule,
)
from ray.rllib.core.rl_module.rl_module import RLModule, RLModuleSpec
from ray.rllib.utils.checkpoints import get_checkpoint_info


def _module(seed):
    torch.manual_seed(seed)
    env = gym.make("CartPole-v1")
    return RLModuleSpec(
        module_class=DefaultPPOTorchRLModule,
        observation_space=env.observation_space,
        action_space=env.action_space,
        model_config={"fcnet_hiddens": [8]},
    ).build()


def _assert_same_weights(a, b):
    state_a, state_b = a.get_state(), b.get_state()
    assert state_a.keys() == state_b.keys()
    for key, value in state_a.items():
        assert torch.equal(torch.as_tensor(value), torch.as_tensor(state_b[key])), key


@pytest.fixture
def in_tmp_home(tmp_path, monkeypatch):
    """The current directory and `~` both in `tmp_path`."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path))
    return tmp_path


@pytest.mark.parametrize("typed", ["ckpt", "./ckpt", "~/ckpt", "sub/../ckpt"])
def test_module_saves_and_loads_at_a_local_path_as_typed(in_tmp_home, typed):
    saved = _module(seed=0)
    returned = saved.save_to_path(typed)

    assert returned == str(in_tmp_home / "ckpt")
    assert (in_tmp_home / "ckpt" / "module_state.pkl").is_file()
    _assert_same_weights(RLModule.from_checkpoint(typed), saved)
    other = _module(seed=1)
    other.restore_from_path(typed)
    _assert_same_weights(other, saved)


def test_uris_and_given_filesystems_keep_their_meaning(in_tmp_home):
    saved = _module(seed=0)
    uri = (in_tmp_home / "by_uri").as_uri()
    assert uri.startswith("file:///")
    saved.save_to_path(uri)
    _assert_same_weights(RLModule.from_checkpoint(uri), saved)

    # A path on a given filesystem is that filesystem's, not the current
    # directory's: here a subtree rooted elsewhere.
    root = in_tmp_home / "root"
    root.mkdir()
    subtree = pyarrow.fs.SubTreeFileSystem(str(root), pyarrow.fs.LocalFileSystem())
    saved.save_to_path("ckpt", filesystem=subtree)
    assert (root / "ckpt" / "module_state.pkl").is_file()
    assert not (in_tmp_home / "ckpt").exists()
    _assert_same_weights(RLModule.from_checkpoint("ckpt", filesystem=subtree), saved)


@pytest.mark.timeout(240)
def test_algorithm_round_trip_at_a_relative_path(ray_cluster, in_tmp_home):
    config = (
        PPOConfig()
        .environment("CartPole-v1")
        .env_runners(num_env_runners=0)
        .rl_module(model_config={"fcnet_hiddens": [8]})
        .training(train_batch_size_per_learner=64, minibatch_size=32, num_epochs=1)
        .debugging(seed=0)
    )
    algo = config.build_algo()
    try:
        algo.train()
        algo.save_to_path("algo_ckpt")
        trained = algo.get_module()
    finally:
        algo.stop()
    info = get_checkpoint_info("algo_ckpt")
    assert info["type"] == "Algorithm"
    assert info["checkpoint_dir"] == os.path.join(str(in_tmp_home), "algo_ckpt")

    restored = Algorithm.from_checkpoint("./algo_ckpt")
    try:
        _assert_same_weights(restored.get_module(), trained)
    finally:
        restored.stop()


if __name__ == "__main__":
    sys.exit(pytest.main(["-v", __file__]))
