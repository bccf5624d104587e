#!/usr/bin/env bash
# Builds the patch series against the installed ray, checks that each patch
# applies (and its modules import) on top of the ones before it, runs the
# series' tests in the patched tree with the overlay off and compares each
# outcome with the overlay's.
#   bash ci/patch_series.sh [OVERLAY_XML]   everything; without the XML (a junit
#                                           XML of a `ci/test.sh` run) the
#                                           overlay run is made here
#   bash ci/patch_series.sh --patched-only [--tier fast|all]
#                                           build, apply, run the patched tree
#                                           (all its tests, or the fast tier's)
#   bash ci/patch_series.sh --compare-only OVERLAY_XML...  (one XML per tier)
set -euo pipefail
cd "$(dirname "$0")/.."

# shellcheck source=ci/env.sh
source ci/env.sh
ci_activate_test_env
args=(--keep build/patch-series-check)
case "${1:-}" in
  --patched-only) args+=(--patched-only "${@:2}") ;;
  --compare-only) args+=(--compare-only --overlay-results "${@:2}") ;;
  "") ;;
  *) args+=(--overlay-results "$@") ;;
esac
python -m ci.patch_series.check "${args[@]}"
