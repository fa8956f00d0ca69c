"""A lazy trace (bounded memory, issue 12) gives every consumer the values an eager trace stores, bit for bit."""

from __future__ import annotations

import pytest
import torch

from scratchformer import Transformer, TransformerConfig
from scratchformer.recording.lazy import Held, RecomputeCache

SMALL = dict(src_vocab_size=40, tgt_vocab_size=45, share_embeddings=False, d_model=16, n_heads=4,
             n_encoder_layers=2, n_decoder_layers=2, d_ff=32, max_len=64, dropout=0.0)
VARIANTS = {
    "paper": {},
    "pre-LN, final norm, GELU": dict(norm_first=True, final_layer_norm=True, activation="gelu"),
    "T5-shaped": dict(norm_first=True, final_layer_norm=True, norm="rmsnorm", linear_bias=False,
                      scale_attention=False, relative_buckets=8, relative_max_distance=16, ffn_gated=True,
                      activation="gelu_tanh", positional="none", d_kv=8, scale_decoder_output=True),
    "decoder-only": dict(n_encoder_layers=0),
}


def _runs(overrides: dict, pad: bool = True):
    torch.manual_seed(0)
    config = TransformerConfig(**{**SMALL, **overrides})
    model = Transformer(config).eval()
    b, s, t = 3, 7, 6
    src = torch.randint(4, 40, (b, s)) if config.has_encoder else None
    tgt = torch.randint(4, 45, (b, t))
    src_pad = torch.zeros(b, s, dtype=torch.bool) if src is not None else None
    tgt_pad = torch.zeros(b, t, dtype=torch.bool)
    if pad and src is not None:
        src_pad[1, 5:] = True  # a padded source and target, so masks differ between batch items
        tgt_pad[2, 4:] = True
    eager_out, eager = model.run_with_trace(src, tgt, src_pad, tgt_pad, lazy=False)
    lazy_out, lazy = model.run_with_trace(src, tgt, src_pad, tgt_pad, keep_bytes=0)
    return eager_out, eager, lazy_out, lazy


@pytest.mark.parametrize("chunk_rows", [256, 1, 14], ids=["whole batch", "item by item", "chunks of 2 and 1"])
@pytest.mark.parametrize("variant", list(VARIANTS))
def test_every_recomputed_step_equals_the_stored_one_exactly(variant, chunk_rows, monkeypatch):
    monkeypatch.setattr("scratchformer.transformer.model.CHUNK_ROWS", chunk_rows)  # how many items are traced together
    eager_out, eager, lazy_out, lazy = _runs(VARIANTS[variant])
    assert torch.equal(eager_out, lazy_out)
    assert lazy.names() == eager.names()
    recomputed = lazy.recomputed_steps()
    kinds = {s.kind for s in recomputed}
    expected = {"scores", "attention_weights", "ffn_hidden", "probabilities", "logits"}
    if not VARIANTS[variant].get("norm_first"):  # pre-LN: the residual sum is the stream itself, kept
        expected.add("residual")
    assert expected <= kinds
    for e, s in zip(eager, lazy):
        assert (s.kind, s.title, s.formula, s.dims, s.shape) == (e.kind, e.title, e.formula, e.dims, e.shape)
        assert torch.equal(s.tensor, e.tensor), s.name  # the whole batch, recomputed in one go
        if "batch" in s.dims:
            for b in range(s.shape[0]):  # one item at a time, as the window asks
                assert torch.equal(s.item(b), e.tensor[b]), (s.name, b)


def test_the_output_summary_matches_the_probabilities():
    _, eager, _, lazy = _runs({})
    probs = eager["generator.probs"].tensor  # (B, T, vocab)
    summary = lazy.output_summary
    top = probs.topk(summary.top_ids.shape[-1], dim=-1)
    assert torch.equal(summary.top_probs, top.values) and torch.equal(summary.top_ids, top.indices)
    tgt = eager["tgt_embed.tokens"].tensor
    expected = probs[:, :-1].gather(-1, tgt[:, 1:, None])[..., 0]
    assert torch.equal(summary.next_probs, expected)
    assert eager.output_summary is not None and torch.equal(eager.output_summary.top_ids, summary.top_ids)


def test_a_lazy_trace_holds_the_residual_stream_not_the_attention_maps():
    """The bound the design promises: no step holds more than the larger of the residual stream (T × d_model
    floats) per batch item and keep_bytes (256 KiB) per traced chunk; each attention map is recomputed."""
    torch.manual_seed(0)
    config = TransformerConfig(**{**SMALL, "max_len": 256})
    model = Transformer(config).eval()
    b, n = 2, 200
    src, tgt = torch.randint(4, 40, (b, n)), torch.randint(4, 45, (b, n))
    _, eager = model.run_with_trace(src, tgt, lazy=False)
    _, lazy = model.run_with_trace(src, tgt)
    stream = n * config.d_model * 4  # one item's residual-stream tensor, float32
    stored = [s for s in lazy if s.stored]
    assert all(t.numel() * t.element_size() <= max(t.shape[0] * stream, 256 * 1024)  # per item of a chunk
               for s in stored for t in s.held() if "batch" in s.dims)  # fmt: skip
    assert lazy.stored_bytes() <= len(stored) * b * max(stream, 256 * 1024)
    assert lazy.stored_bytes() < eager.stored_bytes() / 5
    assert all(not lazy[f"encoder.{i}.self_attn.{k}"].stored for i in range(2) for k in ("scores", "weights"))


def test_the_recompute_cache_has_a_limit_and_evicts_the_least_recently_used():
    torch.manual_seed(0)
    model = Transformer(TransformerConfig(**{**SMALL, "max_len": 256})).eval()
    src, tgt = torch.randint(4, 40, (1, 120)), torch.randint(4, 45, (1, 120))
    cache = RecomputeCache(limit_bytes=2 * 2**20)
    _, trace = model.run_with_trace(src, tgt, keep_bytes=0, cache=cache)
    weights = [s for s in trace if s.kind == "attention_weights"]
    for s in weights:
        s.item(0)
        assert cache.bytes <= cache.limit_bytes
    assert cache.evictions > 0 and cache.misses == len(weights)
    again = trace["decoder.1.cross_attn.scores"]  # same sublayer as the last map asked for: a hit
    hits = cache.hits
    again.item(0)
    assert cache.hits == hits + 1
    first = weights[0]
    misses = cache.misses
    first.item(0)  # evicted long ago: recomputed, and still the same numbers
    assert cache.misses == misses + 1
    _, eager = model.run_with_trace(src, tgt, lazy=False)
    assert torch.equal(first.item(0), eager[first.name].tensor[0])


def test_training_mode_traces_store_everything():
    torch.manual_seed(0)
    model = Transformer(TransformerConfig(**{**SMALL, "dropout": 0.1})).train()
    _, trace = model.run_with_trace(torch.randint(4, 40, (1, 5)), torch.randint(4, 45, (1, 5)), keep_bytes=0)
    assert all(s.stored for s in trace)


def test_exporting_every_attention_map_streams_map_by_map(tmp_path):
    from scratchformer.exporting import ExportRun, plan_attention_maps
    from scratchformer.exporting.tensors import read_csv

    torch.manual_seed(0)
    model = Transformer(TransformerConfig(**{**SMALL, "max_len": 256})).eval()
    src, tgt = torch.randint(4, 40, (2, 100)), torch.randint(4, 45, (2, 100))
    cache = RecomputeCache(limit_bytes=1 * 2**20)  # room for about two sublayers of one item
    _, trace = model.run_with_trace(src, tgt, keep_bytes=0, cache=cache)
    tasks = plan_attention_maps(trace, tmp_path, ["csv"], batch=1)
    assert cache.misses == 0  # planning computes nothing: each map is built when its file is written
    run = ExportRun(tasks, tmp_path)
    while run.step():
        assert cache.bytes <= cache.limit_bytes
    result = run.finish()
    n_maps = sum(s.shape[1] for s in trace.attention_steps())  # every head of every attention
    assert len(result.files) == n_maps == len(list(tmp_path.glob("*_head*.csv")))  # (and index.csv)
    _, eager = model.run_with_trace(src, tgt, lazy=False)
    _, _, values = read_csv(tasks[0].path)  # encoder layer 1, head 1, of batch item 2
    assert torch.allclose(torch.from_numpy(values), eager["encoder.0.self_attn.weights"].tensor[1, 0], atol=1e-6)


def test_an_npz_of_every_step_is_written_step_by_step_with_the_eager_values(tmp_path):
    import numpy as np

    from scratchformer.exporting.tensors import write_npz

    torch.manual_seed(0)
    model = Transformer(TransformerConfig(**{**SMALL, "max_len": 256})).eval()
    src, tgt = torch.randint(4, 40, (2, 100)), torch.randint(4, 45, (2, 100))
    cache = RecomputeCache(limit_bytes=2**20)
    _, trace = model.run_with_trace(src, tgt, keep_bytes=0, cache=cache)
    path = tmp_path / "all.npz"
    with open(path, "wb") as f:
        write_npz(f, trace, list(trace))
    assert cache.bytes <= cache.limit_bytes  # never more recomputed interiors kept than the cache allows
    _, eager = model.run_with_trace(src, tgt, lazy=False)
    with np.load(path) as data:  # np.load reads it like np.savez_compressed's files
        assert list(data["steps"]) == eager.names()
        for s in eager:
            assert np.array_equal(data[s.name], s.tensor.numpy()), s.name
            assert list(data[f"dims:{s.name}"]) == list(s.dims)


def test_csv_files_of_every_step_are_planned_from_shapes_and_filled_when_written(tmp_path):
    from scratchformer.exporting import ExportRun, plan_export
    from scratchformer.exporting.tensors import matrix_slots, step_matrices

    torch.manual_seed(0)
    model = Transformer(TransformerConfig(**{**SMALL, **VARIANTS["T5-shaped"], "max_len": 256})).eval()
    src, tgt = torch.randint(4, 40, (2, 90)), torch.randint(4, 45, (2, 90))
    cache = RecomputeCache(limit_bytes=2**20)
    _, trace = model.run_with_trace(src, tgt, keep_bytes=0, cache=cache)
    for step in trace:  # the index rows come from shapes: they must be what the files hold
        slots = matrix_slots(step, batch=1)
        assert [s.shape for s in slots] == [m.values.shape for m in step_matrices(trace, step, 1)], step.name
    cache.clear()
    misses = cache.misses
    tasks = plan_export(trace, tmp_path, ["csv"], ["all"], batch=1)
    assert cache.misses == misses  # planning computed nothing
    run = ExportRun(tasks, tmp_path)
    while run.step():
        assert cache.bytes <= cache.limit_bytes
    assert len(run.finish().files) == len(tasks) == sum(len(matrix_slots(s, 1)) for s in trace)


def test_two_threads_asking_for_the_same_interior_compute_it_once():
    import threading
    import time

    cache = RecomputeCache()
    calls = []

    def slow():
        calls.append(1)
        time.sleep(0.2)
        return {"x": torch.ones(4)}

    results = []
    threads = [threading.Thread(target=lambda: results.append(cache.get_or_compute(("k",), slow))) for _ in range(2)]
    for t in threads:
        t.start()
    assert not cache.contains(("k",))  # asking what is there never waits for a computation
    for t in threads:
        t.join()
    assert len(calls) == 1 and results[0] is results[1] and cache.contains(("k",))


def test_a_step_a_smaller_chunk_kept_is_ready_without_a_rerun(monkeypatch):
    # Chunks of 2 and 1 items (14 rows each): a step whose larger chunk recomputes it is kept whole by the
    # smaller last chunk when one item's tensor fits keep_bytes and two do not. Reading that item reruns
    # nothing, so it is ready — else the window would "recompute" it and its prefetch ask for it over and over.
    monkeypatch.setattr("scratchformer.transformer.model.CHUNK_ROWS", 14)
    model = Transformer(TransformerConfig(**SMALL)).eval()
    torch.manual_seed(0)
    src, tgt = torch.randint(4, 40, (3, 7)), torch.randint(4, 45, (3, 6))
    _, eager = model.run_with_trace(src, tgt, lazy=False)
    item_bytes = eager["encoder.0.self_attn.weights"].tensor[0].numel() * 4  # (h, S, S) float32 of one item
    _, lazy = model.run_with_trace(src, tgt, keep_bytes=item_bytes)  # one item's map fits, two do not
    mixed = [s for s in lazy if s.sources is not None and any(isinstance(x, Held) for x in s.sources)]
    assert "encoder.0.self_attn.weights" in [s.name for s in mixed]
    for s in mixed:
        for b in range(s.shape[0]):
            source = s.sources[max(i for i, off in enumerate(s.offsets) if off <= b)]
            if isinstance(source, Held):
                assert s.ready(b) and torch.equal(s.item(b), eager[s.name].tensor[b]), (s.name, b)
            else:
                assert s.ready(b) == source.cache.contains((source.key,))


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_a_trace_whose_output_nobody_reads_makes_the_logits_only_when_shown(variant, monkeypatch):
    """keep_output=False (the window's and `trace`'s runs): the (B, T, vocab) logits, often the pass's largest
    product, are not made during the pass; shown later, they and the probabilities equal the eager trace's, and
    the logits' non-finite flag was still set during the pass."""
    from scratchformer.transformer.model import Generator

    _, eager, _, _ = _runs(VARIANTS[variant])
    torch.manual_seed(0)  # the model _runs made: the same seed, the same weights
    config = TransformerConfig(**{**SMALL, **VARIANTS[variant]})
    model = Transformer(config).eval()
    tgt = eager["tgt_embed.tokens"].tensor
    src = eager["src_embed.tokens"].tensor if config.has_encoder else None
    made = []
    original = Generator.logits
    monkeypatch.setattr(Generator, "logits", lambda self, x: made.append(x.shape) or original(self, x))
    out, lazy = model.run_with_trace(src, tgt, eager.source_pad, eager.target_pad, keep_bytes=0, keep_output=False)
    assert out is None and made == []  # nothing computed the vocabulary's scores during the pass
    assert lazy["generator.logits"].nonfinite_flag is not None and not bool(lazy["generator.logits"].nonfinite_flag)
    assert torch.equal(lazy["generator.logits"].tensor, eager["generator.logits"].tensor)
    assert torch.equal(lazy["generator.probs"].tensor, eager["generator.probs"].tensor)
    assert torch.equal(lazy.output_summary.top_ids, eager.output_summary.top_ids) and made  # made when shown
