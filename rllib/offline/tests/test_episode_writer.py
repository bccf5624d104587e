"""EpisodeWriter / episode_reader: round trips, files, and error paths (no Ray)."""

import gc
import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import gymnasium as gym
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import tree
from ray.rllib.core.columns import Columns

from rllib.offline.episode_files import payload, reader
from rllib.offline.episode_files.reader import (
    list_episode_files,
    read_episodes,
    read_spaces,
)
from rllib.offline.episode_files.spaces import space_from_json, space_to_json
from rllib.offline.episode_files.writer import EpisodeWriter, write_episodes
from rllib.offline.tests.episode_factory import (
    BOX,
    DISCRETE,
    SPACES,
    TUPLE,
    make_episode,
    write_msgpack_episodes,
)

REPO_ROOT = Path(__file__).resolve().parents[3]


def assert_same_tree(actual, expected, what):
    tree.assert_same_structure(actual, expected, check_types=True)
    for a, e in zip(tree.flatten(actual), tree.flatten(expected)):
        assert type(a) is type(e), f"{what}: {type(a)} != {type(e)}"
        np.testing.assert_array_equal(a, e, err_msg=what)
        if isinstance(e, (np.ndarray, np.generic)):
            assert a.dtype == e.dtype, f"{what}: {a.dtype} != {e.dtype}"


def assert_episodes_equal(actual, expected):
    assert actual.id_ == expected.id_
    assert len(actual) == len(expected)
    assert actual.is_terminated == expected.is_terminated
    assert actual.is_truncated == expected.is_truncated
    assert actual.t_started == expected.t_started
    assert_same_tree(
        actual.get_observations(), expected.get_observations(), Columns.OBS
    )
    assert_same_tree(actual.get_actions(), expected.get_actions(), Columns.ACTIONS)
    assert_same_tree(actual.get_rewards(), expected.get_rewards(), Columns.REWARDS)
    assert_same_tree(actual.get_infos(), expected.get_infos(), Columns.INFOS)
    assert set(actual.extra_model_outputs) == set(expected.extra_model_outputs)
    for key in expected.extra_model_outputs:
        assert_same_tree(
            actual.get_extra_model_outputs(key),
            expected.get_extra_model_outputs(key),
            key,
        )


@pytest.mark.parametrize("compression", [None, "zstd", "lz4"])
@pytest.mark.parametrize("space_name", sorted(SPACES))
def test_round_trip_every_field(tmp_path, space_name, compression):
    obs_space, act_space = SPACES[space_name]
    episodes = [
        make_episode(obs_space, act_space, length=4, seed=1, terminated=True),
        make_episode(obs_space, act_space, length=1, seed=2, truncated=True),
        make_episode(
            obs_space, act_space, length=6, seed=3, truncated=True, terminated=False
        ),
    ]
    files = write_episodes(
        episodes,
        tmp_path,
        observation_space=obs_space,
        action_space=act_space,
        compression=compression,
        max_rows_per_file=2,
    )
    assert len(files) == 2
    # A fresh reader: new spaces objects from the file metadata only.
    assert read_spaces(tmp_path) == (obs_space, act_space)
    back = {ep.id_: ep for ep in read_episodes(tmp_path)}
    assert sorted(back) == sorted(ep.id_ for ep in episodes)
    for episode in episodes:
        assert_episodes_equal(back[episode.id_], episode)
    # The payload really is compressed (or not).
    table = pq.read_table(files[0])
    first = table.column("item")[0].as_py()
    assert first.startswith(b"\xc1rlz") == (compression is not None)


def test_round_trip_numpy_episode(tmp_path):
    episode = make_episode(*SPACES["nested"], length=3, seed=5)
    episode.to_numpy()
    write_episodes([episode], tmp_path, observation_space=SPACES["nested"][0])
    (back,) = read_episodes(tmp_path)
    assert back.is_numpy
    assert_episodes_equal(back, episode)


@pytest.mark.parametrize("numpy_episode", [False, True])
def test_decode_restores_tuples_from_the_given_space(numpy_episode):
    """An episode recorded without spaces gets its tuples from the caller's."""
    episode = make_episode(TUPLE, DISCRETE, length=4, with_spaces=False)
    if numpy_episode:
        episode.to_numpy()
    decoded = reader.decode_episode(
        payload.encode_episode(episode), observation_space=TUPLE
    )
    assert decoded.observation_space is None
    for t in range(5):
        assert isinstance(decoded.get_observations(t), tuple)
        np.testing.assert_array_equal(
            decoded.get_observations(t)[0], episode.get_observations(t)[0]
        )


@pytest.mark.parametrize(
    "space",
    [
        BOX,
        gym.spaces.Box(
            low=np.array([-np.inf, 0.0, -1.5], np.float32),
            high=np.array([np.inf, 1e30, 2.5], np.float32),
        ),
        gym.spaces.Box(0, 255, (4, 4, 3), np.uint8),
        gym.spaces.Box(np.iinfo(np.int64).min, np.iinfo(np.int64).max, (2,), np.int64),
        DISCRETE,
        gym.spaces.Discrete(3, start=-1),
        gym.spaces.MultiDiscrete([[2, 3], [4, 5]]),
        gym.spaces.MultiBinary([2, 3]),
        TUPLE,
        SPACES["nested"][0],
    ],
    ids=lambda s: type(s).__name__,
)
def test_space_json_round_trip(space):
    spec = json.loads(json.dumps(space_to_json(space), allow_nan=False))
    rebuilt = space_from_json(spec)
    assert rebuilt == space
    assert rebuilt.dtype == space.dtype


def test_unsupported_space_type():
    with pytest.raises(TypeError, match=r"Cannot record the space.*Text"):
        EpisodeWriter("/tmp/unused", observation_space=gym.spaces.Text(5))


def test_files_bounded_unique_and_shared_directory(tmp_path):
    episodes = [make_episode(BOX, DISCRETE, seed=i) for i in range(5)]
    with EpisodeWriter(tmp_path, max_rows_per_file=2) as first:
        with EpisodeWriter(tmp_path, max_rows_per_file=2) as second:
            for episode in episodes:
                first.write(episode)
                second.write(episode)
    assert len(first.files) == len(second.files) == 3
    assert len(set(first.files) | set(second.files)) == 6
    assert [pq.read_metadata(f).num_rows for f in first.files] == [2, 2, 1]
    assert len(list(read_episodes(tmp_path))) == 10


def test_file_invisible_until_committed(tmp_path):
    writer = EpisodeWriter(tmp_path, max_rows_per_file=2, buffer_bytes=1)
    writer.write(make_episode(BOX, DISCRETE, seed=0))
    names = os.listdir(tmp_path)
    # Only the hidden temporary file exists; readers skip it.
    assert len(names) == 1 and names[0].startswith("."), names
    with pytest.raises(FileNotFoundError, match="No parquet files"):
        list(read_episodes(tmp_path))
    writer.write(make_episode(BOX, DISCRETE, seed=1))
    assert [n for n in os.listdir(tmp_path) if not n.startswith(".")] == [
        os.path.basename(writer.files[0])
    ]
    assert not [n for n in os.listdir(tmp_path) if n.startswith(".")]
    writer.close()


def test_exception_in_with_block_commits_earlier_episodes(tmp_path):
    with pytest.raises(RuntimeError, match="collector crashed"):
        with EpisodeWriter(tmp_path) as writer:
            writer.write(make_episode(BOX, DISCRETE, seed=0))
            writer.write(make_episode(BOX, DISCRETE, seed=1))
            raise RuntimeError("collector crashed")
    assert len(writer.files) == 1
    assert len(list(read_episodes(tmp_path))) == 2


def test_spaces_taken_from_first_episode(tmp_path):
    episode = make_episode(*SPACES["tuple"], seed=0, with_spaces=True)
    write_episodes([episode], tmp_path)
    assert read_spaces(tmp_path) == SPACES["tuple"]


def test_reads_recorder_and_hand_rolled_files(tmp_path):
    episodes = [make_episode(*SPACES["dict"], seed=i) for i in range(3)]
    write_msgpack_episodes(episodes, str(tmp_path / "msgpack.parquet"))
    assert read_spaces(tmp_path) == (None, None)
    back = list(read_episodes(tmp_path))
    for actual, expected in zip(back, episodes):
        assert_episodes_equal(actual, expected)


def test_writer_files_are_plain_msgpack_episodes(tmp_path):
    import msgpack
    import msgpack_numpy as mnp
    from ray.rllib.env.single_agent_episode import SingleAgentEpisode

    episode = make_episode(BOX, DISCRETE, seed=0)
    (file,) = write_episodes([episode], tmp_path)
    table = pq.read_table(file)
    assert table.schema.field("item").type == pa.binary()
    # Exactly what ray 2.60's OfflinePreLearner does with `input_read_episodes`.
    state = msgpack.unpackb(table.column("item")[0].as_py(), object_hook=mnp.decode)
    assert_episodes_equal(SingleAgentEpisode.from_state(state), episode)
    assert table.column(Columns.EPS_ID).to_pylist() == [episode.id_]
    assert table.column("env_steps").to_pylist() == [5]
    metadata = json.loads(table.schema.metadata[b"rllib.episodes"])
    assert metadata["format_version"] == payload.FORMAT_VERSION


def test_file_name_callback_places_files_at_commit(tmp_path):
    """`file_name` is asked at commit time and may name subdirectories."""
    run = {"dir": "run-1"}
    asked = []

    def file_name(index):
        asked.append(index)
        return f"{run['dir']}/part-{index:03d}.parquet"

    writer = EpisodeWriter(tmp_path, max_rows_per_file=2, file_name=file_name)
    writer.write(make_episode(BOX, DISCRETE, seed=0))
    run["dir"] = "run-2"  # The file opened during "run-1" commits in "run-2".
    writer.write(make_episode(BOX, DISCRETE, seed=1))
    writer.write(make_episode(BOX, DISCRETE, seed=2))
    run["dir"] = "run-3"
    writer.close()
    assert asked == [0, 1]
    assert [os.path.relpath(f, tmp_path) for f in writer.files] == [
        "run-2/part-000.parquet",
        "run-3/part-001.parquet",
    ]
    assert len(list(read_episodes(tmp_path))) == 3


@pytest.mark.parametrize(
    "name, match",
    [
        ("episodes.json", r"does not end with '.parquet'"),
        ("/abs/episodes.parquet", r"is not a relative path"),
        ("run-1/.hidden.parquet", r"part starting with '.' or '_' \('.hidden"),
        ("_tmp/episodes.parquet", r"part starting with '.' or '_' \('_tmp'\)"),
        ("../up.parquet", r"has an empty, '.' or '..' part"),
        (None, r"is not a non-empty str"),
    ],
)
def test_error_bad_file_name(tmp_path, name, match):
    writer = EpisodeWriter(tmp_path, file_name=lambda index: name)
    writer.write(make_episode(BOX, DISCRETE))
    with pytest.raises(ValueError, match=rf"`file_name\(0\)` returned .*{match}"):
        writer.close()
    assert os.listdir(tmp_path) == []  # The temporary file is gone too.


def test_error_file_name_never_replaces_a_file(tmp_path):
    write_episodes(
        [make_episode(BOX, DISCRETE, seed=0)],
        tmp_path,
        file_name=lambda index: "same.parquet",
    )
    with pytest.raises(FileExistsError, match=r"`.*same.parquet` already exists"):
        write_episodes(
            [make_episode(BOX, DISCRETE, seed=1)],
            tmp_path,
            file_name=lambda index: "same.parquet",
        )
    (episode,) = read_episodes(tmp_path)
    assert episode.get_return() == make_episode(BOX, DISCRETE, seed=0).get_return()


def test_error_file_name_and_prefix(tmp_path):
    with pytest.raises(ValueError, match="either `file_prefix`"):
        EpisodeWriter(tmp_path, file_prefix="x", file_name=lambda i: "a.parquet")
    with pytest.raises(TypeError, match="`file_name` must be a function"):
        EpisodeWriter(tmp_path, file_name="a.parquet")


def test_unclosed_writer_commits_when_collected(tmp_path, caplog):
    writer = EpisodeWriter(tmp_path, max_rows_per_file=10)
    for seed in range(3):
        writer.write(make_episode(BOX, DISCRETE, seed=seed))
    with caplog.at_level(
        logging.WARNING, logger="ray.rllib.offline.episode_files.file_sink"
    ):
        del writer
        gc.collect()
    assert len(list(read_episodes(tmp_path))) == 3
    (record,) = caplog.records
    message = record.getMessage()
    assert "was never closed: committed its 3 pending episode(s)" in message
    (file,) = list_episode_files(tmp_path)[1]
    assert f"`{file}`" in message and str(tmp_path) in message


def test_aborted_or_closed_writer_commits_nothing_more(tmp_path, caplog):
    aborted = EpisodeWriter(tmp_path / "aborted")
    aborted.write(make_episode(BOX, DISCRETE))
    aborted.abort()
    closed = EpisodeWriter(tmp_path / "closed")
    closed.write(make_episode(BOX, DISCRETE))
    closed.close()
    with caplog.at_level(
        logging.WARNING, logger="ray.rllib.offline.episode_files.file_sink"
    ):
        del aborted, closed
        gc.collect()
    assert not caplog.records
    assert os.listdir(tmp_path / "aborted") == []
    assert len(list(read_episodes(tmp_path / "closed"))) == 1


@pytest.mark.skipif(not hasattr(os, "fork"), reason="forks a child")
def test_unclosed_writer_commits_at_interpreter_exit(tmp_path):
    """A script that never closes its writer still leaves its episodes.

    A forked child that exits first must not commit the parent's file.
    """
    script = f"""
import os, sys
from rllib.offline.tests.episode_factory import BOX, DISCRETE, make_episode
from rllib.offline.episode_files.writer import EpisodeWriter

writer = EpisodeWriter({str(tmp_path)!r}, max_rows_per_file=10)
for seed in range(3):
    writer.write(make_episode(BOX, DISCRETE, seed=seed))
pid = os.fork()
if pid == 0:
    sys.exit(0)  # Runs the exit hooks in the child.
os.waitpid(pid, 0)
assert not [n for n in os.listdir({str(tmp_path)!r}) if not n.startswith(".")]
writer.write(make_episode(BOX, DISCRETE, seed=3))
sys.modules["__main__"].keep = writer  # Alive until the interpreter exits.
"""
    done = subprocess.run(
        [sys.executable, "-c", script],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    _, files = list_episode_files(tmp_path)
    assert len(files) == 1
    assert len(list(read_episodes(tmp_path))) == 4
    assert done.stderr.count("was never closed") == 1
    assert "was never closed: committed its 4 pending episode(s)" in done.stderr


# ---------------------------------------------------------------- error paths


def test_error_episode_not_done(tmp_path):
    episode = make_episode(BOX, DISCRETE, terminated=False)
    with EpisodeWriter(tmp_path) as writer:
        with pytest.raises(ValueError, match=rf"Episode `{episode.id_}` is not done"):
            writer.write(episode)


@pytest.mark.parametrize("numpy_episode", [False, True])
def test_error_observation_outside_space(tmp_path, numpy_episode):
    episode = make_episode(BOX, DISCRETE, length=4)
    episode.observations.data[2] = np.array([0.0, 5.0, 0.0], np.float32)
    if numpy_episode:
        episode.to_numpy()
    writer = EpisodeWriter(tmp_path, observation_space=BOX, action_space=DISCRETE)
    with pytest.raises(
        ValueError,
        match=rf"Episode `{episode.id_}`, timestep 2, field `obs`: .* is not in Box",
    ):
        writer.write(episode)


def test_error_nested_observation_names_the_key(tmp_path):
    obs_space, act_space = SPACES["dict"]
    episode = make_episode(obs_space, act_space, length=3)
    episode.observations.data[1]["mode"] = 9
    writer = EpisodeWriter(tmp_path, observation_space=obs_space)
    with pytest.raises(ValueError, match=r"timestep 1, field `obs`: \['mode'\] 9"):
        writer.write(episode)


def test_error_action_outside_space(tmp_path):
    episode = make_episode(BOX, DISCRETE, length=4)
    episode.actions.data[3] = 7
    writer = EpisodeWriter(tmp_path, action_space=DISCRETE)
    with pytest.raises(
        ValueError,
        match=rf"Episode `{episode.id_}`, timestep 3, field `actions`: .*Discrete\(4\)",
    ):
        writer.write(episode)
    # The writer stays usable and nothing bad was written.
    episode.actions.data[3] = 1
    writer.write(episode)
    assert len(writer.close()) == 1


def test_error_unsupported_payload(tmp_path):
    episode = make_episode(BOX, DISCRETE, length=3)
    episode.infos.data[2] = {"handle": object()}
    writer = EpisodeWriter(tmp_path)
    with pytest.raises(
        TypeError,
        match=rf"Episode `{episode.id_}`: field `infos` at timestep 2 .*msgpack",
    ):
        writer.write(episode)


def test_error_wrong_episode_type_and_arguments(tmp_path):
    with pytest.raises(
        TypeError,
        match="takes a `SingleAgentEpisode` or a `MultiAgentEpisode`, got `dict`",
    ):
        EpisodeWriter(tmp_path).write({"obs": [1]})
    with pytest.raises(ValueError, match="Unknown payload `compression='xz'`"):
        EpisodeWriter(tmp_path, compression="xz")
    with pytest.raises(ValueError, match="`max_rows_per_file` must be a positive"):
        EpisodeWriter(tmp_path, max_rows_per_file=0)
    writer = EpisodeWriter(tmp_path)
    writer.close()
    with pytest.raises(ValueError, match=r"after `close\(\)`"):
        writer.write(make_episode(BOX, DISCRETE))


def test_error_corrupt_row_names_file_row_and_episode(tmp_path):
    good = make_episode(BOX, DISCRETE, seed=0)
    path = str(tmp_path / "bad.parquet")
    table = pa.table(
        {
            "item": pa.array(
                [
                    payload.encode_episode(good),
                    b"\x92not an episode",
                ],
                pa.binary(),
            ),
            Columns.EPS_ID: ["good", "broken-42"],
        }
    )
    pq.write_table(table, path)
    with pytest.raises(
        ValueError, match=r"row 1 of file `.*bad.parquet` \(episode id `broken-42`\)"
    ):
        list(read_episodes(path))


def test_error_newer_format_version(tmp_path):
    path = str(tmp_path / "future.parquet")
    schema = pa.schema(
        [("item", pa.binary())],
        metadata={b"rllib.episodes": json.dumps({"format_version": 99})},
    )
    pq.write_table(pa.table({"item": [b""]}, schema=schema), path)
    with pytest.raises(ValueError, match="format version 99"):
        list(read_episodes(path))


def test_error_files_disagree_on_spaces(tmp_path):
    write_episodes([make_episode(BOX, DISCRETE)], tmp_path, observation_space=BOX)
    other = gym.spaces.Box(-5.0, 5.0, (3,), np.float32)
    write_episodes([make_episode(other, DISCRETE)], tmp_path, observation_space=other)
    with pytest.raises(ValueError, match="disagree on the `observation_space`"):
        read_spaces(tmp_path)


def test_error_no_item_column(tmp_path):
    path = str(tmp_path / "tabular.parquet")
    pq.write_table(pa.table({"obs": [1.0]}), path)
    with pytest.raises(ValueError, match="has no `item` column"):
        list(reader.read_episodes(path))


def test_error_truncated_file_names_it(tmp_path):
    path = tmp_path / "cut.parquet"
    pq.write_table(pa.table({"item": [b"x" * 100]}), str(path))
    path.write_bytes(path.read_bytes()[:-20])
    with pytest.raises(ValueError, match=r"`.*cut\.parquet` is not a readable parq"):
        list(reader.read_episodes(str(path)))
    with pytest.raises(ValueError, match=r"`.*cut\.parquet` is not a readable parq"):
        reader.read_file_metadata(str(path))


if __name__ == "__main__":
    import sys

    sys.exit(pytest.main(["-v", __file__]))
