"""Episode states that went through msgpack get their tuples back (no Ray)."""

import sys

import gymnasium as gym
import msgpack
import msgpack_numpy
import numpy as np
import pytest
import tree
from ray.rllib.env.single_agent_episode import SingleAgentEpisode
from ray.rllib.env.utils.infinite_lookback_buffer import InfiniteLookbackBuffer

BOX = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
SPACES = {
    "tuple": gym.spaces.Tuple((BOX, BOX)),
    "nested": gym.spaces.Dict(
        {"pos": BOX, "pair": gym.spaces.Tuple((BOX, gym.spaces.Tuple((BOX,))))}
    ),
    "dict": gym.spaces.Dict({"a": BOX, "b": BOX}),
    "box": BOX,
}


def _msgpack_round_trip(state):
    packed = msgpack.packb(state, default=msgpack_numpy.encode)
    return msgpack.unpackb(packed, object_hook=msgpack_numpy.decode)


def _episode(space, length=4, numpy=True):
    space.seed(0)
    episode = SingleAgentEpisode(
        observations=[space.sample() for _ in range(length + 1)],
        actions=[0] * length,
        rewards=[1.0] * length,
        terminated=True,
        observation_space=space,
        action_space=gym.spaces.Discrete(2),
        len_lookback_buffer=0,
    )
    return episode.to_numpy() if numpy else episode


@pytest.mark.parametrize("numpy", [True, False], ids=["finalized", "list"])
@pytest.mark.parametrize("kind", sorted(SPACES))
def test_episode_observations_keep_their_structure(kind, numpy):
    space = SPACES[kind]
    episode = _episode(space, numpy=numpy)
    restored = SingleAgentEpisode.from_state(_msgpack_round_trip(episode.get_state()))
    for t in range(len(episode) + 1):
        got, want = restored.get_observations(t), episode.get_observations(t)
        tree.assert_same_structure(got, want, check_types=True)
        for a, b in zip(tree.flatten(got), tree.flatten(want)):
            np.testing.assert_array_equal(a, b)
    batch_got = restored.get_observations(slice(0, 3))
    tree.assert_same_structure(
        batch_got, episode.get_observations(slice(0, 3)), check_types=True
    )


def test_buffer_without_space_is_left_as_decoded():
    state = _msgpack_round_trip(
        InfiniteLookbackBuffer(data=(np.zeros(3), np.ones(3))).get_state()
    )
    assert isinstance(InfiniteLookbackBuffer.from_state(state).data, list)


def test_restore_leaves_mismatches_alone():
    # The helper the fix adds; imported here so that the tests above run (and
    # fail) on a tree without the fix.
    from rllib.env.utils.infinite_lookback_buffer import restore_space_structure

    space = SPACES["tuple"]
    assert restore_space_structure([1, 2, 3], space) == [1, 2, 3]
    assert restore_space_structure(np.zeros(2), space).shape == (2,)
    out = restore_space_structure({"pos": 1, "extra": [1, 2]}, SPACES["nested"])
    assert out == {"pos": 1, "extra": [1, 2]}


if __name__ == "__main__":
    sys.exit(pytest.main(["-v", __file__]))
