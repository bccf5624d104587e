"""PPO checkpoints restore across fork and upstream, in both directions.

Upstream saves after one iteration; the fork restores it (same weights),
trains one more iteration and saves; upstream restores that (same weights)
and trains on. Each step runs in a fresh process (`differential.run_scenario`).
"""

import sys

import pytest

from rllib._fork.tests.differential import FORK, UPSTREAM, run_scenario

_SCENARIO = """
import hashlib

import ray
from ray.rllib.algorithms.algorithm import Algorithm
from ray.rllib.algorithms.ppo import PPOConfig

ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)


def digest(algo):
    state = algo.get_module().get_state()
    return {
        name: hashlib.sha1(value.tobytes()).hexdigest()
        for name, value in sorted(state.items())
    }


if RESTORE_FROM:
    algo = Algorithm.from_checkpoint(RESTORE_FROM)
else:
    algo = (
        PPOConfig()
        .environment("CartPole-v1")
        .env_runners(num_env_runners=0)
        .training(train_batch_size_per_learner=128, minibatch_size=64, num_epochs=1)
        .rl_module(model_config={"fcnet_hiddens": [16]})
        .debugging(seed=0)
        .build_algo()
    )
restored = digest(algo)
iteration = algo.iteration
algo.train()
trained = digest(algo)
if SAVE_TO:
    algo.save_to_path(SAVE_TO)
algo.stop()
emit({"restored": restored, "iteration": iteration, "trained": trained})
"""


def _run(mode, *, restore_from="", save_to=""):
    code = f"RESTORE_FROM = {restore_from!r}\nSAVE_TO = {save_to!r}\n" + _SCENARIO
    return run_scenario(code, mode=mode, timeout=400)


@pytest.mark.timeout(1200)
def test_ppo_checkpoints_restore_across_fork_and_upstream(tmp_path):
    upstream_dir, fork_dir = str(tmp_path / "upstream"), str(tmp_path / "fork")
    upstream = _run(UPSTREAM, save_to=upstream_dir)
    fork = _run(FORK, restore_from=upstream_dir, save_to=fork_dir)
    back = _run(UPSTREAM, restore_from=fork_dir)

    assert fork["iteration"] == 1 and back["iteration"] == 2
    assert fork["restored"] == upstream["trained"]
    assert back["restored"] == fork["trained"]
    # Each restored algorithm trains on: its weights move.
    assert fork["trained"] != fork["restored"]
    assert back["trained"] != back["restored"]


if __name__ == "__main__":
    sys.exit(pytest.main(["-v", __file__]))
