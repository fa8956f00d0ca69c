"""circuit-tracer's side of benchmarks/bench_graph.py and tests/scratchformer/test_graph_circuit_tracer.py, run by
the Python of an environment that has circuit-tracer (scripts/circuit-tracer-env.sh makes .venv-circuit-tracer).

It imports circuit-tracer, TransformerLens and transformers, never scratchformer: the two sides meet only in files.

    python benchmarks/circuit_tracer_side.py JOB.json

JOB.json: {"folder": a GPT-2 folder (transformers' GPT2LMHeadModel and tokenizer.json),
           "transcoders": [layer 0's safetensors, …] in circuit-tracer's format, "input_hook", "output_hook",
           "prompts": [{"ids": [...], "target": token id, "ours": a .pt of our graph or null}, …],
           "node_threshold", "edge_threshold", "threads", "repeats", "batch_size", "out": a .pt to write}

For each prompt it times `attribute` (the target token's logit only, every active feature a node) and circuit-
tracer's `prune_graph` and `compute_graph_scores` on its graph, best of `repeats`, and keeps the adjacency, the
active features, the pruned masks and the scores. Where "ours" names our graph's adjacency it also runs those two
functions on it, so our matrix is held to circuit-tracer's pruning and scores whatever the two attributions gave.
The last line on standard output is a JSON summary (versions, times, scores); the tensors go to "out".

How the model is opened, and why not with `ReplacementModel.from_pretrained`: that calls TransformerLens's
`HookedTransformer.from_pretrained`, which takes only the names of models TransformerLens knows (a folder is refused
as "not found") and, even given the name "gpt2" with our weights as hf_model, reads that name's config.json from
the Hugging Face hub (GPT-2 small's shape, not the folder's) — and there is no hub here. So the side builds the
HookedTransformerConfig from the folder's config.json, opens the replacement model with circuit-tracer's
`ReplacementModel.from_config`, and loads the folder's weights with TransformerLens's own GPT-2 converter, unfolded
and uncentred (as `from_pretrained_and_transcoders` asks: fold_ln, center_writing_weights and center_unembed
False), so it computes with the same numbers as the folder. The transcoders are loaded from the local files with
circuit-tracer's `load_transcoder_set`.
"""

from __future__ import annotations

import json
import sys
import tempfile
import time


def open_model(folder: str, job: dict):
    import torch
    import transformers
    from circuit_tracer import ReplacementModel
    from circuit_tracer.transcoder.single_layer_transcoder import load_transcoder_set
    from transformer_lens import HookedTransformerConfig
    from transformer_lens.pretrained.weight_conversions.gpt2 import convert_gpt2_weights

    hf = transformers.GPT2LMHeadModel.from_pretrained(folder).eval()
    c = hf.config
    cfg = HookedTransformerConfig(
        model_name="gpt2-shaped-local", original_architecture="GPT2LMHeadModel", d_model=c.n_embd,
        d_head=c.n_embd // c.n_head, n_heads=c.n_head, d_mlp=c.n_inner or 4 * c.n_embd, n_layers=c.n_layer,
        n_ctx=c.n_positions, eps=c.layer_norm_epsilon, d_vocab=c.vocab_size, act_fn=c.activation_function,
        use_attn_scale=True, scale_attn_by_inverse_layer_idx=c.scale_attn_by_inverse_layer_idx,
        normalization_type="LN", positional_embedding_type="standard", device="cpu", dtype=torch.float32,
    )  # fmt: skip
    # transformers 5 writes tokenizer_config.json with a class transformers 4 lacks, and TransformerLens reopens the
    # tokenizer by its folder: read tokenizer.json itself and write a folder transformers 4 reads
    end = "<|endoftext|>"
    made = transformers.GPT2TokenizerFast(tokenizer_file=f"{folder}/tokenizer.json", bos_token=end, eos_token=end,
                                          unk_token=end)  # fmt: skip
    where = tempfile.mkdtemp(prefix="ct-tokenizer-")
    made.save_pretrained(where)
    tok = transformers.GPT2TokenizerFast.from_pretrained(where, add_bos_token=True)
    transcoders = load_transcoder_set(dict(enumerate(job["transcoders"])), scan="bench_graph",
                                      feature_input_hook=job["input_hook"], feature_output_hook=job["output_hook"],
                                      device=torch.device("cpu"), dtype=torch.float32, lazy_encoder=False,
                                      lazy_decoder=False)  # fmt: skip
    model = ReplacementModel.from_config(cfg, transcoders, backend="transformerlens", tokenizer=tok)
    weights = convert_gpt2_weights(hf, cfg)
    # the replacement model wraps each MLP and the unembedding (ReplacementMLP.old_mlp, ReplacementUnembed)
    renamed = {}
    for k, v in weights.items():
        if ".mlp." in k:
            k = k.replace(".mlp.", ".mlp.old_mlp.")
        elif k.startswith("unembed."):
            k = k.replace("unembed.", "unembed.old_unembed.")
        renamed[k] = v.detach().clone()
    renamed["unembed.old_unembed.b_U"] = torch.zeros(cfg.d_vocab)  # GPT-2's output layer has no bias
    missing, unexpected = model.load_state_dict(renamed, strict=False)
    missing = [k for k in missing if not k.endswith(("IGNORE", ".mask", "W_enc", "W_dec", "b_enc", "b_dec",
                                                     "threshold")) and not k.startswith("transcoders.")]  # fmt: skip
    if missing or unexpected:
        raise SystemExit(f"circuit-tracer side: weights not loaded: missing {missing}, unexpected {unexpected}")
    model.eval()
    return model, cfg


def why_not_from_pretrained(folder: str) -> list[str]:
    """What TransformerLens says when circuit-tracer's own loader is pointed at the folder (first lines)."""
    from transformer_lens import HookedTransformer

    said = []
    try:
        HookedTransformer.from_pretrained(folder, fold_ln=False, center_writing_weights=False, center_unembed=False)
    except Exception as exc:  # noqa: BLE001 - reported, not handled
        said.append(f"from_pretrained({folder!r}): {type(exc).__name__}: {str(exc).splitlines()[0][:160]}")
    return said


def graph_of_ours(ours: dict, cfg, ids, target: int, prob: float):
    """circuit-tracer's Graph around our adjacency (float32, its functions' precision)."""
    import torch
    from circuit_tracer.attribution.targets import LogitTarget
    from circuit_tracer.graph import Graph

    n_feat = len(ours["features"])
    return Graph(input_string="", input_tokens=torch.tensor(ids), active_features=ours["features"],
                 adjacency_matrix=ours["adjacency"].float(), cfg=cfg, selected_features=torch.arange(n_feat),
                 activation_values=ours["activations"].float(), logit_targets=[LogitTarget("", target)],
                 logit_probabilities=torch.tensor([prob]), scan="ours", vocab_size=cfg.d_vocab)  # fmt: skip


def main() -> None:
    job = json.load(open(sys.argv[1], encoding="utf-8"))
    import logging

    import torch

    logging.disable(logging.WARNING)  # "Graph loaded without scan" and the like
    torch.set_num_threads(int(job.get("threads", 1)))
    import circuit_tracer
    import transformers
    from circuit_tracer import attribute
    from circuit_tracer.graph import compute_graph_scores, prune_graph

    nt, et = job.get("node_threshold", 0.8), job.get("edge_threshold", 0.98)
    started = time.perf_counter()
    model, cfg = open_model(job["folder"], job)
    load_seconds = time.perf_counter() - started
    out, summary = [], []
    for prompt in job["prompts"]:
        ids = torch.tensor(prompt["ids"])
        with torch.no_grad():
            logits = model(ids[None])[0, -1]  # (vocab,)
        target = int(prompt["target"])
        prob = float(torch.softmax(logits, -1)[target])
        times, attribute_times = [], []
        for _ in range(int(job.get("repeats", 2))):
            t = time.perf_counter()
            graph = attribute(ids, model, attribution_targets=torch.tensor([target]),
                              batch_size=int(job.get("batch_size", 512)), verbose=False)  # fmt: skip
            attribute_times.append(time.perf_counter() - t)
            pruned = prune_graph(graph, nt, et)
            scores = compute_graph_scores(graph)
            times.append(time.perf_counter() - t)
        row = {"adjacency": graph.adjacency_matrix, "features": graph.active_features,
               "activations": graph.activation_values, "selected": graph.selected_features,
               "node_mask": pruned.node_mask, "edge_mask": pruned.edge_mask, "scores": scores,
               "times": times, "attribute_times": attribute_times, "prob": prob,
               "argmax": int(logits.argmax()), "logit": float(logits[target]),
               "demeaned": float(logits[target] - logits.mean())}  # fmt: skip
        if prompt.get("ours"):
            ours = torch.load(prompt["ours"], weights_only=False)
            g = graph_of_ours(ours, cfg, prompt["ids"], target, prob)
            held = prune_graph(g, nt, et)
            row["on_ours"] = {"node_mask": held.node_mask, "edge_mask": held.edge_mask,
                              "scores": compute_graph_scores(g)}  # fmt: skip
        out.append(row)
        summary.append({"times": times, "attribute_times": attribute_times, "scores": scores,
                        "features": len(graph.active_features)})  # fmt: skip
    torch.save(out, job["out"])
    print(json.dumps({"circuit_tracer": circuit_tracer.__version__, "transformer_lens": _version("transformer-lens"),
                      "transformers": transformers.__version__, "torch": torch.__version__,
                      "torch_threads": torch.get_num_threads(), "load_seconds": load_seconds,
                      "why_not_from_pretrained": why_not_from_pretrained(job["folder"]) if job.get("why") else [],
                      "prompts": summary}))  # fmt: skip


def _version(name: str) -> str:
    from importlib.metadata import version

    return version(name)


if __name__ == "__main__":
    main()
