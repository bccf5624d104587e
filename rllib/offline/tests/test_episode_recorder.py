"""The recorder: ray 2.60's output layout, no lost episodes, bounded memory.

Most tests build the EnvRunner in-process (no Ray cluster): recording episodes
uses pyarrow only. Column output (Ray Data) and training share the local
cluster.
"""

import gc
import logging
import math
import re
from pathlib import Path

import gymnasium as gym
import msgpack
import msgpack_numpy as mnp
import numpy as np
import pyarrow.parquet as pq
import pytest
from ray.data import ActorPoolStrategy
from ray.rllib.algorithms.bc import BCConfig
from ray.rllib.core.columns import Columns
from ray.rllib.env.single_agent_episode import SingleAgentEpisode
from ray.rllib.offline.offline_env_runner import OfflineSingleAgentEnvRunner
from ray.rllib.utils.compression import unpack_if_needed
from ray.rllib.utils.metrics import (
    ALL_MODULES,
    LEARNER_RESULTS,
    NUM_ENV_STEPS_TRAINED_LIFETIME,
)

from rllib.offline.episode_files.reader import read_episodes, read_spaces

#: Run directories as ray 2.60 names them: `run-<worker index:06d>-<sample()
#: call:05d>`, and in each the files: `<recorder id>_<file index:06d>.parquet`.
RUN_DIR = re.compile(r"run-\d{6}-\d{5}")
EPISODE_FILE = re.compile(r"[0-9a-f]{32}_\d{6}\.parquet")

RECORDER_LOGGER = "rllib.offline.offline_env_runner"


class EndlessEnv(gym.Env):
    """Never terminates; the observation is the step count."""

    observation_space = gym.spaces.Box(0.0, 1e6, (1,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def __init__(self, config=None):
        self.t = 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return np.array([0.0], np.float32), {}

    def step(self, action):
        self.t += 1
        return np.array([self.t], np.float32), 1.0, False, False, {}


class NestedObsEnv(gym.Env):
    """Dict observations with a Tuple inside; episodes of 7 steps."""

    observation_space = gym.spaces.Dict(
        {
            "position": gym.spaces.Box(-1.0, 1.0, (2,), np.float32),
            "parts": gym.spaces.Tuple(
                (gym.spaces.Box(0, 255, (2, 2), np.uint8), gym.spaces.Discrete(3))
            ),
        }
    )
    action_space = gym.spaces.Discrete(2)

    def __init__(self, config=None):
        self.t = 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.observation_space.seed(seed)
        self.t = 0
        return self.observation_space.sample(), {}

    def step(self, action):
        self.t += 1
        return self.observation_space.sample(), 1.0, self.t >= 7, False, {}


class RandomActionsRecorder(OfflineSingleAgentEnvRunner):
    """Records with random actions only: no RLModule (none fits NestedObsEnv)."""

    def make_module(self):
        self.module = None


def _config(output, env="CartPole-v1", output_config=None, **offline):
    offline.setdefault("output_write_episodes", True)
    return (
        BCConfig()
        .environment(env)
        .env_runners(num_envs_per_env_runner=1)
        .offline_data(output=str(output), output_config=output_config or {}, **offline)
    )


def _runner(output, *, worker_index=1, cls=OfflineSingleAgentEnvRunner, **kwargs):
    return cls(config=_config(output, **kwargs), worker_index=worker_index)


def _files(root: Path):
    """Visible files under `root`, relative, sorted."""
    return sorted(
        p.relative_to(root).as_posix()
        for p in root.rglob("*")
        if p.is_file() and not p.name.startswith((".", "_"))
    )


def _rows(path: Path) -> int:
    return pq.read_metadata(path).num_rows


# --------------------------------------------------- the run directories


def test_episode_layout_keeps_the_run_directories(tmp_path):
    """One `run-<worker>-<sample call>` directory per write, `item` rows."""
    runner = _runner(tmp_path)
    first = runner.sample(num_episodes=5, random_actions=True)
    second = runner.sample(num_episodes=3, random_actions=True)
    runner.stop()

    # The EnvRunner's subdirectory (its `_get_subdir_path`) and run names.
    subdir = runner._get_subdir_path()
    assert subdir == "cartpoleenv"
    files = _files(tmp_path)
    assert [f.rsplit("/", 1)[0] for f in files] == [
        "cartpoleenv/run-000001-00001",
        "cartpoleenv/run-000001-00002",
    ]
    for file in files:
        run_dir, name = file.split("/")[1:]
        assert RUN_DIR.fullmatch(run_dir) and EPISODE_FILE.fullmatch(name), file
    # Each row is an episode in the `item` column, decoded as ray 2.60's
    # `OfflinePreLearner` does (plain msgpack, `SingleAgentEpisode.from_state`).
    for file, sampled in zip(files, (first, second)):
        table = pq.read_table(tmp_path / file)
        assert table.column_names[0] == "item"
        episodes = [
            SingleAgentEpisode.from_state(msgpack.unpackb(item, object_hook=mnp.decode))
            for item in table.column("item").to_pylist()
        ]
        assert [e.id_ for e in episodes] == [e.id_ for e in sampled]
        assert all(e.is_done for e in episodes)


def test_full_files_go_into_the_run_of_their_sample_call(tmp_path):
    runner = _runner(
        tmp_path, output_max_rows_per_file=4, output_write_remaining_data=True
    )
    runner.sample(num_episodes=10, random_actions=True)
    runner.stop()
    files = _files(tmp_path)
    # Two full files in the first run; the rest at `stop()`, a run of its own.
    assert [f.rsplit("/", 1)[0] for f in files] == [
        "cartpoleenv/run-000001-00001",
        "cartpoleenv/run-000001-00001",
        "cartpoleenv/run-000001-00002",
    ]
    assert [_rows(tmp_path / f) for f in files] == [4, 4, 2]


def test_runner_without_worker_index_is_the_local_one(tmp_path):
    runner = OfflineSingleAgentEnvRunner(config=_config(tmp_path))
    runner.sample(num_episodes=1, random_actions=True)
    runner.stop()
    (file,) = _files(tmp_path)
    assert file.startswith("cartpoleenv/run-000000-00001/"), file


@pytest.mark.timeout(240)
def test_column_layout_and_compressed_columns_read_by_offline_data(
    ray_cluster, tmp_path
):
    from ray.rllib.offline.offline_data import OfflineData

    compressed = [Columns.OBS, Columns.ACTIONS]
    runner = _runner(
        tmp_path, output_write_episodes=False, output_compress_columns=compressed
    )
    sampled = runner.sample(num_timesteps=100, random_actions=True)
    run_dir = tmp_path / "cartpoleenv" / "run-000001-00001"
    assert [p.name for p in (tmp_path / "cartpoleenv").iterdir()] == [run_dir.name]
    runner.stop()

    # Read as ray 2.60's recorder test does: the run directory, columns
    # decompressed.
    config = _config(tmp_path).offline_data(
        input_=[run_dir.as_posix()],
        input_read_episodes=False,
        input_compress_columns=compressed,
    )
    data = OfflineData(config).data
    assert data.count() == 100
    batch = data.take_batch(100)
    observations = {tuple(unpack_if_needed(obs).tolist()) for obs in batch[Columns.OBS]}
    expected = {
        tuple(obs.tolist()) for e in sampled for obs in e.get_observations()[:-1]
    }
    assert observations == expected


@pytest.mark.timeout(180)
def test_column_rows_every_chunk_written(ray_cluster, tmp_path):
    runner = _runner(
        tmp_path,
        output_write_episodes=False,
        output_max_rows_per_file=5,
        output_write_remaining_data=True,
    )
    sampled = runner.sample(num_timesteps=23, random_actions=True)
    first_run = tmp_path / "cartpoleenv" / "run-000001-00001"
    before_stop = pq.read_table(first_run).num_rows
    runner.stop()
    assert before_stop == 20  # Four full chunks, not just the last one.
    last_run = tmp_path / "cartpoleenv" / "run-000001-00002"
    assert pq.read_table(last_run).num_rows == 3
    assert pq.read_table(tmp_path).num_rows == sum(len(e) for e in sampled) == 23


# ------------------------------------------------------------- lossless


def test_one_row_per_file_keeps_every_episode(tmp_path):
    runner = _runner(tmp_path, output_max_rows_per_file=1)
    sampled = runner.sample(num_episodes=6, random_actions=True)
    runner.stop()
    assert len(sampled) == 6
    back = {ep.id_: ep for ep in read_episodes(tmp_path)}
    assert sorted(back) == sorted(ep.id_ for ep in sampled)
    for episode in sampled:
        assert len(back[episode.id_]) == len(episode)
        assert back[episode.id_].get_return() == episode.get_return()
    files = list(tmp_path.rglob("*.parquet"))
    assert len(files) == 6
    assert all(pq.read_metadata(f).num_rows == 1 for f in files)
    assert read_spaces(tmp_path) == (
        runner.env.single_observation_space,
        runner.env.single_action_space,
    )


def test_chunks_are_joined_and_running_episodes_written_at_stop(tmp_path):
    runner = _runner(tmp_path)
    chunks = []
    for _ in range(4):
        chunks += runner.sample(num_timesteps=15, random_actions=True)
    running = {c.id_ for c in chunks if not c.is_done} - {
        c.id_ for c in chunks if c.is_done
    }
    runner.stop()
    back = {ep.id_: ep for ep in read_episodes(tmp_path)}
    assert set(back) == {c.id_ for c in chunks}
    for id_, episode in back.items():
        assert episode.t_started == 0
        assert len(episode) == sum(len(c) for c in chunks if c.id_ == id_)
        # Finished episodes as they ended; the one still running as truncated.
        assert episode.is_truncated == (id_ in running)
        assert episode.is_done
    assert sum(len(e) for e in back.values()) == 60
    assert len(running) <= 1  # None if the last episode ended at step 60.


def test_remaining_rows_follow_output_write_remaining_data(tmp_path, caplog):
    keep = _runner(
        tmp_path / "keep", output_max_rows_per_file=4, output_write_remaining_data=True
    )
    sampled = keep.sample(num_episodes=6, random_actions=True)
    keep.stop()
    assert len(list(read_episodes(tmp_path / "keep"))) == len(sampled)

    drop = _runner(tmp_path / "drop", output_max_rows_per_file=4)
    drop.sample(num_episodes=6, random_actions=True)
    with caplog.at_level(logging.WARNING, logger=RECORDER_LOGGER):
        drop.stop()
    assert len(list(read_episodes(tmp_path / "drop"))) == 4
    assert "dropping the 2 episode(s) of the last, partly filled file" in caplog.text
    assert "output_write_remaining_data=False" in caplog.text


def test_write_failure_raises(tmp_path, monkeypatch):
    def fail(*args, **kwargs):
        raise OSError("No space left on device (injected)")

    monkeypatch.setattr(pq.ParquetWriter, "write_table", fail)
    runner = _runner(tmp_path, output_max_rows_per_file=1)
    with pytest.raises(OSError, match="injected"):
        runner.sample(num_episodes=2, random_actions=True)
    runner.stop()
    assert not list(tmp_path.rglob("*.parquet"))


def test_dict_and_tuple_observations_intact(tmp_path):
    runner = _runner(tmp_path, env=NestedObsEnv, cls=RandomActionsRecorder)
    sampled = runner.sample(num_timesteps=10, random_actions=True)
    runner.stop()
    assert read_spaces(tmp_path) == (
        NestedObsEnv.observation_space,
        NestedObsEnv.action_space,
    )
    back = {e.id_: e for e in read_episodes(tmp_path)}
    assert sorted(back) == sorted({c.id_ for c in sampled})
    for chunk in sampled:
        episode = back[chunk.id_]
        for t in range(len(chunk) + 1):
            obs = episode.get_observations(t)
            expected = chunk.get_observations(t)
            assert isinstance(obs["parts"], tuple)
            np.testing.assert_array_equal(obs["position"], expected["position"])
            np.testing.assert_array_equal(obs["parts"][0], expected["parts"][0])
            assert obs["parts"][0].dtype == np.uint8
            assert obs["parts"][1] == expected["parts"][1]


# ---------------------------------------------------- bounded running memory


def test_endless_episode_is_written_in_truncated_segments(tmp_path, caplog):
    runner = _runner(
        tmp_path, env=EndlessEnv, output_config={"max_running_episode_steps": 25}
    )
    with caplog.at_level(logging.INFO, logger=RECORDER_LOGGER):
        for _ in range(11):
            (chunk,) = runner.sample(num_timesteps=10, random_actions=True)
            # Between `sample()` calls the recorder holds less than the bound.
            held = sum(len(e) for e in runner._running_episodes.values())
            assert held < 25
        runner.stop()
    segments = sorted(read_episodes(tmp_path), key=lambda e: e.t_started)
    # 110 steps: a segment each time 30 are held; the last 20 at `stop()`.
    assert [e.id_ for e in segments] == [f"{chunk.id_}-{i}" for i in range(4)]
    assert [len(e) for e in segments] == [30, 30, 30, 20]
    assert all(e.is_truncated and not e.is_terminated for e in segments)
    # Contiguous: the segments together are the whole episode, step by step.
    observations = [segments[0].get_observations(0)[0]]
    for segment in segments:
        assert segment.t_started == len(observations) - 1
        np.testing.assert_array_equal(segment.get_observations(0), observations[-1])
        observations += [o[0] for o in segment.get_observations()[1:]]
    np.testing.assert_array_equal(observations, np.arange(111, dtype=np.float32))
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert "reached `max_running_episode_steps`=25" in warnings[0].getMessage()


def test_bound_off_holds_the_whole_episode(tmp_path):
    runner = _runner(
        tmp_path, env=EndlessEnv, output_config={"max_running_episode_steps": None}
    )
    for _ in range(5):
        (chunk,) = runner.sample(num_timesteps=10, random_actions=True)
    assert not _files(tmp_path)
    runner.stop()
    (episode,) = read_episodes(tmp_path)
    assert (episode.id_, len(episode), episode.is_truncated) == (chunk.id_, 50, True)


def test_stop_can_drop_running_episodes(tmp_path, caplog):
    runner = _runner(
        tmp_path,
        env=EndlessEnv,
        output_config={"write_running_episodes_at_stop": False},
    )
    runner.sample(num_timesteps=10, random_actions=True)
    with caplog.at_level(logging.WARNING, logger=RECORDER_LOGGER):
        runner.stop()
    assert not _files(tmp_path)
    assert "dropping 1 episode(s) still running at `stop()` (10 env steps)" in (
        caplog.text
    )


def test_episode_cut_off_by_a_reset_is_written_as_truncated(tmp_path):
    runner = _runner(tmp_path, env=EndlessEnv)
    (cut_off,) = runner.sample(num_timesteps=5, random_actions=True)
    (fresh,) = runner.sample(num_timesteps=5, random_actions=True, force_reset=True)
    assert cut_off.id_ != fresh.id_
    assert list(runner._running_episodes) == [fresh.id_]
    (episode,) = read_episodes(tmp_path)
    assert (episode.id_, len(episode), episode.is_truncated) == (cut_off.id_, 5, True)
    runner.stop()


@pytest.mark.parametrize(
    "output_config, match",
    [
        (
            {"max_running_episode_steps": 0},
            r"`output_config\['max_running_episode_steps'\]` must be a positive "
            r"int or None, got 0",
        ),
        (
            {"max_running_episode_steps": 2.5},
            r"must be a positive int or None, got 2.5",
        ),
        (
            {"write_running_episodes_at_stop": "yes"},
            r"`output_config\['write_running_episodes_at_stop'\]` must be a bool, "
            r"got 'yes'",
        ),
    ],
)
def test_bad_recorder_settings(tmp_path, output_config, match):
    with pytest.raises(ValueError, match=match):
        _runner(tmp_path, output_config=output_config)


def test_output_config_is_not_deprecated(tmp_path, caplog, recwarn):
    """`config.offline_data(output_config=...)` passes validation silently."""
    with caplog.at_level(logging.WARNING):
        config = (
            _config(tmp_path, output_config={"max_running_episode_steps": 7})
            .env_runners(batch_mode="complete_episodes")
            .offline_data(dataset_num_iters_per_learner=1)
        )
        config.validate()
    assert "deprecat" not in caplog.text.lower()
    assert "output_config" not in caplog.text
    assert not [w for w in recwarn if "deprecat" in str(w.message).lower()]
    runner = OfflineSingleAgentEnvRunner(config=config)
    assert runner.recorder_settings.max_running_episode_steps == 7
    runner.stop()


# ------------------------------------------------------------- training


@pytest.mark.timeout(300)
def test_recorded_episodes_and_segments_train_bc(ray_cluster, tmp_path):
    """Whole, segmented and cut-at-stop episodes train with `input_read_episodes`."""
    runner = _runner(
        tmp_path / "recorded",
        output_max_rows_per_file=8,
        output_write_remaining_data=True,
        output_config={"max_running_episode_steps": 12},
    )
    for _ in range(6):
        runner.sample(num_timesteps=50, random_actions=True)
    runner.stop()
    episodes = list(read_episodes(tmp_path / "recorded"))
    assert any("-" in e.id_ for e in episodes)  # Some were written in segments.
    assert sum(len(e) for e in episodes) == 300

    config = (
        BCConfig()
        .environment(
            observation_space=runner.env.single_observation_space,
            action_space=runner.env.single_action_space,
        )
        .learners(num_learners=0)
        .training(train_batch_size_per_learner=64, lr=0.001)
        .offline_data(
            input_=[str(tmp_path / "recorded")],
            input_read_episodes=True,
            input_read_batch_size=4,
            dataset_num_iters_per_learner=2,
            map_batches_kwargs={"compute": ActorPoolStrategy(size=1), "num_cpus": 1},
        )
    )
    algo = config.build_algo()
    try:
        result = algo.train()
    finally:
        algo.stop()
        del algo
        gc.collect()  # Drop Ray Data iterators while Ray is still up.
    learner = result[LEARNER_RESULTS]
    assert learner[ALL_MODULES][NUM_ENV_STEPS_TRAINED_LIFETIME] >= 2 * 64
    assert math.isfinite(learner["default_policy"]["policy_loss"])


if __name__ == "__main__":
    import sys

    sys.exit(pytest.main(["-v", __file__]))
