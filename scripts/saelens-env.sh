#!/usr/bin/env bash
# Makes .venv-saelens: an environment with SAELens, for the tests and the benchmark that set scratchformer's
# dictionaries beside SAELens's (tests/scratchformer/test_saelens_compat.py, benchmarks/bench_saelens.py).
#
# SAELens is not one of scratchformer's dependencies: it pulls in TransformerLens 3 (SAELens 6 imports its
# HookedTransformer, which TransformerLens 4 removed), wandb, datasets and some fifty other packages, none of which
# the app needs. So it lives in an environment of its own, which reads PyTorch, transformers, NumPy and safetensors
# from the project's .venv (a .pth file adds .venv's site-packages after its own): one PyTorch on disk, the same
# build on both sides of a comparison, and nothing added to .venv. The tests talk to it through files
# (safetensors and SAELens folders), never by importing it. scripts/test.sh runs this after scripts/setup.sh.
# Safe to run again: a finished environment with the pinned version is kept (about 2 minutes and 0.6 GB the first
# time, with PyPI reachable).
set -euo pipefail
cd "$(dirname "$0")/.."
SAELENS="sae-lens==6.54.12"
TLENS="transformer-lens>=3.0,<4"  # what SAELens 6 imports; pip picks it anyway, said here so it stays so
VENV=.venv-saelens
source scripts/side-env.sh
side_env_open saelens-env "$VENV" "$SAELENS" sae-lens
echo "saelens-env: installing $SAELENS into $VENV (PyTorch and transformers come from $PROJECT)."
"$VENV/bin/python" -m pip install -q "$SAELENS" "$TLENS"
"$VENV/bin/python" - "$project_site" <<'EOF'
import sys, torch, sae_lens
where = torch.__file__
if not where.startswith(sys.argv[1]):
    sys.exit(f"saelens-env: SAELens brought its own PyTorch ({where}) instead of .venv's; the comparison would not "
             "run on the same build.")
print(f"saelens-env: SAELens {sae_lens.__version__} with .venv's PyTorch {torch.__version__}.")
EOF
side_env_close "$VENV"
