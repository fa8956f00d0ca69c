#!/usr/bin/env bash
# Set everything up, then open the scratchformer window.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec "${PYTHON:-python3}" -m scratchformer "$@"
