#!/usr/bin/env bash
# Builds the documentation with warnings as errors, into doc/_build/html.
# Installs the `doc` extras (pinned by ci/constraints.txt) if they are missing.
# Uses the active virtualenv, else `.venv` (created and set up as ci/test.sh
# does). Extra arguments go to sphinx-build, e.g. `bash ci/docs.sh -E`.
set -euo pipefail
cd "$(dirname "$0")/.."

# The API reference imports the fork: it must be installed and active.
# shellcheck source=ci/env.sh
source ci/env.sh
ci_activate_env "$DOC_EXTRAS" "$DOC_MODULES"

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
