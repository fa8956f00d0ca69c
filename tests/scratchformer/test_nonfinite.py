"""Non-finite numbers found, not hidden: a checkpoint whose weights hold NaN or ±∞ opens, `trace` names the
parameters and marks the first step whose values are not finite (JSON and one sentence on stderr), a mask's −∞
is not trouble, and the plot data tells NaN, +∞, −∞ and masked cells apart.

The expected first step is found two ways that share no code with scratchformer.recording.nonfinite: by reasoning about
which step first multiplies by the broken weight, and by scanning every tensor of an eager trace."""

import json

import numpy as np
import pytest
import torch
from transformers import BertConfig, BertModel

from scratchformer import Transformer, TransformerConfig
from scratchformer.cli import main
from scratchformer.loading.bundle import load_model
from scratchformer.loading.checkpoint import save_checkpoint
from scratchformer.loading.tokenizers import word_level_tokenizer
from scratchformer.plotdata import step_heatmap, tensor_stats
from scratchformer.plotdata.special import (
    FINITE,
    MASKED,
    NAN,
    NEG_INF,
    POS_INF,
    cell_classes,
    heatmap_classes,
    legend_entries,
    reduce_classes,
)
from scratchformer.recording.nonfinite import step_flag

SOURCE, TARGET = "the boy eats an apple", "we are friends"


def _brute_force(trace) -> list[str]:
    """Every step holding NaN or +∞, or −∞ outside a mask and the masked scores (where masking puts it)."""
    found = []
    for s in trace:
        t = s.tensor
        if not t.is_floating_point():
            continue
        bad = torch.isnan(t).any() or torch.isposinf(t).any()
        if s.kind not in ("mask", "masked_scores"):
            bad = bad or torch.isneginf(t).any()
        if bad:
            found.append(s.name)
    return found


@pytest.fixture(scope="module")
def nan_checkpoint(tmp_path_factory):
    """A tiny encoder-decoder whose first feed-forward layer has one NaN weight: W_1[3, 2]."""
    src_tok = word_level_tokenizer([SOURCE, TARGET], "en")
    cfg = TransformerConfig(d_model=8, n_heads=2, d_ff=16, n_encoder_layers=1, n_decoder_layers=1, max_len=12,
                            src_vocab_size=src_tok.vocab_size, tgt_vocab_size=src_tok.vocab_size,
                            share_embeddings=False, pad_id=0, bos_id=1, eos_id=2, name="broken")  # fmt: skip
    torch.manual_seed(0)
    model = Transformer(cfg).eval()
    with torch.no_grad():
        model.encoder[0].ffn.w_1.weight[3, 2] = float("nan")
    return save_checkpoint(tmp_path_factory.mktemp("nan") / "broken", model, src_tok, src_tok)


@pytest.fixture(scope="module")
def inf_bert(tmp_path_factory):
    """A tiny Hugging Face BERT folder whose second layer's intermediate bias holds +∞ in unit 5."""
    directory = tmp_path_factory.mktemp("inf-bert")
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + "the cat sat on mat a dog".split()
    (directory / "vocab.txt").write_text("\n".join(vocab) + "\n")
    config = BertConfig(vocab_size=len(vocab), hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=24, max_position_embeddings=16)  # fmt: skip
    torch.manual_seed(1)
    ref = BertModel(config)
    with torch.no_grad():
        ref.encoder.layer[1].intermediate.dense.bias[5] = float("inf")
    ref.save_pretrained(str(directory), safe_serialization=True)
    return directory


def _trace_json(capsys, *argv):
    code = main(["trace", *argv, "--json"])
    out, err = capsys.readouterr()
    return code, json.loads(out) if code == 0 else None, err


def test_a_nan_weight_is_named_and_the_first_nan_step_marked(capsys, nan_checkpoint):
    code, data, err = _trace_json(capsys, "--model", str(nan_checkpoint), "--source", SOURCE, "--target", TARGET)
    assert code == 0, err
    # h = ReLU(x W_1ᵀ + b_1) is the first step that reads W_1: its unit 3 is NaN at every position
    assert data["nonfinite"] == {"parameters": ["encoder.0.ffn.w_1.weight"], "first_step": "encoder.0.ffn.hidden"}
    eager = load_model(str(nan_checkpoint))
    _, trace = eager.model.run_with_trace(*_ids(eager), lazy=False)
    assert _brute_force(trace)[0] == "encoder.0.ffn.hidden"
    hidden = trace["encoder.0.ffn.hidden"].tensor[0]  # (S, d_ff)
    assert torch.isnan(hidden[:, 3]).all() and torch.isfinite(hidden[:, :3]).all()
    # one sentence on stderr naming the parameter and the step
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("warning: ")
    assert "encoder.0.ffn.w_1.weight" in lines[0] and "encoder.0.ffn.hidden" in lines[0] and "NaN" in lines[0]


def test_the_table_marks_the_first_non_finite_step(capsys, nan_checkpoint):
    code = main(["trace", "--model", str(nan_checkpoint), "--source", SOURCE, "--target", TARGET])
    out, _ = capsys.readouterr()
    assert code == 0
    marked = [line for line in out.splitlines() if "⚠" in line]
    assert len(marked) == 1 and " encoder.0.ffn.hidden " in marked[0]


def test_an_inf_weight_in_a_hugging_face_folder(capsys, inf_bert):
    code, data, err = _trace_json(capsys, "--model", str(inf_bert), "--source", "the cat sat on the mat")
    assert code == 0, err
    # BERT's layer.1.intermediate.dense is our encoder.1.ffn.w_1; x W + b is +∞ where b is, and its GELU is not
    # finite there: +∞ in exact arithmetic, NaN from PyTorch's exact GELU in its vectorised path (a lone
    # number gives +∞) — the model gives what PyTorch gives, as transformers' BertModel does
    assert data["nonfinite"] == {"parameters": ["encoder.1.ffn.w_1.bias"], "first_step": "encoder.1.ffn.hidden"}
    bundle = load_model(str(inf_bert))
    ids = torch.tensor([bundle.encode_source("the cat sat on the mat")])
    _, trace = bundle.model.run_with_trace(ids, lazy=False)
    assert _brute_force(trace)[0] == "encoder.1.ffn.hidden"
    hidden = trace["encoder.1.ffn.hidden"].tensor[0]
    assert not torch.isfinite(hidden[:, 5]).any() and torch.isfinite(torch.cat([hidden[:, :5], hidden[:, 6:]], 1)).all()
    assert "+∞" in err and "encoder.1.ffn.w_1.bias" in err


def test_masking_minus_infinity_is_not_trouble(capsys):
    code, data, err = _trace_json(capsys, "--model", "blog", "--source", "machine learning", "--target",
                                  "hello world again")  # fmt: skip
    assert code == 0
    mask = [s for s in data["steps"] if s["name"] == "decoder.0.self_attn.mask"]
    assert mask and "nonfinite" not in data and "warning" not in err
    bundle = load_model("blog")
    _, trace = bundle.run(bundle.prepare_run("machine learning", "hello world again"))
    assert torch.isneginf(trace["decoder.0.self_attn.masked_scores"].tensor).any()  # the causal mask's −∞ is there
    assert trace.first_nonfinite() is None


def test_the_check_of_one_step_by_kind():
    blocks = torch.tensor(True)
    neg = torch.tensor([[0.0, float("-inf")]])
    assert not step_flag(neg, "mask")
    assert step_flag(torch.tensor([[0.0, float("nan")]]), "mask")
    assert not step_flag(torch.tensor([[[1.5, float("-inf")]]]), "masked_scores", blocks)
    assert step_flag(torch.tensor([[[float("nan"), float("-inf")]]]), "masked_scores", blocks)
    assert step_flag(torch.tensor([[[1.5, float("inf")]]]), "masked_scores", blocks)
    assert step_flag(torch.tensor([[[1.5, float("-inf")]]]), "masked_scores", torch.tensor(False))  # no mask
    assert step_flag(neg, "embedding") and step_flag(torch.tensor([1e38, float("inf")]), "residual")
    assert not step_flag(torch.tensor([3.0e38, -3.0e38]), "residual")  # large but finite
    assert step_flag(torch.tensor([1, 2]), "tokens") is None


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.float64])
def test_large_finite_values_whose_sum_overflows_are_still_finite(dtype):
    """On the CPU a step is first checked by one sum; large finite values can make the sum ±∞ (or NaN, when ±∞
    meet), and then the exact check must still call them finite."""
    big = torch.finfo(dtype).max
    for values in ([big, big], [big, big, -big, -big], [-big, -big, 1.0]):
        t = torch.tensor(values, dtype=dtype)
        assert not step_flag(t, "residual"), (dtype, values)
        assert not step_flag(t.reshape(1, 1, -1), "masked_scores", torch.tensor(False)), (dtype, values)
    for bad in (float("nan"), float("inf"), float("-inf")):
        assert step_flag(torch.tensor([big, 1.0, bad], dtype=dtype), "residual"), (dtype, bad)
    assert not step_flag(torch.tensor([[[big, big, float("-inf")]]], dtype=dtype), "masked_scores",
                         torch.tensor(True))  # fmt: skip


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_an_accelerator_s_one_sum_in_double_precision_is_exact(dtype):
    """On a GPU a step is checked by one float64 sum with no read-back (nonfinite.sum_flag): it must never call
    large finite values non-finite, and must catch every NaN and ±∞ (checked here on CPU tensors)."""
    from scratchformer.recording.nonfinite import sum_flag

    big = torch.finfo(dtype).max
    assert not bool(sum_flag(torch.full((1000,), big, dtype=dtype)))
    assert not bool(sum_flag(torch.tensor([big, -big, big], dtype=dtype)))
    for bad in ([float("nan")], [float("inf")], [float("-inf")], [float("inf"), float("-inf")]):
        assert bool(sum_flag(torch.tensor([1.0, big, *bad], dtype=dtype))), bad


def _ids(bundle):
    src = torch.tensor([bundle.encode_source(SOURCE)])
    tgt = torch.tensor([[bundle.start_id()] + bundle.tgt_tokenizer.encode(TARGET)])
    return src, tgt


def test_a_lazy_trace_finds_the_same_steps_without_recomputing(nan_checkpoint):
    bundle = load_model(str(nan_checkpoint))
    _, eager = bundle.model.run_with_trace(*_ids(bundle), lazy=False)
    _, lazy = bundle.model.run_with_trace(*_ids(bundle), lazy=True, keep_bytes=0)  # every interior dropped
    assert lazy.recomputed_steps()
    found = [s.name for s in lazy.nonfinite_steps()]
    assert lazy.cache.misses == 0  # nothing was rerun to find them
    expected = _brute_force(eager)
    # the lazy trace never builds the output probabilities whole; their logits are checked (and listed)
    assert found == [n for n in expected if n != "generator.probs"] and "generator.logits" in found


def test_plot_data_tells_nan_infinity_and_masked_cells_apart(nan_checkpoint):
    bundle = load_model(str(nan_checkpoint))
    _, trace = bundle.model.run_with_trace(*_ids(bundle), lazy=False)
    hidden = heatmap_classes(step_heatmap(trace, "encoder.0.ffn.hidden"))
    assert (hidden[:, 3] == NAN).all() and (np.delete(hidden, 3, axis=1) == FINITE).all()
    assert legend_entries(hidden) == [(NAN, "NaN")]
    scores = step_heatmap(trace, "decoder.0.self_attn.masked_scores")  # causal: query i sees keys ≤ i
    n = scores.shape[0]
    above = np.triu(np.ones((n, n), dtype=bool), 1)
    np.testing.assert_array_equal(heatmap_classes(scores), np.where(above, MASKED, FINITE))
    # −∞ that no mask explains, +∞ and NaN each keep their own class; a block shown as one pixel keeps the worst
    classes = cell_classes(np.float32([[-np.inf, np.inf, np.nan, 1.0]]), masked=np.array([[False] * 4]))
    assert classes.tolist() == [[NEG_INF, POS_INF, NAN, FINITE]]
    assert reduce_classes(classes, (1, 2)).tolist() == [[POS_INF, NAN]]


def test_inspector_numbers_count_every_kind_of_non_finite_cell():
    s = tensor_stats(torch.tensor([[1.0, float("nan")], [float("inf"), float("-inf")], [3.0, 5.0]]))
    assert (s.minimum, s.maximum, s.mean) == (1.0, 5.0, 3.0)  # over the three finite cells
    assert (s.n_nan, s.n_posinf, s.n_masked) == (1, 1, 1)
    assert "NaN  1 cells" in s.lines() and "+∞   1 cells" in s.lines()
