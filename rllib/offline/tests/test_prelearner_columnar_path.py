"""The columnar path's batches equal the per-episode path's.

Both prelearners get the same payloads and the same random draws: the
sampling generators of the columnar buffer and of the per-episode path's
`EpisodeReplayBuffer` (which a custom `prelearner_buffer_class` keeps in use)
are replaced by one script of values (timestep indices and n-steps), and the
per-episode path adds the episodes in batch order (`_validate_episodes` gives
a set, whose order is arbitrary). Every output column must then match in
dtype, shape and value. MARWIL's rows carry value-target inputs on both paths,
the same for any `gamma`, `offline_value_horizon` and `n_step`. No Ray
cluster: the prelearner is a plain callable.
"""

import logging

import gymnasium as gym
import numpy as np
import pytest
import torch
from ray.rllib.algorithms.bc import BCConfig
from ray.rllib.algorithms.marwil import MARWILConfig
from ray.rllib.core import DEFAULT_MODULE_ID
from ray.rllib.core.columns import Columns
from ray.rllib.core.rl_module.rl_module import RLModuleSpec
from ray.rllib.core.rl_module.torch import TorchRLModule
from ray.rllib.env.single_agent_episode import SingleAgentEpisode
from ray.rllib.offline.offline_prelearner import OfflinePreLearner
from ray.rllib.utils.replay_buffers.episode_replay_buffer import EpisodeReplayBuffer

from rllib.core.learner.tests import structured_obs
from rllib.examples.offline_rl.scripted_cartpole import balance_action, record_episodes
from rllib.offline.episode_files.payload import encode_episode
from rllib.offline.tests.episode_factory import SPACES, make_episode
from rllib.utils.postprocessing.bootstrapped_returns import (
    BOOTSTRAP_DISCOUNT,
    BOOTSTRAP_OBS,
    HORIZON_KEY,
    RETURNS_TO_BOOTSTRAP,
)

BATCH_SIZE = 256


class EpisodeObjectBuffer(EpisodeReplayBuffer):
    """A custom buffer class: the prelearner keeps the per-episode path."""


class ScriptedRng:
    """Stands in for `np.random.Generator.integers`: hands out fixed values.

    Calls with one bound take from the timestep indices, calls with two from
    the n-steps, one value per item or `size` values at once.
    """

    def __init__(self, starts, n_steps=()):
        self.queues = {1: list(starts), 2: list(n_steps)}

    def integers(self, low, high=None, size=None):
        queue = self.queues[1 if high is None else 2]
        if size is None:
            return queue.pop(0)
        taken, queue[:size] = queue[:size], []
        return np.array(taken, dtype=np.int64)


def _cartpole(num_episodes=6, to_numpy=True, max_steps=60, id_prefix=None):
    env = gym.make("CartPole-v1", max_episode_steps=max_steps)
    # Random actions half the time: a mix of terminated and truncated episodes.
    episodes = record_episodes(
        env, num_episodes, lambda o: balance_action(o[2], o[3]), epsilon=0.5
    )
    for i, episode in enumerate(episodes):
        if id_prefix is not None:
            # Ids with "_" are not made unique by the connectors.
            episode.id_ = f"{id_prefix}_{i}"
        if to_numpy:
            episode.to_numpy()
    return env.observation_space, env.action_space, episodes


def _structured(name, to_numpy=True):
    space = structured_obs.OBS_SPACES[name]
    episodes = structured_obs.make_episodes(
        space, num_episodes=6, length=20, to_numpy=to_numpy
    )
    return space, structured_obs.ACTION_SPACE, episodes


def _cql_config():
    from ray.rllib.algorithms.cql import CQLConfig

    return CQLConfig().training(lr=None)


def _iql_config():
    from ray.rllib.algorithms.iql import IQLConfig

    return IQLConfig()


_ALGO_CONFIGS = {
    "bc": BCConfig,
    "marwil": MARWILConfig,
    "cql": _cql_config,
    "iql": _iql_config,
}


class _FastSwingEndsPendulum(gym.Wrapper):
    """Pendulum-v1 (Box actions) that terminates once it spins fast."""

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        return obs, reward, terminated or abs(obs[2]) > 5.0, truncated, info


def _pendulum(to_numpy=True, num_episodes=6):
    """Random torques: Box actions, terminated and truncated episodes of
    different lengths."""
    env = _FastSwingEndsPendulum(gym.make("Pendulum-v1", max_episode_steps=60))
    env.action_space.seed(4)
    episodes = []
    for i in range(num_episodes):
        obs, info = env.reset(seed=4 + i)
        episode = SingleAgentEpisode(
            observations=[obs],
            infos=[info],
            observation_space=env.observation_space,
            action_space=env.action_space,
        )
        while not episode.is_done:
            action = env.action_space.sample()
            obs, reward, terminated, truncated, info = env.step(action)
            episode.add_env_step(
                obs,
                action,
                reward,
                infos=info,
                terminated=terminated,
                truncated=truncated,
            )
        if to_numpy:
            episode.to_numpy()
        episodes.append(episode)
    return env.observation_space, env.action_space, episodes


def _prelearner(
    algo,
    obs_space,
    action_space,
    fast,
    module=None,
    n_step=None,
    gamma=0.99,
    horizon=None,
):
    config = _ALGO_CONFIGS[algo]()
    config = (
        config.environment(observation_space=obs_space, action_space=action_space)
        .training(train_batch_size_per_learner=BATCH_SIZE, gamma=gamma)
        .learners(learner_config_dict={HORIZON_KEY: horizon})
        .offline_data(
            input_="/nonexistent",
            input_read_episodes=True,
            prelearner_buffer_class=None if fast else EpisodeObjectBuffer,
        )
    )
    if module is not None:
        config = config.rl_module(rl_module_spec=RLModuleSpec(module_class=module))
    if n_step is not None:
        config.n_step = n_step
    spec = config.get_multi_rl_module_spec(
        spaces={DEFAULT_MODULE_ID: (obs_space, action_space)}, inference_only=False
    )
    # Each prelearner builds its own randomly initialized module: compare the
    # rows, not value targets from two different networks.
    return OfflinePreLearner(
        config=config,
        spaces=(obs_space, action_space),
        module_spec=spec,
        compute_value_targets=False,
    )


def _script(episodes, n_step, seed):
    """Enough timestep indices and n-steps for any number of items needed."""
    rng = np.random.default_rng(seed)
    total = sum(len(e) for e in episodes)
    starts = rng.integers(total, size=4 * BATCH_SIZE)
    if isinstance(n_step, tuple):
        return starts, rng.integers(*n_step, size=4 * BATCH_SIZE)
    return starts, ()


def _run_both(
    algo,
    data,
    *,
    n_step=None,
    module=None,
    compression=None,
    seed=0,
    general_episodes=None,
    gamma=0.99,
    horizon=None,
):
    """Feeds both paths; `general_episodes` (same content) go to the general one."""
    obs_space, action_space, episodes = data
    payloads = np.array(
        [encode_episode(e, compression) for e in episodes], dtype=object
    )
    general_payloads = payloads
    if general_episodes is not None:
        general_payloads = np.array(
            [encode_episode(e, compression) for e in general_episodes], dtype=object
        )
    settings = {"n_step": n_step, "gamma": gamma, "horizon": horizon}
    fast = _prelearner(algo, obs_space, action_space, True, module, **settings)
    general = _prelearner(algo, obs_space, action_space, False, module, **settings)
    assert fast.uses_columnar_path and not general.uses_columnar_path
    # `_validate_episodes` gives a set of episodes; keep the batch order here.
    general._validate_episodes = list
    starts, n_steps = _script(episodes, n_step, seed)
    fast.columnar_buffer.rng = ScriptedRng(starts, n_steps)
    general.episode_buffer.rng = ScriptedRng(starts, n_steps)
    out_fast = fast({"item": payloads})
    out_general = general({"item": general_payloads})
    return out_fast, out_general


def _assert_same(out_fast, out_general):
    assert sorted(out_fast) == sorted(out_general)
    for key, expected in out_general.items():
        got = out_fast[key]
        assert type(got) is type(expected), key
        assert got.dtype == expected.dtype, key
        assert got.shape == expected.shape, key
        if isinstance(expected, torch.Tensor):
            assert torch.equal(got, expected), key
        else:
            np.testing.assert_array_equal(got, expected, err_msg=key)


@pytest.mark.parametrize("algo", ["bc", "marwil"])
@pytest.mark.parametrize("to_numpy", [True, False])
def test_cartpole_batches_match(algo, to_numpy):
    out_fast, out_general = _run_both(algo, _cartpole(to_numpy=to_numpy))
    _assert_same(out_fast, out_general)
    obs = out_fast[f"{DEFAULT_MODULE_ID}/{Columns.OBS}"]
    # One row per sampled transition: MARWIL's rows carry their value-target
    # inputs instead of a bootstrap row each.
    assert len(obs) == BATCH_SIZE
    assert f"{DEFAULT_MODULE_ID}/{Columns.LOSS_MASK}" not in out_fast
    inputs = {
        f"{DEFAULT_MODULE_ID}/{c}"
        for c in (RETURNS_TO_BOOTSTRAP, BOOTSTRAP_DISCOUNT, f"{BOOTSTRAP_OBS}")
    }
    assert inputs <= set(out_fast) if algo == "marwil" else not inputs & set(out_fast)


@pytest.mark.parametrize("algo", ["bc", "marwil"])
@pytest.mark.parametrize("n_step", [3, (1, 6)])
def test_n_step_batches_match(algo, n_step):
    """n-step sums, overshooting ends and `EpisodeReplayBuffer`'s item counter agree."""
    data = _cartpole(max_steps=12)
    out_fast, out_general = _run_both(algo, data, n_step=n_step)
    _assert_same(out_fast, out_general)
    n = out_fast[f"{DEFAULT_MODULE_ID}/n_step"]
    assert n.min() >= 1 and n.max() <= 5
    if isinstance(n_step, tuple):
        assert len(set(n.tolist())) > 1


@pytest.mark.parametrize("algo", ["cql", "iql"])
@pytest.mark.parametrize("n_step", [None, 3, (1, 4)])
@pytest.mark.parametrize("to_numpy", [True, False])
def test_cql_iql_rows_match_and_carry_their_transition(algo, n_step, to_numpy):
    """Rows of off-policy algorithms: the next observation, done flags and
    n-step of each row, equal on both paths for the same draws."""
    data = _pendulum(to_numpy=to_numpy)
    assert {e.is_terminated for e in data[2]} == {True, False}
    out_fast, out_general = _run_both(algo, data, n_step=n_step, gamma=0.95)
    _assert_same(out_fast, out_general)
    columns = {
        key: out_fast[f"{DEFAULT_MODULE_ID}/{key}"]
        for key in (Columns.OBS, Columns.NEXT_OBS, Columns.TERMINATEDS, "n_step")
    }
    assert len(columns[Columns.OBS]) == BATCH_SIZE
    # Rows at a terminal step, and others.
    assert 0 < columns[Columns.TERMINATEDS].sum() < BATCH_SIZE


@pytest.mark.parametrize("fast", [True, False])
def test_n_step_rewards_use_config_gamma(fast):
    """`config.gamma` = 0.5 discounts the 3-step rewards on both paths (ray 2.60's
    prelearner passed no gamma, so its buffer discounted with 0.99).

    Rewards 1, 2, 4, 8, 16 over 5 terminated steps; the observation at step
    `t` is `t`, so each row tells its start.
    """
    from rllib.offline.tests.test_columnar_buffer import (
        HAND_3_STEP_HALF,
        HAND_REWARDS,
    )

    obs_space = gym.spaces.Box(0.0, 10.0, (1,), np.float32)
    action_space = gym.spaces.Discrete(2)
    episode = SingleAgentEpisode(observations=[np.zeros(1, np.float32)])
    for t, reward in enumerate(HAND_REWARDS):
        episode.add_env_step(
            np.full(1, t + 1, np.float32), 0, reward, terminated=t == 4
        )
    prelearner = _prelearner("bc", obs_space, action_space, fast, n_step=3, gamma=0.5)
    assert prelearner.uses_columnar_path is fast
    out = prelearner({"item": np.array([encode_episode(episode)], dtype=object)})
    key = f"{DEFAULT_MODULE_ID}/{{}}".format
    starts = np.asarray(out[key(Columns.OBS)])[:, 0].astype(int).tolist()
    assert set(starts) == set(HAND_3_STEP_HALF)
    np.testing.assert_array_equal(
        np.asarray(out[key(Columns.REWARDS)]), [HAND_3_STEP_HALF[t] for t in starts]
    )


def _reference_inputs(episodes, flat_steps, gamma, horizon):
    """Each drawn step's value-target inputs, by a plain loop over its episode."""
    lengths = np.array([len(e) for e in episodes])
    ends = np.cumsum(lengths)
    expected = []
    for flat in flat_steps:
        index = int(np.searchsorted(ends, flat, side="right"))
        episode = episodes[index]
        t = int(flat - (ends[index] - lengths[index]))
        end = len(episode)
        boot = end if horizon is None else min(t + horizon, end)
        rewards = episode.get_rewards()
        to_boot = sum(gamma ** (k - t) * float(rewards[k]) for k in range(t, boot))
        terminal = boot == end and episode.is_terminated
        discount = 0.0 if terminal else gamma ** (boot - t)
        expected.append((to_boot, discount, episode.get_observations(boot)))
    return expected


@pytest.mark.parametrize("n_step", [1, 3, (1, 6)])
@pytest.mark.parametrize("horizon", [None, 4])
def test_value_target_inputs_mean_the_same_on_both_paths(n_step, horizon):
    """`config.gamma` and the horizon on both paths, whatever the n-step.

    The per-episode path used to bootstrap one step after each sampled
    slice, with the n-step reward discounted by the buffer's default 0.99.
    """
    gamma = 0.9
    data = _cartpole(max_steps=12)
    out_fast, out_general = _run_both(
        "marwil", data, n_step=n_step, gamma=gamma, horizon=horizon
    )
    _assert_same(out_fast, out_general)
    starts, _ = _script(data[2], n_step, seed=0)
    key = f"{DEFAULT_MODULE_ID}/{{}}".format
    returns = out_general[key(RETURNS_TO_BOOTSTRAP)]
    expected = _reference_inputs(data[2], starts[: len(returns)], gamma, horizon)
    np.testing.assert_allclose(returns, [e[0] for e in expected], rtol=1e-5)
    np.testing.assert_allclose(
        out_general[key(BOOTSTRAP_DISCOUNT)], [e[1] for e in expected], rtol=1e-6
    )
    np.testing.assert_array_equal(
        out_general[key(BOOTSTRAP_OBS)], np.stack([e[2] for e in expected])
    )


class _NoNetworkModule(TorchRLModule):
    """Builds for any space; neither path calls it (targets run on the Learner)."""

    def setup(self):
        pass

    def _forward(self, batch, **kwargs):
        raise AssertionError("the prelearner should not run the module")


@pytest.mark.parametrize("algo", ["bc", "marwil"])
@pytest.mark.parametrize("name", sorted(SPACES))
@pytest.mark.parametrize("to_numpy", [True, False])
def test_every_space_kind_matches(algo, name, to_numpy):
    """Box, Discrete, Dict, Tuple, nested (uint8, float64, MultiBinary, ...).

    The episodes also carry infos and extra model outputs, which both paths
    leave out of the batch.
    """
    obs_space, action_space = SPACES[name]

    def episodes(numpy):
        made = []
        for seed in range(5):
            episode = make_episode(
                obs_space,
                action_space,
                length=3 + 2 * seed,
                seed=seed,
                terminated=seed % 2 == 0,
                truncated=seed % 2 == 1,
            )
            made.append(episode.to_numpy() if numpy else episode)
        return made

    # `SingleAgentEpisode.slice` (ray 2.60) fails on numpy-ized episodes with
    # a Tuple action space (it takes the tuple's length for the number of
    # steps), so the general path gets the same episodes as lists there.
    general = None
    if to_numpy and isinstance(action_space, gym.spaces.Tuple):
        general = episodes(numpy=False)
    data = (obs_space, action_space, episodes(numpy=to_numpy))
    out_fast, out_general = _run_both(
        algo, data, module=_NoNetworkModule, general_episodes=general
    )
    _assert_same(out_fast, out_general)


@pytest.mark.parametrize("name", ["dict", "tuple", "nested"])
@pytest.mark.parametrize("to_numpy", [True, False])
def test_structured_observation_batches_match(name, to_numpy):
    out_fast, out_general = _run_both(
        "marwil",
        _structured(name, to_numpy=to_numpy),
        module=structured_obs.StructuredObsModule,
        compression="zstd",
    )
    _assert_same(out_fast, out_general)
    if name == "tuple":
        assert f"{DEFAULT_MODULE_ID}/{Columns.OBS}/#1" in out_fast


@pytest.mark.parametrize("algo", ["bc", "marwil"])
def test_episodes_with_a_lookback_match(algo):
    """Recorded buffers that keep steps before the episode start (lookback)."""
    obs_space, action_space, episodes = _cartpole()
    sliced = [e.slice(slice(2, len(e)), len_lookback_buffer=2) for e in episodes]
    assert all(e.observations.lookback == 2 for e in sliced)
    out_fast, out_general = _run_both(algo, (obs_space, action_space, sliced))
    _assert_same(out_fast, out_general)


def test_episode_without_steps_is_never_sampled():
    from ray.rllib.env.single_agent_episode import SingleAgentEpisode

    obs_space, action_space, episodes = _cartpole(num_episodes=3)
    empty = SingleAgentEpisode(
        observations=[episodes[0].get_observations(0)],
        terminated=True,
        len_lookback_buffer=0,
    )
    data = (obs_space, action_space, [episodes[0], empty] + episodes[1:])
    out_fast, out_general = _run_both("marwil", data)
    _assert_same(out_fast, out_general)


def _connector_order(episode_ids):
    """The row order of the connectors' per-episode dict: items whose ids have
    `_` (not made unique by `AddObservationsFromEpisodesToBatch`) are grouped
    at the position of their id's first item."""
    groups = {}
    keys = [
        groups.setdefault(i_d if "_" in i_d else f"{i_d}_{i}", len(groups))
        for i, i_d in enumerate(episode_ids)
    ]
    return np.argsort(keys, kind="stable")


def _bc_loss(module, batch):
    """BC's loss, `-mean(log pi(a|s))`, of one module on a flattened batch."""
    key = f"{DEFAULT_MODULE_ID}/{{}}".format
    with torch.no_grad():
        out = module.forward_train({Columns.OBS: batch[key(Columns.OBS)]})
        dist = module.get_train_action_dist_cls().from_logits(
            out[Columns.ACTION_DIST_INPUTS]
        )
        return -dist.logp(batch[key(Columns.ACTIONS)]).mean().item()


@pytest.mark.parametrize("algo", ["bc", "marwil"])
def test_shared_episode_ids_keep_the_sampled_order(algo):
    """Ids with "_" are not made unique by the connectors, which then group an
    episode's rows together; the columnar builder keeps the rows in the order
    they were sampled. The rows are the same, only their order differs, and so
    the loss is the same within float tolerance."""
    data = _cartpole(id_prefix="run")
    out_fast, out_general = _run_both(algo, data)
    # The fast path's rows are the scripted draws, in draw order.
    starts, _ = _script(data[2], None, seed=0)
    lengths = np.array([len(e) for e in data[2]])
    ends = np.cumsum(lengths)
    owners = np.searchsorted(ends, starts[:BATCH_SIZE], side="right")
    ts = starts[:BATCH_SIZE] - (ends - lengths)[owners]
    key = f"{DEFAULT_MODULE_ID}/{{}}".format
    obs = out_fast[key(Columns.OBS)].numpy()
    expected_obs = [data[2][o].get_observations(int(t)) for o, t in zip(owners, ts)]
    np.testing.assert_array_equal(obs, np.stack(expected_obs))
    # The general path's rows are the same rows, grouped by episode.
    order = _connector_order([data[2][o].id_ for o in owners])
    assert not np.array_equal(order, np.arange(BATCH_SIZE))
    _assert_same(
        {k: v[torch.as_tensor(order)] for k, v in out_fast.items()}, out_general
    )
    module = _prelearner("bc", *data[:2], True)._module[DEFAULT_MODULE_ID]
    assert _bc_loss(module, out_fast) == pytest.approx(
        _bc_loss(module, out_general), rel=1e-6
    )


def test_unfinished_episode_is_rejected_with_its_id():
    obs_space, action_space, episodes = _cartpole(num_episodes=2)
    episodes[1].is_truncated = episodes[1].is_terminated = False
    prelearner = _prelearner("bc", obs_space, action_space, True)
    payloads = np.array([encode_episode(e) for e in episodes], dtype=object)
    with pytest.raises(ValueError, match=rf"row 1 \(episode id `{episodes[1].id_}`"):
        prelearner({"item": payloads})


def test_corrupt_payload_still_names_its_row():
    obs_space, action_space, episodes = _cartpole(num_episodes=2)
    prelearner = _prelearner("bc", obs_space, action_space, True)
    payloads = np.array([encode_episode(episodes[0]), b"\x00garbage"], dtype=object)
    with pytest.raises(ValueError, match="Cannot decode the episode in batch row 1"):
        prelearner({"item": payloads})


def test_falls_back_and_says_why_once(caplog, monkeypatch):
    import rllib.offline.offline_prelearner as prelearner_module

    monkeypatch.setattr(prelearner_module, "_LOGGED", set())
    obs_space, action_space, _ = _cartpole(num_episodes=1)
    with caplog.at_level(
        logging.WARNING, logger="ray.rllib.offline.offline_prelearner"
    ):
        first = _prelearner("bc", obs_space, action_space, fast=False)
        _prelearner("bc", obs_space, action_space, fast=False)
    assert not first.uses_columnar_path
    notes = [
        r.message for r in caplog.records if "prelearner_buffer_class" in r.message
    ]
    assert len(notes) == 1 and "the per-episode path" in notes[0]


def test_subclass_overriding_the_general_path_keeps_it():
    class Custom(OfflinePreLearner):
        def _postprocess_and_sample(self, episodes):
            return super()._postprocess_and_sample(episodes)

    obs_space, action_space, _ = _cartpole(num_episodes=1)
    config = (
        BCConfig()
        .environment(observation_space=obs_space, action_space=action_space)
        .offline_data(input_="/nonexistent", input_read_episodes=True)
    )
    spec = config.get_multi_rl_module_spec(
        spaces={DEFAULT_MODULE_ID: (obs_space, action_space)}, inference_only=False
    )
    custom = Custom(config=config, spaces=(obs_space, action_space), module_spec=spec)
    assert not custom.uses_columnar_path


if __name__ == "__main__":
    import sys

    sys.exit(pytest.main(["-v", __file__]))
