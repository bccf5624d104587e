"""OfflineData on episode files: driver checks, decode once, in memory or stream.

Driver-side checks (spaces from the data, missing or empty input, spaces
that contradict the config) run without Ray, through `config.validate()`,
which `build_algo()` calls. Everything else uses the shared local cluster.
"""

import logging
import pathlib
import shutil

import gymnasium as gym
import numpy as np
import pytest
from ray.rllib.algorithms.bc import BCConfig
from ray.rllib.algorithms.marwil import MARWILConfig
from ray.rllib.core import DEFAULT_MODULE_ID
from ray.rllib.evaluation.postprocessing import Postprocessing

from rllib.examples.offline_rl.scripted_cartpole import write_hand_rolled_files
from rllib.offline.episode_files.writer import write_episodes
from rllib.offline.tests.episode_factory import cartpole_episodes
from rllib.utils.postprocessing.bootstrapped_returns import (
    BOOTSTRAP_DISCOUNT,
    BOOTSTRAP_OBS,
    RETURNS_TO_BOOTSTRAP,
)

ENV = gym.make("CartPole-v1")


@pytest.fixture(scope="module")
def writer_dir(tmp_path_factory):
    """Episodes written by `EpisodeWriter` (both spaces recorded), 3 files."""
    path = tmp_path_factory.mktemp("writer_episodes")
    _, episodes = cartpole_episodes(9, max_steps=60)
    write_episodes(
        episodes,
        path,
        observation_space=ENV.observation_space,
        action_space=ENV.action_space,
        max_rows_per_file=3,
    )
    return str(path)


@pytest.fixture(scope="module")
def hand_rolled_dir(tmp_path_factory):
    """The hand-rolled format: msgpack'd states with per-step lists, 1 file."""
    path = tmp_path_factory.mktemp("hand_rolled")
    _, episodes = cartpole_episodes(6, max_steps=60, seed=3)
    write_hand_rolled_files(episodes, path)
    return str(path)


def _config(path, algo=BCConfig, **environment):
    return (
        algo()
        .environment(**environment)
        .training(train_batch_size_per_learner=64)
        .offline_data(
            input_=[path], input_read_episodes=True, dataset_num_iters_per_learner=2
        )
    )


# -- On the driver, at `build_algo()` -----------------------------------------


def test_spaces_come_from_the_data(writer_dir, caplog):
    config = _config(writer_dir, env="CartPole-v1")
    with caplog.at_level(logging.INFO, logger="ray.rllib.algorithms.algorithm_config"):
        config.validate()
    assert config.observation_space == ENV.observation_space
    assert config.action_space == ENV.action_space
    assert any("taken from the episode files" in r.message for r in caplog.records)


def test_space_contradicting_the_data_fails_naming_both(writer_dir):
    wider = gym.spaces.Box(-10.0, 10.0, (4,), np.float32)
    config = _config(writer_dir, observation_space=wider, action_space=ENV.action_space)
    with pytest.raises(
        ValueError,
        match=r"recorded with `observation_space` Box\(\[-4\.8.*but training uses "
        r"`observation_space` Box\(-10\.0, 10\.0",
    ):
        config.validate()


def test_missing_and_empty_input_fail_naming_the_input(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"input_=.*does not exist"):
        _config(str(tmp_path / "nope"), env="CartPole-v1").validate()
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match=r"input_=.*No parquet files"):
        _config(str(tmp_path / "empty"), env="CartPole-v1").validate()


def test_files_recording_other_spaces_fail(tmp_path):
    _, episodes = cartpole_episodes(2, max_steps=10)
    write_episodes(episodes[:1], tmp_path, observation_space=ENV.observation_space)
    other = gym.spaces.Box(-1.0, 1.0, (4,), np.float32)
    write_episodes(episodes[1:], tmp_path, observation_space=other)
    with pytest.raises(ValueError, match="disagree on the `observation_space`"):
        _config(str(tmp_path), env="CartPole-v1").validate()


def test_data_without_recorded_spaces_still_needs_spaces(hand_rolled_dir):
    with pytest.raises(ValueError, match="must be provided"):
        _config(hand_rolled_dir, env="CartPole-v1").validate()


def test_a_truncated_file_fails_naming_it_and_the_fix(writer_dir, tmp_path):
    # A writer killed mid-file or a copy cut short: pyarrow alone says "Parquet
    # magic bytes not found in footer" and names no file.
    for source in sorted(pathlib.Path(writer_dir).glob("*.parquet")):
        shutil.copy(source, tmp_path / source.name)
    broken = sorted(tmp_path.glob("*.parquet"))[1]
    broken.write_bytes(broken.read_bytes()[:100])
    config = _config(str(tmp_path), env="CartPole-v1")
    with pytest.raises(ValueError) as raised:
        config.build_algo()
    message = str(raised.value)
    assert f"Episode file `{broken}` is not a readable parquet file" in message
    assert "re-write it if it is a truncated episode file" in message


# -- Training ------------------------------------------------------------------


@pytest.mark.timeout(300)
def test_in_memory_mode_decodes_once_and_samples_every_episode(
    ray_cluster, writer_dir, hand_rolled_dir, caplog
):
    config = _config(
        [writer_dir, hand_rolled_dir],
        algo=MARWILConfig,
        observation_space=ENV.observation_space,
        action_space=ENV.action_space,
    )
    config.input_ = [writer_dir, hand_rolled_dir]
    with caplog.at_level(logging.INFO, logger="ray.rllib.offline.offline_data"):
        algo = config.build_algo()
        try:
            algo.train()
            algo.train()
            data = algo.offline_data
            assert data.mode == "in_memory"
            assert data._store.num_episodes == 15
            batch = data.sample(num_samples=2000).policy_batches[DEFAULT_MODULE_ID]
        finally:
            algo.stop()
    assert any("Offline data in memory" in r.message for r in caplog.records)
    # Rows carry their value-target inputs; the Learner adds the targets.
    for column in (RETURNS_TO_BOOTSTRAP, BOOTSTRAP_OBS, BOOTSTRAP_DISCOUNT):
        assert column in batch
    assert Postprocessing.VALUE_TARGETS not in batch


@pytest.mark.timeout(300)
def test_a_budget_of_0_streams_with_the_same_rows(ray_cluster, writer_dir):
    config = _config(writer_dir, algo=MARWILConfig, env="CartPole-v1").offline_data(
        memory_budget=0
    )
    algo = config.build_algo()
    try:
        results = algo.train()
        assert algo.offline_data.mode == "streaming"
        # The mapped dataset: the prelearner's flattened output rows.
        rows = algo.offline_data.data.take_batch(64)
    finally:
        algo.stop()
    for column in (RETURNS_TO_BOOTSTRAP, BOOTSTRAP_DISCOUNT):
        assert f"{DEFAULT_MODULE_ID}/{column}" in rows
    # The streaming prelearner leaves the targets to the Learner.
    assert f"{DEFAULT_MODULE_ID}/{Postprocessing.VALUE_TARGETS}" not in rows
    assert np.isfinite(results["learners"][DEFAULT_MODULE_ID]["vf_loss"])


@pytest.mark.timeout(300)
def test_over_the_memory_budget_rows_carry_their_value_target_inputs(
    ray_cluster, writer_dir
):
    """A budget of 1 byte: every Learner caches one episode at a time."""
    config = _config(writer_dir, algo=MARWILConfig, env="CartPole-v1").offline_data(
        memory_budget=1
    )
    algo = config.build_algo()
    try:
        results = algo.train()
        assert algo.offline_data.mode == "beyond_memory"
        batch = algo.offline_data.sample(num_samples=64)
        batch = batch.policy_batches[DEFAULT_MODULE_ID]
    finally:
        algo.stop()
    for column in (RETURNS_TO_BOOTSTRAP, BOOTSTRAP_OBS, BOOTSTRAP_DISCOUNT):
        assert column in batch
    assert np.isfinite(results["learners"][DEFAULT_MODULE_ID]["vf_loss"])


@pytest.mark.timeout(300)
def test_shards_are_disjoint_and_balanced(ray_cluster, writer_dir):
    from rllib.offline.in_memory.store import EpisodeStore
    from rllib.offline.offline_data import list_input_episodes

    config = _config(writer_dir, env="CartPole-v1")
    filesystem, files, _, _ = list_input_episodes(config)
    store = EpisodeStore.start(
        files,
        filesystem=filesystem,
        observation_space=ENV.observation_space,
        action_space=ENV.action_space,
        min_ranges=2,
    )
    assert store.wait(10**9)
    shards = store.shards(2)
    refs = [{r.hex() for r in shard.block_refs} for shard in shards]
    assert not refs[0] & refs[1]
    ids = [
        {i for block in shard.blocks() for i in block.ids.tolist()} for shard in shards
    ]
    assert not ids[0] & ids[1] and len(ids[0] | ids[1]) == 9
    steps = [shard.num_timesteps for shard in shards]
    assert min(steps) > 0
    with pytest.raises(ValueError, match="each Learner needs at least one"):
        store.shards(100)


@pytest.mark.timeout(400)
def test_tune_workflow_without_spaces(ray_cluster, writer_dir):
    """The workflow from the user's report: an env name, no spaces, Tuner."""
    from ray import tune

    config = (
        MARWILConfig()
        .environment("CartPole-v1")
        .learners(num_learners=0)
        .training(train_batch_size_per_learner=32)
        .offline_data(
            input_=[writer_dir],
            input_read_episodes=True,
            input_read_batch_size=32,
            dataset_num_iters_per_learner=1,
        )
    )
    results = tune.Tuner(
        config.algo_class,
        param_space=config,
        run_config=tune.RunConfig(stop={"training_iteration": 2}, verbose=0),
    ).fit()
    assert not results.errors, results.errors
    result = results.get_best_result(metric="training_iteration", mode="max")
    assert result.metrics["training_iteration"] == 2
    assert np.isfinite(result.metrics["learners"][DEFAULT_MODULE_ID]["vf_loss"])


if __name__ == "__main__":
    import sys

    sys.exit(pytest.main(["-v", __file__]))
