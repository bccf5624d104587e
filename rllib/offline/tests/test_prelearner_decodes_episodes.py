"""The OfflinePreLearner, called directly on Ray Data-style batches.

No Ray cluster: the prelearner is a plain callable, so these tests feed it the
dict of numpy columns Ray Data would.
"""

import gymnasium as gym
import numpy as np
import pyarrow.parquet as pq
import pytest
from ray.rllib.algorithms.bc import BCConfig
from ray.rllib.core import DEFAULT_MODULE_ID
from ray.rllib.core.columns import Columns
from ray.rllib.offline.offline_prelearner import OfflinePreLearner

from rllib.offline.episode_files.writer import write_episodes
from rllib.offline.tests.episode_factory import (
    cartpole_episodes,
    write_msgpack_episodes,
)

BATCH_SIZE = 32


def _batch_from_files(path):
    table = pq.read_table(path)
    return {name: table.column(name).to_numpy() for name in table.column_names}


def _prelearner(input_path, read_episodes=True, observation_space=None, **offline):
    env = gym.make("CartPole-v1")
    obs_space = observation_space or env.observation_space
    config = (
        BCConfig()
        .environment(observation_space=obs_space, action_space=env.action_space)
        .training(train_batch_size_per_learner=BATCH_SIZE)
        .offline_data(
            input_=[str(input_path)], input_read_episodes=read_episodes, **offline
        )
    )
    module_spec = config.get_multi_rl_module_spec(
        spaces={DEFAULT_MODULE_ID: (env.observation_space, env.action_space)},
        inference_only=False,
    )
    return OfflinePreLearner(
        config=config,
        spaces=(obs_space, env.action_space),
        module_spec=module_spec,
    )


def _check_output(out):
    obs = out[f"{DEFAULT_MODULE_ID}/{Columns.OBS}"]
    assert tuple(obs.shape[1:]) == (4,)
    assert len(obs) >= BATCH_SIZE
    assert len(out[f"{DEFAULT_MODULE_ID}/{Columns.ACTIONS}"]) == len(obs)


@pytest.fixture(scope="module")
def episodes():
    return cartpole_episodes(4, max_steps=40)[1]


@pytest.mark.parametrize("compression", [None, "zstd"])
def test_decodes_writer_files(tmp_path, episodes, compression):
    env = gym.make("CartPole-v1")
    (file,) = write_episodes(
        episodes,
        tmp_path,
        observation_space=env.observation_space,
        action_space=env.action_space,
        compression=compression,
    )
    out = _prelearner(tmp_path)(_batch_from_files(file))
    _check_output(out)


def test_decodes_plain_msgpack_files(tmp_path, episodes):
    write_msgpack_episodes(episodes, str(tmp_path / "msgpack.parquet"))
    out = _prelearner(tmp_path)(_batch_from_files(tmp_path / "msgpack.parquet"))
    _check_output(out)


def test_corrupt_row_is_identified(tmp_path, episodes):
    (file,) = write_episodes(episodes, tmp_path)
    batch = _batch_from_files(file)
    batch["item"] = batch["item"].copy()
    batch["item"][2] = b"\x81\xa3bad"
    broken_id = episodes[2].id_
    with pytest.raises(
        ValueError,
        match=rf"batch row 2 \(episode id `{broken_id}`\).*include_paths",
    ):
        _prelearner(tmp_path)(batch)
    batch["path"] = np.array([file] * len(batch["item"]))
    with pytest.raises(
        ValueError, match=r"batch row 2 \(episode id `\w+`, file `.*\.parquet`\)"
    ):
        _prelearner(tmp_path)(batch)


def test_missing_item_column(tmp_path, episodes):
    with pytest.raises(ValueError, match="needs an `item` column"):
        _prelearner(tmp_path)({"obs": np.zeros((2, 4))})


def test_tabular_input_still_works(tmp_path, episodes):
    episode = episodes[0]
    n = len(episode)
    obs = np.asarray(episode.get_observations())
    batch = {
        Columns.EPS_ID: np.array([episode.id_] * n),
        Columns.OBS: obs[:-1],
        Columns.NEXT_OBS: obs[1:],
        Columns.ACTIONS: np.asarray(episode.get_actions()),
        Columns.REWARDS: np.asarray(episode.get_rewards(), np.float32),
        Columns.TERMINATEDS: np.array([False] * (n - 1) + [True]),
        Columns.TRUNCATEDS: np.array([False] * n),
    }
    out = _prelearner(tmp_path, read_episodes=False)(batch)
    assert tuple(out[f"{DEFAULT_MODULE_ID}/{Columns.OBS}"].shape) == (n, 4)


def test_old_sample_batch_recordings_still_work(tmp_path, episodes):
    rows = episodes[:2]

    def column(get, dtype=None):
        out = np.empty(len(rows), dtype=object)
        for i, episode in enumerate(rows):
            out[i] = np.asarray(get(episode), dtype=dtype)
        return out

    batch = {
        Columns.EPS_ID: column(lambda e: [e.id_] * len(e)),
        Columns.OBS: column(lambda e: e.get_observations()[:-1], np.float32),
        Columns.NEXT_OBS: column(lambda e: e.get_observations()[1:], np.float32),
        Columns.ACTIONS: column(lambda e: e.get_actions()),
        Columns.REWARDS: column(lambda e: e.get_rewards(), np.float32),
        Columns.TERMINATEDS: column(lambda e: [False] * (len(e) - 1) + [True]),
    }
    prelearner = _prelearner(
        tmp_path, read_episodes=False, input_read_sample_batches=True
    )
    out = prelearner(batch)
    assert tuple(out[f"{DEFAULT_MODULE_ID}/{Columns.OBS}"].shape)[1:] == (4,)


if __name__ == "__main__":
    import sys

    sys.exit(pytest.main(["-v", __file__]))
