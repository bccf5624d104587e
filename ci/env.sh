# Sourced by ci/test.sh and ci/docs.sh (not run on its own).
#
# ci_activate_env EXTRAS MODULES: uses the active virtualenv, else `.venv` in
# the repo (created if missing), and installs the fork with EXTRAS (pinned by
# ci/constraints.txt) unless MODULES import and the fork is active.

ci_activate_env() {
  local extras=$1 modules=$2
  if [ -z "${VIRTUAL_ENV:-}" ]; then
    if [ ! -x .venv/bin/python ]; then
      python3 -m venv .venv
    fi
    # shellcheck disable=SC1091
    source .venv/bin/activate
  fi
  if ! python -c "import $modules" 2>/dev/null \
     || ! python -c "import rllib, sys; sys.exit(not rllib.is_active())" 2>/dev/null; then
    python -m pip install --quiet --upgrade pip
    # The CPU wheel of torch; a bare `torch` would pull a multi-GB CUDA build.
    python -m pip install --quiet "torch==2.13.0"
    python -m pip install --quiet -c ci/constraints.txt -e ".[$extras]"
  fi
}

# The environment of the test suite and of the checks that run its tests.
# `minari,minari-create`: the Minari interop tests record datasets with Minari's
# DataCollector (jax) and read both storage backends (h5py, pyarrow, Pillow);
# `mujoco`: the continuous-control datasets' InvertedPendulum-v5.
ci_activate_test_env() {
  ci_activate_env "test,bench,minari,minari-create,mujoco" \
    "rllib, ray, torch, pytest, pytest_timeout, matplotlib, minari, h5py, PIL, jax, moto, mujoco, imageio"
  export RAY_DEDUP_LOGS=0 RAY_USAGE_STATS_ENABLED=0 \
    PYTHONWARNINGS=ignore::DeprecationWarning
}
