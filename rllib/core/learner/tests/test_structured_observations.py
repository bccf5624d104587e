"""Dict, Tuple and nested observations train end to end with BC and MARWIL.

Episodes are written to parquet, read back with `input_read_episodes=True`
and trained by a module that takes the observation's structure as is (no
flattening connector). The module raises on a leaf that is not a tensor on its
device or on a structure that is not the space's, so a training run that
finishes is itself the check; the tests also assert on what it recorded.
"""

import math
import sys

import pytest
import torch
from ray.data import ActorPoolStrategy
from ray.rllib.algorithms.bc import BCConfig
from ray.rllib.algorithms.marwil import MARWILConfig
from ray.rllib.core import DEFAULT_MODULE_ID
from ray.rllib.core.rl_module.rl_module import RLModuleSpec

from rllib.core.learner.tests import structured_obs as so
from rllib.utils.tests.devices import requires_cuda

ITERATIONS = 3
ALGOS = {"BC": BCConfig, "MARWIL": MARWILConfig}


@pytest.fixture(scope="module")
def datasets(tmp_path_factory):
    """One directory of recorded episodes per (space kind, file format)."""
    root = tmp_path_factory.mktemp("structured_obs")
    paths = {}
    for kind, space in so.OBS_SPACES.items():
        # Per-step episodes through RLlib's episode writer; finalized (numpy)
        # episodes in the plain msgpack format, where tuples used to be lost.
        paths[kind, "writer"] = so.write_episodes_for_test(
            so.make_episodes(space, to_numpy=False),
            str(root / kind / "writer"),
            space,
        )
        paths[kind, "msgpack"] = so.write_episodes_for_test(
            so.make_episodes(space, to_numpy=True),
            str(root / kind / "msgpack"),
            space,
            use_episode_writer=False,
        )
    return paths


def _config(algo, kind, path, num_learners, offline_eval, device="cpu"):
    space = so.OBS_SPACES[kind]
    config = (
        ALGOS[algo]()
        .environment(observation_space=space, action_space=so.ACTION_SPACE)
        .rl_module(rl_module_spec=RLModuleSpec(module_class=so.StructuredObsModule))
        .offline_data(
            input_=[path],
            input_read_episodes=True,
            dataset_num_iters_per_learner=2,
            map_batches_kwargs={"compute": ActorPoolStrategy(size=1), "num_cpus": 1},
        )
        .training(train_batch_size_per_learner=64, lr=1e-2)
        .learners(
            num_learners=num_learners,
            num_gpus_per_learner=1 if device == "cuda" else 0,
        )
        .reporting(min_time_s_per_iteration=0)
        .debugging(seed=0)
    )
    if offline_eval:
        config.evaluation(
            offline_evaluation_interval=1,
            num_offline_eval_runners=0,
            offline_evaluation_type="eval_loss",
            offline_eval_batch_size_per_runner=64,
            dataset_num_iters_per_offline_eval_runner=1,
        )
    return config


def _results(call_results):
    """Values of `foreach_learner`/`foreach_runner` results, local or remote."""
    return [r.get() if hasattr(r, "get") else r for r in call_results]


def _train_and_check(config, device="cpu", offline_eval=False):
    algo = config.build_algo()
    try:
        losses, eval_losses = [], []
        for _ in range(ITERATIONS):
            result = algo.train()
            losses.append(float(result["learners"][DEFAULT_MODULE_ID]["total_loss"]))
            if offline_eval:
                eval_losses.append(
                    float(
                        result["evaluation"]["offline_eval_runners"][DEFAULT_MODULE_ID][
                            "total_eval_loss"
                        ]
                    )
                )
        learner_seen = _results(
            algo.learner_group.foreach_learner(
                lambda learner: (
                    str(learner._device),
                    learner.module[DEFAULT_MODULE_ID].seen,
                )
            )
        )
        runner_seen = (
            algo.offline_eval_runner_group.foreach_runner(
                lambda runner: runner.module[DEFAULT_MODULE_ID].seen,
                local_runner=True,
            )
            if offline_eval
            else []
        )
    finally:
        algo.stop()

    assert all(math.isfinite(x) for x in losses), losses
    assert losses[-1] < losses[0], f"loss did not decrease: {losses}"
    assert len(learner_seen) == 1
    learner_device, seen = learner_seen[0]
    assert torch.device(learner_device).type == device
    _assert_tensor_leaves_on(seen, device)
    if offline_eval:
        assert all(math.isfinite(x) for x in eval_losses), eval_losses
        assert len(runner_seen) == 1
        _assert_tensor_leaves_on(runner_seen[0], device)
    return losses


def _assert_tensor_leaves_on(seen, device):
    """Every recorded call, from the first on, got tensors on `device`."""
    assert seen, "the module was never called"
    for call in seen:
        assert torch.device(call["module_device"]).type == device
        for type_name, leaf_device in call["leaves"]:
            assert type_name == "Tensor", call
            assert torch.device(leaf_device).type == device, call


@pytest.mark.timeout(240)
@pytest.mark.parametrize("num_learners", [0, 1])
@pytest.mark.parametrize("algo", sorted(ALGOS))
@pytest.mark.parametrize("kind", sorted(so.OBS_SPACES))
def test_train_structured_obs(ray_cluster, datasets, kind, algo, num_learners):
    # MARWIL's training loss needs Learner state (advantage norms) that the
    # offline evaluation runner does not have (as in ray 2.60). The
    # (local) evaluation runner is the same for either number of Learners.
    offline_eval = algo == "BC" and num_learners == 0
    _train_and_check(
        _config(algo, kind, datasets[kind, "writer"], num_learners, offline_eval),
        offline_eval=offline_eval,
    )


@pytest.mark.timeout(240)
def test_train_tuple_obs_msgpack_format(ray_cluster, datasets):
    # msgpack'd episode states give lists for tuples; they are rebuilt as tuples.
    _train_and_check(_config("MARWIL", "tuple", datasets["tuple", "msgpack"], 0, False))


@pytest.mark.timeout(240)
@requires_cuda
@pytest.mark.parametrize("kind", sorted(so.OBS_SPACES))
def test_train_structured_obs_on_gpu(ray_cluster, datasets, kind):
    _train_and_check(
        _config("BC", kind, datasets[kind, "writer"], 0, False, device="cuda"),
        device="cuda",
    )


if __name__ == "__main__":
    sys.exit(pytest.main(["-v", __file__]))
