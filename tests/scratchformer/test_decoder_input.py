"""What the decoder reads: a typed target (teacher forcing), the model's own greedy output when the target is
empty, or the start token alone — in the core, in `trace --json`, and with the examples every model carries."""

import json

import pytest

from scratchformer.cli import main
from scratchformer.loading.bundle import GENERATION_CAP, examples_of, load_model, model_names
from scratchformer.running.decoding import greedy
from scratchformer.running.examples import known_fraction


@pytest.fixture(scope="module")
def en_hi():
    return load_model("en-hi")


def trace_json(capsys, *argv):
    code = main(["trace", *argv, "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    return json.loads(out)


def test_empty_target_means_the_models_own_translation(en_hi, capsys):
    inputs = en_hi.prepare_run("the girl eats an apple")
    expected = greedy(en_hi, inputs.src[0].tolist(), 31)
    assert inputs.decoder_input == "generated"
    assert inputs.tgt[0].tolist() == [en_hi.start_id()] + expected
    assert inputs.translation == "लड़की सेब खाती है"
    data = trace_json(capsys, "--model", "en-hi", "--source", "the girl eats an apple")
    assert data["decoder_input"] == "generated" and data["translation"] == "लड़की सेब खाती है"
    assert data["target_tokens"][0] == ["<s>", "लड़की", "सेब", "खाती", "है"]
    shapes = {s["name"]: s["shape"] for s in data["steps"]}
    assert shapes["decoder.1.cross_attn.weights"] == [1, 4, 5, 6]  # 5 decoder rows × 6 source tokens


def test_typed_target_and_start_only(en_hi, capsys):
    typed = trace_json(capsys, "--model", "en-hi", "--source", "we are friends", "--target", "हम दोस्त हैं")
    assert typed["decoder_input"] == "typed" and typed["target_tokens"][0] == ["<s>", "हम", "दोस्त", "हैं"]
    alone = trace_json(capsys, "--model", "en-hi", "--source", "we are friends", "--start-only")
    assert alone["decoder_input"] == "start_only" and alone["target_tokens"][0] == ["<s>"]
    assert "translation" not in alone
    assert main(["trace", "--model", "en-hi", "--source", "we are friends", "--target", "हम", "--start-only"]) == 2
    assert "exclude each other" in capsys.readouterr().err


def test_windows_and_encoder_only_say_what_the_decoder_reads(capsys, tmp_path):
    text = tmp_path / "t.txt"
    text.write_text("machine learning using PyTorch is fun because tensors flow through layers", encoding="utf-8")
    data = trace_json(capsys, "--model", "blog", "--text-file", str(text), "--seq-len", "5", "--batch", "2")
    assert data["decoder_input"] == "windows"


def test_a_random_model_stops_at_the_stated_cap():
    paper = load_model("paper")
    inputs = paper.prepare_run("The quick brown fox jumps over the lazy dog.")
    n_source = inputs.src.shape[1]
    assert inputs.decoder_input == "generated"
    # random weights never emit the end token: the output runs to the cap, 2n + 10 at most GENERATION_CAP
    assert inputs.tgt.shape[1] - 1 == paper.generation_limit(n_source) == min(2 * n_source + 10, GENERATION_CAP)
    assert paper.untrained and not load_model("en-hi").untrained


def test_parameters_in_the_json_model(capsys):
    data = trace_json(capsys, "--model", "en-hi", "--source", "we are friends")
    params = data["model"]["parameters"]
    model = load_model("en-hi").model
    assert params["total"] == sum(p.numel() for p in model.parameters())
    assert params["encoder.0.self_attn"] == sum(p.numel() for p in model.encoder[0].self_attn.parameters())
    assert params["decoder.1.ffn"] == sum(p.numel() for p in model.decoder[1].ffn.parameters())


def test_every_model_has_examples_its_vocabulary_knows():
    for name in model_names():
        examples = examples_of(name)
        assert examples, name
        bundle = load_model(name)
        assert [e.source for e in bundle.examples()] == [e.source for e in examples]
        first = examples[0]
        assert known_fraction(bundle.src_tokenizer, first.source) == 1.0, (name, first.source)
        if first.windows is None:
            inputs = bundle.prepare(first.source)
            assert not inputs.unknown_words and not inputs.notes, name
        else:
            s, b = first.windows
            assert bundle.prepare_windows(first.source, s, b).src.shape == (b, s)
    blog = examples_of("blog")[0]
    assert blog.windows == (10, 4)


def test_unknown_words_lower_the_known_fraction(en_hi):
    assert known_fraction(en_hi.src_tokenizer, "the girl eats an apple") == 1.0
    assert known_fraction(en_hi.src_tokenizer, "machine learning using PyTorch") == 0.25  # only "using"
    assert known_fraction(load_model("blog").src_tokenizer, "machine learning using PyTorch") == 1.0


def test_trace_explain_adds_an_explanation_to_every_step(capsys):
    data = trace_json(capsys, "--model", "en-hi", "--source", "we are friends", "--explain")
    assert all(len(s["explanation"]) > 60 for s in data["steps"])
    scaled = next(s for s in data["steps"] if s["name"] == "encoder.0.self_attn.scaled_scores")
    assert "d_k = 32" in scaled["explanation"] and "5.66" in scaled["explanation"]
    assert main(["trace", "--model", "en-hi", "--source", "we are friends", "--explain"]) == 0
    table = capsys.readouterr().out
    assert "Why:" in table and "decoder input: the model's own output" in table
    assert "the model's output: हम दोस्त हैं" in table


def test_trace_lists_departures_from_the_paper(capsys):
    from scratchformer.transformer.departures import departures

    assert trace_json(capsys, "--model", "en-hi", "--source", "we are friends")["model"]["departures"] == []
    assert main(["trace", "--model", "blog", "--source", "machine learning", "--start-only"]) == 0
    assert "departures from the 2017 paper: none" in capsys.readouterr().out
    assert departures(load_model("paper").config) == []
