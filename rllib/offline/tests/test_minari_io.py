"""Minari interop: read, write and convert real Minari datasets, and train on one.

Datasets are made by Minari's own `DataCollector` (both storage backends,
Box/Discrete/Dict/Tuple/nested spaces) under a temporary
`MINARI_DATASETS_PATH`. Only the BC learning test starts Ray.
"""

import importlib.util
import os
import sys

import gymnasium as gym
import numpy as np
import pytest
import tree
from ray.rllib.env.single_agent_episode import SingleAgentEpisode

from rllib.examples.offline_rl.scripted_cartpole import record_episodes
from rllib.offline.episode_files.reader import read_episodes, read_spaces
from rllib.offline.tests.episode_factory import SPACES
from rllib.offline.tools.minari_io import (
    convert_minari,
    open_minari_dataset,
    read_minari,
    write_minari,
)

_EXTRAS = (
    'the `minari` and `minari-create` extras (pip install -e ".[minari,minari-create]")'
)
minari = pytest.importorskip("minari", reason=f"needs {_EXTRAS}")
if importlib.util.find_spec("jax") is None:  # Not imported: it is slow to import.
    pytest.skip(f"Minari's DataCollector needs {_EXTRAS}", allow_module_level=True)

pytestmark = [
    # Minari asks for dataset metadata (author, ...) the tests leave out.
    pytest.mark.filterwarnings("ignore:.*is set to None:UserWarning"),
    pytest.mark.filterwarnings("ignore:env_spec is None:UserWarning"),
]

FORMATS = ["hdf5", "arrow"]
#: name -> (observation space, action space); `cartpole` is the real env.
SPACE_GRID = ["cartpole", *SPACES]


class SpaceEnv(gym.Env):
    """Samples observations from any space and writes infos at every step.

    An episode has `length` steps and ends terminated, or truncated if
    `truncate`; `reset(options={"length": ..., "truncate": ...})` overrides
    both for one episode.
    """

    def __init__(
        self,
        observation_space: gym.Space,
        action_space: gym.Space,
        length: int = 3,
        truncate: bool = False,
    ):
        self.observation_space = observation_space
        self.action_space = action_space
        self._defaults = {"length": length, "truncate": truncate}
        self._t, self._length, self._truncate = 0, length, truncate

    def _info(self):
        return {
            "step": self._t,
            "noise": self.np_random.normal(size=2).astype(np.float32),
            "stats": {"progress": self._t / self._length},
        }

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.observation_space.seed(int(self.np_random.integers(2**31)))
        options = {**self._defaults, **(options or {})}
        self._t = 0
        self._length = int(options["length"])
        self._truncate = bool(options["truncate"])
        return self.observation_space.sample(), self._info()

    def step(self, action):
        assert self.action_space.contains(action)
        self._t += 1
        done = self._t >= self._length
        reward = float(self.np_random.normal())
        return (
            self.observation_space.sample(),
            reward,
            done and not self._truncate,
            done and self._truncate,
            self._info(),
        )


def make_env(space_name: str, **kwargs) -> gym.Env:
    if space_name == "cartpole":
        return gym.make("CartPole-v1")
    return SpaceEnv(*SPACES[space_name], **kwargs)


def record_dataset(
    dataset_id: str, space_name: str, data_format: str, num_episodes: int = 3
):
    """Records random actions through Minari's `DataCollector`.

    SpaceEnv episodes `i` have `3 + i` steps, odd ones end truncated, and
    their reset options are recorded as Minari episode metadata.
    """
    collector = minari.DataCollector(
        make_env(space_name), data_format=data_format, record_infos=True
    )
    collector.action_space.seed(0)
    for i in range(num_episodes):
        options = None
        if space_name != "cartpole":
            options = {"length": 3 + i, "truncate": i % 2 == 1}
        collector.reset(seed=100 + i, options=options)
        done = False
        while not done:
            step = collector.step(collector.action_space.sample())
            done = step[2] or step[3]
    dataset = collector.create_dataset(
        dataset_id,
        algorithm_name="random",
        author="RLlib tests",
        author_email="tests@example.com",
        code_permalink="rllib/offline/tests/test_minari_io.py",
        description=f"{space_name} ({data_format})",
    )
    collector.close()
    return dataset


@pytest.fixture(autouse=True)
def small_chunks(monkeypatch):
    """Two episodes per Minari read/write call, so that every test crosses
    chunk boundaries (episode indices, metadata, cleanup after a later chunk)."""
    monkeypatch.setattr("rllib.offline.tools.minari_io._CHUNK", 2)


@pytest.fixture
def minari_root(tmp_path, monkeypatch):
    root = tmp_path / "minari"
    monkeypatch.setenv("MINARI_DATASETS_PATH", str(root))
    return root


def assert_tree_equal(actual, expected, what, check_dtype=True):
    """Same structure (dict keys, tuples), same values and dtypes at every leaf."""
    tree.assert_same_structure(actual, expected, check_types=True)
    for a, e in zip(tree.flatten(actual), tree.flatten(expected)):
        np.testing.assert_array_equal(a, e, err_msg=what)
        if check_dtype:
            assert np.asarray(a).dtype == np.asarray(e).dtype, what


def stacked(values):
    """A field of an episode that is not numpy-ized, as one batched nest."""
    if not isinstance(values, list):
        return values
    return tree.map_structure(lambda *steps: np.stack(steps), *values)


def minari_info(infos, t):
    """Step `t` of Minari's batched infos (None or {} when there are none).

    Minari's arrow backend gives a nested info dict back as an array of
    per-step dicts; its HDF5 backend as a dict of arrays.
    """
    if not infos:
        return {}
    return {
        key: minari_info(column, t) if isinstance(column, dict) else column[t]
        for key, column in infos.items()
    }


def assert_info_equal(actual, expected, what):
    assert isinstance(actual, dict), what
    assert set(actual) == set(expected), what
    for key, value in expected.items():
        if isinstance(value, dict):
            assert_info_equal(actual[key], value, f"{what}[{key!r}]")
        else:
            np.testing.assert_array_equal(actual[key], value, err_msg=what)


def assert_matches_minari(episode, data, dataset, metadata):
    """Every field of a read episode equals Minari's `EpisodeData`."""
    what = f"episode {data.id}"
    assert isinstance(episode, SingleAgentEpisode)
    assert episode.is_numpy and episode.is_done
    assert len(episode) == len(data.rewards) == metadata["total_steps"]
    assert episode.observation_space == dataset.observation_space
    assert episode.action_space == dataset.action_space
    assert_tree_equal(episode.get_observations(), data.observations, what)
    assert_tree_equal(episode.get_actions(), data.actions, what)
    assert_tree_equal(episode.get_rewards(), data.rewards, what)
    assert episode.is_terminated == bool(data.terminations[-1])
    assert episode.is_truncated == bool(data.truncations[-1])
    assert not data.terminations[:-1].any() and not data.truncations[:-1].any()
    infos = episode.get_infos()
    assert len(infos) == len(episode) + 1
    for t, info in enumerate(infos):
        assert_info_equal(info, minari_info(data.infos, t), f"{what} info {t}")
    provenance = episode.custom_data["minari"]
    assert provenance["dataset_id"] == dataset.id
    assert provenance["episode_id"] == int(data.id)
    assert set(provenance["metadata"]) == set(metadata)
    for key, value in metadata.items():
        got = provenance["metadata"][key]
        if isinstance(value, dict):
            assert got == {k: np.asarray(v).item() for k, v in value.items()}
        else:
            assert got == np.asarray(value).item(), key


# ---------------------------------------------------------------------------
# Reading.
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("space_name", SPACE_GRID)
@pytest.mark.parametrize("data_format", FORMATS)
def test_read_every_field(minari_root, data_format, space_name):
    dataset_id = f"tests/{space_name}-{data_format}-v0"
    record_dataset(dataset_id, space_name, data_format)
    dataset = minari.load_dataset(dataset_id)
    assert dataset.storage.metadata["data_format"] == data_format

    episodes = list(read_minari(dataset_id))
    expected = list(dataset.iterate_episodes())
    metadata = list(dataset.storage.get_episode_metadata(dataset.episode_indices))
    assert len(episodes) == dataset.total_episodes == 3
    assert sum(len(e) for e in episodes) == dataset.total_steps
    for episode, data, meta in zip(episodes, expected, metadata):
        assert_matches_minari(episode, data, dataset, meta)
        assert meta["seed"] == 100 + int(data.id)
    if space_name != "cartpole":
        assert [e.is_truncated for e in episodes] == [False, True, False]
        assert [len(e) for e in episodes] == [3, 4, 5]
        assert episodes[1].custom_data["minari"]["metadata"]["options"] == {
            "length": 4,
            "truncate": True,
        }
        assert set(episodes[0].get_infos()[1]) == {"step", "noise", "stats"}
    else:
        assert all(info == {} for info in episodes[0].get_infos())

    # The same episodes by directory, by `data/` directory and as an object;
    # ids are unique and the same on every read.
    ids = [e.id_ for e in episodes]
    assert len(set(ids)) == 3 and not any("_" in i for i in ids)
    for source in (minari_root / dataset_id, minari_root / dataset_id / "data"):
        assert [e.id_ for e in read_minari(source)] == ids
    assert [e.id_ for e in read_minari(dataset)] == ids


def test_read_selected_and_filtered_episodes(minari_root):
    record_dataset("tests/dict-v0", "dict", "hdf5", num_episodes=4)
    dataset = minari.load_dataset("tests/dict-v0")
    picked = list(read_minari("tests/dict-v0", episode_indices=[3, 1]))
    assert [e.custom_data["minari"]["episode_id"] for e in picked] == [3, 1]
    filtered = dataset.filter_episodes(lambda ep: bool(ep.truncations[-1]))
    assert [e.custom_data["minari"]["episode_id"] for e in read_minari(filtered)] == [
        1,
        3,
    ]
    no_infos = next(read_minari(dataset, read_infos=False))
    assert all(info == {} for info in no_infos.get_infos())


# ---------------------------------------------------------------------------
# Writing.
# ---------------------------------------------------------------------------


def rllib_episodes(space_name: str, num_episodes: int = 4):
    """Episodes recorded the RLlib way (`SingleAgentEpisode.add_env_step`),
    every other one numpy-ized; SpaceEnv episodes have `2 + i` steps and
    even ones end truncated."""
    episodes = []
    for i in range(num_episodes):
        env = make_env(space_name, length=2 + i, truncate=i % 2 == 0)
        env.action_space.seed(i)
        (episode,) = record_episodes(
            env, 1, lambda obs, env=env: env.action_space.sample(), seed=i
        )
        if i % 2:
            episode.to_numpy()
        episodes.append(episode)
    return env, episodes


def assert_written(dataset, episodes, *, infos=True):
    """Every field of a Minari dataset equals the episodes written into it."""
    assert dataset.total_episodes == len(episodes)
    assert dataset.total_steps == sum(len(e) for e in episodes)
    assert dataset.observation_space == episodes[0].observation_space
    assert dataset.action_space == episodes[0].action_space
    metadata = list(dataset.storage.get_episode_metadata(dataset.episode_indices))
    for i, (episode, data) in enumerate(zip(episodes, dataset.iterate_episodes())):
        what = f"episode {i}"
        assert int(data.id) == i
        observations = stacked(episode.get_observations())
        actions = stacked(episode.get_actions())
        assert_tree_equal(data.observations, observations, what)
        assert_tree_equal(data.actions, actions, what)
        np.testing.assert_array_equal(data.rewards, episode.get_rewards())
        assert data.rewards.dtype == np.float64
        ends = np.zeros(len(episode), bool)
        ends[-1] = True
        np.testing.assert_array_equal(data.terminations, ends & episode.is_terminated)
        np.testing.assert_array_equal(data.truncations, ends & episode.is_truncated)
        if infos and any(episode.get_infos()):
            for t, info in enumerate(episode.get_infos()):
                assert_info_equal(minari_info(data.infos, t), info, f"{what} {t}")
        else:
            assert not data.infos
        rewards = np.asarray(episode.get_rewards(), np.float64)
        assert int(metadata[i]["id"]) == i
        assert int(metadata[i]["total_steps"]) == len(episode)
        assert metadata[i]["rewards_sum"] == pytest.approx(rewards.sum())
        assert metadata[i]["rewards_mean"] == pytest.approx(rewards.mean())
        assert metadata[i]["rewards_std"] == pytest.approx(rewards.std())
        assert metadata[i]["rewards_min"] == pytest.approx(rewards.min())
        assert metadata[i]["rewards_max"] == pytest.approx(rewards.max())


@pytest.mark.parametrize("space_name", SPACE_GRID)
@pytest.mark.parametrize("data_format", FORMATS)
def test_write_round_trip_every_field(minari_root, data_format, space_name):
    env, episodes = rllib_episodes(space_name)
    dataset_id = f"tests/written-{space_name}-{data_format}-v0"
    returned = write_minari(
        episodes,
        dataset_id,
        data_format=data_format,
        env=env if space_name == "cartpole" else None,
        author="RLlib tests",
        description="round trip",
    )
    # A fresh `minari.load_dataset` sees every field, metadata included.
    dataset = minari.load_dataset(dataset_id)
    assert returned.total_episodes == dataset.total_episodes
    assert dataset.storage.metadata["data_format"] == data_format
    assert dataset.storage.metadata["author"] == {"RLlib tests"}
    assert dataset.storage.metadata["description"] == "round trip"
    assert_written(dataset, episodes)
    if space_name == "cartpole":
        assert dataset.env_spec.id == "CartPole-v1"
        assert dataset.recover_environment().spec.id == "CartPole-v1"

    # ... and reading it back gives the episodes that were written.
    for original, back in zip(episodes, read_minari(dataset_id)):
        assert_tree_equal(
            back.get_observations(), stacked(original.get_observations()), "obs"
        )
        assert_tree_equal(back.get_actions(), stacked(original.get_actions()), "act")
        np.testing.assert_array_equal(back.get_rewards(), original.get_rewards())
        assert back.is_terminated == original.is_terminated
        assert back.is_truncated == original.is_truncated
        for got, want in zip(back.get_infos(), original.get_infos()):
            assert_info_equal(got, want, "infos")


@pytest.mark.parametrize("data_format", FORMATS)
def test_rewrite_keeps_seeds_options_and_episode_metadata(minari_root, data_format):
    record_dataset("tests/source-v0", "nested", data_format)
    episodes = list(read_minari("tests/source-v0"))
    write_minari(episodes, "tests/copy-v0", data_format=data_format)
    source = minari.load_dataset("tests/source-v0")
    copy = minari.load_dataset("tests/copy-v0")
    assert (copy.total_episodes, copy.total_steps) == (
        source.total_episodes,
        source.total_steps,
    )
    for old, new in zip(source.iterate_episodes(), copy.iterate_episodes()):
        assert_tree_equal(new.observations, old.observations, "obs")
        assert_tree_equal(new.actions, old.actions, "actions")
        for key in ("rewards", "terminations", "truncations"):
            assert_tree_equal(getattr(new, key), getattr(old, key), key)
        for t in range(len(old.rewards) + 1):
            assert_info_equal(
                minari_info(new.infos, t), minari_info(old.infos, t), "infos"
            )
    indices = source.episode_indices
    old_meta = list(source.storage.get_episode_metadata(indices))
    new_meta = list(copy.storage.get_episode_metadata(indices))
    for old, new in zip(old_meta, new_meta):
        assert set(new) == set(old)
        for key in old:
            assert np.all(np.asarray(new[key]) == np.asarray(old[key])) or (
                isinstance(old[key], dict) and new[key] == old[key]
            ), key


def test_write_without_infos_and_from_a_generator(minari_root):
    env, episodes = rllib_episodes("tuple", num_episodes=3)
    write_minari(
        (e for e in episodes),
        "tests/no-infos-v0",
        data_format="arrow",
        record_infos=False,
    )
    dataset = minari.load_dataset("tests/no-infos-v0")
    assert_written(dataset, episodes, infos=False)


@pytest.mark.parametrize("data_format", FORMATS)
def test_write_stores_python_values_in_the_space_dtype(minari_root, data_format):
    env, (episode,) = rllib_episodes("cartpole", num_episodes=1)
    as_python = SingleAgentEpisode(
        observations=[obs.tolist() for obs in episode.get_observations()],
        actions=[int(action) for action in episode.get_actions()],
        rewards=list(episode.get_rewards()),
        terminated=episode.is_terminated,
        truncated=episode.is_truncated,
        len_lookback_buffer=0,
    )
    write_minari([as_python], "tests/python-v0", env=env, data_format=data_format)
    (data,) = minari.load_dataset("tests/python-v0").iterate_episodes()
    assert_tree_equal(data.observations, stacked(episode.get_observations()), "obs")
    assert_tree_equal(data.actions, np.asarray(episode.get_actions()), "actions")


# ---------------------------------------------------------------------------
# Converting.
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("data_format", FORMATS)
def test_convert_to_episode_files(minari_root, tmp_path, data_format, capsys):
    record_dataset("tests/convert-v0", "nested", data_format, num_episodes=5)
    files = convert_minari(
        "tests/convert-v0", tmp_path / "episodes", max_rows_per_file=2
    )
    assert len(files) == 3
    assert "Converting tests/convert-v0" in capsys.readouterr().err
    dataset = minari.load_dataset("tests/convert-v0")
    assert read_spaces(tmp_path / "episodes") == (
        dataset.observation_space,
        dataset.action_space,
    )
    converted = sorted(
        read_episodes(tmp_path / "episodes"),
        key=lambda e: e.custom_data["minari"]["episode_id"],
    )
    direct = list(read_minari("tests/convert-v0"))
    assert [e.id_ for e in converted] == [e.id_ for e in direct]
    for back, episode in zip(converted, direct):
        assert back.custom_data == episode.custom_data
        assert back.is_terminated == episode.is_terminated
        assert back.is_truncated == episode.is_truncated
        assert_tree_equal(back.get_observations(), episode.get_observations(), "obs")
        assert_tree_equal(back.get_actions(), episode.get_actions(), "actions")
        assert_tree_equal(back.get_rewards(), episode.get_rewards(), "rewards")
        for got, want in zip(back.get_infos(), episode.get_infos()):
            assert_info_equal(got, want, "infos")

    quiet = convert_minari("tests/convert-v0", tmp_path / "quiet", progress=False)
    assert len(quiet) == 1 and "Converting" not in capsys.readouterr().err


def unfinished_dataset(dataset_id, terminations=(False, False, False)):
    """Three done one-step episodes and a three-step one ending as given."""
    from minari.data_collector import EpisodeBuffer

    space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)

    def buffer(steps, terminations):
        return EpisodeBuffer(
            observations=np.zeros((steps + 1, 2), np.float32),
            actions=np.zeros(steps, np.int64),
            rewards=np.ones(steps),
            terminations=np.asarray(terminations),
            truncations=np.zeros(steps, bool),
        )

    buffers = [buffer(1, [True]) for _ in range(3)] + [buffer(3, terminations)]
    return minari.create_dataset_from_buffers(
        dataset_id,
        buffers,
        observation_space=space,
        action_space=gym.spaces.Discrete(2),
        algorithm_name="hand-made",
        author="tests",
        author_email="tests@example.com",
        code_permalink="-",
        description="-",
    )


def test_unfinished_episodes(minari_root, tmp_path):
    unfinished_dataset("tests/unfinished-v0")
    with pytest.raises(ValueError, match=r"Episode 3 of Minari dataset .*unfinished"):
        list(read_minari("tests/unfinished-v0"))
    last = list(read_minari("tests/unfinished-v0", truncate_unfinished=True))[-1]
    assert last.is_truncated and not last.is_terminated and len(last) == 3

    # A failed conversion leaves none of its files behind.
    out = tmp_path / "episodes"
    with pytest.raises(ValueError, match="truncate_unfinished=True"):
        convert_minari("tests/unfinished-v0", out, max_rows_per_file=1, progress=False)
    assert not [f for f in os.listdir(out) if f.endswith(".parquet")]
    files = convert_minari(
        "tests/unfinished-v0", out, truncate_unfinished=True, progress=False
    )
    assert sum(1 for _ in read_episodes(files)) == 4


def test_error_episode_ends_in_the_middle(minari_root):
    unfinished_dataset("tests/middle-v0", terminations=(False, True, True))
    with pytest.raises(
        ValueError, match=r"Episode 3 of .*: step 1 is terminated or truncated"
    ):
        list(read_minari("tests/middle-v0"))


# ---------------------------------------------------------------------------
# Errors.
# ---------------------------------------------------------------------------


def test_error_missing_dataset(minari_root, tmp_path):
    record_dataset("tests/present-v0", "discrete", "hdf5", num_episodes=1)
    with pytest.raises(
        FileNotFoundError,
        match=r"No Minari dataset `tests/absent-v0`.*local datasets: "
        r"`tests/present-v0`.*minari download",
    ):
        read_minari("tests/absent-v0")
    with pytest.raises(FileNotFoundError, match="is not a Minari dataset"):
        convert_minari(tmp_path, tmp_path / "out")
    with pytest.raises(TypeError, match="`dataset` must be a Minari dataset id"):
        read_minari(42)
    with pytest.raises(ValueError, match=r"`episode_indices` holds 5, .* 0 to 0"):
        read_minari("tests/present-v0", episode_indices=[5])
    with pytest.raises(TypeError, match="`episode_indices` must hold ints"):
        read_minari("tests/present-v0", episode_indices=["0"])


def test_error_missing_extra(minari_root, monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "minari", None)
    hint = r'pip install "rllib-fork\[minari\]"'
    with pytest.raises(ImportError, match=hint):
        read_minari("tests/any-v0")
    with pytest.raises(ImportError, match=hint):
        convert_minari("tests/any-v0", tmp_path)
    with pytest.raises(ImportError, match=hint):
        write_minari([], "tests/any-v0")
    with pytest.raises(ImportError, match=hint):
        open_minari_dataset("tests/any-v0")


def test_error_write_arguments(minari_root):
    env, episodes = rllib_episodes("cartpole", num_episodes=2)
    with pytest.raises(ValueError, match=r"`dataset_id='cartpole'` is not a Minari"):
        write_minari(episodes, "cartpole")
    with pytest.raises(ValueError, match=r"`data_format='zarr'`.*\['hdf5', 'arrow'\]"):
        write_minari(episodes, "tests/x-v0", data_format="zarr")
    with pytest.raises(TypeError, match=r"unknown keyword arguments \['authr'\]"):
        write_minari(episodes, "tests/x-v0", authr="me")
    with pytest.raises(ValueError, match="`episodes` is empty"):
        write_minari([], "tests/x-v0")
    with pytest.raises(TypeError, match=r"episode #1 is a `dict`, not a"):
        write_minari([episodes[0], {}], "tests/x-v0")
    assert not (minari_root / "tests" / "x-v0").exists()
    bare = SingleAgentEpisode(
        observations=[np.zeros(4, np.float32)] * 2,
        actions=[0],
        rewards=[1.0],
        terminated=True,
        len_lookback_buffer=0,
    )
    with pytest.raises(ValueError, match=r"\['observation_space', 'action_space'\]"):
        write_minari([bare], "tests/x-v0")
    with pytest.raises(TypeError, match="Minari cannot store the `observation_space`"):
        write_minari(
            [bare],
            "tests/x-v0",
            observation_space=gym.spaces.Graph(gym.spaces.Discrete(2), None),
            action_space=env.action_space,
        )
    write_minari(episodes, "tests/x-v0")
    with pytest.raises(FileExistsError, match=r"`tests/x-v0` already exists"):
        write_minari(episodes, "tests/x-v0")


def test_error_bad_episode_deletes_the_partial_dataset(minari_root):
    env, episodes = rllib_episodes("dict", num_episodes=3)
    unfinished = SingleAgentEpisode(
        observations=[env.observation_space.sample()] * 2,
        actions=[env.action_space.sample()],
        rewards=[0.0],
        len_lookback_buffer=0,
    )
    with pytest.raises(ValueError, match=r"`write_minari` to `tests/bad-v0`.*not done"):
        write_minari(episodes + [unfinished], "tests/bad-v0")
    assert not (minari_root / "tests" / "bad-v0").exists()

    outside = SingleAgentEpisode(
        observations=[{"position": np.full(2, 9.0, np.float32), "mode": 0}] * 2,
        actions=[0],
        rewards=[0.0],
        terminated=True,
        len_lookback_buffer=0,
    )
    with pytest.raises(ValueError, match=r"timestep 0, field `obs`: \['position'\]"):
        write_minari(
            [outside],
            "tests/bad-v0",
            observation_space=env.observation_space,
            action_space=env.action_space,
        )
    assert not (minari_root / "tests" / "bad-v0").exists()

    # Infos whose keys change between steps cannot be Minari columns.
    ragged = SingleAgentEpisode(
        observations=[env.observation_space.sample()] * 3,
        infos=[{}, {"a": 1}, {"a": 2}],
        actions=[env.action_space.sample()] * 2,
        rewards=[0.0, 1.0],
        truncated=True,
        len_lookback_buffer=0,
    )
    kwargs = dict(
        observation_space=env.observation_space, action_space=env.action_space
    )
    with pytest.raises(
        ValueError, match=r"the info of timestep 1 has keys \['a'\].*record_infos=False"
    ):
        write_minari([ragged], "tests/bad-v0", **kwargs)
    assert not (minari_root / "tests" / "bad-v0").exists()
    write_minari([ragged], "tests/bad-v0", record_infos=False, **kwargs)
    assert minari.load_dataset("tests/bad-v0").total_steps == 2


# ---------------------------------------------------------------------------
# Training.
# ---------------------------------------------------------------------------


@pytest.mark.timeout(300)
def test_bc_learns_cartpole_from_a_minari_dataset(ray_cluster, tmp_path, monkeypatch):
    """The example end to end: DataCollector -> convert -> BC -> evaluation."""
    from rllib.examples.offline_rl import train_on_minari as example

    # The example points `MINARI_DATASETS_PATH` into its output directory.
    monkeypatch.setenv("MINARI_DATASETS_PATH", str(tmp_path / "unused"))
    summary = example.main([f"--output-dir={tmp_path}"])
    assert summary["total_episodes"] == 20
    assert summary["files"] == 2
    assert summary["expert_return_mean"] >= 490
    losses = summary["losses"]
    assert losses[-1] < losses[0] - 0.02, losses
    assert summary["eval_return_mean"] >= 450, summary


def test_scripted_pendulum_data_round_trips_through_minari(minari_root):
    """The continuous-control example's episodes, written to Minari and read
    back: the same actions and rewards, step for step."""
    from rllib.examples.offline_rl.scripted_continuous_control import (
        TASKS,
        record_episodes,
    )

    recorded = record_episodes("pendulum", "expert", 200)
    write_minari(recorded, "rllib-pendulum/expert-v0", env=TASKS["pendulum"].env_id)
    (episode,) = read_minari("rllib-pendulum/expert-v0")
    np.testing.assert_allclose(episode.get_actions(), recorded[0].get_actions())
    np.testing.assert_allclose(episode.get_rewards(), recorded[0].get_rewards())


if __name__ == "__main__":
    sys.exit(pytest.main(["-v", __file__]))
