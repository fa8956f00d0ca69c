"""`scratchformer trace` as DESIGN.md defines it, and one clear sentence with exit status 2 for mistakes."""

import argparse
import json
import subprocess
import sys

import pytest

from scratchformer.cli import main

TEXT = "machine learning using PyTorch is fun because tensors flow through layers of attention and more"


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_blog_walkthrough_batch_shapes(capsys, tmp_path):
    text_file = tmp_path / "walk.txt"
    text_file.write_text(TEXT, encoding="utf-8")
    code, out, err = run(capsys, "trace", "--model", "blog", "--text-file", str(text_file), "--seq-len", "10",
                         "--batch", "4", "--json")
    assert code == 0, err
    data = json.loads(out)
    shapes = {s["name"]: tuple(s["shape"]) for s in data["steps"]}
    assert shapes["src_embed.lookup"] == (4, 10, 6)
    assert shapes["encoder.0.self_attn.qkv"] == (4, 10, 18)
    for part in "qkv":
        assert shapes[f"encoder.0.self_attn.{part}"] == (4, 2, 10, 3)
    assert shapes["encoder.0.self_attn.scores"] == (4, 2, 10, 10)
    assert shapes["decoder.0.self_attn.weights"] == (4, 2, 10, 10)
    assert shapes["encoder.0.self_attn.context"] == (4, 2, 10, 3)
    assert shapes["encoder.0.self_attn.concat"] == (4, 10, 6)
    assert shapes["encoder.0.ffn.hidden"] == (4, 10, 12)
    assert shapes["generator.probs"] == (4, 10, 50257)
    # windows with stride 1, and the decoder batch is the same windows behind <|endoftext|>
    src, tgt = data["source_tokens"], data["target_tokens"]
    assert src[1][:9] == src[0][1:10]
    assert tgt[0][0] == "<|endoftext|>" and tgt[2][1:] == src[2][:9]
    assert data["model"]["d_model"] == 6 and "values" not in data["steps"][0]


def test_values_are_nested_lists_with_masked_cells_as_strings(capsys):
    code, out, _ = run(capsys, "trace", "--model", "blog", "--source", "machine learning", "--target", "hello world",
                       "--json", "--values")
    assert code == 0
    steps = {s["name"]: s for s in json.loads(out)["steps"]}
    assert steps["src_embed.tokens"]["values"] == [[30243, 4673]]
    mask = steps["decoder.0.self_attn.mask"]["values"][0]
    assert mask[0][1] == "-inf" and mask[1][0] == 0.0


def test_table_lists_every_step(capsys):
    code, out, _ = run(capsys, "trace", "--model", "blog", "--source", "machine learning using PyTorch",
                       "--start-only")
    assert code == 0
    assert "decoder.0.cross_attn.weights" in out and "attention_weights" in out and "1×2×1×6" in out
    assert "decoder input: the start token alone" in out and "untrained: random weights" in out


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--model", "gpt9", "--source", "hi"], "Unknown model 'gpt9'"),
        (["--model", "blog", "--source", "   "], "The source text is empty"),
        (["--model", "blog", "--source", "one two three four five six seven eight nine ten eleven"],
         "reads at most 10"),
        (["--model", "blog", "--text-file", "/no/such/file.txt"], "does not exist"),
        (["--model", "blog", "--source", "hi", "--device", "cuda"], "CUDA"),
        (["--model", "blog", "--text-file", "BIN", "--seq-len", "4", "--batch", "2"], "binary"),
        (["--model", "blog", "--text-file", "LATIN1"], "not UTF-8"),
        (["--model", "blog", "--text-file", "SHORT", "--seq-len", "10", "--batch", "4"], "need 13"),
    ],
)
def test_mistakes_give_one_sentence_and_status_2(capsys, tmp_path, argv, message):
    files = {"BIN": b"\x00\x01\x02binary", "LATIN1": "café".encode("latin-1"), "SHORT": b"just a few words"}
    argv = list(argv)
    for i, a in enumerate(argv):
        if a in files:
            path = tmp_path / a
            path.write_bytes(files[a])
            argv[i] = str(path)
    if "--device" in argv:
        import torch

        if torch.cuda.is_available():
            pytest.skip("this machine has CUDA, so asking for it is not a mistake here")
    code, out, err = run(capsys, "trace", *argv)
    assert code == 2
    assert message in err
    assert err.count("\n") == 1 and "Traceback" not in err


def test_console_entry_point_exits_2_without_traceback():
    proc = subprocess.run([sys.executable, "-m", "scratchformer", "trace", "--model", "nope", "--source", "x"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert proc.stderr.startswith("scratchformer: Unknown model") and "Traceback" not in proc.stderr


def test_the_cli_reference_is_what_the_parser_says():
    """docs/cli-reference.md lists every command and option with its help, as the code has them now; after a
    change to a command's options or help, `python -m scratchformer.cli_reference` writes it again."""
    from scratchformer.cli_reference import PATH, command_parsers, reference

    written = PATH.read_text(encoding="utf-8")
    assert written == reference(), "docs/cli-reference.md is out of date: run python -m scratchformer.cli_reference"
    for name, (line, command) in command_parsers().items():
        assert f"## `scratchformer {name}`" in written and " ".join(line.split())[1:] in written
        for action in command._actions:
            for flag in action.option_strings if not isinstance(action, argparse._HelpAction) else ():
                assert f"`{flag}`" in written, (name, flag)


def test_every_command_and_option_says_what_it_does(capsys):
    """`scratchformer --help` gives each command a line of help, and each command's --help explains every option
    (what a user reads before typing `scratchformer rollout --method …`)."""
    import argparse

    from scratchformer.cli import build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    listed = {choice.dest: choice.help for choice in sub._choices_actions}
    assert set(listed) == set(sub.choices) >= {"trace", "derive", "lens", "rollout", "attribute", "experiment"}
    for name, command in sub.choices.items():
        assert listed[name], f"`scratchformer --help` lists {name} without a line of help"
        for action in command._actions:
            if not isinstance(action, (argparse._HelpAction, argparse._SubParsersAction)):
                assert action.help, f"scratchformer {name}: {action.option_strings or action.dest} has no help"
    # the analyses explain themselves beyond the one line: what is read, through what
    for name, says in (("rollout", "Abnar & Zuidema"), ("lens", "final norm and output layer"),
                       ("attribute", "log-probability of the token")):  # fmt: skip
        with pytest.raises(SystemExit):
            main([name, "--help"])
        assert says in " ".join(capsys.readouterr().out.split()), name
    with pytest.raises(SystemExit):
        main(["rollout", "--help"])
    assert "rollout (default) or flow" in capsys.readouterr().out
