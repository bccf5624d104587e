"""Writes, reads and trains on `MultiAgentEpisode`s (one module per agent).

Part of the "Training from external experiences" page. Starts a local Ray
cluster for the training part and writes into the current working directory.
"""

# __multi_agent_record_begin__
import os

import numpy as np
from ray.rllib.env.multi_agent_episode import MultiAgentEpisode
from ray.rllib.examples.envs.classes.multi_agent import MultiAgentCartPole
from ray.rllib.offline.episode_files.writer import EpisodeWriter


def controller(obs):
    """One agent's policy: push toward the side its pole falls to."""
    return int(obs[2] + 0.5 * obs[3] > 0.0)


def module_of(agent_id, episode=None, **kwargs):
    """Agent 0 is trained by module "p0", agent 1 by "p1"."""
    return f"p{agent_id}"


env = MultiAgentCartPole(config={"num_agents": 2})
output_dir = os.path.abspath("two-agent-episodes")

with EpisodeWriter(
    output_dir,
    observation_space=dict(env.observation_spaces),  # spaces by agent id
    action_space=dict(env.action_spaces),
    max_rows_per_file=5,
) as writer:
    for seed in range(10):
        obs, infos = env.reset(seed=seed)
        episode = MultiAgentEpisode(
            observations=[obs],
            infos=[infos],
            agent_to_module_mapping_fn=module_of,
        )
        finished = set()
        while not episode.is_done:
            # Only agents that are still running act.
            actions = {a: controller(o) for a, o in obs.items() if a not in finished}
            obs, rewards, terminateds, truncateds, infos = env.step(actions)
            finished |= {a for a in obs if terminateds.get(a) or truncateds.get(a)}
            episode.add_env_step(
                obs,
                actions,
                rewards,
                infos=infos,
                terminateds=terminateds,
                truncateds=truncateds,
            )
        writer.write(episode)
print(f"Wrote {writer.num_episodes} two-agent episodes to {len(writer.files)} files.")
# __multi_agent_record_end__

# __multi_agent_read_begin__
from ray.rllib.offline.episode_files.reader import read_episodes, read_spaces

observation_spaces, action_spaces = read_spaces(output_dir)
print(f"Recorded agents: {sorted(observation_spaces)}")
returns = {0: [], 1: []}
for episode in read_episodes(output_dir):
    for agent_id, agent_episode in episode.agent_episodes.items():
        returns[agent_id].append(agent_episode.get_return())
print("Mean return per agent:", {a: float(np.mean(r)) for a, r in returns.items()})
# __multi_agent_read_end__

# __multi_agent_train_begin__
import ray
from ray.rllib.algorithms.bc import BCConfig

ray.init(num_cpus=4, include_dashboard=False)
config = (
    BCConfig()
    # No environment: each module's spaces come from the files.
    .multi_agent(policies={"p0", "p1"}, policy_mapping_fn=module_of)
    .training(train_batch_size_per_learner=512, lr=8e-4)
    .offline_data(
        input_=[output_dir],
        input_read_episodes=True,
        dataset_num_iters_per_learner=5,
    )
)
algo = config.build_algo()
learners = algo.train()["learners"]
print(
    "BC loss per module:",
    {m: round(float(learners[m]["policy_loss"]), 3) for m in ("p0", "p1")},
)
algo.stop()
# __multi_agent_train_end__

print("external_episodes_multi_agent: OK")
