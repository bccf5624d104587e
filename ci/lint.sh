#!/usr/bin/env bash
# ruff lint and format check (line length 88, see pyproject.toml).
set -euo pipefail
cd "$(dirname "$0")/.."
# The ruff version in ci/constraints.txt: formatting differs between releases.
want=$(grep -i '^ruff==' ci/constraints.txt | cut -d= -f3)
if [ "$(ruff --version 2>/dev/null | cut -d' ' -f2)" != "$want" ]; then
  python3 -m pip install --quiet "ruff==$want"
  export PATH="$(python3 -c 'import sysconfig; print(sysconfig.get_path("scripts"))'):$PATH"
fi
ruff check .
ruff format --check .
