"""BC and MARWIL train one module per agent from recorded `MultiAgentEpisode`s.

The data tests run without Ray; the training tests use the shared local Ray
cluster (`ray_cluster` fixture) and RLlib's two-agent CartPole.
"""

import contextlib
import gc
import math

import numpy as np
import pyarrow.parquet as pq
import pytest
import torch
from ray.rllib.core.columns import Columns
from ray.rllib.env import INPUT_ENV_SPACES
from ray.rllib.env.multi_agent_episode import MultiAgentEpisode
from ray.rllib.offline.offline_prelearner import OfflinePreLearner
from ray.rllib.utils import unflatten_dict

from rllib.examples.offline_rl import train_multi_agent_offline as example
from rllib.examples.offline_rl.scripted_cartpole import record_multi_agent_episodes
from rllib.offline.episode_files.payload import encode_episode
from rllib.offline.episode_files.reader import decode_episode, read_episodes
from rllib.offline.episode_files.writer import write_episodes
from rllib.offline.in_memory.columns import (
    decode_module_columns,
    episode_columns_from_episode,
)
from rllib.offline.in_memory.memory_budget import MEMORY_BUDGET_KEY
from rllib.offline.tests.episode_factory import AGENT_SPACES, make_multi_agent_episode
from rllib.offline.tests.test_episode_writer import assert_same_tree
from rllib.utils.postprocessing.bootstrapped_returns import (
    BOOTSTRAP_DISCOUNT,
    RETURNS_TO_BOOTSTRAP,
)

GAMMA = 0.99


def _numpy(value):
    if isinstance(value, torch.Tensor):
        return value.cpu().numpy()
    return np.asarray(value)


def test_each_agent_becomes_columns_of_its_module():
    episode = make_multi_agent_episode(length=6, truncated=True)
    pairs = decode_module_columns(
        encode_episode(episode),
        policy_mapping_fn=lambda agent_id, ep: f"module_{agent_id}",
    )
    by_agent = {columns.id_.split("/", 1)[1]: (m, columns) for m, columns in pairs}
    assert set(by_agent) == {"scout", "7", "late"}
    for agent_id, agent_episode in episode.agent_episodes.items():
        module_id, columns = by_agent[str(agent_id)]
        assert module_id == f"module_{agent_id}"
        assert columns.id_ == f"{episode.id_}/{agent_id}"
        np.testing.assert_array_equal(columns.rewards, agent_episode.get_rewards())
        assert len(columns) == len(agent_episode)
    # "late" left early (terminated); the others end with the episode.
    late = by_agent["late"][1]
    assert (late.is_terminated, late.is_truncated) == (True, False)
    scout = by_agent["scout"][1]
    assert (scout.is_terminated, scout.is_truncated) == (False, True)
    np.testing.assert_array_equal(
        scout.observations["position"],
        np.stack([o["position"] for o in episode.agent_episodes["scout"].observations]),
    )
    # Without a mapping function every agent goes to the default module.
    assert {m for m, _ in decode_module_columns(encode_episode(episode))} == {
        "default_policy"
    }


def _columns_through_the_episode_object(payload, observation_space, action_space):
    """The slow reference: rebuild the episode, then read each agent's data."""
    episode = decode_episode(
        payload, observation_space=observation_space, action_space=action_space
    )
    found = {}
    for agent_id, agent_episode in episode.agent_episodes.items():
        if len(agent_episode):
            columns = episode_columns_from_episode(agent_episode)
            if not columns.is_done:
                columns.is_terminated = episode.is_terminated
                columns.is_truncated = not episode.is_terminated
            found[agent_id] = columns
    return found


@pytest.mark.parametrize("truncated", [True, False])
@pytest.mark.parametrize("numpy_ized", [False, True])
@pytest.mark.parametrize("spaces_given", [False, True])
def test_agent_columns_equal_those_of_the_rebuilt_episode(
    truncated, numpy_ized, spaces_given
):
    """Per-agent columns decode straight from the row, as from the episode."""
    episode = make_multi_agent_episode(length=7, truncated=truncated)
    if numpy_ized:
        episode = episode.to_numpy()
    spaces = dict(AGENT_SPACES)
    observation_space = (
        {agent: s[0] for agent, s in spaces.items()} if spaces_given else None
    )
    action_space = (
        {agent: s[1] for agent, s in spaces.items()} if spaces_given else None
    )
    payload = encode_episode(episode)
    expected = _columns_through_the_episode_object(
        payload, observation_space, action_space
    )
    pairs = decode_module_columns(
        payload,
        observation_space=observation_space,
        action_space=action_space,
        policy_mapping_fn=lambda agent_id, ep: f"m{agent_id}",
    )
    assert len(pairs) == len(expected) == 3
    for module_id, columns in pairs:
        agent_id = columns.id_.split("/", 1)[1]
        agent_id = int(agent_id) if agent_id.isdigit() else agent_id
        assert module_id == f"m{agent_id}"
        reference = expected[agent_id]
        assert_same_tree(columns.observations, reference.observations, "obs")
        assert_same_tree(columns.actions, reference.actions, "actions")
        assert_same_tree(columns.rewards, reference.rewards, "rewards")
        assert (columns.is_terminated, columns.is_truncated) == (
            reference.is_terminated,
            reference.is_truncated,
        )
    # Agent 7's Tuple observations and actions come back as tuples.
    seven = next(c for _, c in pairs if c.id_.endswith("/7"))
    assert isinstance(seven.observations, tuple)
    assert isinstance(seven.actions, tuple)


def test_mapping_function_gets_the_episode_it_asks_for():
    """A mapping that reads the episode gets the real one (recorded mapping)."""
    episode = make_multi_agent_episode(length=5)
    seen = []

    def mapping(agent_id, ep):
        seen.append(ep)
        assert type(ep) is MultiAgentEpisode
        assert ep.id_ == episode.id_
        return ep.module_for(agent_id) if agent_id == "scout" else "other"

    pairs = decode_module_columns(encode_episode(episode), policy_mapping_fn=mapping)
    modules = {columns.id_.split("/", 1)[1]: m for m, columns in pairs}
    assert modules == {"scout": "p_scout", "7": "other", "late": "other"}
    assert len(seen) == 3 and len(seen[0]) == len(episode)
    assert seen[0].env_t_to_agent_t["late"].data == (
        episode.env_t_to_agent_t["late"].data
    )


def test_mapping_function_gets_a_real_episode_with_the_rows_data():
    """`type(episode) is MultiAgentEpisode`, one per row, holding that row."""
    env = example.make_env()
    episodes = record_multi_agent_episodes(
        env, 3, example.scripted_action, epsilon=0.5, seed=1
    )
    for recorded in episodes:
        seen = []

        def mapping(agent_id, ep, seen=seen):
            seen.append((agent_id, ep))
            return f"p{agent_id}"

        pairs = decode_module_columns(
            encode_episode(recorded), policy_mapping_fn=mapping
        )
        assert {m for m, _ in pairs} == {f"p{a}" for a, _ in seen}
        assert [a for a, _ in seen] == list(recorded.agent_episodes)
        received = seen[0][1]
        assert all(ep is received for _, ep in seen)  # Decoded once per row.
        assert type(received) is MultiAgentEpisode
        assert received.id_ == recorded.id_
        assert received.agent_ids == recorded.agent_ids
        assert len(received) == len(recorded)
        for agent_id, agent_episode in recorded.agent_episodes.items():
            np.testing.assert_array_equal(
                received.agent_episodes[agent_id].get_rewards(),
                agent_episode.get_rewards(),
            )


@pytest.fixture(scope="module")
def two_agent_data(tmp_path_factory):
    """Short two-agent CartPole episodes (half of the actions random)."""
    data_dir = tmp_path_factory.mktemp("two_agent_cartpole")
    env = example.make_env()
    episodes = record_multi_agent_episodes(
        env, 12, example.scripted_action, epsilon=0.5, seed=3
    )
    write_episodes(episodes, data_dir, max_rows_per_file=4)
    return data_dir


def _index_steps(data_dir):
    """Observation bytes -> [(agent, discounted return-to-go, terminated)].

    Both poles reset to the same state, so early observations of the two
    agents can coincide: a key may have several candidates.
    """
    index = {}
    for episode in read_episodes(data_dir):
        for agent_id, agent_episode in episode.agent_episodes.items():
            rewards = np.asarray(agent_episode.get_rewards(), dtype=np.float64)
            to_go = np.zeros(len(rewards) + 1)
            for t in reversed(range(len(rewards))):
                to_go[t] = rewards[t] + GAMMA * to_go[t + 1]
            observations = agent_episode.get_observations()
            for t in range(len(rewards)):
                key = np.asarray(observations[t], np.float32).tobytes()
                index.setdefault(key, []).append(
                    (agent_id, to_go[t], agent_episode.is_terminated)
                )
    return index


def _assert_each_agents_own_rows(module_batches, index):
    """Module `p<i>` holds 256 steps of agent `i` only, with its own targets."""
    for module_id, agent_id in (("p0", 0), ("p1", 1)):
        rows = module_batches[module_id]
        observations = _numpy(rows[Columns.OBS])
        assert len(observations) == 256
        returns = _numpy(rows[RETURNS_TO_BOOTSTRAP])
        discounts = _numpy(rows[BOOTSTRAP_DISCOUNT])
        for obs, to_go, discount in zip(observations, returns, discounts):
            # Whole-episode returns (the default horizon): the recorded
            # return-to-go of this agent's own episode at this step; a
            # terminated agent's rows do not bootstrap.
            matches = [
                (expected, terminated)
                for owner, expected, terminated in index[obs.tobytes()]
                if owner == agent_id
                and to_go == pytest.approx(expected, rel=1e-5, abs=1e-4)
            ]
            assert matches, (module_id, obs, to_go, index[obs.tobytes()])
            if all(terminated for _, terminated in matches):
                assert discount == 0.0


@contextlib.contextmanager
def _running(config):
    """The algorithm built from `config`, stopped (and collected) afterwards."""
    algo = config.build_algo()
    try:
        yield algo
    finally:
        algo.stop()
        gc.collect()


def _build(algo, data_dir, **learners):
    config = example.build_config(algo, data_dir, updates_per_iteration=2)
    config = config.training(train_batch_size_per_learner=256, gamma=GAMMA)
    return config.learners(**learners).evaluation(evaluation_interval=None)


@pytest.mark.timeout(300)
def test_marwil_batches_hold_each_agents_own_rows_and_targets(
    ray_cluster, two_agent_data
):
    with _running(_build("marwil", two_agent_data, num_learners=0)) as algo:
        batch = algo.offline_data.sample(num_samples=256)
        assert algo.offline_data.mode == "in_memory"
        assert set(batch.policy_batches) == {"p0", "p1"}
        _assert_each_agents_own_rows(batch.policy_batches, _index_steps(two_agent_data))
        before = {m: algo.get_module(m).state_dict() for m in ("p0", "p1")}
        before = {
            m: {k: v.clone() for k, v in state.items()} for m, state in before.items()
        }
        learners = algo.train()["learners"]
        for module_id in ("p0", "p1"):
            assert math.isfinite(learners[module_id]["policy_loss"])
            assert math.isfinite(learners[module_id]["vf_loss"])
            after = algo.get_module(module_id).state_dict()
            changed = [not torch.equal(before[module_id][k], after[k]) for k in after]
            assert any(changed), module_id


@pytest.mark.timeout(300)
def test_bc_with_a_remote_learner_trains_both_modules(ray_cluster, two_agent_data):
    with _running(_build("bc", two_agent_data, num_learners=1)) as algo:
        learners = algo.train()["learners"]
        assert algo.offline_data.mode == "in_memory"
        for module_id in ("p0", "p1"):
            assert math.isfinite(learners[module_id]["policy_loss"])
            assert learners[module_id]["num_module_steps_trained"] == 2 * 256


@pytest.mark.timeout(300)
def test_two_learners_each_train_both_modules_on_their_own_shard(
    ray_cluster, two_agent_data
):
    with _running(_build("bc", two_agent_data, num_learners=2)) as algo:
        learners = algo.train()["learners"]
        shards = algo.offline_data.shards(2)
        ids = [{i for block in shard.blocks() for i in block.ids} for shard in shards]
        assert not ids[0] & ids[1]
        for shard in shards:
            assert {block.module_id for block in shard.blocks()} == {"p0", "p1"}
        for module_id in ("p0", "p1"):
            assert math.isfinite(learners[module_id]["policy_loss"])
            # Both Learners' rows: 2 updates x 256 rows x 2 Learners.
            assert learners[module_id]["num_module_steps_trained"] == 2 * 256 * 2


@pytest.mark.timeout(300)
def test_marwil_trains_on_what_the_multi_agent_recorder_wrote(ray_cluster, tmp_path):
    from ray.rllib.algorithms.ppo import PPOConfig

    from rllib.offline.offline_multi_agent_env_runner import (
        OfflineMultiAgentEnvRunner,
    )

    recording = (
        PPOConfig()
        .environment(example.MultiAgentCartPole, env_config={"num_agents": 2})
        .multi_agent(policies={"p0", "p1"}, policy_mapping_fn=example.module_of_agent)
        .debugging(seed=1)
        .offline_data(output=str(tmp_path), output_write_episodes=True)
    )
    runner = OfflineMultiAgentEnvRunner(config=recording, worker_index=1)
    sampled = sum(
        len(chunk) for _ in range(4) for chunk in runner.sample(num_timesteps=100)
    )
    runner.stop()
    recorded = list(read_episodes(tmp_path))
    assert sum(len(e) for e in recorded) == sampled
    with _running(_build("marwil", tmp_path, num_learners=0)) as algo:
        learners = algo.train()["learners"]
        for module_id in ("p0", "p1"):
            assert math.isfinite(learners[module_id]["vf_loss"])
            assert learners[module_id]["num_module_steps_trained"] == 2 * 256


def test_a_shard_without_one_module_is_refused():
    from rllib.offline.in_memory.store import EpisodeStore

    store = EpisodeStore([], refs=[None, None, None], size_refs=[])
    store._sizes = [
        {"timesteps": 100, "episodes": 2, "nbytes": 1, "modules": ["p0", "p1"]},
        {"timesteps": 90, "episodes": 2, "nbytes": 1, "modules": ["p0"]},
        {"timesteps": 5, "episodes": 1, "nbytes": 1, "modules": ["p0"]},
    ]
    with pytest.raises(ValueError, match=r"Learner 1 without data for module\(s\)"):
        store.shards(2)
    assert len(store.shards(1)) == 1


@pytest.mark.timeout(300)
def test_unknown_module_fails_clearly(ray_cluster, two_agent_data):
    config = _build("bc", two_agent_data, num_learners=0).multi_agent(
        policies={"p0", "p1"}, policy_mapping_fn=lambda agent_id, *a, **k: "p2"
    )
    with pytest.raises(ValueError, match="maps the recorded agent `0` to module `p2`"):
        config.build_algo()


@pytest.mark.timeout(400)
def test_marwil_streams_each_agents_own_rows_and_targets(ray_cluster, two_agent_data):
    """Over the memory budget the `OfflinePreLearner` builds every module's batch."""
    streamed = {MEMORY_BUDGET_KEY: 0}
    with _running(
        _build("marwil", two_agent_data, num_learners=0, learner_config_dict=streamed)
    ) as algo:
        learners = algo.train()["learners"]
        assert algo.offline_data.mode == "streaming"
        for module_id in ("p0", "p1"):
            assert math.isfinite(learners[module_id]["policy_loss"])
            assert math.isfinite(learners[module_id]["vf_loss"])
            assert learners[module_id]["num_module_steps_trained"] == 2 * 256
        # What a streamed batch holds: each module only its agent's steps,
        # each row its own value-target inputs.
        prelearner = OfflinePreLearner(
            config=algo.config,
            spaces=algo.offline_data.spaces[INPUT_ENV_SPACES],
            module_spec=algo.offline_data.module_spec,
            compute_value_targets=False,
        )
        rows = pq.read_table(two_agent_data).to_pydict()
        batch = unflatten_dict(prelearner({"item": np.array(rows["item"])}))
        _assert_each_agents_own_rows(batch, _index_steps(two_agent_data))


@pytest.mark.timeout(400)
def test_bc_streams_to_a_remote_learner(ray_cluster, two_agent_data):
    streamed = {MEMORY_BUDGET_KEY: 0}
    with _running(
        _build("bc", two_agent_data, num_learners=1, learner_config_dict=streamed)
    ) as algo:
        learners = algo.train()["learners"]
        assert algo.offline_data.mode == "streaming"
        for module_id in ("p0", "p1"):
            assert math.isfinite(learners[module_id]["policy_loss"])
            assert learners[module_id]["num_module_steps_trained"] == 2 * 256


@pytest.mark.timeout(300)
def test_two_learners_do_not_stream_multi_agent_data(ray_cluster, two_agent_data):
    streamed = {MEMORY_BUDGET_KEY: 0}
    config = _build("bc", two_agent_data, num_learners=2, learner_config_dict=streamed)
    with _running(config) as algo:
        with pytest.raises(ValueError, match=r"cannot stream either: `num_learners=2`"):
            algo.train()


if __name__ == "__main__":
    import sys

    sys.exit(pytest.main(["-v", __file__]))
