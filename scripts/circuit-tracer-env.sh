#!/usr/bin/env bash
# Makes .venv-circuit-tracer: an environment with circuit-tracer, for the benchmark and the test that set
# scratchformer's attribution graphs beside circuit-tracer's (benchmarks/bench_graph.py,
# tests/scratchformer/test_graph_circuit_tracer.py; its side is benchmarks/circuit_tracer_side.py).
#
# circuit-tracer is not one of scratchformer's dependencies: it pulls in TransformerLens 3 (it imports
# HookedTransformer, which TransformerLens 4 removed), nnsight, transformers 4 (it asks for <= 4.57.3; .venv has
# transformers 5) and some forty other packages the app does not need. So it lives in an environment of its own,
# which reads PyTorch, NumPy and safetensors from the project's .venv (a .pth file adds .venv's site-packages after
# its own, so its own transformers 4 comes first): one PyTorch on disk, the same build on both sides of a
# comparison, and nothing added to .venv. The two sides talk only through files. scripts/test.sh runs this after
# scripts/setup.sh. Safe to run again: a finished environment with the pinned version is kept (about 30 s and
# 0.5 GB the first time, with PyPI reachable).
set -euo pipefail
cd "$(dirname "$0")/.."
CIRCUIT_TRACER="circuit-tracer==0.5.0"
TLENS="transformer-lens>=3.0,<4"  # what circuit-tracer imports; pip picks it anyway, said here so it stays so
VENV=.venv-circuit-tracer
source scripts/side-env.sh
side_env_open circuit-tracer-env "$VENV" "$CIRCUIT_TRACER" circuit-tracer
echo "circuit-tracer-env: installing $CIRCUIT_TRACER into $VENV (PyTorch comes from $PROJECT)."
# pip sees .venv's packages through the .pth file: it leaves them alone ("outside environment") and warns that
# .venv's sentence-transformers wants transformers 5, which only this environment's own transformers 4 shadows
"$VENV/bin/python" -m pip install -q "$CIRCUIT_TRACER" "$TLENS" 2>&1 | grep -v "sentence-transformers\|dependency resolver" || true
"$VENV/bin/python" - "$project_site" <<'PY'
import sys, torch, circuit_tracer, transformers
from circuit_tracer.graph import prune_graph  # noqa: F401 - it imports
where = torch.__file__
if not where.startswith(sys.argv[1]):
    sys.exit(f"circuit-tracer-env: circuit-tracer brought its own PyTorch ({where}) instead of .venv's; the comparison "
             "would not run on the same build.")
print(f"circuit-tracer-env: circuit-tracer {circuit_tracer.__version__} (transformers {transformers.__version__}) "
      f"with .venv's PyTorch {torch.__version__}.")
PY
side_env_close "$VENV"
