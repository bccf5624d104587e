"""Facts about ray's repository that its installed package does not carry
(the wheel has no tests), for :mod:`ci.patch_series.conventions`.

Read from ray-project/ray's tree as indexed on 2026-12-07 (every crawled
commit, so a file ray deleted may still be listed; that only makes the
check stricter).
"""

#: ``tests/__init__.py`` files in the folders the series adds tests to. The
#: index shows none (it leaves empty files out, so this cannot prove there is
#: none): the series adds none, and a patch that adds one fails the check.
TESTS_INIT_FILES = frozenset()

#: Test files ray has in the folders the series adds tests to: a new test
#: file by one of these names would replace ray's.
TEST_FILES = frozenset(
    f"rllib/{folder}/{name}.py"
    for folder, names in {
        "algorithms/cql/tests": (
            "test_cql",
            "test_cql_lagrangian",
            "test_cql_old_api_stack",
        ),
        "algorithms/iql/tests": ("test_iql", "test_iql_rl_module"),
        "algorithms/marwil/tests": (
            "test_bc",
            "test_marwil",
            "test_marwil_old_api_stack",
            "test_marwil_rl_module",
        ),
        "algorithms/sac/tests": (
            "test_rnnsac",
            "test_sac",
            "test_sac_with_new_stack",
        ),
        "algorithms/tests": (
            "test_aggregator_actor",
            "test_aggregator_placement_groups",
            "test_algorithm",
            "test_algorithm_checkpoint_restore",
            "test_algorithm_checkpoint_steps",
            "test_algorithm_checkpointing",
            "test_algorithm_config",
            "test_algorithm_export_checkpoint",
            "test_algorithm_rl_module_restore",
            "test_algorithm_save_load_checkpoint_connectors",
            "test_algorithm_save_load_checkpoint_learner",
            "test_callbacks",
            "test_callbacks_old_api_stack",
            "test_callbacks_old_stack",
            "test_callbacks_on_algorithm",
            "test_callbacks_on_env_runner",
            "test_compute_single_action_filter",
            "test_custom_resources_for_main_process",
            "test_custom_resources_per_learner",
            "test_dependency_torch",
            "test_env_runner_failures",
            "test_env_runner_state_server",
            "test_eval_workers_all_unhealthy",
            "test_get_learner_bundles",
            "test_get_main_process_bundle",
            "test_memory_leaks",
            "test_nn_framework_import_errors",
            "test_node_failures",
            "test_placement_groups",
            "test_ray_client",
            "test_registry",
            "test_replay_buffer_type_resolution",
            "test_telemetry",
            "test_worker_failures",
        ),
        "core/distribution/torch/tests": ("test_torch_squashed_gaussian",),
        "core/learner/tests": (
            "test_differentiable_learner",
            "test_learner",
            "test_learner_group",
            "test_learner_group_config",
            "test_trainer_runner",
            "test_trainer_runner_config",
        ),
        "env/tests": ("test_infinite_lookback_buffer",),
        "offline/tests": (
            "test_dataset_reader",
            "test_dataset_writer",
            "test_feature_importance",
            "test_json_reader",
            "test_offline_data",
            "test_offline_e2e",
            "test_offline_env_runner",
            "test_offline_evaluation_runner",
            "test_offline_evaluation_runner_group",
            "test_offline_policy_evaluation_runner",
            "test_offline_prelearner",
            "test_offline_rl_stateful",
            "test_worker_set_input_reader",
        ),
        "utils/postprocessing/tests": ("test_value_predictions",),
        "utils/tests": (
            "test_actor_manager",
            "test_check_env",
            "test_check_multi_agent",
            "test_checkpoint_utils",
            "test_checkpointable",
            "test_errors",
            "test_filter",
            "test_framework_agnostic_components",
            "test_framework_independent_components",
            "test_from_checkpoint_exception_handling",
            "test_io",
            "test_minibatch_utils",
            "test_nested_dict",
            "test_schedules",
            "test_serialization",
            "test_taskpool",
            "test_tf_utils",
            "test_torch_utils",
            "test_utils",
        ),
    }.items()
    for name in names
)
