"""Records externally collected experiences as `SingleAgentEpisode` files.

Part of the "Training from external experiences" page. Runs without a Ray
cluster in a few seconds and writes into the current working directory.
"""

# __record_simulator_begin__
import os

import gymnasium as gym
import numpy as np
from ray.rllib.env.single_agent_episode import SingleAgentEpisode
from ray.rllib.offline.episode_files.writer import EpisodeWriter


def controller(obs):
    """Your policy, a human, a PLC: anything that picks the action."""
    _, _, angle, angular_velocity = obs
    return int(angle + 0.5 * angular_velocity > 0.0)


env = gym.make("CartPole-v1")
output_dir = os.path.abspath("cartpole-episodes")

with EpisodeWriter(
    output_dir,
    observation_space=env.observation_space,
    action_space=env.action_space,
    max_rows_per_file=10,  # episodes per parquet file
) as writer:
    for seed in range(20):
        obs, info = env.reset(seed=seed)
        episode = SingleAgentEpisode(observations=[obs], infos=[info])
        terminated = truncated = False
        while not (terminated or truncated):
            action = controller(obs)
            obs, reward, terminated, truncated, info = env.step(action)
            episode.add_env_step(
                obs,
                action,
                reward,
                infos=info,
                terminated=terminated,
                truncated=truncated,
            )
        writer.write(episode)

print(f"Wrote {writer.num_episodes} episodes to {len(writer.files)} files.")
# __record_simulator_end__

assert writer.num_episodes == 20 and len(writer.files) == 2, writer.files

# __record_log_begin__
from ray.rllib.offline.episode_files.writer import write_episodes

# A log you already have: one dict of arrays per episode, with one more
# observation than actions (the observation after the last action).
rng = np.random.default_rng(0)
logs = []
for _ in range(5):
    num_steps = int(rng.integers(20, 40))
    logs.append(
        {
            "obs": rng.uniform(-0.05, 0.05, (num_steps + 1, 4)).astype(np.float32),
            "actions": rng.integers(0, 2, num_steps),
            "rewards": np.ones(num_steps, dtype=np.float32),
            "terminated": True,  # False if the log was cut off (a time limit)
        }
    )

episodes = [
    SingleAgentEpisode(
        observations=list(log["obs"]),
        actions=list(log["actions"]),
        rewards=list(log["rewards"]),
        terminated=log["terminated"],
        truncated=not log["terminated"],
        # Without this, all the steps you pass count as "lookback" (history
        # before the episode started) and the episode has length 0.
        len_lookback_buffer=0,
    )
    for log in logs
]
files = write_episodes(
    episodes,
    os.path.abspath("logged-episodes"),
    observation_space=env.observation_space,
    action_space=env.action_space,
)
print(f"Wrote {len(episodes)} logged episodes of lengths {[len(e) for e in episodes]}")
# __record_log_end__

assert all(len(e) >= 20 for e in episodes)

# __record_compression_begin__
with EpisodeWriter(
    os.path.abspath("compressed-episodes"),
    observation_space=env.observation_space,
    action_space=env.action_space,
    # Compress each episode's payload. Readable by the fork only; leave it at
    # None for files that stock RLlib must read too.
    compression="zstd",
    # Compression of the parquet pages (the default); "snappy", "none", ...
    parquet_compression="zstd",
    max_rows_per_file=1000,
) as writer:
    writer.write_many(episodes)
print(f"Compressed files: {writer.files}")
# __record_compression_end__

assert len(writer.files) == 1

# __record_filesystem_begin__
import fsspec
from ray.rllib.offline.episode_files.reader import read_episodes

filesystem = fsspec.filesystem("memory")  # e.g. pyarrow.fs.S3FileSystem(...)
files = write_episodes(episodes, "/my-bucket/episodes", filesystem=filesystem)
episodes_back = list(read_episodes("/my-bucket/episodes", filesystem=filesystem))
print(f"{len(episodes_back)} episodes in {files}")
# __record_filesystem_end__

assert [len(e) for e in episodes_back] == [len(e) for e in episodes]
print("external_episodes_record: OK")
