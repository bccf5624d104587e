# Sourced by ci/test.sh and ci/docs.sh (not run on its own).
#
# ci_activate_env EXTRAS MODULES: uses the active virtualenv, else `.venv` in
# the repo (created if missing). Where MODULES do not import or the fork is not
# active, it installs the fork with EXTRAS (pinned by ci/constraints.txt) into
# `.venv`, and fails, naming the install line, in any other virtualenv.

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
    # Only the repo's own `.venv` is changed; a virtualenv of the user's stays
    # as it is.
    if [ "$(cd "$VIRTUAL_ENV" && pwd -P)" != "$(pwd -P)/.venv" ]; then
      echo "The active virtualenv ($VIRTUAL_ENV) lacks what this needs" \
        "(python modules: $modules; the fork installed and active)." >&2
      echo "Install it there with:" >&2
      echo "  pip install torch==2.13.0 && pip install -c ci/constraints.txt -e \".[$extras]\"" >&2
      echo "or deactivate it, and the script sets up .venv in the repo." >&2
      return 1
    fi
    python -m pip install --quiet --upgrade pip
    # The CPU wheel of torch; a bare `torch` would pull a multi-GB CUDA build.
    python -m pip install --quiet "torch==2.13.0"
    python -m pip install --quiet -c ci/constraints.txt -e ".[$extras]"
  fi
}

# What the docs need (ci/docs.sh).
DOC_EXTRAS="doc"
DOC_MODULES="rllib, sphinx, pydata_sphinx_theme, myst_parser"
# What the test suite and the checks that run its tests need.
# `minari,minari-create`: the Minari interop tests record datasets with Minari's
# DataCollector (jax) and read both storage backends (h5py, pyarrow, Pillow);
# `mujoco`: the continuous-control datasets' InvertedPendulum-v5.
TEST_EXTRAS="test,bench,minari,minari-create,mujoco"
TEST_MODULES="rllib, ray, torch, pytest, pytest_timeout, xdist, black, matplotlib, minari, h5py, PIL, jax, moto, mujoco, imageio"

# The environment of the test suite and of the checks that run its tests.
ci_activate_test_env() {
  ci_activate_env "$TEST_EXTRAS" "$TEST_MODULES"
  export RAY_DEDUP_LOGS=0 RAY_USAGE_STATS_ENABLED=0 \
    PYTHONWARNINGS=ignore::DeprecationWarning
  # One torch/OpenMP thread per process: CI runs two test processes at once
  # on two cores, each with Ray workers and fresh interpreters of its own.
  export OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}" MKL_NUM_THREADS="${MKL_NUM_THREADS:-1}"
}
