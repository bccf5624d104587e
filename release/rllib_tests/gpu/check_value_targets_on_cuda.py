"""GPU check: MARWIL's value pass and value targets run on the Learner's device.

Records CartPole episodes with the scripted expert, writes them with
`EpisodeWriter`, trains MARWIL for a few iterations with
`num_gpus_per_learner=1` (local learner), and checks, on every value-target
call, that the module's parameters, the rows' observations and bootstrap
observations and the results (value targets, advantages, value predictions)
all live on `cuda`. With `--value-share` it also prints the share of a
Learner update the value pass takes on this device. Exits non-zero on any CPU
tensor; prints `SKIPPED: no CUDA device` and exits 0 where there is no GPU.

    python release/rllib_tests/gpu/check_value_targets_on_cuda.py --value-share
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
        "--value-share",
        action="store_true",
        help="Also time the value pass's share of a Learner update.",
    )
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
    from ray.rllib.offline.episode_files.writer import write_episodes

    import rllib
    from rllib.core.learner import value_targets as targets
    from rllib.utils.postprocessing.bootstrapped_returns import BOOTSTRAP_OBS

    sys.path.insert(0, "release/benchmarks")
    from episode_data import centering_policy, record_episodes

    assert rllib.is_active(), "the fork is not active in this process"
    seen = []
    original = targets.add_value_targets

    def spy(module, module_batch):
        added = original(module, module_batch)
        if added:
            seen.append(
                {
                    "params": next(module.parameters()).device.type,
                    "obs": module_batch[Columns.OBS].device.type,
                    "bootstrap_obs": module_batch[BOOTSTRAP_OBS].device.type,
                    "advantages": module_batch[Postprocessing.ADVANTAGES].device.type,
                    "value_targets": module_batch[
                        Postprocessing.VALUE_TARGETS
                    ].device.type,
                    "vf_preds": module_batch[Columns.VF_PREDS].device.type,
                }
            )
        return added

    targets.add_value_targets = spy
    env = gym.make("CartPole-v1")
    data = tempfile.mkdtemp()
    write_episodes(
        [
            episode.to_numpy()
            for episode in record_episodes(
                args.episodes, 0.1, 0, policy=centering_policy
            )
        ],
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
    share = None
    if args.value_share:
        sys.path.insert(0, "release/benchmarks")
        from bench_marwil_vs_bc import value_pass_share

        targets.add_value_targets = original
        batch = algo.offline_data.sample(num_samples=1024)
        share = value_pass_share(algo.learner_group._learner, batch)
    algo.stop()
    ray.shutdown()
    if share is not None:
        print(f"value pass and targets: {100 * share:.1f}% of a Learner update")

    devices = {key for call in seen for key in call.items()}
    print(f"value-target calls: {len(seen)}; devices seen: {sorted(devices)}")
    print(f"total losses: {[round(float(x), 4) for x in losses]}")
    ok = bool(seen) and all(v == expected for _, v in devices)
    ok = ok and all(np.isfinite(losses))
    print("PASSED" if ok else f"FAILED: a value-target tensor was not on {expected}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
