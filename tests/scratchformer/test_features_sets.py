"""Transcoder sets (`features train --kind transcoder --every-layer`) and dictionary training under torchrun
(issue 44): one transcoder per feed-forward that stands in for it, and two ranks that learn as well as one."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from scratchformer.cli import main
from scratchformer.features.attach import traced
from scratchformer.features.folder import CFG, load
from scratchformer.loading.bundle import load_model
from tests.scratchformer.test_distributed import ENV, _free_port

SMALL = ["--tokens", "4000", "--width", "48", "--k", "4", "--steps", "120", "--quiet"]


@pytest.fixture(scope="module")
def transcoders(tmp_path_factory):
    out = tmp_path_factory.mktemp("set") / "tc"
    assert main(["features", "train", "--model", "en-hi", "--kind", "transcoder", "--every-layer", "--corpus",
                 "task:en-hi", "--out", str(out), "--json", *SMALL]) == 0  # fmt: skip
    return out


def test_every_layer_writes_one_transcoder_per_feed_forward(transcoders, capsys):
    folders = sorted(p.name for p in transcoders.iterdir())
    assert folders == ["decoder.0.ffn.out", "decoder.1.ffn.out", "encoder.0.ffn.out", "encoder.1.ffn.out"]
    for name in folders:
        cfg = json.loads((transcoders / name / CFG).read_text())
        assert cfg["architecture"] == "jumprelu_transcoder" and cfg["metadata"]["hook_name_out"] == name
        assert cfg["scratchformer"]["at"] == {"decoder.0.ffn.out": "decoder.0.add_norm2.out",
                                              "decoder.1.ffn.out": "decoder.1.add_norm2.out",
                                              "encoder.0.ffn.out": "encoder.0.add_norm1.out",
                                              "encoder.1.ffn.out": "encoder.1.add_norm1.out"}[name]  # fmt: skip
        assert cfg["scratchformer"]["trained"]["fvu"] < 0.9  # it learned some of the feed-forward


def test_a_transcoder_stands_in_for_its_feed_forward_in_the_trace(transcoders):
    bundle = load_model("en-hi")
    inputs = bundle.prepare_run("the girl eats an apple", "")
    t = load(transcoders / "decoder.1.ffn.out")
    _, trace = traced(bundle, inputs, [t], keep_output=False)
    at = "decoder.1.add_norm2.out"
    names = trace.names()
    assert names.index(f"{at}.dict.pre") == names.index("decoder.1.ffn.out") + 1  # after the output it predicts
    y = trace["decoder.1.ffn.out"].tensor
    assert torch.allclose(trace[f"{at}.dict.recon"].tensor + trace[f"{at}.dict.error"].tensor, y, atol=1e-6)
    assert trace[f"{at}.dict.features"].dims == ("batch", "tgt_pos", "feature")
    encoder = load(transcoders / "encoder.0.ffn.out")
    _, trace = traced(bundle, inputs, [encoder], keep_output=False)
    assert trace["encoder.0.add_norm1.out.dict.features"].dims == ("batch", "src_pos", "feature")


def test_two_ranks_train_a_dictionary_as_well_as_one_process(tmp_path, capsys):
    args = ["features", "train", "--model", "en-hi", "--at", "decoder.1.add_norm3.out", "--corpus", "task:en-hi",
            "--json", "--tokens", "6000", "--width", "64", "--k", "4", "--steps", "150", "--quiet"]  # fmt: skip
    assert main([*args, "--out", str(tmp_path / "one")]) == 0
    one = json.loads(capsys.readouterr().out)
    cmd = [str(Path(sys.executable).with_name("torchrun")), "--nproc-per-node=2", f"--master-port={_free_port()}",
           "-m", "scratchformer", *args, "--out", str(tmp_path / "two")]  # fmt: skip
    done = subprocess.run(cmd, env={**os.environ, **ENV}, capture_output=True, text=True, timeout=280)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.strip().splitlines()
    assert len(lines) == 1  # rank 1 prints nothing
    two = json.loads(lines[0])
    assert two["tokens"] == one["tokens"]  # the ranks read half the corpus each, the same tokens in all
    assert abs(two["fvu"] - one["fvu"]) < 0.1 and two["fvu"] < 0.5  # the same quality, not the same bits
    assert load(tmp_path / "two").info.trained["tokens"] == one["tokens"]


def test_clamping_a_transcoder_feature_moves_its_feed_forwards_output_by_its_decoder_row(transcoders):
    from scratchformer.features.attach import Clamp

    bundle = load_model("en-hi")
    inputs = bundle.prepare_run("the girl eats an apple", "")
    t = load(transcoders / "decoder.1.ffn.out")
    at = "decoder.1.add_norm2.out"
    _, plain = traced(bundle, inputs, [t], keep_output=False)
    f = plain[f"{at}.dict.features"].tensor
    top = int(f[0, 1].argmax())
    value = float(f[0, 1, top])
    _, same = traced(bundle, inputs, [t], [Clamp(at, top, value, 1)], keep_output=False)
    assert torch.equal(same["generator.probs"].tensor, plain["generator.probs"].tensor)
    _, zero = traced(bundle, inputs, [t], [Clamp(at, top, 0.0, 1)], keep_output=False)
    moved = zero["decoder.1.ffn.out"].tensor - plain["decoder.1.ffn.out"].tensor
    assert torch.allclose(moved[0, 1], -value * t.W_dec[top], atol=1e-5) and moved[0, 0].abs().max() == 0
    assert torch.equal(zero[at].tensor, plain[at].tensor)  # the step read is not changed, only the one predicted
