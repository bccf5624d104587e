#!/usr/bin/env bash
# Runs the test suite. Without an active virtualenv it creates `.venv` in the
# repo and installs the fork with its test extras (pinned by ci/constraints.txt).
# Extra arguments go to pytest, e.g. `bash ci/test.sh -k episode_writer`.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ -z "${VIRTUAL_ENV:-}" ]; then
  if [ ! -x .venv/bin/python ]; then
    python3 -m venv .venv
  fi
  # shellcheck disable=SC1091
  source .venv/bin/activate
fi

if ! python -c "import rllib, ray, torch, pytest, pytest_timeout, matplotlib" 2>/dev/null \
   || ! python -c "import rllib, sys; sys.exit(not rllib.is_active())" 2>/dev/null; then
  python -m pip install --quiet --upgrade pip
  # The CPU wheel of torch; a bare `torch` would pull a multi-GB CUDA build.
  python -m pip install --quiet "torch==2.13.0"
  python -m pip install --quiet -c ci/constraints.txt -e ".[test,bench]"
fi

export RAY_DEDUP_LOGS=0 RAY_USAGE_STATS_ENABLED=0 PYTHONWARNINGS=ignore::DeprecationWarning
python -m pytest "$@"
