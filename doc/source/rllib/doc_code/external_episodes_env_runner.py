"""Records the episodes RLlib's EnvRunners sample, then trains BC on them.

Part of the "Training from external experiences" page. Records with a PPO
training run and with a stand-alone EnvRunner (no Ray cluster needed for the
latter), reads the files back, and checks that no episode was lost. Writes
into the current working directory. Takes about a minute on 2 CPUs.
"""

import gc

# __record_ppo_begin__
import os

import ray
from ray.rllib.algorithms.ppo import PPOConfig

ray.init(num_cpus=4, include_dashboard=False)

ppo_dir = os.path.abspath("ppo-recording")
config = (
    PPOConfig()
    .environment("CartPole-v1")
    # RLlib requires whole episodes per sample when it records episodes.
    .env_runners(num_env_runners=0, batch_mode="complete_episodes")
    .training(train_batch_size_per_learner=500, minibatch_size=100, num_epochs=1)
    .offline_data(
        output=ppo_dir,
        output_write_episodes=True,  # the default: one row per whole episode
        output_max_rows_per_file=50,  # episodes per file
        output_write_remaining_data=True,  # commit the last, partial file
    )
)
algo = config.build_algo()
algo.train()
algo.stop()  # commits the files still open
# __record_ppo_end__

del algo
gc.collect()
ray.shutdown()

# __record_runner_begin__
from ray.rllib.algorithms.bc import BCConfig
from ray.rllib.offline.offline_env_runner import OfflineSingleAgentEnvRunner

runner_dir = os.path.abspath("env-runner-recording")
config = (
    BCConfig()
    .environment("CartPole-v1")
    .offline_data(
        output=runner_dir,
        output_write_episodes=True,
        # Hold at most 200 steps of a running episode in memory; longer ones
        # are written in truncated segments.
        output_config={"max_running_episode_steps": 200},
    )
)
runner = OfflineSingleAgentEnvRunner(config=config, worker_index=1)
sampled = runner.sample(num_episodes=10, random_actions=True)
runner.stop()
# __record_runner_end__

# __record_read_begin__
from ray.rllib.offline.episode_files.reader import list_episode_files, read_episodes

for directory in (ppo_dir, runner_dir):
    _, files = list_episode_files(directory)
    episodes = list(read_episodes(directory))
    assert all(episode.is_done for episode in episodes)
    print(f"{directory}: {len(episodes)} whole episodes in {len(files)} file(s)")
    # <env>/run-<EnvRunner index>-<sample() call>/<file>.parquet, as upstream.
    print(" ", os.path.relpath(files[0], directory))
# __record_read_end__

assert sorted(e.id_ for e in read_episodes(runner_dir)) == sorted(
    e.id_ for e in sampled
)
assert len(list(read_episodes(ppo_dir))) > 0
print("external_episodes_env_runner: OK")
