"""MARWIL and BC checkpoints restore across the fork and upstream, both ways.

Upstream saves BC and MARWIL checkpoints; the fork restores them, compares
the restored weights with the saved ones, trains one more iteration and
saves; upstream restores those the same way (each mode in a fresh process,
`rllib._fork.tests.differential`). The fork also restores its own checkpoint
into a fresh algorithm and checks that MARWIL's advantage normalizer and
value-target scale come back.
"""

import sys

import gymnasium as gym
import numpy as np
import pytest

from rllib._fork.tests.differential import FORK, UPSTREAM, run_scenario
from rllib.examples.offline_rl.scripted_cartpole import (
    balance_action,
    record_episodes,
    write_hand_rolled_files,
)

_COMMON = """
import hashlib
import logging
import gymnasium as gym
import numpy as np
import ray
import rllib
from ray.rllib.algorithms.algorithm import Algorithm
from ray.rllib.algorithms.bc import BCConfig
from ray.rllib.algorithms.marwil import MARWILConfig

DATA, RESTORE_FROM, SAVE_TO = {data!r}, {restore_from!r}, {save_to!r}
ray.init(num_cpus=4, include_dashboard=False, log_to_driver=False)
ENV = gym.make("CartPole-v1")


def build(name):
    config = MARWILConfig().training(beta=1.0) if name == "marwil" else BCConfig()
    config = (
        config.environment(
            observation_space=ENV.observation_space, action_space=ENV.action_space
        )
        .rl_module(model_config={{"fcnet_hiddens": [16]}})
        .training(train_batch_size_per_learner=64)
        .debugging(seed=0)
        .offline_data(
            input_=[DATA], input_read_episodes=True, dataset_num_iters_per_learner=1
        )
    )
    return config.build_algo()


def restore(checkpoints, name):
    path = f"{{checkpoints}}/{{name}}"
    if rllib.is_active():
        return Algorithm.from_checkpoint(path)
    # Upstream's `Algorithm.restore_from_path` needs env runners, which an
    # offline algorithm lacks (AttributeError: ... 'sync_weights'): restore
    # the LearnerGroup, which holds the weights and optimizer.
    algo = build(name)
    algo.learner_group.restore_from_path(f"{{path}}/learner_group")
    return algo


def digests(algo):
    state = algo.learner_group._learner.module["default_policy"].state_dict()
    return {{
        key: hashlib.sha1(value.detach().cpu().numpy().tobytes()).hexdigest()
        for key, value in state.items()
    }}


def normalizer(algo):
    learner = algo.learner_group._learner
    norms = getattr(learner, "moving_avg_sqd_adv_norms_per_module", {{}})
    scales = getattr(learner, "_value_target_scales", {{}})
    return [
        float(norms["default_policy"]) if "default_policy" in norms else None,
        float(scales["default_policy"]) if "default_policy" in scales else None,
    ]
"""

_RESTORE = """
records = []
handler = logging.Handler()
handler.emit = lambda record: records.append(record.getMessage())
logging.getLogger("ray.rllib").addHandler(handler)
result = {"restored": {}, "saved": {}}
for name in ("bc", "marwil"):
    if RESTORE_FROM:
        algo = restore(RESTORE_FROM, name)
        weights = digests(algo)
        stats = algo.train()["learners"]["default_policy"]
        result["restored"][name] = {
            "weights": weights,
            "changed_by_training": digests(algo) != weights,
            "policy_loss": float(stats["policy_loss"]),
        }
    else:
        algo = build(name)
        algo.train()
    if SAVE_TO:
        algo.save_to_path(f"{SAVE_TO}/{name}")
        result["saved"][name] = {
            "weights": digests(algo), "normalizer": normalizer(algo)
        }
    algo.stop()
    if SAVE_TO and rllib.is_active():
        # The fork restores its own checkpoint into a fresh algorithm.
        fresh = restore(SAVE_TO, name)
        result["saved"][name]["own_restore"] = {
            "weights": digests(fresh), "normalizer": normalizer(fresh)
        }
        fresh.stop()
result["log"] = [r for r in records if "checkpoint" in r]
emit(result)
"""


@pytest.fixture(scope="module")
def episode_dir(tmp_path_factory):
    """Six scripted CartPole episodes in the format both modes read."""
    path = tmp_path_factory.mktemp("marwil_checkpoint_episodes")
    env = gym.make("CartPole-v1")
    episodes = record_episodes(
        env, 6, lambda obs: balance_action(obs[2], obs[3]), epsilon=0.5, seed=3
    )
    write_hand_rolled_files(episodes, path)
    return str(path)


def _run(mode, data, restore_from=None, save_to=None):
    code = _COMMON.format(data=data, restore_from=restore_from, save_to=save_to)
    return run_scenario(code + _RESTORE, mode=mode, timeout=900)


def _assert_restored(saved, restored):
    for name in ("bc", "marwil"):
        assert restored[name]["weights"] == saved[name]["weights"], name
        assert restored[name]["changed_by_training"], name
        assert np.isfinite(restored[name]["policy_loss"]), name


@pytest.mark.timeout(2400)
def test_checkpoints_restore_and_train_across_fork_and_upstream(episode_dir, tmp_path):
    """Upstream saves; the fork restores, trains and saves; upstream restores."""
    upstream_dir, fork_dir = str(tmp_path / "upstream"), str(tmp_path / "fork")
    upstream = _run(UPSTREAM, episode_dir, save_to=upstream_dir)
    fork = _run(FORK, episode_dir, restore_from=upstream_dir, save_to=fork_dir)
    back = _run(UPSTREAM, episode_dir, restore_from=fork_dir)

    _assert_restored(upstream["saved"], fork["restored"])
    # Upstream saves no normalizer: the fork starts it fresh and says so.
    assert any("start fresh" in line for line in fork["log"]), fork["log"]
    _assert_restored(fork["saved"], back["restored"])

    marwil = fork["saved"]["marwil"]
    norm, scale = marwil["normalizer"]
    assert norm is not None and norm > 0 and norm != 100.0
    assert scale is not None and scale > 0
    # The fork restores its own statistics into a fresh algorithm.
    assert marwil["own_restore"]["normalizer"] == [norm, scale]
    assert marwil["own_restore"]["weights"] == marwil["weights"]
    bc = fork["saved"]["bc"]
    assert bc["own_restore"]["weights"] == bc["weights"]


if __name__ == "__main__":
    sys.exit(pytest.main(["-v", __file__]))
