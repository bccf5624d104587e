"""`python -m ray.rllib.offline.episodes`: info, validate and convert.

Each command runs on `EpisodeWriter` files and on the hand-rolled
format of ray-project/ray#51747 (`msgpack_numpy.packb(ep.get_state())` in an
`item` column, written with gzip). Most tests call `main()` in-process; two
run the real `python -m` command, one writes with Ray Data.
"""

import json
import os
import re
import subprocess
import sys
import types

import gymnasium as gym
import msgpack_numpy as mnp
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from rllib.offline.episode_files.reader import read_episodes, read_spaces
from rllib.offline.episode_files.writer import write_episodes
from rllib.offline.tests.episode_factory import cartpole_episodes
from rllib.offline.tools import cli as episodes
from rllib.offline.tools import conversion, inspection
from rllib.offline.tools.inspection import (
    FORMAT_HAND_ROLLED,
    FORMAT_RECORDER,
    dataset_info,
    validate_dataset,
)

CARTPOLE = gym.make("CartPole-v1")
OBS_SPACE, ACT_SPACE = CARTPOLE.observation_space, CARTPOLE.action_space
NUM_EPISODES = 6
MAX_STEPS = 40


@pytest.fixture(scope="module")
def cartpole():
    """Scripted CartPole episodes: all truncated at `MAX_STEPS` steps."""
    _, recorded = cartpole_episodes(NUM_EPISODES, seed=3, max_steps=MAX_STEPS)
    return recorded


def pack(state) -> bytes:
    """The hand-rolled recipe's payload (ray-project/ray#51747)."""
    return mnp.packb(state, default=mnp.encode)


def write_item_file(payloads, path) -> str:
    """What `ray.data.from_items(payloads).write_parquet(..., compression='gzip')`
    writes, without Ray: one binary `item` column, no episode metadata."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    pq.write_table(
        pa.table({"item": pa.array(payloads, pa.binary())}), path, compression="gzip"
    )
    return path


@pytest.fixture
def hand_rolled(tmp_path, cartpole):
    directory = tmp_path / "hand"
    write_item_file(
        [pack(ep.get_state()) for ep in cartpole], str(directory / "a.parquet")
    )
    return str(directory)


@pytest.fixture
def writer_files(tmp_path, cartpole):
    directory = str(tmp_path / "writer")
    write_episodes(
        cartpole,
        directory,
        observation_space=OBS_SPACE,
        action_space=ACT_SPACE,
        max_rows_per_file=4,
        compression="zstd",
    )
    return directory


def run(capsys, *argv):
    """Runs the command in-process: `(exit code, stdout, stderr)`."""
    code = episodes.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


# ---------------------------------------------------------------------------
# info
# ---------------------------------------------------------------------------


def test_info_on_writer_files(capsys, writer_files, cartpole):
    code, out, _ = run(capsys, "info", writer_files, "--files")
    assert code == 0
    assert "EpisodeWriter (format 1): 2 files" in out
    assert f"zstd: {NUM_EPISODES} episodes" in out
    assert f"per-step lists: {NUM_EPISODES} episodes" in out
    assert re.search(
        rf"Episodes +{NUM_EPISODES} \(0 terminated, {NUM_EPISODES} trunc", out
    )
    assert re.search(rf"Steps +{NUM_EPISODES * MAX_STEPS}\n", out)
    assert "Discrete(2) (file metadata)" in out
    assert out.count("payload compression zstd, parquet compression zstd") == 2
    assert "Note" not in out


def test_info_on_hand_rolled_format_as_json(capsys, hand_rolled, cartpole):
    code, out, _ = run(capsys, "info", hand_rolled, "--json")
    assert code == 0
    info = json.loads(out)
    returns = [ep.get_return() for ep in cartpole]
    lengths = [len(ep) for ep in cartpole]
    assert info["num_episodes"] == NUM_EPISODES
    assert info["num_steps"] == sum(lengths)
    assert info["num_truncated"] == NUM_EPISODES
    assert info["formats"] == {FORMAT_HAND_ROLLED: 1}
    assert info["payload_layouts"] == {"per-step lists": NUM_EPISODES}
    assert info["payload_compressions"] == {"none": NUM_EPISODES}
    assert info["files"][0]["parquet_compression"] == "gzip"
    assert info["files"][0]["payload_compression"] is None
    assert info["num_bytes"] == os.path.getsize(os.path.join(hand_rolled, "a.parquet"))
    np.testing.assert_allclose(
        [info["returns"][k] for k in ("mean", "std", "min", "max")],
        [np.mean(returns), np.std(returns), np.min(returns), np.max(returns)],
    )
    assert info["lengths"]["max"] == max(lengths)
    # No metadata: the spaces come from the episodes themselves.
    assert info["spaces_source"] == "carried by the episodes"
    assert info["action_space"] == "Discrete(2)"
    assert info["action_space_json"]["type"] == "Discrete"


def test_info_tells_numpy_episodes_and_missing_spaces(capsys, tmp_path, cartpole):
    states = []
    for episode in cartpole[:2]:
        state = episode.get_state()
        state["_observation_space"] = state["_action_space"] = None
        states.append(state)
    numpy_episode = cartpole_episodes(1, seed=9, max_steps=5)[1][0].to_numpy()
    path = write_item_file(
        [pack(numpy_episode.get_state())], str(tmp_path / "numpy" / "a.parquet")
    )
    write_item_file([pack(s) for s in states], str(tmp_path / "lists" / "a.parquet"))
    assert dataset_info(path).files[0].format == FORMAT_RECORDER
    code, out, _ = run(capsys, "info", tmp_path / "lists")
    assert code == 0
    assert re.search(r"Obs space +-\n", out)
    assert "The files record no spaces" in out


# ---------------------------------------------------------------------------
# validate
# ---------------------------------------------------------------------------


def test_validate_clean_datasets(capsys, writer_files, hand_rolled):
    code, out, _ = run(capsys, "validate", writer_files)
    assert code == 0, out
    assert "OK: no problems found." in out
    assert "(file metadata), up to 100 steps per episode" in out
    code, out, _ = run(capsys, "validate", hand_rolled, "--env", "CartPole-v1")
    assert code == 0, out
    assert f"Checked {NUM_EPISODES} episode(s), {NUM_EPISODES * MAX_STEPS} steps" in out
    assert "(given by the caller)" in out


def _broken_dataset(directory, cartpole):
    """One file per kind of trouble; returns {kind: (file, row)} expected."""
    states = [ep.get_state() for ep in cartpole]
    not_done = dict(states[1], is_truncated=False, is_terminated=False)
    nan_reward = states[2]
    nan_reward["rewards"] = dict(nan_reward["rewards"])
    nan_reward["rewards"]["data"] = list(nan_reward["rewards"]["data"])
    nan_reward["rewards"]["data"][7] = float("nan")
    short = states[3]
    short["actions"] = dict(short["actions"], data=short["actions"]["data"][:-1])
    outside = states[4]
    outside["observations"] = dict(outside["observations"])
    outside["observations"]["data"] = list(outside["observations"]["data"])
    outside["observations"]["data"][MAX_STEPS] = np.full(4, 99.0, np.float32)
    bad = write_item_file(
        [
            pack(states[0]),
            b"\x00 not msgpack",
            pack(not_done),
            pack(nan_reward),
            pack(short),
            pack(outside),
            pack(states[0]),
        ],
        os.path.join(directory, "bad.parquet"),
    )
    no_item = os.path.join(directory, "no_item.parquet")
    pq.write_table(pa.table({"obs": [1.0, 2.0]}), no_item)
    not_parquet = os.path.join(directory, "truncated.parquet")
    with open(not_parquet, "wb") as f:
        f.write(b"PAR1 cut off")
    return {
        "undecodable": (bad, 1),
        "not-done": (bad, 2),
        "non-finite-reward": (bad, 3),
        "length-mismatch": (bad, 4),
        "outside-space": (bad, 5),
        "duplicate-id": (bad, 6),
        "no-item-column": (no_item, None),
        "not-parquet": (not_parquet, None),
    }


def test_validate_reports_every_problem_with_file_and_row(capsys, tmp_path, cartpole):
    expected = _broken_dataset(str(tmp_path / "bad"), cartpole)
    code, out, _ = run(capsys, "validate", tmp_path / "bad", "--json")
    assert code == 1
    report = json.loads(out)
    assert not report["ok"]
    found = {p["kind"]: (p["file"], p["row"]) for p in report["problems"]}
    assert found == expected
    assert len(report["problems"]) == len(expected)
    # Text mode: one line per problem, located, plus a summary.
    code, out, _ = run(capsys, "validate", tmp_path / "bad")
    assert code == 1
    assert "row 1 of file `" in out and "[undecodable] cannot decode the payload" in out
    assert "[not-done] the episode is not done" in out
    assert "truncated=True" in out  # The fix.
    assert "reward at timestep 7 is nan" in out
    assert "field `obs` at timestep 40 holds [99.0, 99.0, 99.0, 99.0]" in out
    assert f"FAILED: {len(expected)} problem(s)" in out


def test_validate_sample_steps_reach_the_check(tmp_path, cartpole):
    state = cartpole[0].get_state()
    state["observations"]["data"] = list(state["observations"]["data"])
    state["observations"]["data"][MAX_STEPS // 2 + 1] = np.full(4, 99.0, np.float32)
    path = write_item_file([pack(state)], str(tmp_path / "one" / "a.parquet"))
    # 2 sampled steps are the first and the last: the bad middle step is missed.
    assert validate_dataset(path, sample_steps=2).ok
    report = validate_dataset(path, sample_steps=None)
    assert [p.kind for p in report.problems] == ["outside-space"]
    assert f"timestep {MAX_STEPS // 2 + 1}" in report.problems[0].message


def test_validate_files_that_disagree_on_spaces(capsys, tmp_path, cartpole):
    write_episodes(cartpole[:1], str(tmp_path / "d"), observation_space=OBS_SPACE)
    other = gym.spaces.Box(-10.0, 10.0, (4,), np.float32)
    write_episodes(
        cartpole[1:2], str(tmp_path / "d"), observation_space=other, validate=False
    )
    code, out, _ = run(capsys, "validate", tmp_path / "d", "--max-problems", "1")
    assert code == 1
    assert "[spaces-disagree] records the `observation_space`" in out
    assert "FAILED: 1 problem(s): 1 spaces-disagree." in out


def test_validate_env_disagreeing_with_recorded_spaces(capsys, writer_files):
    code, out, _ = run(capsys, "validate", writer_files, "--env", "MountainCar-v0")
    assert code == 1
    assert "spaces-disagree" in out
    assert "outside-space" in out  # The data checked against the env's spaces.


# ---------------------------------------------------------------------------
# convert
# ---------------------------------------------------------------------------


def test_convert_hand_rolled_to_writer_files(capsys, tmp_path, hand_rolled, cartpole):
    destination = tmp_path / "out"
    code, out, err = run(
        capsys,
        "convert",
        hand_rolled,
        destination,
        "--env",
        "CartPole-v1",
        "--rows-per-file",
        "4",
        "--compression",
        "zstd",
        "--progress",
    )
    assert code == 0, err
    assert f"Wrote {NUM_EPISODES} episode(s) to 2 file(s)" in out
    assert "convert: 100%" in err  # The progress bar.
    assert read_spaces(destination) == (OBS_SPACE, ACT_SPACE)
    back = {ep.id_: ep for ep in read_episodes(destination)}
    assert set(back) == {ep.id_ for ep in cartpole}
    for episode in cartpole:
        copy = back[episode.id_]
        np.testing.assert_array_equal(
            np.stack(copy.get_observations()), np.stack(episode.get_observations())
        )
        assert copy.get_actions() == episode.get_actions()
        assert copy.get_rewards() == episode.get_rewards()
        assert copy.is_truncated == episode.is_truncated
    info = dataset_info(destination)
    assert info.payload_compressions == {"zstd": NUM_EPISODES}
    assert validate_dataset(destination).ok
    # No staging directory is left beside the destination.
    assert sorted(os.listdir(tmp_path)) == ["hand", "out"]


def test_convert_writer_files_to_numpy(capsys, tmp_path, writer_files):
    code, _, err = run(capsys, "convert", writer_files, tmp_path / "np", "--numpy")
    assert code == 0, err
    info = dataset_info(str(tmp_path / "np"))
    assert info.payload_layouts == {"numpy-ized": NUM_EPISODES}
    assert info.payload_compressions == {"none": NUM_EPISODES}
    assert info.spaces_source == "file metadata"


def test_convert_never_overwrites_without_flag(capsys, tmp_path, hand_rolled):
    destination = tmp_path / "dst"
    destination.mkdir()
    (destination / "keep.txt").write_text("mine")
    code, _, err = run(capsys, "convert", hand_rolled, destination)
    assert code == 2
    assert "is not empty (1 entries)" in err and "--overwrite" in err
    assert os.listdir(destination) == ["keep.txt"]
    code, _, err = run(capsys, "convert", hand_rolled, destination, "--overwrite")
    assert code == 0, err
    assert "keep.txt" not in os.listdir(destination)
    # In place: the source itself, with --overwrite.
    code, _, err = run(capsys, "convert", destination, destination, "--overwrite")
    assert code == 0, err
    assert dataset_info(str(destination)).num_episodes == NUM_EPISODES


def test_convert_stops_at_a_bad_row_or_skips_it(capsys, tmp_path, cartpole):
    expected = _broken_dataset(str(tmp_path / "bad"), cartpole)
    destination = tmp_path / "out"
    code, _, err = run(capsys, "convert", tmp_path / "bad", destination)
    assert code == 1
    bad_file, _ = expected["undecodable"]
    assert f"row 1 of file `{bad_file}`" in err and "--skip-invalid" in err
    assert not destination.exists()  # Nothing half-written.
    assert [p.name for p in tmp_path.iterdir()] == ["bad"]
    code, out, err = run(
        capsys, "convert", tmp_path / "bad", destination, "--skip-invalid"
    )
    assert code == 0, err
    # Written: the good row and its duplicate (ids are not checked on write).
    # Written: rows 0, 3 (a NaN reward: `EpisodeWriter` does not check
    # rewards, `validate` does) and 6 (a copy of row 0: neither are ids).
    assert "Wrote 3 episode(s)" in out and "skipped 6" in out
    assert "Skipped row 2 of file" in out and "is not done" in out


def test_convert_env_must_match_recorded_spaces(capsys, tmp_path, writer_files):
    code, _, err = run(
        capsys, "convert", writer_files, tmp_path / "o", "--env", "MountainCar-v0"
    )
    assert code == 1
    assert "The source records the `observation_space`" in err


def test_convert_minari_source_goes_to_the_minari_converter(
    capsys, tmp_path, monkeypatch, cartpole
):
    calls = []

    def convert_minari(dataset, output_dir, progress=True, **kwargs):
        calls.append((dataset, kwargs))
        return write_episodes(cartpole[:2], output_dir, observation_space=OBS_SPACE)

    fake = types.ModuleType(conversion.MINARI_MODULE)
    fake.convert_minari = convert_minari
    monkeypatch.setitem(sys.modules, conversion.MINARI_MODULE, fake)
    code, out, err = run(
        capsys,
        "convert",
        "minari:cartpole/expert-v0",
        tmp_path / "m",
        "--rows-per-file",
        "7",
    )
    assert code == 0, err
    assert calls == [
        (
            "cartpole/expert-v0",
            {
                "compression": None,
                "parquet_compression": "zstd",
                "max_rows_per_file": 7,
            },
        )
    ]
    assert "Wrote 2 episode(s) to 1 file(s)" in out
    # Without Minari support: a usage error that says so.
    monkeypatch.setitem(sys.modules, conversion.MINARI_MODULE, None)
    code, _, err = run(capsys, "convert", "minari:x-v0", tmp_path / "m2")
    assert code == 2
    assert "no Minari support" in err


# ---------------------------------------------------------------------------
# Bad input.
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("command", ["info", "validate", "convert"])
def test_missing_and_empty_paths_are_usage_errors(capsys, tmp_path, command):
    extra = [tmp_path / "dst"] if command == "convert" else []
    code, _, err = run(capsys, command, tmp_path / "nope", *extra)
    assert code == 2
    assert f"`{tmp_path / 'nope'}` does not exist" in err
    (tmp_path / "empty").mkdir()
    code, _, err = run(capsys, command, tmp_path / "empty", *extra)
    assert code == 2
    assert "No parquet files under" in err


def test_non_parquet_file(capsys, tmp_path):
    path = tmp_path / "notes.json"
    path.write_text("{}")
    code, out, _ = run(capsys, "validate", path)
    assert code == 1
    assert f"file `{path}`: [not-parquet]" in out
    code, out, _ = run(capsys, "info", path)
    assert code == 0
    assert "unreadable: 1 file" in out and "1 file(s) cannot be read" in out


@pytest.mark.parametrize(
    "argv",
    [
        [],
        ["frobnicate"],
        ["info"],
        ["validate", "x", "--sample-steps", "0"],
        ["validate", "x", "--sample-steps", "3", "--all-steps"],
        ["convert", "x"],
        ["convert", "x", "y", "--compression", "xz"],
    ],
)
def test_bad_arguments_exit_2(capsys, argv):
    try:
        code = episodes.main(argv)
    except SystemExit as raised:  # argparse's own usage errors.
        code = raised.code
    assert code == 2
    assert "usage: python -m ray.rllib.offline.episodes" in capsys.readouterr().err


def test_unknown_env_is_a_usage_error(capsys, hand_rolled, tmp_path):
    code, _, err = run(capsys, "validate", hand_rolled, "--env", "NoSuchEnv-v0")
    assert code == 2
    assert "argument --env: cannot make the gymnasium env 'NoSuchEnv-v0'" in err


# ---------------------------------------------------------------------------
# The real command.
# ---------------------------------------------------------------------------


def _python_m(*argv, cwd=None):
    return subprocess.run(
        [sys.executable, "-m", "ray.rllib.offline.episodes", *map(str, argv)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=cwd,
        env=dict(os.environ, RAY_USAGE_STATS_ENABLED="0"),
    )


def test_python_dash_m_runs_the_command(tmp_path, hand_rolled, cartpole):
    proc = _python_m("info", "--json", hand_rolled)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["num_episodes"] == NUM_EPISODES
    assert "RuntimeWarning" not in proc.stderr
    _broken_dataset(str(tmp_path / "bad"), cartpole)
    proc = _python_m("validate", tmp_path / "bad")
    assert proc.returncode == 1, proc.stderr
    assert "FAILED: 8 problem(s)" in proc.stdout


@pytest.mark.parametrize("command", [[], ["info"], ["validate"], ["convert"]])
def test_help_explains_each_command(capsys, command):
    with pytest.raises(SystemExit) as raised:
        episodes.main([*command, "--help"])
    assert raised.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith(f"usage: {episodes.PROG} {' '.join(command)}".rstrip())
    words = {
        (): ["exit codes", "info", "validate", "convert"],
        ("info",): ["payload format", "--json", "return"],
        ("validate",): ["file and", "row", "--all-steps", "--env", "Exits with 1"],
        ("convert",): ["--overwrite", "--compression", "--rows-per-file", "minari:"],
    }[tuple(command)]
    for word in words:
        assert word in out, word


def test_library_functions_do_not_need_the_cli(writer_files):
    files = inspection.open_episode_files(writer_files)
    assert [f.num_rows for f in files] == [4, 2]
    rows = [row.index for row in files[0].rows(batch_size=3)]
    assert rows == [0, 1, 2, 3]
    assert all(row.is_compressed for row in files[1].rows())


@pytest.mark.timeout(240)
def test_hand_rolled_recipe_written_with_ray_data(
    capsys, ray_cluster, tmp_path, cartpole
):
    """The exact recipe of ray-project/ray#51747, through Ray Data."""
    import ray.data

    payloads = [mnp.packb(ep.get_state(), default=mnp.encode) for ep in cartpole]
    filename = str(tmp_path / "experiences")
    ray.data.from_items(payloads).write_parquet(filename, compression="gzip")

    code, out, _ = run(capsys, "info", "--json", filename)
    assert code == 0
    info = json.loads(out)
    assert info["num_episodes"] == NUM_EPISODES
    assert set(info["formats"]) == {FORMAT_HAND_ROLLED}
    code, out, _ = run(capsys, "validate", filename, "--env", "CartPole-v1")
    assert code == 0, out
    code, _, err = run(capsys, "convert", filename, tmp_path / "converted")
    assert code == 0, err
    assert read_spaces(tmp_path / "converted") == (OBS_SPACE, ACT_SPACE)


def test_info_and_validate_read_multi_agent_files(tmp_path):
    from rllib.offline.tests.episode_factory import (
        AGENT_SPACES,
        make_multi_agent_episode,
    )

    observation_spaces = {agent: spaces[0] for agent, spaces in AGENT_SPACES.items()}
    episodes = [make_multi_agent_episode(seed=i) for i in range(3)]
    expected_return = sum(e.get_return() for e in episodes)
    late = episodes[2].agent_episodes["late"]
    late.observations.data[1] = late.observations.data[1] + 5.0
    write_episodes(episodes, tmp_path, max_rows_per_file=2, validate=False)
    info = inspection.dataset_info(tmp_path)
    assert (info.num_episodes, info.num_steps, info.num_truncated) == (3, 18, 3)
    assert info.returns.mean * 3 == pytest.approx(expected_return)
    assert info.observation_space == observation_spaces
    report = inspection.validate_dataset(tmp_path)
    assert (report.num_episodes, report.num_steps) == (3, 18)
    (problem,) = report.problems
    assert problem.kind == "outside-space"
    assert problem.episode_id == episodes[2].id_
    assert "agent `'late'`: field `obs` at timestep 1" in problem.message


def test_unreadable_file_error_points_at_validate(tmp_path):
    """The reader's error names the command that lists every such file."""
    from rllib.offline.episode_files.reader import read_file_metadata

    write_episodes(cartpole_episodes(1, max_steps=20)[1], tmp_path)
    (path,) = tmp_path.glob("*.parquet")
    path.write_bytes(path.read_bytes()[:-20])
    with pytest.raises(ValueError, match=r"ray\.rllib\.offline\.episodes validate DIR"):
        read_file_metadata(str(path))


if __name__ == "__main__":
    sys.exit(pytest.main(["-v", __file__]))
