#!/usr/bin/env bash
# Set everything up in .venv, then open the scratchformer window (afterwards `.venv/bin/scratchformer` opens it).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/scratchformer "$@"
