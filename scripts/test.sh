#!/usr/bin/env bash
# Set everything up in .venv, then lint (ruff, import-linter) and run the whole test suite (headless Qt; the window
# test starts its own Xvfb).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
PY=.venv/bin/python
"$PY" -m ruff check .
.venv/bin/lint-imports  # import-linter: the contracts in pyproject.toml (layers, no Qt in the core, no cycles)
# Two worker processes (pytest-xdist): the window tests wait on threads and timers, so two share two cores
# well; TEST_WORKERS=0 runs everything in this one process.
QT_QPA_PLATFORM=offscreen "$PY" -m pytest -q -n "${TEST_WORKERS:-2}" "$@"
