"""The fork's recorder writes every sampled episode and raises on write errors.

The EnvRunner is built in-process (no Ray cluster): recording episodes uses
pyarrow only.
"""

import pyarrow.parquet as pq
import pytest
from ray.rllib.algorithms.bc import BCConfig
from ray.rllib.offline.episode_reader import read_episodes, read_spaces
from ray.rllib.offline.offline_env_runner import OfflineSingleAgentEnvRunner


def _runner(output, **offline):
    offline.setdefault("output_write_episodes", True)
    config = (
        BCConfig()
        .environment("CartPole-v1")
        .env_runners(num_envs_per_env_runner=1)
        .offline_data(output=str(output), **offline)
    )
    return OfflineSingleAgentEnvRunner(config=config)


def test_is_the_overlay_class():
    import rllib.offline.offline_env_runner as fork

    assert OfflineSingleAgentEnvRunner is fork.OfflineSingleAgentEnvRunner


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


def test_chunks_are_joined_into_whole_episodes(tmp_path):
    runner = _runner(tmp_path)
    chunks = []
    for _ in range(4):
        chunks += runner.sample(num_timesteps=15, random_actions=True)
    runner.stop()
    done_ids = {c.id_ for c in chunks if c.is_done}
    back = {ep.id_: ep for ep in read_episodes(tmp_path)}
    assert set(back) == done_ids
    for id_, episode in back.items():
        assert episode.is_done
        assert episode.t_started == 0
        assert len(episode) == sum(len(c) for c in chunks if c.id_ == id_)


def test_remaining_rows_follow_output_write_remaining_data(tmp_path):
    keep = _runner(
        tmp_path / "keep", output_max_rows_per_file=4, output_write_remaining_data=True
    )
    sampled = keep.sample(num_episodes=6, random_actions=True)
    keep.stop()
    assert len(list(read_episodes(tmp_path / "keep"))) == len(sampled)

    drop = _runner(tmp_path / "drop", output_max_rows_per_file=4)
    drop.sample(num_episodes=6, random_actions=True)
    drop.stop()
    assert len(list(read_episodes(tmp_path / "drop"))) == 4


def test_write_failure_raises(tmp_path, monkeypatch):
    def fail(*args, **kwargs):
        raise OSError("No space left on device (injected)")

    monkeypatch.setattr(pq.ParquetWriter, "write_table", fail)
    runner = _runner(tmp_path, output_max_rows_per_file=1)
    with pytest.raises(OSError, match="injected"):
        runner.sample(num_episodes=2, random_actions=True)
    runner.stop()
    assert not list(tmp_path.rglob("*.parquet"))


@pytest.mark.ray
@pytest.mark.timeout(180)
def test_column_rows_every_chunk_written(ray_cluster, tmp_path):
    runner = _runner(
        tmp_path,
        output_write_episodes=False,
        output_max_rows_per_file=5,
        output_write_remaining_data=True,
    )
    sampled = runner.sample(num_timesteps=23, random_actions=True)
    before_stop = pq.read_table(tmp_path).num_rows
    runner.stop()
    assert before_stop == 20  # Four full chunks, not just the last one.
    assert pq.read_table(tmp_path).num_rows == sum(len(e) for e in sampled) == 23


if __name__ == "__main__":
    import sys

    sys.exit(pytest.main(["-v", __file__]))
