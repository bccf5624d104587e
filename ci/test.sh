#!/usr/bin/env bash
# Runs the test suite's fast tier: the small and medium tests of ci/sizes.py
# (every unit test, and an end-to-end test per feature). `--tier large` or
# `--tier all` picks another tier; CI runs both tiers (.ci/run).
# Two pytest-xdist workers take a test file each at a time (most tests wait on
# Ray and fresh interpreters, so two workers fill the two cores);
# RLLIB_TEST_WORKERS sets how many, and `-n 0` runs in one process.
# Without an active virtualenv it creates `.venv` in the repo and installs the
# fork with its test extras (pinned by ci/constraints.txt).
# Extra arguments go to pytest, e.g. `bash ci/test.sh -k episode_writer`.
set -euo pipefail
cd "$(dirname "$0")/.."

# shellcheck source=ci/env.sh
source ci/env.sh
ci_activate_test_env
tier=(--tier fast)
for arg in "$@"; do
  case "$arg" in --tier | --tier=*) tier=() ;; esac
done
python -m pytest "${tier[@]}" -n "${RLLIB_TEST_WORKERS:-2}" --dist loadfile "$@"
