"""Builds small, fully populated episodes for the offline tests (no Ray)."""

import gymnasium as gym
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from ray.rllib.core.columns import Columns
from ray.rllib.env.single_agent_episode import SingleAgentEpisode

from rllib.examples.offline_rl.scripted_cartpole import balance_action, record_episodes

BOX = gym.spaces.Box(-1.0, 1.0, (3,), np.float32)
DISCRETE = gym.spaces.Discrete(4)
DICT = gym.spaces.Dict(
    {"position": gym.spaces.Box(-2.0, 2.0, (2,), np.float32), "mode": DISCRETE}
)
TUPLE = gym.spaces.Tuple((gym.spaces.Box(0, 255, (2, 2), np.uint8), DISCRETE))
NESTED = gym.spaces.Dict(
    {
        "sensors": gym.spaces.Tuple(
            (
                gym.spaces.Box(-np.inf, np.inf, (2,), np.float64),
                gym.spaces.MultiBinary(3),
            )
        ),
        "inventory": gym.spaces.Dict({"slots": gym.spaces.MultiDiscrete([3, 5])}),
    }
)

#: name -> (observation space, action space) for the round-trip grid.
SPACES = {
    "box": (BOX, DISCRETE),
    "discrete": (DISCRETE, BOX),
    "dict": (DICT, DISCRETE),
    "tuple": (TUPLE, gym.spaces.Tuple((DISCRETE, BOX))),
    "nested": (NESTED, DICT),
}


def make_episode(
    observation_space: gym.Space,
    action_space: gym.Space,
    length: int = 5,
    seed: int = 0,
    terminated: bool = True,
    truncated: bool = False,
    with_spaces: bool = False,
) -> SingleAgentEpisode:
    """An episode with observations, actions, rewards, infos and model outputs."""
    observation_space.seed(seed)
    action_space.seed(seed + 1)
    rng = np.random.default_rng(seed)
    episode = SingleAgentEpisode(
        observations=[observation_space.sample()],
        infos=[{"start": True, "seed": seed}],
        observation_space=observation_space if with_spaces else None,
        action_space=action_space if with_spaces else None,
    )
    for t in range(length):
        last = t == length - 1
        episode.add_env_step(
            observation_space.sample(),
            action_space.sample(),
            float(rng.normal()),
            infos={"t": t, "noise": rng.normal(size=2).astype(np.float32)},
            terminated=terminated and last,
            truncated=truncated and last,
            extra_model_outputs={
                Columns.ACTION_LOGP: np.float32(rng.normal()),
                Columns.ACTION_DIST_INPUTS: rng.normal(size=4).astype(np.float32),
            },
        )
    return episode


def cartpole_episodes(num_episodes: int, seed: int = 0, max_steps: int = 500):
    """Scripted CartPole episodes (a near-perfect controller)."""
    env = gym.make("CartPole-v1", max_episode_steps=max_steps)
    episodes = record_episodes(
        env,
        num_episodes,
        lambda obs: balance_action(obs[2], obs[3]),
        epsilon=0.0,
        seed=seed,
    )
    return env, episodes


def write_msgpack_episodes(episodes, path: str) -> None:
    """Writes what ray 2.60's recorder / the hand-rolled snippet produce.

    Both do `ray.data.from_items([msgpack.packb(ep.get_state(), ...)])
    .write_parquet(...)`: one binary `item` column, no episode metadata.
    """
    import msgpack
    import msgpack_numpy as mnp

    payloads = [msgpack.packb(ep.get_state(), default=mnp.encode) for ep in episodes]
    pq.write_table(
        pa.table({"item": pa.array(payloads, pa.binary())}), path, compression="gzip"
    )


#: Per-agent spaces of `make_multi_agent_episode`: a Dict, a Tuple and a Box
#: observation; int and str agent ids.
AGENT_SPACES = {
    "scout": (DICT, DISCRETE),
    7: (TUPLE, gym.spaces.Tuple((DISCRETE, BOX))),
    "late": (BOX, DISCRETE),
}


def make_multi_agent_episode(length: int = 6, seed: int = 0, truncated: bool = True):
    """A `MultiAgentEpisode` of `length` env steps with three agents.

    `"scout"` and `7` act at every step; `"late"` joins at env step 2 and
    terminates at env step 4 (before the end). The episode ends truncated (or
    terminated), with infos and extra model outputs for every agent step and
    `"scout"` mapped to module `"p_scout"` while recording.
    """
    from ray.rllib.env.multi_agent_episode import MultiAgentEpisode

    rng = np.random.default_rng(seed)
    for i, (obs_space, act_space) in enumerate(AGENT_SPACES.values()):
        obs_space.seed(seed + 2 * i)
        act_space.seed(seed + 2 * i + 1)

    def observe(agents):
        return {a: AGENT_SPACES[a][0].sample() for a in agents}

    episode = MultiAgentEpisode(
        observation_space={a: s[0] for a, s in AGENT_SPACES.items()},
        action_space={a: s[1] for a, s in AGENT_SPACES.items()},
        agent_to_module_mapping_fn=lambda agent_id, _: f"p_{agent_id}",
    )
    active = ["scout", 7]
    episode.add_env_reset(
        observations=observe(active), infos={a: {"reset": a} for a in active}
    )
    episode.module_for("scout")
    for t in range(length):
        actions = {a: AGENT_SPACES[a][1].sample() for a in active}
        extra = {a: {"action_logp": np.float32(-rng.random())} for a in active}
        rewards = {a: float(rng.normal()) for a in active}
        last = t == length - 1
        terminateds = {"__all__": last and not truncated}
        truncateds = {"__all__": last and truncated}
        if "late" in active and t == 3:
            terminateds["late"] = True
        next_active = [a for a in active if not terminateds.get(a)]
        if t == 1:
            next_active.append("late")
        observed = list(set(active) | set(next_active))
        episode.add_env_step(
            observations=observe(observed),
            actions=actions,
            rewards=rewards,
            infos={a: {"t": t} for a in observed},
            terminateds=terminateds,
            truncateds=truncateds,
            extra_model_outputs=extra,
        )
        active = next_active
    return episode
