"""The recorder (`OfflineSingleAgentEnvRunner` with `output=...`) writes every
full file of rows it samples, not only the last one of a `sample()` call."""

import pathlib

import pyarrow.parquet as pq
import pytest
from ray.rllib.algorithms.bc import BCConfig
from ray.rllib.offline.offline_env_runner import OfflineSingleAgentEnvRunner


def _recorder(output, **offline_data):
    config = (
        BCConfig()
        .environment("CartPole-v1")
        .env_runners(num_envs_per_env_runner=1)
        .offline_data(output=str(output), **offline_data)
    )
    return OfflineSingleAgentEnvRunner(config=config, worker_index=1)


def _rows_written(root: pathlib.Path) -> int:
    return sum(pq.read_metadata(path).num_rows for path in root.rglob("*.parquet"))


@pytest.mark.timeout(180)
def test_every_full_chunk_of_rows_is_written(ray_cluster, tmp_path):
    recorder = _recorder(
        tmp_path, output_write_episodes=False, output_max_rows_per_file=5
    )
    try:
        recorder.sample(num_timesteps=23, random_actions=True)
        # Four full files of five rows; the last three rows wait for more.
        assert _rows_written(tmp_path) == 20
    finally:
        recorder.stop()


if __name__ == "__main__":
    import sys

    sys.exit(pytest.main(["-v", __file__]))
