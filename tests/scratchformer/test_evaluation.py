"""Evaluation figures, the translate/evaluate commands, and the shipped en-hi model's accuracy."""

import json

import pytest
import torch

from scratchformer.cli import main
from scratchformer.loading.bundle import ModelBundle, bundled_models, load_model
from scratchformer.loading.tokenizers import word_level_tokenizer
from scratchformer.tasks import Pair
from scratchformer.training.evaluation import evaluate, format_table
from scratchformer.transformer.config import TransformerConfig
from scratchformer.transformer.model import Transformer

PAIRS = [Pair("a b c", "c b a", (2, 1, 0)), Pair("b c", "c b", (1, 0)), Pair("c a b", "b a c", (2, 1, 0))]


def _bundle() -> ModelBundle:
    tok = word_level_tokenizer(["a b c"], "abc")
    config = TransformerConfig(
        d_model=16, n_heads=2, d_ff=32, n_encoder_layers=1, n_decoder_layers=2, dropout=0.0,
        src_vocab_size=tok.vocab_size, tgt_vocab_size=tok.vocab_size, max_len=16, share_embeddings=False,
        pad_id=0, bos_id=1, eos_id=2, extra={"src_suffix": ["</s>"], "alignment_layer": 1},
    )  # fmt: skip
    torch.manual_seed(0)
    return ModelBundle(Transformer(config).eval(), tok, tok, "abc", "test")


def test_alignment_accuracy_counts_argmax_hits_against_gold(monkeypatch):
    """Known attention in, known figures out: layer 1 looks at the gold word, layer 0 always at token 0."""
    import contextlib

    import scratchformer.training.evaluation as ev

    real_tracing = ev.tracing

    @contextlib.contextmanager
    def planted_tracing():
        with real_tracing() as tracer:
            yield tracer
        for step in tracer.steps:
            if step.name == "decoder.1.cross_attn.weights":
                w = torch.zeros_like(step.tensor)  # (B, h, T, S)
                for b, p in enumerate(PAIRS):
                    for j, i in enumerate(p.alignment):
                        w[b, :, j, i] = 1.0
                w[2, 1, 0] = 0.0  # head 1 looks mostly at the wrong word for one target word
                w[2, 1, 0, 0], w[2, 1, 0, 2] = 0.6, 0.4
                step.tensor = w
            elif step.name == "decoder.0.cross_attn.weights":
                w = torch.zeros_like(step.tensor)
                w[..., 0] = 1.0
                step.tensor = w

    monkeypatch.setattr(ev, "tracing", planted_tracing)
    result = evaluate(_bundle(), PAIRS, "test")
    assert result.n_words == 8
    assert result.chosen_layer == 1 and "validation" in result.chosen_by  # the config's alignment_layer
    assert result.layer_accuracy[1] == pytest.approx(1.0)  # heads averaged: 0.7 on gold beats 0.3
    assert result.head_accuracy[1] == pytest.approx([1.0, 7 / 8])
    golds_at_0 = sum(i == 0 for p in PAIRS for i in p.alignment)
    assert result.layer_accuracy[0] == pytest.approx(golds_at_0 / 8)
    assert result.best_head == (1, 0, 1.0)
    assert 0.0 <= result.exact_match <= 1.0
    table = format_table(result, "abc")
    assert "best single head: decoder layer 2, head 1 (decoder.1.cross_attn.head0): 100.00%" in table
    rows = [line.split() for line in table.splitlines() if line.startswith("  ") and line.split()[0].isdigit()]
    assert [r[0] for r in rows] == ["1", "2"] and rows[1][-1] == "←"  # layers from 1, as the window; 2 chosen


def test_exact_match_counts_outputs_equal_to_the_gold_target(monkeypatch):
    """Greedy decoding planted: the first pair decoded exactly, the second one token short, the third with one
    token wrong — 1 of 3 exact, and the two misses listed with what the model wrote."""
    import scratchformer.training.evaluation as ev

    bundle = _bundle()
    tok = bundle.tgt_tokenizer
    gold = [tok.encode(p.target) for p in PAIRS]  # the target's ids, no start or end token
    planted = [gold[0], gold[1][:-1], gold[2][:-1] + [tok.encode("a")[0] if gold[2][-1] != tok.encode("a")[0]
                                                      else tok.encode("b")[0]]]
    monkeypatch.setattr(ev, "greedy_batch", lambda model, src, src_pad, max_len: [list(r) for r in planted])
    result = evaluate(bundle, PAIRS, "test")
    assert result.exact_match == pytest.approx(1 / 3)
    assert [e["source"] for e in result.examples] == [PAIRS[1].source, PAIRS[2].source]
    assert [e["output"] for e in result.examples] == [tok.decode(planted[1]), tok.decode(planted[2])]


def test_evaluate_on_a_random_model_gives_figures_in_range():
    result = evaluate(_bundle(), PAIRS, "test", layer=0)
    assert result.chosen_layer == 0 and result.chosen_by == "--layer"
    assert len(result.layer_accuracy) == 2 and len(result.head_accuracy[0]) == 2
    assert all(0 <= a <= 1 for a in result.layer_accuracy)


def test_translate_reports_unknown_words_and_rejects_bad_beam(tmp_path, capsys):
    from scratchformer.loading.checkpoint import save_checkpoint

    bundle = _bundle()
    save_checkpoint(tmp_path / "m", bundle.model, bundle.src_tokenizer, bundle.tgt_tokenizer)
    assert main(["translate", "--model", str(tmp_path / "m"), "--source", "a zebra b", "--beam", "2"]) == 0
    captured = capsys.readouterr()
    assert "Unknown words (not in the model's vocabulary): zebra" in captured.err
    assert main(["translate", "--model", str(tmp_path / "m"), "--source", "a b", "--beam", "0"]) == 2
    assert "--beam must be at least 1" in capsys.readouterr().err


def test_evaluate_command_on_a_user_tsv(tmp_path, capsys):
    from scratchformer.loading.checkpoint import save_checkpoint

    bundle = _bundle()
    save_checkpoint(tmp_path / "m", bundle.model, bundle.src_tokenizer, bundle.tgt_tokenizer)
    data = tmp_path / "pairs.tsv"
    data.write_text("".join(f"{p.source}\t{p.target}\t{' '.join(map(str, p.alignment))}\n" for p in PAIRS),
                    encoding="utf-8")
    assert main(["evaluate", "--model", str(tmp_path / "m"), "--data", str(data), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["n_pairs"] == 3 and out["n_words"] == 8 and len(out["layer_accuracy"]) == 2
    assert main(["evaluate", "--model", str(tmp_path / "m")]) == 2  # no task: needs --data
    assert "--data" in capsys.readouterr().err


@pytest.mark.skipif("en-hi" not in bundled_models(), reason="the trained en-hi model is not in resources/ yet")
def test_shipped_en_hi_model_translates_and_aligns():
    from scratchformer.training import task_splits

    bundle = load_model("en-hi")
    test = task_splits("en-hi", int(bundle.config.extra.get("seed", 0)))["test"][::5]  # 200 of the 1000
    result = evaluate(bundle, test, "test")
    assert result.exact_match >= 0.99
    layer, head = result.guided_head  # the head the README reports: chosen before testing
    assert result.head_accuracy[layer][head] >= 0.90
    assert result.alignment_accuracy >= 0.80  # heads averaged (the other heads are not supervised)
