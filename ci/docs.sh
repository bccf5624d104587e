#!/usr/bin/env bash
# Builds the documentation with warnings as errors, into doc/_build/html.
# Installs the `doc` extras (pinned by ci/constraints.txt) if they are missing.
# Uses the active virtualenv, else `.venv` (created and set up as ci/test.sh
# does). Extra arguments go to sphinx-build, e.g. `bash ci/docs.sh -E`.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ -z "${VIRTUAL_ENV:-}" ]; then
  if [ ! -x .venv/bin/python ]; then
    python3 -m venv .venv
  fi
  # shellcheck disable=SC1091
  source .venv/bin/activate
fi

# The API reference imports the fork: it must be installed and active.
if ! python -c "import rllib, sys; sys.exit(not rllib.is_active())" 2>/dev/null; then
  python -m pip install --quiet --upgrade pip
  # The CPU wheel of torch; a bare `torch` would pull a multi-GB CUDA build.
  python -m pip install --quiet "torch==2.13.0"
  python -m pip install --quiet -c ci/constraints.txt -e ".[doc]"
fi
if ! python -c "import sphinx, pydata_sphinx_theme, myst_parser" 2>/dev/null; then
  python -m pip install --quiet -c ci/constraints.txt -e ".[doc]"
fi

export RAY_USAGE_STATS_ENABLED=0 PYTHONWARNINGS=ignore::DeprecationWarning
rm -rf doc/_build/doctrees
# HTML, warnings are errors.
python -m sphinx -W --keep-going -b html -d doc/_build/doctrees \
  doc/source doc/_build/html "$@"
# The `.. testcode::` examples in the fork's docstrings (DOCS_DOCTEST=0 skips
# them). The page's own examples run in the test suite instead
# (doc/source/rllib/doc_code/test_doc_code.py).
if [ "${DOCS_DOCTEST:-1}" = "1" ]; then
  python -m sphinx -W --keep-going -b doctest -d doc/_build/doctrees \
    doc/source doc/_build/doctest "$@"
fi
echo "Docs built: doc/_build/html/index.html"
