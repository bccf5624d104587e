"""A scripted CartPole controller and a recorder of its episodes.

Shared by the offline RL examples, the benchmarks and the tests: data to
train on without any download or pre-trained model.
"""

from typing import Callable, List

import gymnasium as gym
import numpy as np
from ray.rllib.core.columns import Columns
from ray.rllib.env.single_agent_episode import SingleAgentEpisode


def balance_action(angle: float, angular_velocity: float) -> int:
    """Pushes the cart toward the side the pole is falling to.

    Balances CartPole to its 500-step limit from every start tried.
    """
    return int(angle + 0.5 * angular_velocity > 0.0)


def record_episodes(
    env: gym.Env,
    num_episodes: int,
    policy: Callable[[object], int],
    *,
    epsilon: float = 0.0,
    seed: int = 0,
    record_logp: bool = False,
) -> List[SingleAgentEpisode]:
    """Runs `policy` in `env` and records each run as a finished episode.

    Args:
        env: The environment; its spaces are recorded in the episodes.
        num_episodes: How many episodes to record.
        policy: Maps an observation to an action.
        epsilon: Share of uniformly random actions (diversifies the data).
        seed: Seeds the resets (`seed + i` for episode `i`) and the random
            actions.
        record_logp: Record each action's log-probability under this
            epsilon-greedy behaviour as `action_logp` (Discrete actions), for
            off-policy evaluation.

    Returns:
        The episodes, done (terminated or truncated) and not numpy-ized.
    """
    rng = np.random.default_rng(seed)
    env.action_space.seed(seed)
    episodes = []
    for i in range(num_episodes):
        obs, info = env.reset(seed=seed + i)
        episode = SingleAgentEpisode(
            observations=[obs],
            infos=[info],
            observation_space=env.observation_space,
            action_space=env.action_space,
        )
        done = False
        while not done:
            greedy = policy(obs)
            if rng.random() < epsilon:
                action = int(env.action_space.sample())
            else:
                action = greedy
            extra = {}
            if record_logp:
                probability = epsilon / env.action_space.n + (1 - epsilon) * (
                    action == greedy
                )
                extra = {Columns.ACTION_LOGP: np.log(probability)}
            obs, reward, terminated, truncated, info = env.step(action)
            episode.add_env_step(
                obs,
                action,
                reward,
                infos=info,
                terminated=terminated,
                truncated=truncated,
                extra_model_outputs=extra,
            )
            done = terminated or truncated
        episodes.append(episode)
    return episodes


def write_hand_rolled_files(
    episodes: List[SingleAgentEpisode], directory, num_files: int = 1
) -> List[str]:
    """Writes `episodes` as users do by hand, without `EpisodeWriter`.

    Each row's `item` is `msgpack.packb(episode.get_state(),
    default=msgpack_numpy.encode)` (per-step lists, no recorded spaces);
    episode `i` goes to file `i % num_files`. Returns the file paths.
    """
    import os

    import msgpack
    import msgpack_numpy
    import pyarrow as pa
    import pyarrow.parquet as pq

    paths = []
    for part in range(num_files):
        payloads = [
            msgpack.packb(e.get_state(), default=msgpack_numpy.encode)
            for e in episodes[part::num_files]
        ]
        path = os.path.join(str(directory), f"part{part}.parquet")
        pq.write_table(pa.table({"item": payloads}), path)
        paths.append(path)
    return paths


def module_of_agent(agent_id, episode=None, **kwargs) -> str:
    """Agent `i` of the multi-agent CartPole examples is trained by module `p<i>`."""
    return f"p{agent_id}"


class SharedModules:
    """Agent `i` is trained by module `p<i % num_modules>`: agents share
    modules. A class, so that Ray pickles it by reference."""

    def __init__(self, num_modules: int):
        self.num_modules = num_modules

    def __call__(self, agent_id, episode=None, **kwargs) -> str:
        return f"p{int(agent_id) % self.num_modules}"


def record_multi_agent_episodes(
    env,
    num_episodes: int,
    policy: Callable[[object], int],
    *,
    epsilon: float = 0.0,
    seed: int = 0,
    agent_to_module: Callable[..., str] = module_of_agent,
) -> list:
    """Runs `policy` for every agent of a multi-agent env and records each run.

    Agents act until their own episode ends; the episode ends when all have
    (RLlib's `MultiAgentCartPole` does so).

    Args:
        env: A `MultiAgentEnv` with `observation_spaces` / `action_spaces`
            (recorded in the episodes).
        num_episodes: How many episodes to record.
        policy: Maps one agent's observation to its action.
        epsilon: Share of uniformly random actions, per agent and step.
        seed: Seeds the resets (`seed + i` for episode `i`) and the random
            actions.
        agent_to_module: Maps each agent to its module in the episodes.

    Returns:
        Finished `MultiAgentEpisode`s whose agents map to modules through
        `agent_to_module`.
    """
    from ray.rllib.env.multi_agent_episode import MultiAgentEpisode

    rng = np.random.default_rng(seed)
    episodes = []
    for i in range(num_episodes):
        obs, infos = env.reset(seed=seed + i)
        episode = MultiAgentEpisode(
            observations=[obs],
            infos=[infos],
            observation_space=dict(env.observation_spaces),
            action_space=dict(env.action_spaces),
            agent_to_module_mapping_fn=agent_to_module,
        )
        done_agents = set()
        while not episode.is_done:
            actions = {}
            for agent_id, agent_obs in obs.items():
                if agent_id in done_agents:
                    continue
                if rng.random() < epsilon:
                    actions[agent_id] = int(rng.integers(env.action_spaces[agent_id].n))
                else:
                    actions[agent_id] = policy(agent_obs)
            obs, rewards, terminateds, truncateds, infos = env.step(actions)
            done_agents |= {
                agent_id
                for agent_id in obs
                if terminateds.get(agent_id) or truncateds.get(agent_id)
            }
            episode.add_env_step(
                obs,
                actions,
                rewards,
                infos=infos,
                terminateds=terminateds,
                truncateds=truncateds,
            )
        for agent_id in episode.agent_episodes:
            episode.module_for(agent_id)
        episodes.append(episode)
    return episodes
