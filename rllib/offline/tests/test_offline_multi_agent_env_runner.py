"""The multi-agent recorder: no lost steps, the recorder layout, auto-selected.

Sampling tests build the EnvRunner in-process: recording uses pyarrow only.
Training through `build_algo()` shares the local Ray cluster.
"""

import gc
import re
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest
from ray.rllib.algorithms.ppo import PPOConfig
from ray.rllib.examples.envs.classes.multi_agent import MultiAgentCartPole
from ray.rllib.utils.metrics import (
    ENV_RUNNER_RESULTS,
    LEARNER_RESULTS,
    NUM_ENV_STEPS_SAMPLED_LIFETIME,
)

from rllib.offline.episode_files.reader import read_episodes, read_spaces
from rllib.offline.offline_multi_agent_env_runner import (
    OfflineMultiAgentEnvRunner,
)

#: Run directories as the single-agent recorder names them:
#: `<env subdir>/run-<worker:06d>-<call:05d>/`.
RUN_DIR = re.compile(r"multienv/run-000001-\d{5}")
AGENTS = (0, 1)


def _config(output, output_config=None, **offline):
    offline.setdefault("output_write_episodes", True)
    return (
        PPOConfig()
        .environment(MultiAgentCartPole, env_config={"num_agents": len(AGENTS)})
        .multi_agent(
            policies={"p0", "p1"},
            policy_mapping_fn=lambda aid, *args, **kwargs: f"p{aid}",
        )
        .env_runners(num_envs_per_env_runner=2)
        .debugging(seed=0)
        .offline_data(output=str(output), output_config=output_config or {}, **offline)
    )


def _runner(output, **kwargs):
    return OfflineMultiAgentEnvRunner(config=_config(output, **kwargs), worker_index=1)


def _sample(runner, calls, num_timesteps, **kwargs):
    """`calls` chunk lists, one per `sample()` call."""
    return [runner.sample(num_timesteps=num_timesteps, **kwargs) for _ in range(calls)]


def _joined(chunks):
    """Per episode id: env steps, and per agent the joined rewards and actions."""
    steps = defaultdict(int)
    rewards = defaultdict(lambda: defaultdict(list))
    actions = defaultdict(lambda: defaultdict(list))
    for chunk in chunks:
        steps[chunk.id_] += len(chunk)
        for agent_id, agent_episode in chunk.agent_episodes.items():
            rewards[chunk.id_][agent_id] += list(agent_episode.get_rewards())
            actions[chunk.id_][agent_id] += list(agent_episode.get_actions())
    return steps, rewards, actions


def test_nothing_lost_across_sample_calls(tmp_path):
    runner = _runner(tmp_path)
    calls = _sample(runner, calls=6, num_timesteps=25)
    chunks = [chunk for call in calls for chunk in call]
    finished = {c.id_ for c in chunks if c.is_done}
    running = {c.id_ for c in chunks} - finished
    runner.stop()

    # The test exercises joining: some episode spans several `sample()` calls.
    calls_per_id = defaultdict(int)
    for call in calls:
        for chunk in call:
            calls_per_id[chunk.id_] += 1
    assert max(calls_per_id.values()) >= 2
    assert running  # Episodes were running at `stop()`.

    back = {episode.id_: episode for episode in read_episodes(tmp_path)}
    steps, rewards, actions = _joined(chunks)
    assert sorted(back) == sorted(steps)
    # Every env step sampled is written, once.
    assert sum(len(e) for e in back.values()) == sum(len(c) for c in chunks)
    for id_, episode in back.items():
        assert episode.is_done
        assert episode.env_t_started == 0
        assert len(episode) == steps[id_]
        # Episodes running at `stop()` are written as truncated, the others
        # as they ended.
        assert episode.is_truncated == (id_ in running), id_
        assert episode.is_terminated == (id_ in finished), id_
        assert sorted(episode.agent_episodes) == sorted(rewards[id_])
        for agent_id, agent_episode in episode.agent_episodes.items():
            assert len(agent_episode) == len(rewards[id_][agent_id])
            np.testing.assert_allclose(
                agent_episode.get_rewards(), rewards[id_][agent_id]
            )
            np.testing.assert_array_equal(
                agent_episode.get_actions(), actions[id_][agent_id]
            )
            assert agent_episode.is_done, (id_, agent_id)
            # The recorded agent-to-module mapping.
            assert episode.module_for(agent_id) == f"p{agent_id}"
            assert agent_episode.module_id == f"p{agent_id}"


def test_layout_and_spaces_are_recorded(tmp_path):
    runner = _runner(tmp_path)
    _sample(runner, calls=3, num_timesteps=40)
    runner.stop()
    files = sorted(tmp_path.rglob("*.parquet"))
    assert files
    for file in files:
        run_dir = file.parent.relative_to(tmp_path).as_posix()
        assert RUN_DIR.fullmatch(run_dir), run_dir
    assert runner._get_subdir_path() == "multienv"
    env = runner.env.envs[0].unwrapped
    assert read_spaces(tmp_path) == (
        {a: env.get_observation_space(a) for a in AGENTS},
        {a: env.get_action_space(a) for a in AGENTS},
    )


def test_long_episode_is_written_in_truncated_segments(tmp_path):
    runner = _runner(tmp_path, output_config={"max_running_episode_steps": 6})
    chunks = [c for call in _sample(runner, calls=8, num_timesteps=4) for c in call]
    runner.stop()
    steps, rewards, _ = _joined(chunks)
    back = list(read_episodes(tmp_path))
    assert sum(len(e) for e in back) == sum(steps.values())
    segmented = {e.id_.rsplit("-", 1)[0] for e in back if "-" in e.id_}
    assert segmented  # Some episode reached the bound.
    for id_ in segmented:
        segments = sorted(
            (e for e in back if e.id_.startswith(f"{id_}-")),
            key=lambda e: e.env_t_started,
        )
        assert [e.id_ for e in segments] == [f"{id_}-{i}" for i in range(len(segments))]
        # Contiguous, and together the whole sampled episode.
        for before, after in zip(segments, segments[1:]):
            assert after.env_t_started == before.env_t
            assert before.is_truncated and not before.is_terminated
        assert sum(len(e) for e in segments) == steps[id_]
        for agent_id in AGENTS:
            joined = [
                r
                for e in segments
                if agent_id in e.agent_episodes
                for r in e.agent_episodes[agent_id].get_rewards()
            ]
            np.testing.assert_allclose(joined, rewards[id_][agent_id])
        for segment in segments:
            for agent_episode in segment.agent_episodes.values():
                assert agent_episode.is_done
                assert agent_episode.multi_agent_episode_id == segment.id_


def test_episode_cut_off_by_a_reset_is_written_as_truncated(tmp_path):
    runner = _runner(tmp_path)
    cut_off = runner.sample(num_timesteps=6)
    fresh = runner.sample(num_timesteps=6, force_reset=True)
    running_before = {c.id_ for c in cut_off if not c.is_done}
    assert running_before
    assert not running_before & {c.id_ for c in fresh}
    assert set(runner.episode_recorder.running_episodes) <= {c.id_ for c in fresh}
    back = {e.id_: e for e in read_episodes(tmp_path)}
    for id_ in running_before:
        assert back[id_].is_truncated and not back[id_].is_terminated
    runner.stop()


def test_column_output_is_refused(tmp_path):
    match = r"`output_write_episodes` is False.*output_write_episodes=True"
    with pytest.raises(ValueError, match=match):
        _runner(tmp_path, output_write_episodes=False)
    config = _config(tmp_path, output_write_episodes=False).env_runners(
        batch_mode="complete_episodes"
    )
    with pytest.raises(ValueError, match=match):
        config.validate()


def test_validation_selects_the_recorder(tmp_path):
    config = _config(tmp_path).env_runners(batch_mode="complete_episodes")
    assert config.env_runner_cls is None
    config.validate()
    assert config.env_runner_cls is OfflineMultiAgentEnvRunner

    class Custom(OfflineMultiAgentEnvRunner):
        pass

    # A user's EnvRunner class is left alone; so are configs that do not record.
    custom = _config(tmp_path).env_runners(
        batch_mode="complete_episodes", env_runner_cls=Custom
    )
    custom.validate()
    assert custom.env_runner_cls is Custom
    not_recording = _config(tmp_path).offline_data(output=None)
    not_recording.validate()
    assert not_recording.env_runner_cls is None


@pytest.mark.timeout(300)
def test_build_algo_records_while_training(ray_cluster, tmp_path):
    returned = []  # Env steps of what each `sample()` returned (local runner).

    def on_sample_end(*, samples, **kwargs):
        returned.append(sum(len(episode) for episode in samples))

    config = (
        _config(tmp_path)
        .env_runners(num_env_runners=0, batch_mode="complete_episodes")
        .learners(num_learners=0)
        .training(train_batch_size_per_learner=128, minibatch_size=64, num_epochs=1)
        .callbacks(on_sample_end=on_sample_end)
    )
    algo = config.build_algo()
    try:
        assert isinstance(algo.env_runner, OfflineMultiAgentEnvRunner)
        result = algo.train()
        # Written during `train()`, not only at `stop()`.
        assert sorted(Path(tmp_path).rglob("*.parquet"))
        episodes = list(read_episodes(tmp_path))
    finally:
        algo.stop()
        del algo
        gc.collect()
    assert {"p0", "p1"} <= set(result[LEARNER_RESULTS])
    # Every env step `sample()` returned for training is recorded. (Steps of
    # episodes that `sample(num_episodes=...)` leaves unfinished in other
    # sub-environments count as sampled, but the `MultiAgentEnvRunner` drops
    # them.)
    assert returned
    assert sum(len(e) for e in episodes) == sum(returned) > 0
    assert sum(returned) <= result[ENV_RUNNER_RESULTS][NUM_ENV_STEPS_SAMPLED_LIFETIME]
    for episode in episodes:
        assert episode.is_done
        assert not episode.is_truncated  # `complete_episodes`: all ended.
        for agent_id in episode.agent_episodes:
            assert episode.module_for(agent_id) == f"p{agent_id}"


if __name__ == "__main__":
    import sys

    sys.exit(pytest.main(["-v", __file__]))
