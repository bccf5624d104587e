"""`OfflineData.sample(num_shards > 1)` splits the data into one stream per
Learner: it returns their iterators, or says how to ask for them (#55419)."""

import gymnasium as gym
import msgpack
import msgpack_numpy
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from ray.rllib.algorithms.bc import BCConfig
from ray.rllib.core import DEFAULT_MODULE_ID
from ray.rllib.env import INPUT_ENV_SPACES
from ray.rllib.env.single_agent_episode import SingleAgentEpisode
from ray.rllib.offline.offline_data import OfflineData


def _write_one_episode(directory):
    """One CartPole episode in the recorder's format (a msgpack'd state)."""
    env = gym.make("CartPole-v1")
    obs, _ = env.reset(seed=0)
    episode = SingleAgentEpisode(observations=[obs])
    for step in range(10):
        obs, reward, terminated, _, _ = env.step(step % 2)
        episode.add_env_step(
            obs, step % 2, reward, terminated=terminated, truncated=step == 9
        )
        if terminated:
            break
    payload = msgpack.packb(episode.get_state(), default=msgpack_numpy.encode)
    pq.write_table(pa.table({"item": [payload]}), str(directory / "part0.parquet"))
    return env


@pytest.mark.timeout(120)
def test_one_batch_from_several_shards_asks_for_iterators(ray_cluster, tmp_path):
    env = _write_one_episode(tmp_path)
    config = (
        BCConfig()
        .environment(
            observation_space=env.observation_space, action_space=env.action_space
        )
        .learners(num_learners=2)
        .offline_data(input_=[str(tmp_path)], input_read_episodes=True)
    )
    offline_data = OfflineData(config)
    # What the Algorithm sets at the end of its setup (no Learners run here:
    # the module state is the one they would send).
    spaces = (env.observation_space, env.action_space)
    module_spec = config.get_multi_rl_module_spec(spaces={DEFAULT_MODULE_ID: spaces})
    offline_data.module_spec = module_spec
    offline_data.spaces = {INPUT_ENV_SPACES: spaces, DEFAULT_MODULE_ID: spaces}
    module_state = module_spec.build().get_state()
    with pytest.raises(ValueError, match=r"num_shards=2.*return_iterator=True"):
        offline_data.sample(num_samples=8, num_shards=2, module_state=module_state)


if __name__ == "__main__":
    import sys

    sys.exit(pytest.main(["-v", __file__]))
