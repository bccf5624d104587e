"""`MultiAgentEpisode`s through EpisodeWriter / read_episodes (no Ray)."""

import copy
import json

import gymnasium as gym
import numpy as np
import pyarrow.parquet as pq
import pytest

from rllib.offline.episode_files.payload import METADATA_KEY
from rllib.offline.episode_files.reader import read_episodes, read_spaces
from rllib.offline.episode_files.writer import EpisodeWriter, write_episodes
from rllib.offline.tests.episode_factory import (
    AGENT_SPACES,
    BOX,
    DISCRETE,
    make_episode,
    make_multi_agent_episode,
)
from rllib.offline.tests.test_episode_writer import (
    assert_episodes_equal,
    assert_same_tree,
)

OBSERVATION_SPACES = {agent: spaces[0] for agent, spaces in AGENT_SPACES.items()}
ACTION_SPACES = {agent: spaces[1] for agent, spaces in AGENT_SPACES.items()}


def assert_multi_agent_episodes_equal(actual, expected):
    assert actual.id_ == expected.id_
    assert len(actual) == len(expected)
    assert (actual.env_t_started, actual.env_t) == (
        expected.env_t_started,
        expected.env_t,
    )
    assert actual.is_terminated == expected.is_terminated
    assert actual.is_truncated == expected.is_truncated
    # Agent ids keep their types (int 7 stays int).
    assert list(actual.agent_episodes) == list(expected.agent_episodes)
    for agent_id, agent_episode in expected.agent_episodes.items():
        assert_episodes_equal(actual.agent_episodes[agent_id], agent_episode)
        assert list(actual.env_t_to_agent_t[agent_id]) == list(
            expected.env_t_to_agent_t[agent_id]
        ), agent_id
        assert actual.agent_t_started[agent_id] == expected.agent_t_started[agent_id]
    assert actual._agent_to_module_mapping == expected._agent_to_module_mapping
    assert actual.get_return() == expected.get_return()
    assert actual.observation_space == expected.observation_space
    assert actual.action_space == expected.action_space
    for name in ("_hanging_actions_end", "_hanging_rewards_end"):
        assert dict(getattr(actual, name)) == dict(getattr(expected, name)), name


@pytest.mark.parametrize("compression", [None, "zstd"])
def test_round_trip_every_field(tmp_path, compression):
    episodes = [
        make_multi_agent_episode(length=6, seed=0, truncated=True),
        make_multi_agent_episode(length=5, seed=1, truncated=False),
    ]
    expected = copy.deepcopy(episodes)
    files = write_episodes(episodes, tmp_path, compression=compression)
    assert len(files) == 1
    read = list(read_episodes(tmp_path))
    assert len(read) == 2
    for actual, original in zip(read, expected):
        assert_multi_agent_episodes_equal(actual, original)
    # The fields that make this episode multi-agent, spelled out.
    late = read[0].agent_episodes["late"]
    assert (len(late), late.is_terminated, late.is_truncated) == (2, True, False)
    assert list(read[0].env_t_to_agent_t["late"])[2:5] == [0, 1, 2]
    scout = read[0].agent_episodes["scout"]
    assert (scout.is_terminated, scout.is_truncated) == (False, True)
    assert read[1].agent_episodes[7].is_terminated
    assert isinstance(read[0].agent_episodes[7].get_observations(0), tuple)
    assert set(read[0].agent_episodes["scout"].get_observations(0)) == {
        "mode",
        "position",
    }
    assert read[0].module_for("scout") == "p_scout"
    assert read[0].module_for(7) == "p_7"


def test_spaces_per_agent_in_metadata(tmp_path):
    files = write_episodes([make_multi_agent_episode()], tmp_path)
    metadata = json.loads(pq.read_schema(files[0]).metadata[METADATA_KEY])
    # The format's own name for the layout, no Python module path.
    assert metadata["payload"] == "msgpack+msgpack_numpy:MultiAgentEpisode.agent_states"
    assert metadata["observation_space"] is None
    assert {agent for agent, _ in metadata["agents"]} == set(AGENT_SPACES)
    observation_spaces, action_spaces = read_spaces(tmp_path)
    assert observation_spaces == OBSERVATION_SPACES
    assert action_spaces == ACTION_SPACES
    assert 7 in observation_spaces and "7" not in observation_spaces


def test_declared_spaces_are_checked_per_agent(tmp_path):
    narrow = dict(OBSERVATION_SPACES, late=gym.spaces.Box(5.0, 6.0, (3,), np.float32))
    writer = EpisodeWriter(tmp_path, observation_space=narrow)
    episode = make_multi_agent_episode()
    with pytest.raises(ValueError) as error:
        writer.write(episode)
    message = str(error.value)
    for words in (
        f"Episode `{episode.id_}`",
        "agent `'late'`",
        "timestep 0",
        "field `obs`",
        "observation_space={'late': ...}",
    ):
        assert words in message, (words, message)
    writer.abort()


def test_unfinished_agent_lengths_and_not_done(tmp_path):
    episode = make_multi_agent_episode()
    running = copy.deepcopy(episode)
    running.is_truncated = False
    with EpisodeWriter(tmp_path) as writer:
        with pytest.raises(ValueError, match=f"Episode `{running.id_}` is not done"):
            writer.write(running)
        broken = copy.deepcopy(episode)
        broken.agent_episodes[7].rewards.data.append(0.0)
        with pytest.raises(ValueError, match=r"agent `7`, field `rewards`"):
            writer.write(broken)
        writer.write(episode)
    assert [e.id_ for e in read_episodes(tmp_path)] == [episode.id_]


def test_one_kind_of_episode_per_writer(tmp_path):
    with EpisodeWriter(tmp_path / "ma") as writer:
        writer.write(make_multi_agent_episode())
        with pytest.raises(TypeError, match="this writer writes `MultiAgentEpisode`s"):
            writer.write(make_episode(BOX, DISCRETE))
    single = EpisodeWriter(tmp_path / "sa", observation_space=BOX)
    with pytest.raises(TypeError, match="writes `SingleAgentEpisode`s"):
        single.write(make_multi_agent_episode())
    single.abort()
    with pytest.raises(TypeError, match="dict of spaces by agent id"):
        from rllib.offline.episode_files.validation import validate_episode

        validate_episode(make_multi_agent_episode(), observation_space=BOX)


def test_unserializable_agent_data_names_the_agent(tmp_path):
    episode = make_multi_agent_episode()
    episode.agent_episodes["scout"].infos.data[1] = {"handle": object()}
    with EpisodeWriter(tmp_path) as writer:
        with pytest.raises(TypeError) as error:
            writer.write(episode)
    message = str(error.value)
    assert "agent `'scout'`" in message and "field `infos` at timestep 1" in message


def test_agent_ids_of_other_types_cannot_be_recorded(tmp_path):
    with pytest.raises(TypeError, match=r"agent \(1, 2\)"):
        EpisodeWriter(tmp_path, observation_space={(1, 2): BOX})


def test_numpy_episode_round_trip(tmp_path):
    episode = make_multi_agent_episode(seed=3)
    episode.to_numpy()
    expected = copy.deepcopy(episode)
    write_episodes([episode], tmp_path)
    (actual,) = read_episodes(tmp_path)
    for agent_id, agent_episode in expected.agent_episodes.items():
        assert_same_tree(
            actual.agent_episodes[agent_id].get_observations(),
            agent_episode.get_observations(),
            f"{agent_id} observations",
        )
        assert_same_tree(
            actual.agent_episodes[agent_id].get_rewards(),
            agent_episode.get_rewards(),
            f"{agent_id} rewards",
        )


if __name__ == "__main__":
    import sys

    sys.exit(pytest.main(["-v", __file__]))
