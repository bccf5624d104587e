#!/usr/bin/env bash
# ruff lint and format check (line length 88, see pyproject.toml).
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v ruff >/dev/null 2>&1; then
  python3 -m pip install --quiet "ruff>=0.6"
fi
ruff check .
ruff format --check .
