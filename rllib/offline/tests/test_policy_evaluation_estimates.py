"""Offline policy evaluation runners estimate from the logged actions, per
module, inside `Algorithm.train()` (ray 2.60 fails on episode files with
`KeyError: 'action_logp'`)."""

import sys
import types

import gymnasium as gym
import numpy as np
import pytest
import torch
from ray.rllib.algorithms.bc import BCConfig
from ray.rllib.core import DEFAULT_MODULE_ID
from ray.rllib.core.columns import Columns

from rllib.examples.offline_rl import train_multi_agent_offline as multi_agent
from rllib.examples.offline_rl.scripted_cartpole import (
    balance_action,
    record_episodes,
)
from rllib.offline.episode_files.reader import read_episodes
from rllib.offline.episode_files.writer import write_episodes
from rllib.offline.off_policy_estimation import evaluate_module
from rllib.offline.offline_policy_evaluation_runner import _estimation_settings

EPSILON = 0.5
NUM_EPISODES = 12


def _scripted(obs):
    return balance_action(obs[2], obs[3])


@pytest.fixture(scope="module")
def logged_dir(tmp_path_factory):
    """CartPole runs of an epsilon-greedy scripted policy, with `action_logp`."""
    env = gym.make("CartPole-v1")
    episodes = record_episodes(
        env, NUM_EPISODES, _scripted, epsilon=EPSILON, record_logp=True
    )
    path = tmp_path_factory.mktemp("logged")
    write_episodes([ep.to_numpy() for ep in episodes], str(path))
    return str(path)


def _train_once(config, module_ids=(DEFAULT_MODULE_ID,)):
    algo = config.build_algo()
    try:
        result = algo.train()
        return result, {m: algo.get_module(m) for m in module_ids}
    finally:
        algo.stop()


def _bc_config(data_dir, evaluation_type):
    return (
        BCConfig()
        .environment("CartPole-v1")
        .training(train_batch_size_per_learner=256, lr=1e-3)
        .offline_data(
            input_=[data_dir], input_read_episodes=True, dataset_num_iters_per_learner=2
        )
        .evaluation(
            offline_evaluation_interval=1,
            num_offline_eval_runners=1,
            offline_evaluation_type=evaluation_type,
            # One minibatch holds every recorded episode.
            offline_eval_batch_size_per_runner=NUM_EPISODES,
        )
        .debugging(seed=0)
    )


def _plain_loop_estimates(module, episodes, gamma):
    """IS and PDIS from the module's logits, one episode and step at a time."""
    is_terms, pdis_terms = [], []
    for episode in episodes:
        obs = torch.as_tensor(np.asarray(episode.get_observations()[:-1]))
        with torch.no_grad():
            logits = module.forward_inference({Columns.OBS: obs})[
                Columns.ACTION_DIST_INPUTS
            ]
        target = torch.softmax(logits.double(), -1).numpy()
        behavior = np.exp(episode.get_extra_model_outputs(Columns.ACTION_LOGP))
        rho, discounted, pdis = 1.0, 0.0, 0.0
        for t, (action, reward) in enumerate(
            zip(episode.get_actions(), episode.get_rewards())
        ):
            rho *= target[t, action] / behavior[t]
            discounted += gamma**t * reward
            pdis += gamma**t * rho * reward
        is_terms.append(rho * discounted)
        pdis_terms.append(pdis)
    return np.mean(is_terms), np.mean(pdis_terms)


@pytest.mark.timeout(300)
@pytest.mark.parametrize("evaluation_type", ["is", "pdis"])
def test_estimates_use_the_logged_actions(ray_cluster, logged_dir, evaluation_type):
    config = _bc_config(logged_dir, evaluation_type)
    result, modules = _train_once(config)
    module = modules[DEFAULT_MODULE_ID]
    offline = result["evaluation"]["offline_eval_runners"]
    estimates = offline["off_policy_estimation"][DEFAULT_MODULE_ID]
    expected_is, expected_pdis = _plain_loop_estimates(
        module, read_episodes(logged_dir), config.gamma
    )
    assert estimates["is"] == pytest.approx(expected_is, rel=1e-4)
    assert estimates["pdis"] == pytest.approx(expected_pdis, rel=1e-4)
    assert estimates["behavior_logp_recorded"] == 1.0
    assert estimates["num_episodes"] == NUM_EPISODES
    headline = expected_is if evaluation_type == "is" else expected_pdis
    assert offline["episode_return_mean"] == pytest.approx(headline, rel=1e-4)
    for name in ("is", "wis", "pdis", "wpdis"):
        low, high = estimates[name + "_ci_low"], estimates[name + "_ci_high"]
        assert low <= estimates[name] <= high, name


@pytest.mark.timeout(400)
def test_fqe_and_doubly_robust_per_module_of_a_multi_agent_run(ray_cluster, tmp_path):
    # Recorded without `action_logp`: the runner fits the behaviour policy.
    multi_agent.record_and_write(str(tmp_path), num_episodes=6, epsilon=0.3, seed=0)
    config = multi_agent.build_config(
        "bc", str(tmp_path), updates_per_iteration=2
    ).evaluation(
        evaluation_interval=None,
        offline_evaluation_interval=1,
        num_offline_eval_runners=1,
        offline_evaluation_type="dr",
        offline_eval_batch_size_per_runner=6,
        offline_evaluation_timeout_s=600,
    )
    # FQE's settings go through `learner_config_dict`.
    config.learners(
        learner_config_dict={
            "off_policy_estimation": {
                "fqe": {"num_updates": 300, "horizon": 500},
                "num_bootstrap": 20,
            }
        }
    )
    result, modules = _train_once(config, multi_agent.MODULES)
    estimates = result["evaluation"]["offline_eval_runners"]["off_policy_estimation"]
    assert set(estimates) == set(multi_agent.MODULES)
    on_driver = evaluate_module(
        modules,
        read_episodes(str(tmp_path)),
        gamma=config.gamma,
        policy_mapping_fn=config.policy_mapping_fn,
        estimators=["is", "wis", "pdis", "wpdis"],
        seed=0,
    )
    for module_id, stats in estimates.items():
        assert stats["behavior_logp_recorded"] == 0.0
        for name in ("fqe", "dr", "wis"):
            assert np.isfinite(stats[name]), (module_id, name)
        # The ratios are the same as a driver-side estimate with the same
        # trained module and the same seeded behaviour fit.
        for name in ("is", "wis", "pdis", "wpdis"):
            assert stats[name] == pytest.approx(
                on_driver[module_id].estimates[name].value, rel=1e-3
            ), (module_id, name)
        # Each agent's discounted return is at most sum_t 0.99^t < 100.
        assert 0 < stats["fqe"] < 100


def test_estimation_settings_from_learner_config_dict():
    def runner(settings):
        config = BCConfig().learners(
            learner_config_dict={"off_policy_estimation": settings}
        )
        return types.SimpleNamespace(config=config, _device=None)

    settings = _estimation_settings(
        runner({"fqe": {"num_updates": 2000, "horizon": 500}, "num_bootstrap": 7})
    )
    assert settings["fqe_config"].num_updates == 2000
    assert settings["fqe_config"].horizon == 500
    assert settings["fqe_config"].device == "cpu"
    assert settings["num_bootstrap"] == 7
    with pytest.raises(ValueError, match=r"unknown keys \['bootstrap'\]"):
        _estimation_settings(runner({"bootstrap": 7}))


if __name__ == "__main__":
    sys.exit(pytest.main(["-v", __file__]))
