"""The logit lens on a model small enough to work out by hand: two numbers per position, three tokens, an output
layer that reads the numbers as logits (logits = (x₀, x₁, 0)), so each point's probabilities are ratios chosen
in the test. Also which steps are the residual stream's points, their labels, and what the command prints."""

from __future__ import annotations

import json
import math
import re
from types import SimpleNamespace

import pytest
import torch

from scratchformer.analyses import lens, stream
from scratchformer.cli import main
from scratchformer.errors import UserError
from scratchformer.patching.interventions import HeadChange


class _Head(torch.nn.Module):
    """logits = (x₀, x₁, 0): an output layer with a `proj` like the model's."""

    def __init__(self, dtype=torch.float64):
        super().__init__()
        self.proj = torch.nn.Linear(2, 3, bias=False, dtype=dtype)
        with torch.no_grad():
            self.proj.weight.copy_(torch.tensor([[1.0, 0.0], [0.0, 1.0], [0.0, 0.0]]))

    def forward(self, h):
        return self.proj(h)


class _Tok:
    def __init__(self, prefix):
        self.prefix = prefix

    def token_strings(self, ids):
        return [f"{self.prefix}{int(i)}" for i in ids]


def _model(has_decoder=True, norm=None, norm_first=False):
    head = _Head()
    config = SimpleNamespace(has_decoder=has_decoder, norm_first=norm_first)
    if has_decoder:
        return SimpleNamespace(config=config, decoder_norm=norm, generator=head, encoder_norm=None, mlm_head=None)
    return SimpleNamespace(config=config, decoder_norm=None, generator=None, encoder_norm=norm, mlm_head=head)


class _Step:
    def __init__(self, name, data):
        self.name, self.data = name, data

    def item(self, batch):
        return self.data[batch]


class _Trace:
    def __init__(self, steps, source_tokens=(), target_tokens=()):
        self.steps = steps
        self.source_tokens, self.target_tokens = list(source_tokens), list(target_tokens)
        self.interventions = []
        self.dictionaries = {}  # (a real Trace's: the dictionaries attached, none here)

    def __iter__(self):
        return iter(self.steps)

    def __getitem__(self, name):
        return next(s for s in self.steps if s.name == name)

    def find(self, name):
        return next((s for s in self.steps if s.name == name), None)


L2, L3, L4, L6 = math.log(2), math.log(3), math.log(4), math.log(6)
# per point, per position: x = (x₀, x₁) → P ∝ (e^x₀, e^x₁, 1)
EMB = [[L2, L3], [L3, L2]]  # P = (2, 3, 1)/6 and (3, 2, 1)/6
MID = [[L2, L4], [L6, -L2]]  # P = (2, 4, 1)/7 and (6, 0.5, 1)/7.5
TOP = [[L2, 0.0], [0.0, L3]]  # P = (2, 1, 1)/4 and (1, 3, 1)/5: emitted tokens 0 and 1


def _decoder_trace(prefix="decoder", embed="tgt_embed"):
    batch = lambda pts: torch.tensor([[[9.0, 9.0], [9.0, 9.0]], pts], dtype=torch.float32)  # noqa: E731  item 1
    noise = torch.full((2, 2, 2), 50.0)  # steps that are not points of the stream: never read
    return [_Step(f"{embed}.sum", batch(EMB)), _Step(f"{prefix}.0.self_attn.weights", noise),
            _Step(f"{prefix}.0.add_norm1.residual", noise), _Step(f"{prefix}.0.add_norm1.out", batch(MID)),
            _Step("other.0.add_norm1.out", noise), _Step(f"{prefix}.0.add_norm2.out", batch(TOP))]  # fmt: skip


def _bundle(model):
    return SimpleNamespace(model=model, config=model.config, tgt_tokenizer=_Tok("t"), src_tokenizer=_Tok("s"))


def test_each_point_gives_its_top_tokens_and_the_emitted_tokens_probability_and_rank():
    trace = _Trace(_decoder_trace(), target_tokens=[["a", "b"], ["<s>", "x"]])
    result = lens.compute(_bundle(_model()), trace, batch=1, k=5)  # k beyond the 3 tokens: all 3
    assert result.steps == ["tgt_embed.sum", "decoder.0.add_norm1.out", "decoder.0.add_norm2.out"]
    assert result.labels == ["embeddings", "layer 1 self-attention", "layer 1 cross-attention"]
    assert result.positions == ["<s>", "x"] and result.stack == "decoder" and result.notes == []
    assert result.emitted_ids == [0, 1] and result.emitted == ["t0", "t1"]
    assert result.top_ids.tolist() == [[[1, 0, 2], [0, 1, 2]], [[1, 0, 2], [0, 2, 1]], [[0, 1, 2], [1, 0, 2]]]
    assert result.top_tokens[1] == [["t1", "t0", "t2"], ["t0", "t2", "t1"]]
    want_top = [[[3 / 6, 2 / 6, 1 / 6], [3 / 6, 2 / 6, 1 / 6]], [[4 / 7, 2 / 7, 1 / 7], [6 / 7.5, 1 / 7.5, 0.5 / 7.5]],
                [[2 / 4, 1 / 4, 1 / 4], [3 / 5, 1 / 5, 1 / 5]]]  # fmt: skip
    torch.testing.assert_close(result.top_probs, torch.tensor(want_top), rtol=1e-6, atol=1e-7)
    # P(emitted): token 0 at position 0, token 1 at position 1
    want_final = [[2 / 6, 2 / 6], [2 / 7, 0.5 / 7.5], [2 / 4, 3 / 5]]
    torch.testing.assert_close(result.final_probs, torch.tensor(want_final), rtol=1e-6, atol=1e-7)
    assert result.final_ranks.tolist() == [[2, 2], [2, 3], [1, 1]]
    assert result.top_probs.dtype == torch.float32


def test_k_limits_the_tokens_listed_per_point():
    result = lens.compute(_bundle(_model()), _Trace(_decoder_trace(), target_tokens=[["a"], ["b"]]), batch=1, k=1)
    assert result.top_ids.shape == (3, 2, 1) and result.top_ids[:, :, 0].tolist() == [[1, 0], [1, 0], [0, 1]]


def test_post_and_pre_ln_streams_take_the_normalised_or_the_residual_sum():
    steps = _decoder_trace()
    assert stream.residual_points(_Trace(steps), "decoder", False) == [
        "tgt_embed.sum", "decoder.0.add_norm1.out", "decoder.0.add_norm2.out"]  # fmt: skip
    assert stream.residual_points(_Trace(steps), "decoder", True) == ["tgt_embed.sum", "decoder.0.add_norm1.residual"]
    enc = _decoder_trace("encoder", "src_embed")
    assert stream.residual_points(_Trace(enc + steps), "encoder", False) == [
        "src_embed.sum", "encoder.0.add_norm1.out", "encoder.0.add_norm2.out"]  # fmt: skip


def test_the_embeddings_point_prefers_dropout_then_layer_norm_then_the_sum():
    def names(*ns):
        return _Trace([_Step(n, None) for n in ns])

    assert stream.embedding_point(names("tgt_embed.sum", "tgt_embed.layer_norm", "tgt_embed.dropout"),
                                  "decoder") == "tgt_embed.dropout"  # fmt: skip
    assert stream.embedding_point(names("tgt_embed.sum", "tgt_embed.layer_norm"), "decoder") == "tgt_embed.layer_norm"
    assert stream.embedding_point(names("src_embed.sum", "tgt_embed.layer_norm"), "encoder") == "src_embed.sum"
    with pytest.raises(UserError, match=r"^This run has no encoder embeddings to read\.$"):
        stream.embedding_point(names("tgt_embed.sum"), "encoder")


@pytest.mark.parametrize(("name", "label"), [
    ("tgt_embed.sum", "embeddings"), ("encoder.0.add_norm1.out", "layer 1 self-attention"),
    ("encoder.11.add_norm2.residual", "layer 12 feed-forward"), ("decoder.2.add_norm1.out", "layer 3 self-attention"),
    ("decoder.0.add_norm2.residual", "layer 1 cross-attention"), ("decoder.3.add_norm3.out", "layer 4 feed-forward"),
])  # fmt: skip
def test_point_labels_name_the_layer_from_1_and_the_sublayer(name, label):
    assert stream.point_label(name) == label


def test_the_read_out_goes_through_the_final_norm_in_the_heads_dtype():
    double = lambda h: 2 * h  # noqa: E731  a final "norm" that doubles: P ∝ (e^{2x₀}, e^{2x₁}, 1)
    for model in (_model(True, double), _model(False, double)):
        out = lens.read_out(model, torch.tensor([[L2, 0.0]], dtype=torch.float32))  # float32 into a float64 head
        assert out.dtype == torch.float32 and not out.requires_grad
        torch.testing.assert_close(out.exp(), torch.tensor([[4 / 6, 1 / 6, 1 / 6]]))


def test_an_encoder_is_read_through_its_masked_lm_head_over_the_source_tokens():
    trace = _Trace(_decoder_trace("encoder", "src_embed"), source_tokens=[["a", "b"], ["c", "d"]])
    result = lens.compute(_bundle(_model(has_decoder=False)), trace, batch=1, k=2)
    assert result.stack == "encoder" and result.positions == ["c", "d"] and result.emitted == ["s0", "s1"]
    assert result.labels == ["embeddings", "layer 1 self-attention", "layer 1 feed-forward"]
    assert result.top_tokens[0] == [["s1", "s0"], ["s0", "s1"]]
    assert result.final_ranks.tolist() == [[2, 2], [2, 3], [1, 1]]


def test_without_the_tokens_of_the_run_positions_are_named_by_the_emitted_tokens():
    result = lens.compute(_bundle(_model()), _Trace(_decoder_trace()), batch=1)
    assert result.positions == ["t0", "t1"]


def test_a_changed_run_is_said_in_a_note():
    trace = _Trace(_decoder_trace(), target_tokens=[["a", "b"], ["c", "d"]])
    trace.interventions = [HeadChange("decoder.0.self_attn", 1), HeadChange("decoder.0.self_attn", 0, "mean")]
    result = lens.compute(_bundle(_model()), trace, batch=1)
    assert result.notes == ["This run changed the model on purpose (decoder.0.self_attn.head1:zero; "
                            "decoder.0.self_attn.head0:mean), and the lens reads the changed run."]  # fmt: skip


def test_which_models_have_no_lens():
    why = ("This model is an encoder alone without an output layer: its folder has no masked-language-model head, "
           "so its residual stream cannot be read as predicted tokens (open a folder with one, such as "
           "BertForMaskedLM's, or a model with a decoder).")  # fmt: skip
    assert lens.no_output_layer(_bundle(_model(True))) is None
    assert lens.no_output_layer(_bundle(_model(False))) is None
    no_head = _model(False)
    no_head.mlm_head = None
    assert lens.no_output_layer(_bundle(no_head)) == why
    odd = _model(True)  # a decoder without an output layer has no lens either
    odd.generator = None
    assert lens.no_output_layer(_bundle(odd)) == why
    with pytest.raises(UserError, match=r"^This model is an encoder alone"):
        lens.compute(_bundle(odd), _Trace(_decoder_trace()))


def test_the_dictionary_and_the_text_report():
    trace = _Trace(_decoder_trace(), target_tokens=[["a", "b"], ["<s>", "x"]])
    result = lens.compute(_bundle(_model()), trace, batch=1, k=2)
    d = json.loads(json.dumps(result.to_dict()))
    assert d["stack"] == "decoder" and d["positions"] == ["<s>", "x"] and d["notes"] == []
    assert d["emitted"] == [{"id": 0, "token": "t0"}, {"id": 1, "token": "t1"}]
    assert [p["step"] for p in d["points"]] == result.steps and [p["label"] for p in d["points"]] == result.labels
    mid = d["points"][1]
    assert mid["top"][1] == [{"id": 0, "token": "t0", "p": pytest.approx(6 / 7.5)},
                             {"id": 2, "token": "t2", "p": pytest.approx(1 / 7.5)}]  # fmt: skip
    assert mid["final"] == [{"id": 0, "token": "t0", "p": pytest.approx(2 / 7), "rank": 2},
                            {"id": 1, "token": "t1", "p": pytest.approx(0.5 / 7.5), "rank": 3}]  # fmt: skip
    result.notes = ["n1"]
    assert lens.text_report(result).split("\n") == [
        "position 0 reads “<s>” → the model emits “t0”",
        "  embeddings               first choice “t1” 0.500   “t0”: p 0.333, rank 2",
        "  layer 1 self-attention   first choice “t1” 0.571   “t0”: p 0.286, rank 2",
        "  layer 1 cross-attention  first choice “t0” 0.500   “t0”: p 0.500, rank 1",
        "position 1 reads “x” → the model emits “t1”",
        "  embeddings               first choice “t0” 0.500   “t1”: p 0.333, rank 2",
        "  layer 1 self-attention   first choice “t0” 0.800   “t1”: p 0.067, rank 3",
        "  layer 1 cross-attention  first choice “t1” 0.600   “t1”: p 0.600, rank 1",
        "note: n1",
    ]
    result.stack = "encoder"
    assert lens.text_report(result).split("\n")[0] == "source position 0 holds “<s>” → the masked-LM head predicts “t0”"


def test_the_command_prints_five_tokens_by_default_and_refuses_top_0(capsys):
    args = ["lens", "--model", "en-hi", "--source", "the girl eats"]
    assert main([*args, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert all(len(row) == 5 for p in out["points"] for row in p["top"])
    assert main(args) == 0
    text = capsys.readouterr().out.split("\n")
    assert re.fullmatch(r"position 0 reads “<s>” → the model emits “.+”", text[0])
    assert text[1].startswith("  embeddings ") and "first choice" in text[1]
    assert main([*args, "--top", "0"]) == 2
    assert capsys.readouterr().err.strip() == "scratchformer: --top must be at least 1, not 0."


def test_the_command_lists_top_1_for_the_batch_item_asked_for_in_its_own_script(capsys, tmp_path):
    """--top 1 is allowed and lists one token; --item 2 reads the second window of a --text-file batch; the JSON
    keeps Hindi as itself."""
    from scratchformer.loading.bundle import load_model

    text = tmp_path / "two.txt"
    text.write_text("the girl eats an apple the boy reads a book", encoding="utf-8")
    args = ["lens", "--model", "en-hi", "--text-file", str(text), "--seq-len", "4", "--batch", "2", "--json"]
    assert main([*args, "--top", "1", "--item", "2"]) == 0
    raw = capsys.readouterr().out
    out = json.loads(raw)
    assert all(len(row) == 1 for p in out["points"] for row in p["top"])
    bundle = load_model("en-hi")
    _, trace = bundle.run(bundle.prepare_windows(text.read_text(encoding="utf-8"), 4, 2))
    want = lens.compute(bundle, trace, batch=1, k=1)
    assert out["positions"] == want.positions == trace.target_tokens[1]
    firsts = torch.tensor([[row[0]["p"] for row in point["top"]] for point in out["points"]])
    assert torch.allclose(firsts, want.top_probs[:, :, 0], rtol=1e-6)
    assert not torch.allclose(firsts, lens.compute(bundle, trace, batch=0, k=1).top_probs[:, :, 0], rtol=1e-3)
    tokens = [t["token"] for point in out["points"] for row in point["top"] for t in row]
    assert any(ord(ch) > 127 for t in tokens for ch in t) and "\\u" not in raw
