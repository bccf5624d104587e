"""BC trains on episode files: `EpisodeWriter`-written (compressed) and hand-rolled.

Uses the shared local Ray cluster (`ray_cluster` fixture).
"""

import gc
import math

import pytest
from ray.data import ActorPoolStrategy
from ray.rllib.algorithms.bc import BCConfig
from ray.rllib.utils.metrics import (
    ALL_MODULES,
    LEARNER_RESULTS,
    NUM_ENV_STEPS_TRAINED_LIFETIME,
)

from rllib.offline.episode_files.reader import read_episodes
from rllib.offline.episode_files.writer import write_episodes
from rllib.offline.tests.episode_factory import cartpole_episodes


@pytest.mark.timeout(300)
def test_bc_trains_on_writer_and_hand_rolled_files(ray_cluster, tmp_path):
    import msgpack_numpy as mnp

    ray = ray_cluster
    env, episodes = cartpole_episodes(8, max_steps=100)
    write_episodes(
        episodes[:4],
        tmp_path / "writer",
        observation_space=env.observation_space,
        action_space=env.action_space,
        compression="zstd",
        max_rows_per_file=2,
    )
    # The hand-rolled recipe from the issue, verbatim (also ray 2.60's layout).
    payloads = [mnp.packb(ep.get_state(), default=mnp.encode) for ep in episodes[4:]]
    ray.data.from_items(payloads).write_parquet(
        str(tmp_path / "hand_rolled"), compression="gzip"
    )
    hand_rolled = {ep.id_ for ep in read_episodes(tmp_path / "hand_rolled")}
    assert hand_rolled == {ep.id_ for ep in episodes[4:]}

    config = (
        BCConfig()
        .environment(
            observation_space=env.observation_space, action_space=env.action_space
        )
        .learners(num_learners=0)
        .training(train_batch_size_per_learner=128, lr=0.001)
        .offline_data(
            # One root: Ray Data lists it recursively. (Several paths list in
            # threads that can race on importing fsspec's http module.)
            input_=[str(tmp_path)],
            input_read_episodes=True,
            input_read_batch_size=2,
            dataset_num_iters_per_learner=2,
            map_batches_kwargs={"compute": ActorPoolStrategy(size=1), "num_cpus": 1},
        )
    )
    algo = config.build_algo()
    try:
        result = algo.train()
    finally:
        algo.stop()
        del algo
        gc.collect()  # Drop Ray Data iterators while Ray is still up.
    learner = result[LEARNER_RESULTS]
    assert learner[ALL_MODULES][NUM_ENV_STEPS_TRAINED_LIFETIME] >= 2 * 128
    assert math.isfinite(learner["default_policy"]["policy_loss"])


if __name__ == "__main__":
    import sys

    sys.exit(pytest.main(["-v", __file__]))
