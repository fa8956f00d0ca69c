#!/usr/bin/env bash
# Set everything up in .venv, then lint (ruff, import-linter) and run the whole test suite (headless Qt; the window
# test starts its own Xvfb).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# SAELens in an environment of its own, for the tests that set our dictionaries beside its (about 2 minutes the
# first time, kept after); if it cannot be made, those tests fail saying so and the rest still run.
bash scripts/saelens-env.sh || echo "test: .venv-saelens could not be made; the SAELens tests will fail saying so."
# circuit-tracer likewise (about 30 s the first time): without it, the test that sets our graphs beside its is skipped
bash scripts/circuit-tracer-env.sh || echo "test: .venv-circuit-tracer could not be made; the circuit-tracer test is skipped."
PY=.venv/bin/python
"$PY" -m ruff check .
.venv/bin/lint-imports  # import-linter: the contracts in pyproject.toml (layers, no Qt in the core, no cycles)
# Two worker processes (pytest-xdist): the window tests wait on threads and timers, so two share two cores
# well; TEST_WORKERS=0 runs everything in this one process.
QT_QPA_PLATFORM=offscreen "$PY" -m pytest -q -n "${TEST_WORKERS:-2}" "$@"
