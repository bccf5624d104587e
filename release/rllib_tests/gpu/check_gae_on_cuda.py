"""GPU check: MARWIL's value pass and GAE run on the Learner's CUDA device.

Records CartPole episodes with the scripted expert, writes them with
`EpisodeWriter`, trains MARWIL for a few iterations with
`num_gpus_per_learner=1` (local learner), and checks, on every GAE call, that
the module's parameters, the value predictions' inputs and the GAE results
(advantages, value targets) all live on `cuda`. Exits non-zero on any CPU
tensor; prints `SKIPPED: no CUDA device` and exits 0 where there is no GPU.

    python release/rllib_tests/gpu/check_gae_on_cuda.py --iterations 3
"""

import argparse
import sys
import tempfile

import torch


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=3)
    parser.add_argument("--episodes", type=int, default=10)
    parser.add_argument(
        "--dry-run-on-cpu",
        action="store_true",
        help="Run the same checks with a CPU learner (to test this script).",
    )
    args = parser.parse_args()
    expected = "cpu" if args.dry_run_on_cpu else "cuda"
    num_gpus = 0 if args.dry_run_on_cpu else 1
    if expected == "cuda" and not torch.cuda.is_available():
        print("SKIPPED: no CUDA device")
        return 0

    import gymnasium as gym
    import numpy as np
    import ray
    from ray.rllib.algorithms.marwil import MARWILConfig
    from ray.rllib.core.columns import Columns
    from ray.rllib.evaluation.postprocessing import Postprocessing
    from ray.rllib.offline.episode_writer import write_episodes

    import rllib
    from rllib.connectors.learner import general_advantage_estimation as gae

    sys.path.insert(0, "release/benchmarks")
    from bench_marwil_value_quality import record_episodes

    assert rllib.is_active(), "the fork is not active in this process"
    seen = []
    original = gae.add_advantages_to_module_batch

    def spy(module, module_batch, **kwargs):
        original(module, module_batch, **kwargs)
        seen.append(
            {
                "params": next(module.parameters()).device.type,
                "obs": module_batch[Columns.OBS].device.type,
                "advantages": module_batch[Postprocessing.ADVANTAGES].device.type,
                "value_targets": module_batch[Postprocessing.VALUE_TARGETS].device.type,
            }
        )

    gae.add_advantages_to_module_batch = spy
    env = gym.make("CartPole-v1")
    data = tempfile.mkdtemp()
    write_episodes(
        record_episodes(args.episodes, 0.1, 0),
        data,
        observation_space=env.observation_space,
        action_space=env.action_space,
    )
    ray.init(
        num_cpus=4, num_gpus=num_gpus, include_dashboard=False, log_to_driver=False
    )
    config = (
        MARWILConfig()
        .environment(
            observation_space=env.observation_space, action_space=env.action_space
        )
        .learners(num_learners=0, num_gpus_per_learner=num_gpus)
        .training(train_batch_size_per_learner=1024)
        .offline_data(
            input_=[data], input_read_episodes=True, dataset_num_iters_per_learner=2
        )
    )
    algo = config.build_algo()
    losses = []
    for _ in range(args.iterations):
        results = algo.train()
        losses.append(results["learners"]["default_policy"]["total_loss"])
    algo.stop()
    ray.shutdown()

    devices = {key for call in seen for key in call.items()}
    print(f"GAE calls: {len(seen)}; devices seen: {sorted(devices)}")
    print(f"total losses: {[round(float(x), 4) for x in losses]}")
    ok = bool(seen) and all(v == expected for _, v in devices)
    ok = ok and all(np.isfinite(losses))
    print("PASSED" if ok else f"FAILED: a GAE tensor was not on {expected}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
