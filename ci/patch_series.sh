#!/usr/bin/env bash
# Builds the patch series against the installed ray, checks that each patch
# applies (and its modules import) on top of the ones before it, runs the
# series' tests in the patched tree with the overlay off and compares each
# outcome with the overlay's. Usage: bash ci/patch_series.sh [OVERLAY_XML]
# (a junit XML of a `ci/test.sh` run; without it the overlay run is made here).
set -euo pipefail
cd "$(dirname "$0")/.."

# shellcheck source=ci/env.sh
source ci/env.sh
ci_activate_test_env
args=(--keep build/patch-series-check)
if [ $# -gt 0 ]; then
  args+=(--overlay-results "$1")
fi
python -m ci.patch_series.check "${args[@]}"
