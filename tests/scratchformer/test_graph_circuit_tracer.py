"""scratchformer's attribution graph beside circuit-tracer's own (issue 45), on a tiny random GPT-2 with random
JumpReLU transcoders saved in both layouts: the same active features, the same edges (within 1e-3 relative), the
same pruned graph and the same scores — and circuit-tracer's pruning and scores run on our adjacency give ours.

circuit-tracer runs in its own environment, .venv-circuit-tracer (scripts/circuit-tracer-env.sh, which
scripts/test.sh runs after set-up); its side is benchmarks/circuit_tracer_side.py, and the two sides exchange only
files. benchmarks/bench_graph.py does the same on a trained GPT-2 with trained transcoders, and times both.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

from tests.scratchformer.graph_fixtures import one_thread  # noqa: F401 - one PyTorch thread

ROOT = Path(__file__).resolve().parents[2]
CT_PYTHON = ROOT / ".venv-circuit-tracer" / "bin" / "python"
PROMPT = "When Mary and John went to the store, John gave a drink to"

if not CT_PYTHON.exists():
    pytest.skip("circuit-tracer's environment .venv-circuit-tracer is missing: `bash scripts/circuit-tracer-env.sh` "
                "makes it (scripts/test.sh runs it after set-up).", allow_module_level=True)  # fmt: skip

sys.path.insert(0, str(ROOT / "benchmarks"))
import bench_graph  # noqa: E402 - the converter, our side's graphs and the comparison


def tiny_gpt2(where: Path) -> tuple[str, str]:
    """A random GPT-2 (2 layers, d_model 64, GPT-2's vocabulary) and a random JumpReLU transcoder per MLP, in our
    transcoder-set layout: about 9 of 128 features fire per token."""
    import transformers

    from scratchformer.features.dictionary import Dictionary, DictionaryInfo
    from scratchformer.features.folder import save
    from scratchformer.features.points import ffn_input, ffn_steps
    from scratchformer.loading.bundle import load_model
    from scratchformer.loading.tokenizers import gpt2_tokenizer

    torch.manual_seed(0)
    folder = where / "gpt2"
    model = transformers.GPT2LMHeadModel(transformers.GPT2Config(n_layer=2, n_head=4, n_embd=64, n_positions=32))
    model.save_pretrained(folder)
    gpt2_tokenizer().hf.save_pretrained(folder)
    bundle = load_model(str(folder))
    set_dir = where / "transcoders"
    g = torch.Generator().manual_seed(1)
    for step in ffn_steps(bundle.model):
        d = Dictionary(64, 128, "jumprelu", d_out=64,
                       info=DictionaryInfo(ffn_input(bundle.model, step), step, "tiny", "transcoder"))  # fmt: skip
        with torch.no_grad():
            d.W_enc.copy_(torch.randn(64, 128, generator=g) / 8)  # LayerNorm's output has unit variance: pre ~ N(0, 1)
            d.W_dec.copy_(torch.randn(128, 64, generator=g) / 10)
            d.b_dec.copy_(torch.randn(64, generator=g) / 10)
            d.threshold.copy_(1.0 + torch.rand(128, generator=g))
        save(d, set_dir / step)
    return str(folder), str(set_dir)


def test_our_graph_is_circuit_tracers(tmp_path):
    folder, set_dir = tiny_gpt2(tmp_path)
    paths = bench_graph.to_circuit_tracer(set_dir, tmp_path / "circuit-tracer", 2)
    mine = bench_graph.ours(folder, set_dir, [PROMPT], tmp_path, repeats=1)
    job = {"folder": folder, "transcoders": paths, "input_hook": bench_graph.INPUT_HOOK,
           "output_hook": bench_graph.OUTPUT_HOOK, "threads": 1, "repeats": 1, "out": str(tmp_path / "theirs.pt"),
           "prompts": [{"ids": m["ids"], "target": m["target"], "ours": m["path"]} for m in mine]}  # fmt: skip
    try:
        side = bench_graph.run_side(str(CT_PYTHON), job, tmp_path)
    except SystemExit as exc:
        pytest.fail(str(exc), pytrace=False)
    assert side["circuit_tracer"] == "0.5.0"
    theirs = torch.load(tmp_path / "theirs.pt", weights_only=False)[0]
    c = bench_graph.compare(mine[0], theirs)
    n_ours, n_theirs, shared = c["features"]
    assert c["same_features"] and 20 < n_ours == n_theirs == shared  # features fire at every position but the first
    assert theirs["argmax"] == mine[0]["target"]
    assert abs(theirs["demeaned"] - float(mine[0]["result"].graph.real[-1])) < 1e-4
    assert c["zero_mismatch"] == 0
    assert c["max_rel_big"] < bench_graph.TOLERANCE  # every edge that matters, within 1e-3 relative
    assert c["max_rel_to_row"] < 1e-5  # and every edge within 1e-5 of its target's largest
    assert max(abs(a - b) for a, b in zip(c["scores_ours"], c["scores_theirs"])) < 1e-5
    assert max(abs(a - b) for a, b in zip(c["scores_ours"], c["scores_theirs_on_ours"])) < 1e-5
    assert c["same_nodes"] and c["same_edges"] and c["same_nodes_on_ours"] and c["same_edges_on_ours"]
    assert 0 < c["pruned_ours"][0] < len(mine[0]["result"].graph.nodes)  # pruning removed something
