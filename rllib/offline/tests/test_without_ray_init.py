"""`build_algo()` and `Algorithm.from_checkpoint()` without `ray.init()`.

Upstream starts Ray itself when the offline data is read; a user's script
that never calls `ray.init()` must work the same with the fork. Each step
runs in a fresh process, in both modes.
"""

import pytest

from rllib._fork.tests.differential import (
    FORK,
    UPSTREAM,
    assert_same,
    run_scenario,
)

#: BC from episode files, spaces given, no `ray.init()`; saves a checkpoint.
TRAIN = """
import math
import ray
from ray.rllib.algorithms.bc import BCConfig
from rllib.offline.episode_files.writer import write_episodes
from rllib.offline.tests.episode_factory import cartpole_episodes

env, episodes = cartpole_episodes(6, max_steps=60)
write_episodes(
    episodes,
    "{root}/episodes",
    observation_space=env.observation_space,
    action_space=env.action_space,
)
config = (
    BCConfig()
    .environment(observation_space=env.observation_space, action_space=env.action_space)
    .learners(num_learners=0)
    .training(train_batch_size_per_learner=64)
    .offline_data(
        input_=["{root}/episodes"],
        input_read_episodes=True,
        dataset_num_iters_per_learner=1,
        map_batches_kwargs={{"concurrency": 1, "num_cpus": 1}},
    )
)
started = ray.is_initialized()
algo = config.build_algo()
learners = algo.train()["learners"]
algo.save_to_path("{root}/checkpoint")
algo.stop()
emit({{
    "ray_started_before_build": started,
    "steps": learners["__all_modules__"]["num_env_steps_trained"],
    "loss_finite": math.isfinite(learners["default_policy"]["policy_loss"]),
}})
"""

#: What the example prints to restore the algorithm, in a fresh process.
RESTORE = """
import math
from ray.rllib.algorithms.algorithm import Algorithm

algo = Algorithm.from_checkpoint("{root}/checkpoint")
iteration = algo.iteration
learners = algo.train()["learners"]
algo.stop()
emit({{
    "restored_iteration": iteration,
    "loss_finite": math.isfinite(learners["default_policy"]["policy_loss"]),
}})
"""


@pytest.mark.timeout(900)
def test_build_train_and_restore_without_ray_init(tmp_path):
    upstream_root, fork_root = tmp_path / "upstream", tmp_path / "fork"
    upstream = run_scenario(
        TRAIN.format(root=upstream_root), mode=UPSTREAM, timeout=280
    )
    fork = run_scenario(TRAIN.format(root=fork_root), mode=FORK, timeout=280)
    expected = {"ray_started_before_build": False, "steps": 64, "loss_finite": True}
    assert fork == expected
    assert_same(upstream, fork)
    restored = run_scenario(RESTORE.format(root=fork_root), mode=FORK, timeout=280)
    assert restored == {"restored_iteration": 1, "loss_finite": True}


if __name__ == "__main__":
    import sys

    sys.exit(pytest.main(["-v", __file__]))
