#!/usr/bin/env bash
# Runs the test suite. Without an active virtualenv it creates `.venv` in the
# repo and installs the fork with its test extras (pinned by ci/constraints.txt).
# Extra arguments go to pytest, e.g. `bash ci/test.sh -k episode_writer`.
set -euo pipefail
cd "$(dirname "$0")/.."

# shellcheck source=ci/env.sh
source ci/env.sh
ci_activate_test_env
python -m pytest "$@"
