"""The option checks of `translate`, `evaluate`, `export` and `train`: each bad value is refused with exit status 2
and one sentence on stderr (no traceback), before any work; --max-len really bounds what translate generates;
`train --resume` refuses a changed model or data; `--precision bf16` is refused on the CPU."""

import pytest
import torch
from transformers import BertConfig, BertModel, GPT2Config, GPT2LMHeadModel

from scratchformer.cli import main
from scratchformer.loading.tokenizers import gpt2_tokenizer

TINY = ["--d-model", "16", "--heads", "2", "--layers", "1", "--d-ff", "32", "--quiet", "--threads", "1"]
DIGITS = "3 1 4 1 5 9 2 6"  # the copy model's output is its input


@pytest.fixture(autouse=True)
def keep_torch_threads():
    """Training sets torch's thread count for the process; give the next tests the one they had."""
    threads = torch.get_num_threads()
    yield
    torch.set_num_threads(threads)


def _cli(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def _refused(capsys, argv, message):
    code, out, err = _cli(capsys, *argv)
    assert (code, err) == (2, f"scratchformer: {message}\n"), (code, err)
    assert "Traceback" not in err and out == ""


@pytest.mark.parametrize("argv, message", [
    (["--max-len", "0"], "--max-len must be at least 1, not 0."),
    (["--max-len", "-3"], "--max-len must be at least 1, not -3."),
    (["--beam", "-2"], "--beam must be at least 1, not -2."),
    (["--max-new", "-1"], "--max-new must be at least 1, not -1."),
    (["--top-k", "-5"], "--top-k must be at least 1, not -5."),
])  # fmt: skip
def test_translate_refuses_bad_numbers(capsys, argv, message):
    _refused(capsys, ["translate", "--model", "copy", "--source", DIGITS, *argv], message)


def test_translate_max_len_bounds_the_generated_tokens(capsys):
    for extra in ([], ["--beam", "3"]):
        code, out, err = _cli(capsys, "translate", "--model", "copy", "--source", DIGITS, "--tokens", *extra)
        assert code == 0, err
        assert out.splitlines()[1].split(" | ") == DIGITS.split()  # unbounded: the whole copy
        code, out, err = _cli(capsys, "translate", "--model", "copy", "--source", DIGITS, "--tokens", "--max-len",
                              "3", *extra)  # fmt: skip
        assert code == 0, err
        assert out.splitlines()[1].split(" | ") == DIGITS.split()[:3], extra  # the first three, then it stops


def test_translate_refuses_a_model_without_a_decoder(capsys, tmp_path):
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat"]
    (tmp_path / "vocab.txt").write_text("\n".join(vocab) + "\n")
    config = BertConfig(vocab_size=len(vocab), hidden_size=8, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=16, max_position_embeddings=16)  # fmt: skip
    BertModel(config).save_pretrained(str(tmp_path), safe_serialization=True)
    capsys.readouterr()  # save_pretrained's progress bar
    _refused(capsys, ["translate", "--model", tmp_path, "--source", "the cat"],
             f"{tmp_path.name} has no decoder, so it cannot translate; choose a trained model.")


def test_translate_refuses_a_missing_model_folder(capsys, tmp_path):
    code, _, err = _cli(capsys, "translate", "--model", tmp_path / "nowhere", "--source", DIGITS)
    assert code == 2 and err.startswith(f"scratchformer: Unknown model '{tmp_path / 'nowhere'}'")
    assert "Traceback" not in err and err.count("\n") == 1


@pytest.mark.parametrize("argv, message", [
    (["--limit", "0"], "--limit must be at least 1, not 0."),
    (["--layer", "0"], "--layer counts from 1, as in the window; 0 is not a layer."),
    (["--layer", "9", "--limit", "2"], "Decoder layer 9 does not exist; this model has decoder layers 1 to 2."),
    (["--data", "MISSING"], "MISSING does not exist."),
    (["--data", "FOLDER"], "FOLDER is not a file."),
])  # fmt: skip
def test_evaluate_refuses_bad_options(capsys, tmp_path, argv, message):
    names = {"MISSING": str(tmp_path / "none.tsv"), "FOLDER": str(tmp_path)}
    argv = [names.get(a, a) for a in argv]
    for name, path in names.items():
        message = message.replace(name, path)
    _refused(capsys, ["evaluate", "--model", "copy", *argv], message)


@pytest.mark.parametrize("argv, message", [
    (["--scale", "0.1"], "--scale must be between 0.25 and 8."),
    (["--scale", "9"], "--scale must be between 0.25 and 8."),
    (["--item", "0"], "--item 0 is out of range; this run has 1 batch item(s)."),
    (["--item", "2"], "--item 2 is out of range; this run has 1 batch item(s)."),
    (["--layer", "1"], "--layer chooses the map that --snapshots follows; add --snapshots or leave it out."),
    (["--head", "1"], "--head chooses the map that --snapshots follows; add --snapshots or leave it out."),
    (["--snapshots", "--layer", "0"], "--layer counts from 1, as the window shows it; 0 is not a layer."),
    (["--snapshots", "--steps", "all"], "--steps does not apply to --snapshots; choose the map with --attention, "
                                        "--layer and --head."),
])  # fmt: skip
def test_export_refuses_bad_options(capsys, tmp_path, argv, message):
    formats = ["--format", "gif" if "--snapshots" in argv else "npz"]
    _refused(capsys, ["export", "--model", "copy", "--source", DIGITS, "--out", tmp_path / "e", *formats, *argv],
             message)  # fmt: skip
    assert not (tmp_path / "e").exists() or not any((tmp_path / "e").iterdir())  # nothing written


def test_export_refuses_a_missing_text_file(capsys, tmp_path):
    missing = tmp_path / "no.txt"
    _refused(capsys, ["export", "--model", "copy", "--text-file", missing, "--out", tmp_path / "e", "--format",
                      "npz"], f"The file {missing} does not exist.")  # fmt: skip


@pytest.mark.parametrize("argv, message", [
    (["--precision", "bf16"], "--precision bf16 needs CUDA (--device cuda); on the CPU train in fp32."),
    (["--dist-timeout", "0"], "--dist-timeout must be more than 0 minutes, not 0."),
    (["--epochs", "0"], "--epochs must be at least 1, not 0."),
    (["--max-minutes", "0"], "--max-minutes must be more than 0, not 0."),
    (["--max-minutes", "-2.5"], "--max-minutes must be more than 0, not -2.5."),
    (["--batch-tokens", "-8"], "--batch-tokens must be at least 1, not -8."),
    (["--dropout", "1.5"], "dropout must be in [0, 1), not 1.5."),
    (["--label-smoothing", "1.5"], "--label-smoothing must be between 0 and 1, not 1.5."),
    (["--label-smoothing", "-0.1"], "--label-smoothing must be between 0 and 1, not -0.1."),
    (["--lr-scale", "0"], "--lr-scale must be more than 0, not 0."),
    (["--lr-scale", "-1"], "--lr-scale must be more than 0, not -1."),
    (["--align-weight", "-1"], "--align-weight must be 0 (off) or more, not -1."),
    (["--align-weight", "1", "--align-layer", "1"],
     "--align-layer 1 does not exist; this model has decoder layers 0 to 0 (or -1 for the last)."),
    (["--align-weight", "1", "--align-layer", "-2"],
     "--align-layer -2 does not exist; this model has decoder layers 0 to 0 (or -1 for the last)."),
    (["--align-weight", "1", "--align-head", "2"], "--align-head 2 does not exist; this model has heads 0 to 1."),
])  # fmt: skip
def test_train_refuses_bad_values_before_training(capsys, tmp_path, argv, message):
    out = tmp_path / "run"
    _refused(capsys, ["train", "--task", "copy", *TINY, "--max-steps", "1", "--out", out, *argv], message)
    assert not out.exists()  # nothing trained, nothing written


@pytest.fixture(scope="module")
def saved_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("copy-run") / "run"
    threads = torch.get_num_threads()
    try:
        assert main(["train", "--task", "copy", *TINY, "--max-steps", "2", "--out", str(out)]) == 0
    finally:
        torch.set_num_threads(threads)
    return out


@pytest.mark.parametrize("argv, message", [
    (["--d-model", "32"], "--resume keeps the saved model's shape; leave out --d-model."),
    (["--heads", "4"], "--resume keeps the saved model's shape; leave out --heads."),
    (["--layers", "2"], "--resume keeps the saved model's shape; leave out --layers."),
    (["--d-ff", "64"], "--resume keeps the saved model's shape; leave out --d-ff."),
    (["--task", "reverse"], "--resume continues the saved run's data; leave out --task, --data and --text."),
    (["--precision", "bf16"], "--precision bf16 needs CUDA (--device cuda); on the CPU train in fp32."),
])  # fmt: skip
def test_train_resume_refuses_a_changed_model_or_data(capsys, saved_run, argv, message):
    before = sorted(p.relative_to(saved_run) for p in saved_run.rglob("*"))
    _refused(capsys, ["train", "--resume", saved_run, "--quiet", "--max-steps", "4", *argv], message)
    assert sorted(p.relative_to(saved_run) for p in saved_run.rglob("*")) == before  # the saved run is untouched
    code, _, err = _cli(capsys, "train", "--resume", saved_run, "--quiet", "--max-steps", "3", "--out",
                        saved_run.parent / "continued")  # fmt: skip
    assert code == 0, err  # unchanged, the same run resumes


def test_translate_refuses_beam_and_a_bad_temperature_for_a_decoder_only_model(capsys, tmp_path):
    config = GPT2Config(vocab_size=50257, n_positions=16, n_embd=8, n_layer=1, n_head=2)
    GPT2LMHeadModel(config).save_pretrained(str(tmp_path), safe_serialization=True)
    gpt2_tokenizer().hf.save_pretrained(str(tmp_path))
    capsys.readouterr()  # save_pretrained's progress bar
    base = ["translate", "--model", tmp_path, "--source", "the cat"]
    _refused(capsys, [*base, "--beam", "3"], "--beam works with encoder-decoder models; this one is decoder-only.")
    _refused(capsys, [*base, "--temperature", "0"], "--temperature must be above 0, not 0.")
    code, out, err = _cli(capsys, *base, "--max-new", "2")  # the same folder continues its text when asked rightly
    assert code == 0 and out.strip(), err
    _refused(capsys, ["translate", "--model", "copy", "--source", DIGITS, "--max-new", "2"],
             "--max-new, --temperature, --top-k and --seed continue a decoder-only model's text; copy translates "
             "(use --max-len and --beam).")
