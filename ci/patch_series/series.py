"""The fork as a patch series: one topic per patch, in the order they apply.

Each topic names the fork files it adds or changes (paths in this repository,
which are ray's paths too), the tests that come with it, and the ray issues
it addresses. A file belongs to exactly one topic. Tests that compare the
fork with the upstream code it replaces (they need the overlay: `rllib/_fork`,
`*_matches_upstream`, `*_across_modes`, ...) stay in the fork and are listed
in `FORK_ONLY_TESTS`. The fork's `tests/__init__.py` files stay in the fork:
the series adds none (pytest and Bazel find ray's tests without them).
"""

from dataclasses import dataclass, field
from typing import Dict, List, Sequence, Tuple


@dataclass(frozen=True)
class Topic:
    slug: str
    subject: str
    description: str
    files: Sequence[str]
    tests: Sequence[str] = ()
    #: Per file: (old, new) text substitutions that drop overlay-only code.
    substitutions: Dict[str, Sequence[Tuple[str, str]]] = field(default_factory=dict)
    #: Why the patch is over about 800 changed lines, where it is.
    size_reason: str = ""
    #: A bug fix names its regression tests (pytest node ids): each fails on
    #: ray's sources and passes with this patch alone (`bug_fixes.py`).
    regression_tests: Sequence[str] = ()
    #: The topics a bug fix stacks on (their patches apply first, in series
    #: order); the fix's pull request says so.
    stacked_on: Sequence[str] = ()
    #: Per ray file: (old, new) edits of its text as the series left it, each
    #: ``old`` found exactly once. A minimal fix in ray's own code, where the
    #: fork's version of the function also carries later changes (a later
    #: topic splices that version over it); the regression tests check both.
    upstream_edits: Dict[str, Sequence[Tuple[str, str]]] = field(default_factory=dict)


_NO_CLUSTER_CHECK_PRELEARNER = (
    ("from rllib._fork.cluster_check import ForkStamp, check_fork\n", ""),
    (
        "        fork_stamp: The `fork_stamp()` of the process that set up the data\n"
        "            pipeline; a Ray Data worker without the same fork refuses to\n"
        "            run (`rllib._fork.cluster_check`).\n",
        "",
    ),
    ("        fork_stamp: Optional[ForkStamp] = None,\n", ""),
    (
        "        if fork_stamp is not None:\n"
        '            check_fork(fork_stamp, what="the OfflinePreLearner of a Ray '
        'Data worker")\n',
        "",
    ),
)

CQL_LEARNER = "rllib/algorithms/cql/torch/cql_torch_learner.py"
CQL_MODULE = "rllib/algorithms/cql/torch/default_cql_torch_rl_module.py"
RECORDER = "rllib/offline/offline_env_runner.py"
OFFLINE_DATA = "rllib/offline/offline_data.py"
PRELEARNER = "rllib/offline/offline_prelearner.py"

SERIES: List[Topic] = [
    Topic(
        slug="test-fixtures",
        subject="[RLlib] Test fixtures: one small local Ray cluster per session",
        description=(
            "The offline tests below share one local Ray cluster with four logical\n"
            "CPUs, so a remote Learner plus Ray Data's read tasks and map actors\n"
            "cannot wait on each other for CPUs on a 2-core CI machine. A second\n"
            "fixture runs a test with one torch thread."
        ),
        files=["rllib/conftest.py"],
    ),
    Topic(
        slug="lookback-buffer-tuple-state",
        subject="[RLlib] InfiniteLookbackBuffer.from_state: restore Tuple observations",
        description=(
            "A buffer restored with `from_state` holds lists where its space has a\n"
            "Tuple, so a top-level Tuple observation of an episode read from disk\n"
            "arrives stacked (issue #51747, item 3). `from_state` now turns those\n"
            "lists back into tuples, recursively, following the buffer's space.\n\n"
            "Behaviour change: none for Box/Discrete/Dict spaces."
        ),
        files=["rllib/env/utils/infinite_lookback_buffer.py"],
        tests=["rllib/env/utils/tests/test_lookback_buffer_from_state.py"],
        regression_tests=[
            "rllib/env/utils/tests/test_lookback_buffer_from_state.py::"
            f"test_episode_observations_keep_their_structure[{case}]"
            for case in ("tuple-list", "tuple-finalized", "nested-list")
        ],
    ),
    Topic(
        slug="nested-flatten-dict",
        subject="[RLlib] flatten_dict/unflatten_dict: keep tuples in nested batches",
        description=(
            "`flatten_dict` followed by `unflatten_dict` turned tuples of a nested\n"
            "batch into dicts keyed '0', '1', ..., so Tuple observations did not\n"
            "survive the round trip through Ray Data columns (#51747, item 3).\n"
            "Tuples now flatten to '#<index>' keys and come back as tuples.\n\n"
            "Behaviour change: flattened keys of tuple members are '#0', '#1', ..."
        ),
        files=["rllib/utils/__init__.py"],
        tests=[
            "rllib/utils/tests/test_flatten_dict.py",
        ],
        regression_tests=[
            f"rllib/utils/tests/test_flatten_dict.py::{name}"
            for name in (
                "test_tuple_round_trip",
                "test_nested_tuple_inside_a_dict_round_trip",
                "test_dict_inside_a_tuple_round_trip",
            )
        ],
    ),
    Topic(
        slug="learner-nested-batches",
        subject="[RLlib] Learners: convert every train batch, checking each leaf",
        description=(
            "`DifferentiableLearner._make_batch_if_necessary` decides whether a\n"
            "batch needs converting from `batch['obs']` alone and calls `.device`\n"
            "on it, which fails for Dict and Tuple observations (#51747, item 3).\n"
            "`Learner._make_batch_if_necessary` checks every leaf of a\n"
            "`MultiAgentBatch` passed in as is, but leaves a single-agent\n"
            "`SampleBatch` and the Learner connector's output unconverted\n"
            "(`update(batch=SampleBatch(<numpy>))` fails in the RLModule). Both\n"
            "now convert whatever batch they build, checking every leaf for numpy\n"
            "arrays and tensors on another device; the DifferentiableLearner uses\n"
            "the Learner's method."
        ),
        files=[
            "rllib/core/learner/batch_conversion.py",
            "rllib/core/learner/learner.py::Learner._make_batch_if_necessary",
            "rllib/core/learner/differentiable_learner.py",
        ],
        tests=[
            "rllib/utils/tests/devices.py",
            "rllib/core/learner/tests/test_batch_conversion.py",
            "rllib/core/learner/tests/test_learner_batch_checks.py",
        ],
        regression_tests=[
            f"rllib/core/learner/tests/test_learner_batch_checks.py::{name}"
            for name in (
                "test_differentiable_learner_builds_batches_as_the_learner_does",
                "test_single_agent_numpy_sample_batch_trains",
                "test_numpy_tuple_obs_is_converted_with_structure[sample_batch-cpu]",
            )
        ],
    ),
    Topic(
        slug="offline-algorithm-restore",
        subject="[RLlib] Algorithm: restore offline-only algorithms from checkpoints",
        description=(
            "`Algorithm.from_checkpoint` fails for BC/MARWIL/CQL without\n"
            "EnvRunners (no env runner group to restore into), and `get_module`\n"
            "returns None for them. Without EnvRunners the Algorithm now restores\n"
            "through `Checkpointable` and syncs the evaluation runners' weights;\n"
            "`get_module` answers from the local Learner."
        ),
        files=["rllib/algorithms/algorithm.py"],
        tests=["rllib/algorithms/tests/test_offline_algorithm_restore.py"],
        regression_tests=[
            "rllib/algorithms/tests/test_offline_algorithm_restore.py::"
            "test_get_module_returns_the_learners_module",
            "rllib/algorithms/tests/test_offline_algorithm_restore.py::"
            "test_from_checkpoint_restores_the_trained_weights",
        ],
    ),
    Topic(
        slug="offline-data-sample-shards",
        subject=(
            "[RLlib] OfflineData.sample: say how to sample several shards (#55419)"
        ),
        description=(
            "`OfflineData.sample(num_samples, num_shards=2)` with the default\n"
            "`return_iterator=False` split the data into one stream per shard and\n"
            "then called `next()` on the list of streams: `TypeError: 'list'\n"
            "object is not an iterator` (#55419). Several shards only make sense\n"
            "as one iterator per Learner (what the algorithms' training steps\n"
            "ask for), so the call now raises a `ValueError` that says to pass\n"
            "`return_iterator=True`, or `num_shards=1` for a single batch, before\n"
            "anything is read or split.\n\n"
            "Behaviour change: a clear error instead of a TypeError."
        ),
        files=[],
        upstream_edits={
            OFFLINE_DATA: [
                (
                    "        module_state: Dict[str, Any] = None,\n    ):\n",
                    "        module_state: Dict[str, Any] = None,\n"
                    "    ):\n"
                    "        if num_shards > 1 and not return_iterator:\n"
                    "            raise ValueError(\n"
                    '                f"`OfflineData.sample(num_shards={num_shards})`'
                    ' splits the data "\n'
                    '                "into one stream per Learner and returns their'
                    ' iterators: pass "\n'
                    '                "`return_iterator=True`, or `num_shards=1` for'
                    ' a single batch."\n'
                    "            )\n",
                ),
            ]
        },
        tests=["rllib/offline/tests/test_offline_data_sample_shards.py"],
        regression_tests=[
            "rllib/offline/tests/test_offline_data_sample_shards.py::"
            "test_one_batch_from_several_shards_asks_for_iterators"
        ],
    ),
    Topic(
        slug="prelearner-n-step-gamma",
        subject="[RLlib] OfflinePreLearner: discount n-step rewards with `gamma`",
        description=(
            "With `n_step > 1` (CQL and SAC configs) the OfflinePreLearner sampled\n"
            "n-step transitions from its episode buffer without passing the\n"
            "algorithm's `gamma`, so the rows' rewards were discounted with the\n"
            "buffer's default of 0.99 whatever `config.gamma` said. The buffer\n"
            "gets `gamma=self.config.gamma`.\n\n"
            "Behaviour change: n-step rewards for `gamma != 0.99`."
        ),
        files=[],
        upstream_edits={
            PRELEARNER: [
                (
                    '            n_step=self.config.get("n_step", 1),\n',
                    '            n_step=self.config.get("n_step", 1),\n'
                    "            gamma=self.config.gamma,\n",
                ),
            ]
        },
        tests=["rllib/offline/tests/test_prelearner_n_step_gamma.py"],
        regression_tests=[
            "rllib/offline/tests/test_prelearner_n_step_gamma.py::"
            f"test_two_step_rewards_are_discounted_with_the_configs_gamma[{gamma}]"
            for gamma in ("0.5", "0.9")
        ],
    ),
    Topic(
        slug="checkpoint-local-paths",
        subject="[RLlib] Checkpointable: save and load at relative and ~ paths",
        description=(
            "Without a `filesystem`, `save_to_path`, `restore_from_path`,\n"
            "`from_checkpoint` and `get_checkpoint_info` pass the path to\n"
            "`pyarrow.fs.FileSystem.from_uri`, which rejects relative paths:\n"
            "`algo.save_to_path('ckpt')` and `RLModule.from_checkpoint('./ckpt')`\n"
            "fail with `ArrowInvalid: URI has empty scheme`. A path without a\n"
            "scheme is now local: `~` is expanded and a relative path is taken\n"
            "from the current directory.\n\n"
            "Behaviour change: none for URIs, absolute paths, or calls that pass a\n"
            "`filesystem`."
        ),
        files=["rllib/utils/checkpoints.py"],
        tests=["rllib/utils/tests/test_checkpoint_local_paths.py"],
        regression_tests=[
            "rllib/utils/tests/test_checkpoint_local_paths.py::"
            "test_algorithm_round_trip_at_a_relative_path",
            *(
                "rllib/utils/tests/test_checkpoint_local_paths.py::"
                f"test_module_saves_and_loads_at_a_local_path_as_typed[{path}]"
                for path in ("ckpt", "./ckpt")
            ),
        ],
    ),
    Topic(
        slug="squashed-gaussian-deterministic",
        subject="[RLlib] TorchSquashedGaussian.to_deterministic: the squashed mean",
        description=(
            "`to_deterministic()` returned the Gaussian's mean before the tanh\n"
            "squash, and EnvRunners then clipped it to the box: SAC, CQL and IQL\n"
            "policies acting with `explore=False` sent a mean of 1.5 as 1.0\n"
            "instead of tanh(1.5) = 0.91, and for a box other than [-1, 1] they\n"
            "acted in the wrong units. It now returns the mean squashed and\n"
            "scaled to [low, high], the action the samples centre on. (#65036\n"
            "fixed this distribution's log-probability of saturated samples; this\n"
            "is a separate method.)\n\n"
            "Behaviour change: deterministic actions of squashed-Gaussian\n"
            "policies. Sampling and log-probabilities are unchanged."
        ),
        files=["rllib/core/distribution/torch/torch_distribution.py"],
        tests=[
            "rllib/core/distribution/torch/tests/"
            "test_squashed_gaussian_deterministic.py"
        ],
        regression_tests=[
            "rllib/core/distribution/torch/tests/"
            "test_squashed_gaussian_deterministic.py::"
            "test_deterministic_action_is_the_squashed_mean"
        ],
    ),
    Topic(
        slug="episode-payload",
        subject="[RLlib] Episode files: one episode per row, spaces in the metadata",
        description=(
            "The core of a documented on-disk format for episodes (#51747,\n"
            "item 1): each row holds msgpack + msgpack_numpy of one episode's\n"
            "state (the `item` column `input_read_episodes=True` reads),\n"
            "optionally compressed behind a marker byte msgpack never emits;\n"
            "observation and action spaces go into the parquet metadata as JSON.\n"
            "A `MultiAgentEpisode` row holds each agent's `SingleAgentEpisode`\n"
            "state (its payload id: `MultiAgentEpisode.agent_states`)."
        ),
        files=[
            "rllib/offline/episode_files/__init__.py",
            "rllib/offline/episode_files/payload.py",
            "rllib/offline/episode_files/spaces.py",
            "rllib/offline/episode_files/multi_agent_state.py",
        ],
    ),
    Topic(
        slug="episode-validation-and-filesystems",
        subject="[RLlib] Episode files: validation, filesystems and atomic commits",
        description=(
            "Checks that name the episode, step and field of a value outside its\n"
            "space before anything is written; one resolver for local paths,\n"
            "URIs, pyarrow and fsspec filesystems and RLlib's 's3'/'gcs'/'abs'\n"
            "settings; a file sink that writes under a temporary name and commits\n"
            "by rename, so readers never see a partial file."
        ),
        files=[
            "rllib/offline/episode_files/validation.py",
            "rllib/offline/episode_files/filesystem.py",
            "rllib/offline/episode_files/file_sink.py",
        ],
    ),
    Topic(
        slug="episode-writer-reader",
        subject="[RLlib] EpisodeWriter, write_episodes and read_episodes",
        description=(
            "A public API to save externally collected episodes (#51747, item 1):\n"
            "`EpisodeWriter` streams finished `SingleAgentEpisode`s (or\n"
            "`MultiAgentEpisode`s) into parquet files with bounded rows per file and\n"
            "atomic commits; `read_episodes` loads them back. The files train with\n"
            "`offline_data(input_read_episodes=True)` unchanged. The files record\n"
            "the units of their actions (`action_units`: the environment's, the\n"
            "default for data users collect, or normalized)."
        ),
        files=[
            "rllib/examples/offline_rl/scripted_cartpole.py",
            "rllib/offline/episode_files/action_units.py",
            "rllib/offline/episode_files/writer.py",
            "rllib/offline/episode_files/reader.py",
        ],
        tests=[
            "rllib/offline/tests/episode_factory.py",
            "rllib/offline/tests/test_episode_writer.py",
            "rllib/offline/tests/test_multi_agent_episodes.py",
        ],
        # The episode tools' command line stays in the fork (FORK_ONLY_TOPICS).
        substitutions={
            "rllib/offline/episode_files/reader.py": (
                (
                    '"file; `python -m ray.rllib.offline.episodes validate DIR` '
                    'lists "\n            "every such file."',
                    '"file."',
                ),
            ),
        },
        size_reason=(
            "The writer and the reader are one API and their tests round-trip\n"
            "both (about 880 lines of code; the rest are tests and the scripted\n"
            "CartPole recorder the tests share)."
        ),
    ),
    Topic(
        slug="recorder-write-failures",
        subject="[RLlib] Recorder: raise when writing the samples fails",
        description=(
            "`OfflineSingleAgentEnvRunner` (`config.offline_data(output=...)`)\n"
            "logged any exception of its writes and went on sampling: a full\n"
            "disk, a missing permission or a bad output path left a dataset with\n"
            "holes and a training run that did not stop. Both writes, in\n"
            "`sample()` and at `stop()`, now raise an `OSError` that names the\n"
            "output path, chained to the cause (#51747, item 1).\n\n"
            "Behaviour change: a failed write raises instead of logging."
        ),
        files=[],
        upstream_edits={
            RECORDER: [
                (
                    '                logger.info(f"Wrote samples to storage at'
                    ' {path}.")\n'
                    "            except Exception as e:\n"
                    "                logger.error(e)\n",
                    '                logger.info(f"Wrote samples to storage at'
                    ' {path}.")\n'
                    "            except Exception as e:\n"
                    "                raise OSError(\n"
                    '                    f"The recorder could not write its samples'
                    ' to {path}: {e}"\n'
                    "                ) from e\n",
                ),
                (
                    '                    f"`max_rows_per_file`, if defined."\n'
                    "                )\n"
                    "            except Exception as e:\n"
                    "                logger.error(e)\n",
                    '                    f"`max_rows_per_file`, if defined."\n'
                    "                )\n"
                    "            except Exception as e:\n"
                    "                raise OSError(\n"
                    '                    "The recorder could not write its final'
                    ' samples to "\n'
                    '                    f"{path}: {e}"\n'
                    "                ) from e\n",
                ),
            ]
        },
        tests=["rllib/offline/tests/test_recorder_write_failures.py"],
        regression_tests=[
            "rllib/offline/tests/test_recorder_write_failures.py::"
            f"test_a_failed_write_raises[{flag}]"
            for flag in ("True", "False")
        ],
    ),
    Topic(
        slug="recorder-every-chunk",
        subject="[RLlib] Recorder: write every full file of rows of a sample call",
        description=(
            "With `output_max_rows_per_file`, `sample()` cut its buffer into\n"
            "full chunks in a loop but wrote only the dataset of the last one:\n"
            "a call that filled four files wrote one and dropped three (#51747,\n"
            "item 1). Each full chunk is now written, to the call's run\n"
            "directory as before.\n\n"
            "Behaviour change: no rows are dropped."
        ),
        files=[],
        upstream_edits={
            RECORDER: [
                (
                    "                while len(self._samples) >="
                    " self.output_max_rows_per_file:\n",
                    "                datasets = []\n"
                    "                while len(self._samples) >="
                    " self.output_max_rows_per_file:\n",
                ),
                (
                    "                    samples_ds ="
                    " ray.data.from_items(samples_to_write)\n"
                    "            # Otherwise, write the complete data.\n"
                    "            else:\n"
                    "                samples_ds = ray.data.from_items(self._samples)\n"
                    "            try:\n"
                    "                # Setup the path for writing data. Each run will"
                    " be written to\n"
                    "                # its own file. A run is a writing event. The"
                    " path will look\n"
                    "                # like. 'base_path/env-name/00000<WorkerID>"
                    "-00000<RunID>'.\n"
                    "                path = (\n"
                    "                    Path(self.output_path)\n"
                    "                    .joinpath(self.subdir_path)\n"
                    "                    .joinpath(self.worker_path +"
                    ' f"-{self._sample_counter}".zfill(6))\n'
                    "                )\n"
                    "                getattr(samples_ds, self.output_write_method)(\n"
                    "                    path.as_posix(),"
                    " **self.output_write_method_kwargs\n"
                    "                )\n"
                    '                logger.info(f"Wrote samples to storage at'
                    ' {path}.")\n'
                    "            except Exception as e:\n"
                    "                raise OSError(\n"
                    '                    f"The recorder could not write its samples'
                    ' to {path}: {e}"\n'
                    "                ) from e\n",
                    "                    datasets.append("
                    "ray.data.from_items(samples_to_write))\n"
                    "            # Otherwise, write the complete data.\n"
                    "            else:\n"
                    "                datasets = [ray.data.from_items(self._samples)]\n"
                    "            # All of a call's files go into its run directory:\n"
                    "            # 'base_path/env-name/00000<WorkerID>-00000<RunID>'.\n"
                    "            path = (\n"
                    "                Path(self.output_path)\n"
                    "                .joinpath(self.subdir_path)\n"
                    "                .joinpath(self.worker_path +"
                    ' f"-{self._sample_counter}".zfill(6))\n'
                    "            )\n"
                    "            for samples_ds in datasets:\n"
                    "                try:\n"
                    "                    getattr(samples_ds,"
                    " self.output_write_method)(\n"
                    "                        path.as_posix(),"
                    " **self.output_write_method_kwargs\n"
                    "                    )\n"
                    "                except Exception as e:\n"
                    "                    raise OSError(\n"
                    '                        f"The recorder could not write its'
                    ' samples to {path}: {e}"\n'
                    "                    ) from e\n"
                    '            logger.info(f"Wrote samples to storage at'
                    ' {path}.")\n',
                ),
            ]
        },
        tests=["rllib/offline/tests/test_recorder_keeps_every_row.py"],
        regression_tests=[
            "rllib/offline/tests/test_recorder_keeps_every_row.py::"
            "test_every_full_chunk_of_rows_is_written"
        ],
        stacked_on=["recorder-write-failures"],
    ),
    Topic(
        slug="lossless-recorder",
        subject="[RLlib] Recorder: write every episode, raise on write failures",
        description=(
            "`output_write_episodes=True` drops episodes and logs write errors\n"
            "instead of raising (#51747, item 1), and rewrites its buffer at every\n"
            "sample. The recorder now writes each finished episode once through\n"
            "`EpisodeWriter`, flushes at stop, and raises on a failed write.\n\n"
            "Behaviour change: a failed write raises instead of logging."
        ),
        files=[
            "rllib/offline/episode_files/recorder.py",
            "rllib/offline/offline_env_runner.py",
        ],
        tests=["rllib/offline/tests/test_episode_recorder.py"],
        size_reason=(
            "620 lines of code for one feature (the recorder and the runner that\n"
            "uses it); the rest is its test."
        ),
    ),
    Topic(
        slug="episode-writer-crash-safety",
        subject="[RLlib] Tests: a killed writer leaves only committed files",
        description=(
            "A process killed while writing episodes leaves every committed file\n"
            "readable and no partial file a reader would pick up."
        ),
        files=[],
        tests=[
            "rllib/offline/tests/crash_child.py",
            "rllib/offline/tests/test_crash_safety.py",
        ],
    ),
    Topic(
        slug="value-target-inputs",
        subject="[RLlib] Value targets from inputs each training row carries",
        description=(
            "Each training row can carry the inputs of its own value target: the\n"
            "discounted recorded rewards to a bootstrap step, the observation\n"
            "there and its discount. `add_value_targets` computes the targets\n"
            "from them with a module's value function, on the module's device,\n"
            "in whatever order Ray Data delivers the rows (#51747, item 2)."
        ),
        files=[
            "rllib/utils/postprocessing/bootstrapped_returns.py",
            "rllib/core/learner/value_targets.py",
        ],
        tests=[
            "rllib/utils/postprocessing/tests/test_bootstrapped_returns.py",
            "rllib/core/learner/tests/test_value_targets.py",
        ],
    ),
    Topic(
        slug="marwil-live-value-targets",
        subject="[RLlib] MARWIL: value targets from the Learner's live weights",
        description=(
            "Upstream computes MARWIL's value targets in the OfflinePreLearner, on\n"
            "CPU in Ray Data workers, with a module copy that is never updated, so\n"
            "the targets come from the initial network (#51747, item 2). The\n"
            "MARWIL Learner now computes them with its live module from the\n"
            "inputs each row carries, and divides the value loss by a running\n"
            "scale of the targets. The advantage normalizer moves once per update\n"
            "at the configured rate from the configured start;\n"
            "`moving_average_sqd_adv_norm_start=0` starts it from the first\n"
            "batch. Both statistics are all-reduced across Learners and kept in\n"
            "the Learner's state. The weights' exponent is clipped at 20.\n\n"
            "Behaviour change: MARWIL's value targets come from the live network;\n"
            "the config's normalizer defaults (start 100, rate 1e-8) are unchanged."
        ),
        files=[
            "rllib/algorithms/marwil/torch/advantage_statistics.py",
            "rllib/algorithms/marwil/torch/marwil_torch_learner.py",
        ],
        tests=["rllib/algorithms/marwil/tests/test_marwil_loss.py"],
    ),
    Topic(
        slug="offline-evaluation-batches",
        subject="[RLlib] Offline evaluation runner: nested minibatches on the device",
        description=(
            "The offline evaluation runner checks only `batch['obs']` before the\n"
            "RLModule sees a minibatch, so Dict and Tuple observations reach it\n"
            "as numpy arrays. Every minibatch now passes the same tree-aware\n"
            "check as the Learner's train batches, and rows that carry\n"
            "value-target inputs get their targets from the runner's module."
        ),
        files=["rllib/offline/offline_evaluation_runner.py"],
    ),
    Topic(
        slug="episode-columns",
        subject="[RLlib] Offline data: episodes as flat per-step columns",
        description=(
            "Decodes an episode row straight into per-step columns (no episode\n"
            "objects) and keeps them in a columnar episode buffer that samples\n"
            "transitions and n-step returns at array speed. N-step rewards are\n"
            "discounted with the configured `gamma`."
        ),
        files=[
            "rllib/offline/in_memory/__init__.py",
            "rllib/offline/in_memory/columns.py",
            "rllib/offline/in_memory/columnar_buffer.py",
        ],
        tests=[
            "rllib/offline/tests/test_columnar_buffer.py",
            "rllib/offline/tests/test_sampled_value_target_inputs.py",
        ],
        size_reason="Two modules that only make sense together, with their tests.",
    ),
    Topic(
        slug="prelearner-columnar-path",
        subject="[RLlib] OfflinePreLearner: rows that stand alone, built from columns",
        description=(
            "The OfflinePreLearner builds train batches from the columns instead\n"
            "of episode objects and gives every row the inputs of its value\n"
            "target, so Ray Data may re-cut, shuffle and split batches across\n"
            "Learners. Custom Learner connectors keep the connector pipeline."
        ),
        files=[
            "rllib/offline/offline_settings.py",
            "rllib/offline/in_memory/batch_builder.py",
            "rllib/offline/offline_prelearner.py",
        ],
        tests=[
            "rllib/core/learner/tests/structured_obs.py",
            "rllib/offline/tests/test_prelearner_decodes_episodes.py",
            "rllib/offline/tests/test_prelearner_columnar_path.py",
        ],
        substitutions={
            "rllib/offline/offline_prelearner.py": _NO_CLUSTER_CHECK_PRELEARNER,
        },
        size_reason=(
            "About 850 lines of code (the batch builder and the prelearner that\n"
            "uses it); the rest are tests."
        ),
    ),
    Topic(
        slug="episode-store",
        subject="[RLlib] Offline data: an object-store episode store under a budget",
        description=(
            "Decodes the episode files once into Ray's object store, in parallel\n"
            "tasks that honour `input_filesystem` and the scheduling options of\n"
            "`input_read_method_kwargs`, and shards the blocks per Learner; each\n"
            "Learner samples its train batches from its shard at array speed. The\n"
            "memory budget of the nodes is checked before anything is decoded."
        ),
        files=[
            "rllib/offline/in_memory/memory_budget.py",
            "rllib/offline/in_memory/read_options.py",
            "rllib/offline/in_memory/store.py",
            "rllib/offline/in_memory/shard_sampler.py",
        ],
        tests=["rllib/offline/tests/test_shard_sampler.py"],
        size_reason=(
            "About 1,050 lines of code: the store, the budget it is checked\n"
            "against and the sampler each Learner draws its shard with."
        ),
        substitutions={
            "rllib/offline/in_memory/store.py": (
                ("from rllib._fork.cluster_check import RequiresFork\n", ""),
                ("class EpisodeShard(RequiresFork):", "class EpisodeShard:"),
                (
                    "    references keep the blocks alive in the object store. A "
                    "Learner process\n    without the fork (or with another "
                    "version) refuses it on arrival.\n",
                    "    references keep the blocks alive in the object store.\n",
                ),
            ),
        },
    ),
    Topic(
        slug="rotating-block-cache",
        subject="[RLlib] Offline data beyond memory: a rotating cache per Learner",
        description=(
            "Episodes over the memory budget are cut into row ranges sized to a\n"
            "Learner's share of the budget and dealt out to the Learners; each\n"
            "Learner keeps a few ranges decoded (tasks on its own node, refilled\n"
            "in the background), samples them uniformly and retires a range once\n"
            "it has given a set number of draws per timestep, so a pass draws\n"
            "every timestep at about the same rate. Every pass logs how uniform\n"
            "it was (per-range spread and chi-square) and the time spent waiting\n"
            "for decoding."
        ),
        files=["rllib/offline/in_memory/block_cache.py"],
        substitutions={
            "rllib/offline/in_memory/block_cache.py": (
                ("from rllib._fork.cluster_check import RequiresFork\n", ""),
                (
                    "class CachedEpisodeShard(RequiresFork):",
                    "class CachedEpisodeShard:",
                ),
            ),
        },
    ),
    Topic(
        slug="in-memory-training",
        subject="[RLlib] Offline training from the episode store, equal updates",
        description=(
            "`OfflineData` trains from the episode store when the data fits,\n"
            "from rotating block caches beyond the memory budget, and streams\n"
            "where only Ray Data's pipeline serves; each Learner samples its\n"
            "train batches from its shard at array speed. Every Learner runs\n"
            "the same number of updates per `train()`, so DDP Learners never\n"
            "wait on each other. The recorded spaces are checked once, on the\n"
            "driver, at `build_algo()`. Recorded actions are mapped to the units\n"
            "the module acts in, on every path: files record their units, and\n"
            "`offline_data(input_action_units=...)` states them for files that\n"
            "do not (with a warning when such actions fall outside [-1, 1])."
        ),
        files=[
            "rllib/offline/offline_data.py",
            "rllib/core/learner/learner.py::Learner._create_iterator_if_necessary",
            "rllib/algorithms/algorithm_config.py",
        ],
        # The new settings start unset in every config, as ray's own do.
        upstream_edits={
            "rllib/algorithms/algorithm_config.py": [
                (
                    "        self.output_write_episodes = True\n"
                    "        self.offline_sampling = False\n",
                    "        self.output_write_episodes = True\n"
                    "        self.offline_sampling = False\n"
                    "        self.input_action_units = None\n"
                    "        self.memory_budget = None\n"
                    "        self.cache_draws_per_timestep = None\n"
                    "        self.value_horizon = None\n",
                ),
            ]
        },
        tests=[
            "rllib/offline/tests/test_offline_settings.py",
            "rllib/offline/tests/test_memory_budget.py",
            "rllib/core/learner/tests/test_in_memory_source.py",
            "rllib/offline/tests/test_offline_data_from_episodes.py",
            "rllib/offline/tests/test_train_on_episodes.py",
            "rllib/offline/tests/test_train_streaming.py",
            "rllib/algorithms/marwil/tests/test_marwil_two_learners.py",
        ],
        substitutions={
            "rllib/offline/offline_data.py": (
                ("from rllib._fork.cluster_check import fork_stamp\n", ""),
                (
                    '                constructor_kwargs["fork_stamp"] = fork_stamp()\n',
                    "",
                ),
            ),
        },
        size_reason=(
            "About 1,100 lines of code: `OfflineData`'s modes and the\n"
            "Learner's side of them cannot land apart."
        ),
    ),
    Topic(
        slug="examples-quiet-output",
        subject="[RLlib] Offline examples: drop warnings a user cannot act on",
        description=(
            "The offline examples and the episode tools log only what their user\n"
            "can act on: ray's new-API-stack notice, the `RLModule(config=...)`\n"
            "deprecation that `RLModule.__init__` triggers itself and the gputil\n"
            "hint are dropped on the driver, with Ray Data's progress bars;\n"
            "`--verbose` keeps them."
        ),
        files=[
            # The tools package; its other modules stay in the fork
            # (FORK_ONLY_TOPICS).
            "rllib/offline/tools/__init__.py",
            "rllib/offline/tools/quiet_output.py",
        ],
        tests=["rllib/offline/tests/test_quiet_output.py"],
        substitutions={
            "rllib/offline/tools/__init__.py": (
                (
                    "recorded episodes; none of them needs the overlay.\n",
                    "recorded episodes.\n",
                ),
                (
                    "- :mod:`.inspection`: what a dataset holds, and every problem "
                    "in it.\n"
                    "- :mod:`.conversion`: re-writes a dataset (or a Minari dataset) "
                    "as episode files.\n"
                    "- :mod:`.cli`: the command line front end, "
                    "``python -m ray.rllib.offline.episodes``.\n"
                    "- :mod:`.minari_io`, :mod:`.minari_codec`: Minari datasets in "
                    "and out.\n",
                    "",
                ),
            ),
        },
    ),
    Topic(
        slug="nested-observations-end-to-end",
        subject="[RLlib] Tests: Dict and Tuple observations train end to end",
        description=(
            "BC and MARWIL train on Dict, Tuple and nested observation spaces from\n"
            "episode files and from hand-rolled msgpack files (#51747, item 3)."
        ),
        files=[
            "rllib/examples/offline_rl/dict_cartpole.py",
            "rllib/examples/offline_rl/train_with_dict_observations.py",
        ],
        tests=[
            "rllib/examples/offline_rl/tests/test_train_with_dict_observations.py",
            "rllib/core/learner/tests/test_structured_observations.py",
            "rllib/core/learner/tests/test_offline_learners.py",
        ],
        size_reason=(
            "Tests and an example only (265 lines of example code): the\n"
            "nested-space scenarios and the module they train."
        ),
    ),
    Topic(
        slug="multi-agent-offline",
        subject="[RLlib] Multi-agent offline RL: record, read and train per module",
        description=(
            "`MultiAgentEpisode`s go through the same writer, reader and recorder,\n"
            "and BC and MARWIL train one module per policy from them (#24283:\n"
            "offline API for multi-agent batches; #42872: multi-agent episode\n"
            "buffers). Upstream's prelearner raises `NotImplementedError` and its\n"
            "recorder refuses multi-agent configs."
        ),
        files=[
            "rllib/offline/offline_multi_agent_env_runner.py",
            "rllib/examples/offline_rl/train_multi_agent_offline.py",
        ],
        tests=[
            "rllib/offline/tests/test_episode_shard_sampler.py",
            "rllib/examples/offline_rl/tests/test_train_multi_agent_offline.py",
            "rllib/offline/tests/test_offline_multi_agent_env_runner.py",
            "rllib/offline/tests/test_multi_agent_training.py",
        ],
        size_reason=(
            "360 lines of code (the recorder and the example); the rest are the\n"
            "tests that train multi-agent BC and MARWIL end to end."
        ),
    ),
    Topic(
        slug="offline-scale-out-tests",
        subject="[RLlib] Tests: offline data beyond memory and on several nodes",
        description=(
            "End-to-end tests of the rotating block caches (uniformity over\n"
            "passes, 0, 1 and 2 Learners, hand-rolled payloads, multi-agent data,\n"
            "an undecodable row) and of Learners on several nodes of\n"
            "`ray.cluster_utils.Cluster` (each shard decoded on its Learner's node,\n"
            "DDP across nodes, BC and MARWIL, single- and multi-agent, a Learner\n"
            "node that dies). They follow the multi-agent patch, whose example\n"
            "data they use."
        ),
        files=[],
        tests=[
            "rllib/offline/tests/test_beyond_memory.py",
            "rllib/offline/tests/test_multi_node.py",
        ],
        substitutions={
            "rllib/offline/tests/test_multi_node.py": (
                (
                    "from rllib.conftest import start_local_ray\n",
                    "from ray.rllib.conftest import start_local_ray\n",
                ),
            ),
        },
    ),
    Topic(
        slug="off-policy-estimation",
        subject=(
            "[RLlib] Off-policy estimation from recorded episodes (IS family, FQE,"
            " DR); fix the is/pdis offline evaluation runner"
        ),
        description=(
            "`OfflinePolicyEvaluationRunner` ('is', 'pdis') fails on episode files\n"
            "(`KeyError: 'action_logp'`: it reads the training buffer's sampled\n"
            "chunks), scores a freshly sampled action against the logged action's\n"
            "behaviour probability, multiplies undiscounted ratios and only knows\n"
            "the default module. A new package, `offline/off_policy_estimation`,\n"
            "estimates a policy's discounted return from whole recorded episodes:\n"
            "per-episode and per-decision IS and their weighted forms (log-space\n"
            "ratios of the logged actions), fitted Q evaluation for discrete and\n"
            "continuous actions, and doubly robust on FQE's Q-function (FQE/DR for\n"
            "continuous actions: #38357), with bootstrap intervals over episodes,\n"
            "per module. The runner uses it on whole episodes and adds the types\n"
            "'wis', 'wpdis', 'fqe' and 'dr'.\n\n"
            "Behaviour change: 'is' and 'pdis' estimates are discounted with\n"
            "`config.gamma` and use the logged actions; metrics gain\n"
            "`off_policy_estimation/<module>/...`."
        ),
        files=[
            "rllib/offline/off_policy_estimation/__init__.py",
            "rllib/offline/off_policy_estimation/trajectories.py",
            "rllib/offline/off_policy_estimation/target_policy.py",
            "rllib/offline/off_policy_estimation/features.py",
            "rllib/offline/off_policy_estimation/importance_sampling.py",
            "rllib/offline/off_policy_estimation/behavior_policy.py",
            "rllib/offline/off_policy_estimation/fitted_q_evaluation.py",
            "rllib/offline/off_policy_estimation/doubly_robust.py",
            "rllib/offline/off_policy_estimation/bootstrap.py",
            "rllib/offline/off_policy_estimation/estimate.py",
            "rllib/offline/offline_policy_evaluation_runner.py",
        ],
        tests=[
            "rllib/offline/off_policy_estimation/tests/tiny_mdp.py",
            "rllib/offline/off_policy_estimation/tests/test_estimators.py",
            "rllib/offline/tests/test_policy_evaluation_estimates.py",
        ],
        size_reason=(
            "A new, self-contained package (one estimator per file) with its\n"
            "tests; the runner change is the only upstream file touched."
        ),
    ),
    Topic(
        slug="sac-temperature-in-state",
        subject="[RLlib] SAC: keep the entropy temperature in the Learner's state",
        description=(
            "The SAC Learner saved the temperature optimizer's moments but not\n"
            "the temperature (`curr_log_alpha`), so a SAC, CQL or TQC Learner\n"
            "restored from a checkpoint went on from `initial_alpha`. The\n"
            "temperature is now part of the Learner's state and is restored in\n"
            "place (its optimizer keeps the parameter). A state without it, as\n"
            "ray 2.60 saved, leaves the temperature as it is.\n\n"
            "Behaviour change: restored SAC-family Learners keep their temperature."
        ),
        files=["rllib/algorithms/sac/torch/sac_torch_learner.py"],
        tests=["rllib/algorithms/sac/tests/test_sac_temperature_in_state.py"],
        regression_tests=[
            "rllib/algorithms/sac/tests/test_sac_temperature_in_state.py::"
            "test_restored_learner_keeps_the_learned_temperature",
        ],
    ),
    Topic(
        slug="cql-random-actions",
        subject="[RLlib] CQL: draw the random actions where the policy acts",
        description=(
            "CQL's penalty scores random actions next to the policy's. The policy\n"
            "is a squashed Gaussian on [-1, 1] per dimension (the EnvRunner maps\n"
            "it onto the action box), and the logged actions reach the module in\n"
            "those units, but the module drew the random actions uniformly from\n"
            "the action box itself: on Pendulum's [-2, 2] half of them lay where\n"
            "neither the policy nor the data acts, and the learner weighed them\n"
            "by (1/2)^d, the density of [-1, 1]^d (the learner's TODO read this\n"
            "as a wrong density; the draw was wrong). They are now uniform on\n"
            "[-1, 1]^d, and the learner's comment says so.\n\n"
            "Behaviour change: CQL's penalty for action boxes other than [-1, 1];\n"
            "identical for [-1, 1]."
        ),
        files=[],
        upstream_edits={
            CQL_MODULE: [
                (
                    "        low = torch.tensor(\n"
                    "            self.action_space.low,\n"
                    "            device=fwd_out[QF_PREDS].device,\n"
                    "        )\n"
                    "        high = torch.tensor(\n"
                    "            self.action_space.high,\n"
                    "            device=fwd_out[QF_PREDS].device,\n"
                    "        )\n",
                    "        # Uniform on [-1, 1] per dimension, where the policy's\n"
                    "        # squashed Gaussian acts (the EnvRunner maps it onto the\n"
                    "        # action box), whatever the box.\n"
                    "        device = fwd_out[QF_PREDS].device\n"
                    "        low = -torch.ones("
                    "self.action_space.shape, device=device)\n"
                    "        high = torch.ones("
                    "self.action_space.shape, device=device)\n",
                ),
            ],
            CQL_LEARNER: [
                (
                    "        # TODO (simon): This is the density for a discrete"
                    " uniform, however, actions\n"
                    "        # come from a continuous one. So actually this density"
                    " should use (1/(high-low))\n"
                    "        # instead of (1/2).\n",
                    "        # The module draws the random actions uniformly on"
                    " [-1, 1]^d.\n",
                ),
            ],
        },
        tests=[
            "rllib/algorithms/cql/tests/cql_fixtures.py",
            "rllib/algorithms/cql/tests/test_cql_loss.py",
        ],
        regression_tests=[
            "rllib/algorithms/cql/tests/test_cql_loss.py::"
            f"test_random_actions_are_uniform_where_the_policy_acts[{high}]"
            for high in ("2.0", "3.0")
        ],
    ),
    Topic(
        slug="cql-iql-learners-in-step",
        subject=("[RLlib] CQL and IQL: Learners apply the same averaged gradients"),
        description=(
            "CQL and IQL step one optimizer per loss term, each after its own\n"
            "backward pass. With `num_learners >= 2` their Learners drifted apart:\n"
            "CQL copied each optimizer's gradients right after its backward pass,\n"
            "before DDP's averaged values reached them (48 of 57 weight tensors\n"
            "of two Learners differed after three updates of one module), and\n"
            "both looped over a `set` of module ids, whose order follows each\n"
            "process's hash seed, so DDP could average one module's gradients\n"
            "with another's. Both now run the backward passes in sorted module\n"
            "order. CQL averages the gradients it copies over the Learners in one\n"
            "all-reduce, in an order every Learner shares; IQL keeps reading the\n"
            "parameters' `.grad`, which DDP averages once the order matches. The\n"
            "regression test trains CQL on two Learners (IQL's drift needed two\n"
            "modules and showed in about half the runs).\n\n"
            "Behaviour change: with `num_learners >= 2` every Learner applies\n"
            "the averaged gradients; identical values with one Learner."
        ),
        files=[
            "rllib/core/learner/optimizer_gradients.py",
            CQL_LEARNER + "::CQLTorchLearner.compute_gradients",
            "rllib/algorithms/iql/torch/iql_torch_learner.py"
            "::IQLTorchLearner.compute_gradients",
        ],
        tests=[
            "rllib/algorithms/cql/tests/test_cql_learners_in_step.py",
        ],
        regression_tests=[
            "rllib/algorithms/cql/tests/test_cql_learners_in_step.py::"
            "test_two_learners_keep_identical_modules"
        ],
        stacked_on=["cql-random-actions"],
    ),
    Topic(
        slug="cql-n-step-discount",
        subject="[RLlib] CQL: discount n-step bootstraps by `gamma ** n_step`",
        description=(
            "With `n_step > 1` the sampled rows' rewards already sum `n_step`\n"
            "discounted rewards (the `n_step` column the replay buffers add), yet\n"
            "CQL's Bellman target discounted the bootstrap by `gamma`, as if one\n"
            "step had passed (the TODO in the learner). It uses\n"
            "`gamma ** n_step`, as SAC's learner does, and `gamma` where a batch\n"
            "has no `n_step` column.\n\n"
            "Behaviour change: CQL's critic loss for `n_step > 1`; identical\n"
            "values for `n_step=1` (CQL's default)."
        ),
        files=[],
        upstream_edits={
            CQL_LEARNER: [
                (
                    "        q_selected_target = (\n"
                    "            # TODO (simon): Add an `n_step` option to the"
                    " `AddNextObsToBatch` connector.\n"
                    "            batch[Columns.REWARDS]\n"
                    "            # TODO (simon): Implement n_step.\n"
                    "            + (config.gamma) * q_next_masked\n"
                    "        ).detach()\n",
                    "        # A row's reward sums `n_step` discounted rewards:"
                    " its bootstrap\n"
                    "        # is `n_step` steps ahead.\n"
                    "        discount = config.gamma\n"
                    '        if "n_step" in batch:\n'
                    '            discount = config.gamma ** batch["n_step"].float()\n'
                    "        q_selected_target = (\n"
                    "            batch[Columns.REWARDS] + discount * q_next_masked\n"
                    "        ).detach()\n",
                ),
            ]
        },
        tests=["rllib/algorithms/cql/tests/test_cql_n_step.py"],
        regression_tests=[
            "rllib/algorithms/cql/tests/test_cql_n_step.py::"
            f"test_bootstrap_is_discounted_by_gamma_to_the_n_step[{n_step}]"
            for n_step in (2, 3)
        ],
        stacked_on=["cql-random-actions"],
    ),
    Topic(
        slug="iql-policy-extraction",
        subject="[RLlib] IQL: fit logged actions at the squashed mean",
        description=(
            "IQL's actor maximized the tanh-squashed Gaussian's exact\n"
            "log-probability of the logged actions, which passes each through\n"
            "atanh: actions at or near the bounds (saturating controllers) land\n"
            "at +-7.25 after clipping and dominate the fit. It now scores them\n"
            "under a Gaussian at the squashed mean, as IQL's reference\n"
            "implementation and d3rlpy do.\n\n"
            "Behaviour change: IQL's actor loss. Value and critic losses are\n"
            "unchanged."
        ),
        files=[
            "rllib/algorithms/iql/torch/iql_torch_learner.py"
            "::IQLTorchLearner.compute_loss_for_module",
        ],
        tests=[
            "rllib/algorithms/iql/tests/iql_fixtures.py",
            "rllib/algorithms/iql/tests/test_iql_loss.py",
        ],
        regression_tests=[
            "rllib/algorithms/iql/tests/test_iql_loss.py::"
            f"test_losses_written_out_by_hand[{twin}]"
            for twin in ("False", "True")
        ]
        + [
            "rllib/algorithms/iql/tests/test_iql_loss.py::"
            "test_the_actor_fits_a_behaviour_saturating_at_the_bounds"
        ],
        stacked_on=[
            "squashed-gaussian-deterministic",
            "cql-random-actions",
            "cql-iql-learners-in-step",
        ],
    ),
    Topic(
        slug="cql-lagrangian",
        subject="[RLlib] CQL: learn the conservative weight with `lagrangian=True`",
        description=(
            "`CQLConfig(lagrangian=True)` was ignored on the new API stack (the\n"
            "TODOs in the learner). The conservative weight `alpha'` is now\n"
            "learned as in the CQL paper's Lagrangian form: each critic's penalty\n"
            "enters its loss as `alpha' * (penalty - lagrangian_thresh)`, and\n"
            "`log alpha'` ascends the critics' mean excess with its own Adam\n"
            "optimizer (`alpha_prime`, at `critic_lr`, from `alpha' = 1`, clamped\n"
            "to [0, 1e6]). `log alpha'` is part of the Learner's state, so a\n"
            "restored Learner goes on from the learned weight. The loss function\n"
            "is restructured around one critic loss helper for both critics;\n"
            "with `lagrangian=False` (the default) its values are unchanged.\n\n"
            "Behaviour change: only with `lagrangian=True`."
        ),
        files=[
            CQL_LEARNER + "::CQLTorchLearner.configure_optimizers_for_module,"
            "CQLTorchLearner.compute_loss_for_module,CQLTorchLearner.get_state,"
            "CQLTorchLearner.set_state",
        ],
        tests=["rllib/algorithms/cql/tests/test_cql_lagrangian_weight.py"],
        regression_tests=[
            "rllib/algorithms/cql/tests/test_cql_lagrangian_weight.py::"
            f"test_lagrangian_losses_equal_the_written_out_loss[{twin}]"
            for twin in ("True", "False")
        ]
        + [
            "rllib/algorithms/cql/tests/test_cql_lagrangian_weight.py::"
            f"test_lagrangian_weight_follows_the_penalty_excess[{case}]"
            for case in ("-100.0-True", "100.0-False")
        ],
        stacked_on=[
            "sac-temperature-in-state",
            "cql-random-actions",
            "cql-iql-learners-in-step",
            "cql-n-step-discount",
        ],
    ),
    Topic(
        slug="iql-train-pass",
        subject="[RLlib] IQL: run only the forward passes its loss reads",
        description=(
            "IQL's module ran SAC's whole train pass before its own: policy\n"
            "samples at the observations and next observations, scored by both\n"
            "Q-networks and target Q-networks, none of which IQL's loss reads.\n"
            "It now runs the policy, the Q-networks and target Q-networks on the\n"
            "logged actions and the value network; targets without a graph.\n"
            "The values the loss reads are unchanged."
        ),
        files=["rllib/algorithms/iql/torch/default_iql_torch_rl_module.py"],
    ),
    Topic(
        slug="iql-beta-validation",
        subject="[RLlib] IQL: accept inverse temperatures `beta` above 1",
        description=(
            "IQLConfig inherits MARWIL's check that `beta` lies in [0, 1], but\n"
            "IQL's `beta` is the inverse temperature of exp(beta * A): the IQL\n"
            "paper's 3 and 10 failed validation. IQL keeps MARWIL's other\n"
            "checks and its own (`beta > 0`, `0 < expectile < 1`)."
        ),
        files=["rllib/algorithms/iql/iql.py"],
        tests=["rllib/algorithms/iql/tests/test_iql_config.py"],
        regression_tests=[
            "rllib/algorithms/iql/tests/test_iql_config.py::"
            f"test_the_papers_temperatures_validate_and_are_kept[{beta}]"
            for beta in ("3.0", "10.0")
        ],
    ),
    Topic(
        slug="continuous-control-datasets",
        subject="[RLlib] Examples: continuous-control datasets at three qualities",
        description=(
            "Scripted Pendulum-v1 and InvertedPendulum-v5 (MuJoCo) behaviours at\n"
            "random, medium and expert quality, recorded as episode files, with\n"
            "the returns that normalize scores; the data of the CQL/IQL release\n"
            "benchmark. CQL and IQL train on them with 0, 1 and 2 Learners, in\n"
            "memory and streaming."
        ),
        files=["rllib/examples/offline_rl/scripted_continuous_control.py"],
        tests=[
            "rllib/examples/offline_rl/tests/test_scripted_continuous_control.py",
            # Training CQL and IQL on these datasets with 0, 1 and 2 Learners.
            "rllib/algorithms/cql/tests/test_cql_iql_from_episodes.py",
        ],
    ),
    Topic(
        slug="action-units-end-to-end",
        subject="[RLlib] Tests: recorded action units reach the module in its units",
        description=(
            "A Pendulum controller's torques, written in env units, train BC whose\n"
            "EnvRunner sends the controller's torques (in memory, streaming, and\n"
            "from hand-rolled payloads with `input_action_units`); read as\n"
            "normalized they come out doubled. Also the mapping's values on every\n"
            "decoder, column data, the warning and errors, and off-policy\n"
            "evaluation's units. (After the continuous-control datasets, whose\n"
            "controller the test records.)"
        ),
        files=[],
        tests=["rllib/offline/tests/test_action_units.py"],
    ),
    Topic(
        slug="sac-concat-q-encoder",
        subject="[RLlib] SAC/CQL/IQL: optional Q-network over concatenated (s, a)",
        description=(
            "SACCatalog builds the continuous Q-network as two MLPs (observation\n"
            "and action streams) plus three fusion layers, about four times the\n"
            "compute per sample of the critic in the SAC, CQL and IQL papers,\n"
            "d3rlpy and CORL: one MLP over [s, a]. A dict model config with\n"
            "`qf_concat_obs_actions: True` now builds that critic\n"
            "(`ConcatMLPEncoderConfig`, `TorchConcatMLPEncoder`) from\n"
            "`fcnet_hiddens` and `fcnet_activation`; 1D Box observations only.\n"
            "IQL trained 3.5x faster per update on CPU at [256, 256].\n\n"
            "Behaviour change: none unless the key is set."
        ),
        files=[
            "rllib/core/models/torch/concat_encoder.py",
            "rllib/algorithms/sac/sac_catalog.py",
        ],
        tests=[
            "rllib/algorithms/sac/tests/test_sac_catalog.py",
        ],
    ),
    Topic(
        slug="target-network-update-in-place",
        subject="[RLlib] update_target_network: blend in place with fused kernels",
        description=(
            "The torch `update_target_network` built a new state dict and loaded\n"
            "it after every DQN/SAC/CQL/IQL update: a Python loop, new tensors\n"
            "and a copy per parameter, 12% of an IQL update on CPU. It now blends\n"
            "the floating tensors in place with `torch._foreach_*` kernels, term\n"
            "by term as before, so the targets are bit-for-bit the same.\n\n"
            "Behaviour change: none."
        ),
        files=["rllib/utils/torch_utils.py"],
    ),
    Topic(
        slug="fused-nonfinite-gradient-check",
        subject="[RLlib] TorchLearner.apply_gradients: one nan/inf check per device",
        description=(
            "`apply_gradients` ran `torch.isfinite(grad).all()` and a host sync on\n"
            "every gradient twice per update (about 90 for IQL's four optimizers,\n"
            "11% of its update on CPU). One fused check per device and dtype\n"
            "(`torch._amp_foreach_non_finite_check_and_unscale_` with scale 1, as\n"
            "GradScaler) now decides; only a non-finite result falls back to the\n"
            "per-parameter handling, with the same warnings, `nan_to_num` and\n"
            "skipped steps as before.\n\n"
            "Behaviour change: none."
        ),
        files=["rllib/core/learner/torch/torch_learner.py"],
    ),
]

#: Fork tests that compare the fork with upstream or test the overlay itself.
#: Topics that stay in the fork and are not proposed to ray: the episode
#: tools' command line and Minari input/output. Ray's review would not take
#: them as they are (a second command line next to ray's, a dataset library
#: ray reaches through its own Minari route); `doc/rep-offline-episodes.md`
#: argues for keeping them here. Their files are accounted for like the
#: series' (each in exactly one topic), and their tests run with the overlay.
FORK_ONLY_TOPICS: List[Topic] = [
    Topic(
        slug="example-external-episodes",
        subject="[RLlib] Example: record, write and train on external episodes",
        description=(
            "A runnable example of the whole path: record CartPole episodes with\n"
            "a scripted controller, write them with `EpisodeWriter`, train MARWIL\n"
            "or BC on them evaluating in the environment, score every iteration's\n"
            "checkpoint off-policy from the episodes alone (FQE) and keep the best\n"
            "next to the last (#51747).\n\n"
            "Fork only: an outside review read it as an application (progress\n"
            "bars, a plot, 11 to 17 minutes of scoring) rather than one of ray's\n"
            "examples; ray's example would be a short script on the public writer."
        ),
        files=["rllib/examples/offline_rl/train_on_external_episodes.py"],
        tests=[
            "rllib/examples/offline_rl/tests/test_train_on_external_episodes.py",
        ],
        substitutions={
            "rllib/examples/offline_rl/train_on_external_episodes.py": (
                (
                    "recorded episodes (inspect them with\n"
                    "  `python -m ray.rllib.offline.episodes info "
                    "<output-dir>/episodes`),",
                    "recorded episodes (`read_episodes` reads them back),",
                ),
            ),
        },
        size_reason=(
            "One new example script (about 620 lines: its five steps, the\n"
            "output directory, the plot and the restore instructions) and its\n"
            "tests; no library code."
        ),
    ),
    Topic(
        slug="marwil-normalizer-defaults",
        subject="MARWIL's advantage normalizer follows the data by default",
        description=(
            "The fork's `MARWILConfig` defaults: the normalizer starts from the\n"
            "first batch and moves at 0.05 per update (ray: 100 and 1e-8). The\n"
            "series keeps ray's defaults; the REP argues for these."
        ),
        files=["rllib/algorithms/marwil/marwil.py"],
    ),
    Topic(
        slug="vectorized-value-targets",
        subject="[RLlib] compute_value_targets: vectorize the GAE recursion",
        description=(
            "The GAE recursion runs as one `scipy.signal.lfilter` per episode\n"
            "segment instead of a Python loop over steps; results are bit-identical\n"
            "to the loop's (float64), at array speed on long batches.\n\n"
            "Behaviour change: none; the test compares with a step-by-step loop.\n"
            "Fork only: ray's GAE rework deprecates `compute_value_targets`, and\n"
            "the REP proposes no patch of it."
        ),
        files=["rllib/utils/postprocessing/value_predictions.py"],
        tests=[
            "rllib/utils/postprocessing/tests/test_gae_matches_step_loop.py",
        ],
    ),
    Topic(
        slug="cql-random-actions-overlay",
        subject="CQL's random actions on [-1, 1], in the overlay",
        description=(
            "The fork's form of `cql-random-actions`: it cannot edit the module's\n"
            "draw, so it maps the drawn actions affinely onto [-1, 1] (the same\n"
            "values; the series proposes the edit)."
        ),
        files=["rllib/algorithms/cql/torch/default_cql_torch_rl_module.py"],
    ),
    Topic(
        slug="episode-tools",
        subject=(
            "[RLlib] python -m ray.rllib.offline.episodes: info, validate, convert, ope"
        ),
        description=(
            "Inspect, check and convert datasets of recorded episodes (the fork's\n"
            "files, RLlib's recorder output, hand-rolled msgpack files) from the\n"
            "command line; every problem is reported with its file and row. `ope`\n"
            "scores checkpoints on a dataset by off-policy evaluation, best first;\n"
            "an example uses it to choose among BC checkpoints."
        ),
        files=[
            "rllib/offline/tools/inspection.py",
            "rllib/offline/tools/conversion.py",
            "rllib/offline/tools/cli.py",
            "rllib/offline/tools/ope_command.py",
            "rllib/offline/episodes.py",
            "rllib/examples/offline_rl/choose_checkpoint_by_ope.py",
        ],
        tests=[
            "rllib/offline/tests/test_episodes_cli.py",
            "rllib/offline/tests/test_ope_command.py",
            "rllib/examples/offline_rl/tests/test_choose_checkpoint_by_ope.py",
        ],
        # In ray the command has one name; the fork names it by whether the
        # overlay is on.
        substitutions={
            "rllib/offline/tools/cli.py": (
                ("import rllib\n", ""),
                (
                    "#: How to call this command: under ray's name where the fork is "
                    "active; with\n"
                    "#: the overlay off (`RLLIB_FORK_DISABLE=1`, another ray version) "
                    "only the\n"
                    "#: fork's own package has the module.\n"
                    'PROG = "python -m " + ("ray." if rllib.is_active() else "") + '
                    '"rllib.offline.episodes"\n',
                    "#: How to call this command.\n"
                    'PROG = "python -m ray.rllib.offline.episodes"\n',
                ),
            ),
        },
        size_reason=(
            "A new, self-contained tool: inspection, conversion and the command\n"
            "line front end are used only together; no upstream file changes."
        ),
    ),
    Topic(
        slug="minari",
        subject="[RLlib] Minari datasets: read, write and convert",
        description=(
            "Read Minari datasets as episodes, write episodes as Minari datasets\n"
            "and convert them to episode files for training."
        ),
        files=[
            "rllib/offline/tools/minari_codec.py",
            "rllib/offline/tools/minari_io.py",
            "rllib/examples/offline_rl/train_on_minari.py",
        ],
        tests=["rllib/offline/tests/test_minari_io.py"],
        substitutions={
            "rllib/offline/tools/minari_io.py": (
                (
                    'called: install it with `pip install "rllib-fork[minari]"`.',
                    'called: install it with `pip install "minari[arrow,hdf5]"`.',
                ),
                (
                    "    'pip install \"rllib-fork[minari]\" (in a source checkout: '\n"
                    "    'pip install -e \".[minari]\")'\n",
                    "    'pip install \"minari[arrow,hdf5]>=0.5.4\" pillow'\n",
                ),
            ),
            "rllib/offline/tests/test_minari_io.py": (
                (
                    """    hint = r'pip install "rllib-fork\\[minari\\]"'""",
                    '    hint = r\'pip install "minari\\[arrow,hdf5\\]>=0.5.4"'
                    " pillow'",
                ),
            ),
            "rllib/examples/offline_rl/train_on_minari.py": (
                ('        author="rllib-fork",\n', '        author="RLlib",\n'),
                (
                    '        author_email="rllib-fork@example.com",\n',
                    '        author_email="rllib@example.com",\n',
                ),
            ),
        },
        size_reason=(
            "A new, self-contained module with its example and tests; no upstream\n"
            "file changes."
        ),
    ),
]

FORK_ONLY_TESTS = (
    "rllib/_fork/tests/",
    "rllib/algorithms/marwil/tests/test_marwil.py",
    "rllib/algorithms/marwil/tests/test_marwil_checkpoints.py",
    "rllib/algorithms/cql/tests/test_cql_loss_matches_upstream.py",
    "rllib/algorithms/iql/tests/test_iql_matches_upstream.py",
    "rllib/algorithms/iql/tests/test_iql_train_pass_matches_upstream.py",
    "rllib/core/learner/tests/test_optimizer_gradients_match_upstream.py",
    "rllib/core/learner/torch/tests/",
    "rllib/utils/tests/test_torch_utils_matches_upstream.py",
    "rllib/algorithms/sac/tests/test_sac_catalog_matches_upstream.py",
    "rllib/algorithms/ppo/tests/",
    "rllib/offline/tests/test_cloud_input.py",
    "rllib/offline/tests/test_column_data_matches_upstream.py",
    "rllib/offline/tests/test_data_tools_without_overlay.py",
    "rllib/offline/tests/test_recording_matches_upstream.py",
    "rllib/offline/tests/test_without_ray_init.py",
)
