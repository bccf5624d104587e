"""Episode files on cloud storage and other filesystems, read as RLlib documents.

An S3-protocol server (moto, in the `test` extra) runs on 127.0.0.1 inside
the scenario's process; the episodes go there with the fork's
`EpisodeWriter`, and MARWIL trains from them with `input_filesystem="s3"`
and `input_filesystem_kwargs`, with the fork and upstream.
"""

import logging

import pyarrow.compute as pc
import pytest
from ray.rllib.algorithms.bc import BCConfig

from rllib._fork.tests.differential import assert_same, run_in_both_modes
from rllib.offline.episode_files.filesystem import as_pyarrow, input_filesystem
from rllib.offline.episode_files.writer import write_episodes
from rllib.offline.in_memory.read_options import task_options, unsupported_read_kwargs
from rllib.offline.tests.episode_factory import cartpole_episodes

S3_SCENARIO = """
import math
import os

os.environ["AWS_EC2_METADATA_DISABLED"] = "true"
import boto3
import gymnasium as gym
import pyarrow.fs as pa_fs
import ray
from moto.server import ThreadedMotoServer
from ray.rllib.algorithms.marwil import MARWILConfig

from rllib.offline.episode_files.writer import write_episodes
from rllib.offline.tests.episode_factory import cartpole_episodes

server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
server.start()
host, port = server.get_host_and_port()
endpoint = f"http://{host}:{port}"
boto3.client(
    "s3",
    endpoint_url=endpoint,
    region_name="us-east-1",
    aws_access_key_id="testing",
    aws_secret_access_key="testing",
).create_bucket(Bucket="episodes")
fs_kwargs = {
    "endpoint_override": endpoint,
    "access_key": "testing",
    "secret_key": "testing",
    "region": "us-east-1",
}
env, episodes = cartpole_episodes(6, max_steps=60)
write_episodes(
    episodes,
    "s3://episodes/cartpole",
    filesystem=pa_fs.S3FileSystem(**fs_kwargs),
    observation_space=env.observation_space,
    action_space=env.action_space,
    max_rows_per_file=2,
)
ray.init(num_cpus=4, include_dashboard=False)
config = (
    MARWILConfig()
    .environment(observation_space=env.observation_space, action_space=env.action_space)
    .learners(num_learners=0)
    .training(train_batch_size_per_learner=64)
    .offline_data(
        input_=["s3://episodes/cartpole"],
        input_read_episodes=True,
        input_filesystem="s3",
        input_filesystem_kwargs=fs_kwargs,
        dataset_num_iters_per_learner=1,
        map_batches_kwargs={"concurrency": 1, "num_cpus": 1},
    )
)
algo = config.build_algo()
learners = algo.train()["learners"]
emit({
    "steps": learners["__all_modules__"]["num_env_steps_trained"],
    "losses_finite": all(
        math.isfinite(learners["default_policy"][k])
        for k in ("policy_loss", "vf_loss")
    ),
})
algo.stop()
"""


@pytest.mark.timeout(600)
def test_s3_input_with_filesystem_kwargs_trains_in_both_modes():
    pytest.importorskip("moto.server", reason="needs moto (the `test` extra)")
    upstream, fork = run_in_both_modes(S3_SCENARIO, timeout=280)
    assert fork == {"steps": 64, "losses_finite": True}
    assert_same(upstream, fork)


# -- Without Ray: how the settings are read ------------------------------------


def test_filesystem_settings_build_what_upstream_builds():
    import fsspec
    import pyarrow.fs as pa_fs

    config = BCConfig().offline_data(
        input_filesystem="s3",
        input_filesystem_kwargs={
            "endpoint_override": "http://127.0.0.1:9",
            "region": "eu-west-1",
        },
    )
    filesystem = input_filesystem(config)
    assert isinstance(filesystem, pa_fs.S3FileSystem)
    assert filesystem.region == "eu-west-1"
    local = fsspec.filesystem("file")
    config.input_filesystem = local
    wrapped = as_pyarrow(input_filesystem(config))
    assert isinstance(wrapped, pa_fs.PyFileSystem)
    config.input_filesystem = "ftp"
    with pytest.raises(ValueError, match="Unknown `config.offline_data"):
        input_filesystem(config)


def test_read_kwargs_that_could_change_the_rows_are_named():
    config = BCConfig().offline_data(
        input_read_method_kwargs={
            "filter": pc.field("env_steps") > 3,
            "columns": ["eps_id"],
            "partition_filter": None,
            "shuffle": "files",
            "ray_remote_args": {"num_cpus": 0.5, "memory": 10},
            "memory": 20,
            "file_extensions": ["parquet"],
        }
    )
    assert unsupported_read_kwargs(config) == ["columns", "filter", "partition_filter"]
    assert task_options(config) == {"num_cpus": 0.5, "memory": 20}
    config.input_read_method_kwargs = {"columns": ["item", "eps_id"]}
    assert unsupported_read_kwargs(config) == []


# -- With the shared cluster ---------------------------------------------------


@pytest.fixture(scope="module")
def episode_dir(tmp_path_factory):
    """10 CartPole episodes of 20 to 60 steps, a hive partition per length."""
    path = tmp_path_factory.mktemp("episodes")
    lengths = []
    for max_steps in (20, 30, 40, 50, 60):  # The controller reaches the limit.
        env, pair = cartpole_episodes(2, max_steps=max_steps, seed=max_steps)
        write_episodes(
            pair,
            path / f"steps={max_steps}",
            observation_space=env.observation_space,
            action_space=env.action_space,
        )
        lengths.extend(len(e) for e in pair)
    return str(path), env, lengths


def _bc(path, env, **offline):
    return (
        BCConfig()
        .environment(
            observation_space=env.observation_space, action_space=env.action_space
        )
        .learners(num_learners=0)
        .training(train_batch_size_per_learner=32)
        .offline_data(
            input_=[path],
            input_read_episodes=True,
            dataset_num_iters_per_learner=1,
            map_batches_kwargs={"concurrency": 1, "num_cpus": 1},
            **offline,
        )
    )


@pytest.mark.timeout(300)
def test_fsspec_filesystem_trains_in_memory(ray_cluster, episode_dir):
    import fsspec

    path, env, lengths = episode_dir
    config = _bc(path, env, input_filesystem=fsspec.filesystem("file"))
    # Extensions match case-insensitively, as `read_parquet` matches them.
    config.input_read_method_kwargs = {"file_extensions": ["PARQUET"]}
    algo = config.build_algo()
    try:
        steps = algo.train()["learners"]["__all_modules__"]["num_env_steps_trained"]
        data = algo.offline_data
        assert (data.mode, data._store.num_timesteps) == ("in_memory", sum(lengths))
    finally:
        algo.stop()
    assert steps == 32


@pytest.mark.timeout(300)
def test_a_partition_filter_streams_through_ray_data(ray_cluster, episode_dir, caplog):
    from ray.data.datasource.partitioning import PathPartitionFilter

    path, env, lengths = episode_dir
    keep = PathPartitionFilter.of(lambda keys: int(keys["steps"]) >= 40)
    config = _bc(path, env, input_read_method_kwargs={"partition_filter": keep})
    with caplog.at_level(logging.WARNING, logger="ray.rllib.offline.offline_data"):
        algo = config.build_algo()
    try:
        # Ray Data reads only the rows the filter keeps.
        rows = algo.offline_data.data.count()
        algo.train()
        assert algo.offline_data.mode == "streaming"
    finally:
        algo.stop()
    assert rows == sum(n >= 40 for n in lengths) < len(lengths)
    warnings = [r.message for r in caplog.records if r.levelno == logging.WARNING]
    assert any("`input_read_method_kwargs` ['partition_filter']" in m for m in warnings)


if __name__ == "__main__":
    import sys

    sys.exit(pytest.main(["-v", __file__]))
