"""The size of every test: ray's `small` / `medium` / `large` (the `size` of a
`py_test` in ray's `rllib/BUILD.bazel`), read by the repository's `conftest.py`.

- `small`: starts no Ray and no other interpreter; well under a second a test.
- `medium`: starts Ray or a fresh interpreter and trains a few updates at
  most. Small and medium make the fast tier, the README's test command
  (`bash ci/test.sh`): every unit test, and an end-to-end test per feature,
  in both modes where a differential test guards the path.
- `large`: CI only (`.ci/run` adds `--tier large`): the remaining
  differential runs of whole jobs, clusters of several nodes, crash loops,
  checks repeated per module or per setting, and the release suite's quick
  mode.

A test file missing from `FILES` fails the collection: a new test file gets a
size here when it is written. `TESTS` sizes single tests (a test function,
or one parametrization of it) apart from their file.
"""

from typing import Dict

SMALL, MEDIUM, LARGE = "small", "medium", "large"

#: The tiers `ci/test.sh --tier` runs, by the sizes they hold.
TIERS: Dict[str, tuple] = {
    "fast": (SMALL, MEDIUM),
    "large": (LARGE,),
    "all": (SMALL, MEDIUM, LARGE),
}

FILES: Dict[str, str] = {
    "ci/patch_series/tests/test_bug_fixes.py": SMALL,
    "ci/patch_series/tests/test_conventions.py": SMALL,
    "ci/patch_series/tests/test_upstream_form.py": SMALL,
    "ci/tests/test_conventions.py": SMALL,
    "ci/tests/test_sizes.py": MEDIUM,
    "doc/source/rllib/doc_code/test_doc_code.py": MEDIUM,
    "doc/source/test_readme.py": MEDIUM,
    "release/benchmarks/tests/test_beyond_memory_benchmark_quick.py": LARGE,
    "release/benchmarks/tests/test_cql_iql_benchmark_quick.py": LARGE,
    "release/benchmarks/tests/test_ope_benchmark_quick.py": LARGE,
    "release/benchmarks/tests/test_runner_quick.py": LARGE,
    "rllib/_fork/tests/test_cluster_check.py": MEDIUM,
    "rllib/_fork/tests/test_differential.py": MEDIUM,
    "rllib/_fork/tests/test_fingerprints.py": MEDIUM,
    "rllib/_fork/tests/test_flatten_dict_matches_upstream.py": SMALL,
    "rllib/_fork/tests/test_import_without_torch.py": MEDIUM,
    "rllib/_fork/tests/test_layout.py": SMALL,
    "rllib/_fork/tests/test_overlay.py": MEDIUM,
    "rllib/_fork/tests/test_replaced_classes.py": SMALL,
    "rllib/_fork/tests/test_value_predictions_match_upstream.py": SMALL,
    "rllib/algorithms/cql/tests/test_cql_iql_from_episodes.py": MEDIUM,
    "rllib/algorithms/tests/test_offline_algorithm_restore.py": MEDIUM,
    "rllib/core/distribution/torch/tests/test_squashed_gaussian_deterministic.py": (
        SMALL
    ),
    "rllib/algorithms/cql/tests/test_cql_lagrangian_weight.py": SMALL,
    "rllib/algorithms/cql/tests/test_cql_learners_in_step.py": LARGE,
    "rllib/algorithms/cql/tests/test_cql_loss.py": SMALL,
    "rllib/algorithms/cql/tests/test_cql_loss_matches_upstream.py": SMALL,
    "rllib/algorithms/cql/tests/test_cql_n_step.py": SMALL,
    "rllib/algorithms/iql/tests/test_iql_config.py": SMALL,
    "rllib/algorithms/iql/tests/test_iql_loss.py": SMALL,
    "rllib/algorithms/iql/tests/test_iql_matches_upstream.py": SMALL,
    "rllib/algorithms/iql/tests/test_iql_train_pass_matches_upstream.py": SMALL,
    "rllib/algorithms/marwil/tests/test_marwil.py": MEDIUM,
    "rllib/algorithms/marwil/tests/test_marwil_checkpoints.py": LARGE,
    "rllib/algorithms/marwil/tests/test_marwil_loss.py": SMALL,
    "rllib/algorithms/marwil/tests/test_marwil_two_learners.py": MEDIUM,
    "rllib/algorithms/ppo/tests/test_ppo_checkpoints_across_modes.py": MEDIUM,
    "rllib/algorithms/ppo/tests/test_ppo_matches_upstream.py": MEDIUM,
    "rllib/algorithms/sac/tests/test_sac_catalog.py": SMALL,
    "rllib/algorithms/sac/tests/test_sac_catalog_matches_upstream.py": SMALL,
    "rllib/algorithms/sac/tests/test_sac_temperature_in_state.py": SMALL,
    "rllib/core/learner/tests/test_batch_conversion.py": SMALL,
    "rllib/core/learner/tests/test_in_memory_source.py": SMALL,
    "rllib/core/learner/tests/test_learner_batch_checks.py": SMALL,
    "rllib/core/learner/tests/test_offline_learners.py": MEDIUM,
    "rllib/core/learner/tests/test_optimizer_gradients_match_upstream.py": SMALL,
    "rllib/core/learner/tests/test_structured_observations.py": MEDIUM,
    "rllib/core/learner/tests/test_value_targets.py": SMALL,
    "rllib/core/learner/torch/tests/test_apply_gradients_matches_upstream.py": SMALL,
    "rllib/env/utils/tests/test_lookback_buffer_from_state.py": SMALL,
    "rllib/examples/offline_rl/tests/test_choose_checkpoint_by_ope.py": MEDIUM,
    "rllib/examples/offline_rl/tests/test_scripted_continuous_control.py": SMALL,
    "rllib/examples/offline_rl/tests/test_train_multi_agent_offline.py": MEDIUM,
    "rllib/examples/offline_rl/tests/test_train_on_external_episodes.py": MEDIUM,
    "rllib/examples/offline_rl/tests/test_train_with_dict_observations.py": MEDIUM,
    "rllib/offline/off_policy_estimation/tests/test_estimators.py": SMALL,
    "rllib/offline/tests/test_action_units.py": MEDIUM,
    "rllib/offline/tests/test_beyond_memory.py": MEDIUM,
    "rllib/offline/tests/test_cloud_input.py": MEDIUM,
    "rllib/offline/tests/test_column_data_matches_upstream.py": LARGE,
    "rllib/offline/tests/test_columnar_buffer.py": SMALL,
    "rllib/offline/tests/test_sampled_value_target_inputs.py": SMALL,
    "rllib/offline/tests/test_shard_sampler.py": SMALL,
    "rllib/offline/tests/test_crash_safety.py": MEDIUM,
    "rllib/offline/tests/test_data_tools_without_overlay.py": MEDIUM,
    "rllib/offline/tests/test_episode_shard_sampler.py": MEDIUM,
    "rllib/offline/tests/test_episode_writer.py": SMALL,
    "rllib/offline/tests/test_episodes_cli.py": SMALL,
    "rllib/offline/tests/test_memory_budget.py": MEDIUM,
    "rllib/offline/tests/test_minari_io.py": SMALL,
    "rllib/offline/tests/test_multi_agent_episodes.py": SMALL,
    "rllib/offline/tests/test_multi_agent_training.py": MEDIUM,
    "rllib/offline/tests/test_multi_node.py": LARGE,
    "rllib/offline/tests/test_offline_data_from_episodes.py": MEDIUM,
    "rllib/offline/tests/test_offline_data_sample_shards.py": MEDIUM,
    "rllib/offline/tests/test_offline_settings.py": SMALL,
    "rllib/offline/tests/test_prelearner_n_step_gamma.py": SMALL,
    "rllib/offline/tests/test_quiet_output.py": MEDIUM,
    "rllib/offline/tests/test_episode_recorder.py": MEDIUM,
    "rllib/offline/tests/test_offline_multi_agent_env_runner.py": MEDIUM,
    "rllib/offline/tests/test_prelearner_decodes_episodes.py": SMALL,
    "rllib/offline/tests/test_ope_command.py": MEDIUM,
    "rllib/offline/tests/test_policy_evaluation_estimates.py": MEDIUM,
    "rllib/offline/tests/test_prelearner_columnar_path.py": SMALL,
    "rllib/offline/tests/test_recorder_keeps_every_row.py": MEDIUM,
    "rllib/offline/tests/test_recorder_write_failures.py": MEDIUM,
    "rllib/offline/tests/test_recording_matches_upstream.py": MEDIUM,
    "rllib/offline/tests/test_train_on_episodes.py": MEDIUM,
    "rllib/offline/tests/test_train_streaming.py": MEDIUM,
    "rllib/offline/tests/test_without_ray_init.py": LARGE,
    "rllib/utils/postprocessing/tests/test_bootstrapped_returns.py": SMALL,
    "rllib/utils/postprocessing/tests/test_gae_matches_step_loop.py": SMALL,
    "rllib/utils/tests/test_checkpoint_local_paths.py": MEDIUM,
    "rllib/utils/tests/test_flatten_dict.py": SMALL,
    "rllib/utils/tests/test_torch_utils_matches_upstream.py": SMALL,
}

#: Tests sized apart from their file: `path::test` or `path::test[params]`
#: (the more specific entry wins). Each large one names what covers its path
#: in the fast tier.
TESTS: Dict[str, str] = {
    # One fresh interpreter per replaced module (34). The fast tier keeps the
    # module whose import order once broke the overlay.
    "rllib/_fork/tests/test_overlay.py::"
    "test_replaced_module_imports_first_in_a_fresh_process": LARGE,
    "rllib/_fork/tests/test_overlay.py::"
    "test_replaced_module_imports_first_in_a_fresh_process"
    "[ray.rllib.offline.offline_evaluation_runner]": MEDIUM,
    # Streaming CQL/IQL from hand-rolled payloads: the fast tier streams BC
    # and MARWIL from them (test_train_streaming, test_offline_data_from_episodes) and
    # trains CQL/IQL in memory.
    "rllib/algorithms/cql/tests/test_cql_iql_from_episodes.py::"
    "test_trains_streaming_from_hand_rolled_payloads": LARGE,
    # Two Learners per algorithm: the fast tier keeps 0 and 1.
    "rllib/algorithms/cql/tests/test_cql_iql_from_episodes.py::"
    "test_trains_in_memory_with_0_1_2_learners[2-cql]": LARGE,
    "rllib/algorithms/cql/tests/test_cql_iql_from_episodes.py::"
    "test_trains_in_memory_with_0_1_2_learners[2-iql]": LARGE,
    # Multi-agent CQL/IQL on two Learners: the fast tier trains multi-agent BC
    # and MARWIL on two Learners (test_multi_agent_training) and CQL/IQL on
    # 0 and 1.
    "rllib/algorithms/cql/tests/test_cql_iql_from_episodes.py::"
    "test_multi_agent_trains_one_module_per_policy_with_two_learners": LARGE,
    # Beyond memory with two Learners: the fast tier runs 0 and 1.
    "rllib/offline/tests/test_beyond_memory.py::"
    "test_bc_trains_beyond_memory_with_any_number_of_learners[2]": LARGE,
    # Dict/Tuple/nested observations with a remote Learner: the fast tier
    # trains each space locally.
    "rllib/core/learner/tests/test_structured_observations.py::"
    "test_train_structured_obs[dict-BC-1]": LARGE,
    "rllib/core/learner/tests/test_structured_observations.py::"
    "test_train_structured_obs[dict-MARWIL-1]": LARGE,
    "rllib/core/learner/tests/test_structured_observations.py::"
    "test_train_structured_obs[tuple-BC-1]": LARGE,
    "rllib/core/learner/tests/test_structured_observations.py::"
    "test_train_structured_obs[tuple-MARWIL-1]": LARGE,
    "rllib/core/learner/tests/test_structured_observations.py::"
    "test_train_structured_obs[nested-BC-1]": LARGE,
    "rllib/core/learner/tests/test_structured_observations.py::"
    "test_train_structured_obs[nested-MARWIL-1]": LARGE,
    # Offline evaluation of MARWIL inside `train()`: the fast tier runs BC's.
    "rllib/core/learner/tests/test_offline_learners.py::"
    "test_offline_evaluation_of_marwil": LARGE,
    # The guide's examples beyond its training and error pages.
    "doc/source/rllib/doc_code/test_doc_code.py::"
    "test_example_runs[external_episodes_nested_obs.py]": LARGE,
    "doc/source/rllib/doc_code/test_doc_code.py::"
    "test_example_runs[external_episodes_multi_agent.py]": LARGE,
    "doc/source/rllib/doc_code/test_doc_code.py::"
    "test_example_runs[external_episodes_env_runner.py]": LARGE,
    # The main job's printed snippets, each in a fresh process: the fast tier
    # runs the main job and restores its checkpoint.
    "rllib/examples/offline_rl/tests/test_train_on_external_episodes.py::"
    "test_printed_snippets_run_as_printed_in_a_fresh_process": LARGE,
    # Multi-agent streaming to a remote Learner: the fast tier streams
    # multi-agent data locally and trains it in memory with remote Learners.
    "rllib/offline/tests/test_multi_agent_training.py::"
    "test_bc_streams_to_a_remote_learner": LARGE,
    "rllib/offline/tests/test_multi_agent_training.py::"
    "test_marwil_streams_each_agents_own_rows_and_targets": LARGE,
    "rllib/offline/tests/test_multi_agent_training.py::"
    "test_two_learners_do_not_stream_multi_agent_data": LARGE,
    # A memory budget of 0 against the in-memory rows: the fast tier streams
    # over the budget (test_over_the_memory_budget_rows_carry_...).
    "rllib/offline/tests/test_offline_data_from_episodes.py::"
    "test_a_budget_of_0_streams_with_the_same_rows": LARGE,
    # FQE and DR per module of a multi-agent run; per-step IS (pdis) beside IS.
    "rllib/offline/tests/test_policy_evaluation_estimates.py::"
    "test_fqe_and_doubly_robust_per_module_of_a_multi_agent_run": LARGE,
    "rllib/offline/tests/test_policy_evaluation_estimates.py::"
    "test_estimates_use_the_logged_actions[pdis]": LARGE,
    # The writer killed at 20 points: the fast tier kills the recorder once
    # (test_recorder_killed_loses_only_uncommitted_episodes).
    "rllib/offline/tests/test_crash_safety.py::"
    "test_writer_killed_at_20_random_points": LARGE,
    # The data tools under another ray version: the fast tier runs them with
    # the overlay off by RLLIB_FORK_DISABLE.
    "rllib/offline/tests/test_data_tools_without_overlay.py::"
    "test_write_read_validate_convert_with_the_fork_off[unsupported_ray]": LARGE,
}
