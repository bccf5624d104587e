"""GAE moves from the OfflinePreLearner to the Learner (live module, its device)."""

import sys

import gymnasium as gym
import msgpack
import msgpack_numpy as mnp
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch
from ray.rllib.algorithms.marwil import MARWILConfig
from ray.rllib.core import DEFAULT_MODULE_ID
from ray.rllib.core.columns import Columns
from ray.rllib.core.rl_module.multi_rl_module import MultiRLModuleSpec
from ray.rllib.evaluation.postprocessing import Postprocessing
from ray.rllib.offline.offline_prelearner import OfflinePreLearner

from rllib.connectors.learner import general_advantage_estimation as gae_module
from rllib.examples.offline_rl.scripted_cartpole import balance_action, record_episodes

ENV = gym.make("CartPole-v1")


def _episodes(num, seed=0):
    episodes = record_episodes(
        ENV,
        num,
        lambda obs: balance_action(obs[2], obs[3]),
        epsilon=0.3,
        seed=seed,
    )
    return [e.to_numpy() for e in episodes]


def _packed(episodes):
    return [msgpack.packb(e.get_state(), default=mnp.encode) for e in episodes]


def _config(data_path=None, num_learners=0, batch_size=64):
    return (
        MARWILConfig()
        .environment(
            observation_space=ENV.observation_space, action_space=ENV.action_space
        )
        .rl_module(model_config={"fcnet_hiddens": [16]})
        .learners(num_learners=num_learners)
        .training(train_batch_size_per_learner=batch_size)
        .offline_data(
            input_=[data_path or "unused"],
            input_read_episodes=True,
            input_read_batch_size=4,
            dataset_num_iters_per_learner=1,
        )
    )


@pytest.fixture(scope="module")
def episode_dir(tmp_path_factory):
    path = tmp_path_factory.mktemp("marwil_episodes")
    pq.write_table(
        pa.table({"item": _packed(_episodes(6, seed=1))}), path / "eps.parquet"
    )
    return str(path)


@pytest.mark.parametrize("segment_length", [None, 8])
def test_prelearner_runs_no_value_pass(episode_dir, monkeypatch, segment_length):
    calls = []
    config = _config(episode_dir)
    if segment_length:
        config.training(
            learner_config_dict={"offline_gae_segment_length": segment_length}
        )
    spec = config.get_default_rl_module_spec()
    spec.observation_space = ENV.observation_space
    spec.action_space = ENV.action_space
    spec.model_config = {"fcnet_hiddens": [16]}
    config.rl_module(
        rl_module_spec=MultiRLModuleSpec(rl_module_specs={DEFAULT_MODULE_ID: spec})
    )
    prelearner = OfflinePreLearner(
        config=config, spaces=(ENV.observation_space, ENV.action_space)
    )
    module = prelearner._module[DEFAULT_MODULE_ID]
    monkeypatch.setattr(type(module), "compute_values", lambda *a, **k: calls.append(1))
    out = prelearner({"item": np.array(_packed(_episodes(3)), dtype=object)})

    assert calls == []
    keys = set(out)
    assert any(k.endswith(Columns.LOSS_MASK) for k in keys), keys
    assert any(k.endswith(Columns.REWARDS) for k in keys), keys
    assert not any(k.endswith(Postprocessing.ADVANTAGES) for k in keys), keys
    assert not any(k.endswith(Postprocessing.VALUE_TARGETS) for k in keys), keys
    # One bootstrap step per sampled slice: one-step slices by default (as
    # upstream), contiguous segments of up to `segment_length` steps on request.
    loss_mask = next(v for k, v in out.items() if k.endswith(Columns.LOSS_MASK))
    slices = int((~np.asarray(loss_mask, dtype=bool)).sum())
    if segment_length is None:
        assert slices == len(loss_mask) / 2, (slices, len(loss_mask))
    else:
        assert len(loss_mask) / (segment_length + 1) <= slices < len(loss_mask) / 3


@pytest.mark.ray
@pytest.mark.timeout(300)
def test_local_learner_computes_gae_with_live_module(
    ray_cluster, episode_dir, monkeypatch
):
    seen = []
    original = gae_module.add_advantages_to_module_batch

    def spy(module, module_batch, **kwargs):
        seen.append(
            {
                "module": module,
                "weights": [p.detach().clone() for p in module.parameters()],
                "obs_device": module_batch[Columns.OBS].device,
            }
        )
        original(module, module_batch, **kwargs)
        seen[-1]["targets_device"] = module_batch[Postprocessing.VALUE_TARGETS].device
        seen[-1]["targets_finite"] = bool(
            torch.isfinite(module_batch[Postprocessing.VALUE_TARGETS]).all()
        )

    monkeypatch.setattr(gae_module, "add_advantages_to_module_batch", spy)
    algo = _config(episode_dir).build_algo()
    try:
        learner = algo.learner_group._learner
        live_module = learner.module[DEFAULT_MODULE_ID]
        for _ in range(3):
            results = algo.train()
    finally:
        algo.stop()

    assert len(seen) == 3, "one GAE pass per train batch on the Learner"
    for call in seen:
        assert call["module"] is live_module
        assert call["obs_device"] == learner._device
        assert call["targets_device"] == learner._device
        assert call["targets_finite"]
    # The weights seen by GAE change between iterations: the live module.
    assert any(
        not torch.equal(a, b) for a, b in zip(seen[0]["weights"], seen[-1]["weights"])
    )
    loss = results["learners"][DEFAULT_MODULE_ID]["total_loss"]
    assert np.isfinite(loss)


@pytest.mark.ray
@pytest.mark.timeout(300)
def test_remote_learner_trains_with_deferred_gae(ray_cluster, episode_dir):
    algo = _config(episode_dir, num_learners=1).build_algo()
    try:
        results = [algo.train() for _ in range(2)]
    finally:
        algo.stop()
    stats = results[-1]["learners"][DEFAULT_MODULE_ID]
    assert np.isfinite(stats["total_loss"])
    assert np.isfinite(stats["vf_loss"])


if __name__ == "__main__":
    sys.exit(pytest.main(["-v", __file__]))
