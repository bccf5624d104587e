#!/usr/bin/env bash
# Runs the test suite. Without an active virtualenv it creates `.venv` in the
# repo and installs the fork with its test extras (pinned by ci/constraints.txt).
# Extra arguments go to pytest, e.g. `bash ci/test.sh -k episode_writer`.
set -euo pipefail
cd "$(dirname "$0")/.."

# shellcheck source=ci/env.sh
source ci/env.sh
# `minari,minari-create`: the Minari interop tests record datasets with Minari's
# DataCollector (jax) and read both storage backends (h5py, pyarrow, Pillow).
ci_activate_env "test,bench,minari,minari-create" \
  "rllib, ray, torch, pytest, pytest_timeout, matplotlib, minari, h5py, PIL, jax, moto"

export RAY_DEDUP_LOGS=0 RAY_USAGE_STATS_ENABLED=0 PYTHONWARNINGS=ignore::DeprecationWarning
python -m pytest "$@"
