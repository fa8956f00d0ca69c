"""Head importance's numbers against a computation made another way: a head is zeroed by zeroing the columns of
W^O that read its context (Concat(head_1, …, head_h) W^O, so those columns carry that head alone), and the drop
is the mean probability of the next tokens before minus after, over the positions that are not padding."""

import copy

import numpy as np
import pytest
import torch

from scratchformer.errors import UserError
from scratchformer.patching.head_importance import HeadImportance, format_importance, head_importance
from scratchformer.patching.interventions import attention_names
from scratchformer.transformer.config import TransformerConfig

PAD = 0
SIZES = dict(d_model=16, n_heads=4, d_ff=24, n_encoder_layers=1, n_decoder_layers=2, src_vocab_size=11,
             tgt_vocab_size=11, pad_id=PAD, max_len=32, dropout=0.2)  # fmt: skip


@pytest.fixture(scope="module")
def model():
    from scratchformer.transformer.model import Transformer

    torch.manual_seed(3)
    m = Transformer(TransformerConfig(**SIZES))
    with torch.no_grad():  # sharpen the attention so that zeroing a head moves the probabilities visibly
        for name, p in m.named_parameters():
            if "qkv" in name or "q_proj" in name or "kv_proj" in name:
                p.mul_(4)
    return m.eval()


# two sentences, the second padded on both sides; column 0 of tgt is the start token (here the pad id, as Marian)
SRC = torch.tensor([[3, 4, 5, 6, 7], [8, 9, 2, PAD, PAD]])
TGT = torch.tensor([[PAD, 5, 6, 7, 8], [PAD, 9, 10, PAD, PAD]])


def chosen_probabilities(m, src, tgt) -> list[float]:
    """P(tgt[b, t + 1]) at every decoder position t whose next token is not padding, by a plain forward pass."""
    src_pad = src == PAD
    tgt_pad = tgt == PAD
    tgt_pad[:, 0] = False
    with torch.no_grad():
        probs = torch.softmax(m(src, tgt, src_pad if src_pad.any() else None, tgt_pad).double(), -1)
    return [float(probs[b, t, tgt[b, t + 1]]) for b in range(tgt.shape[0]) for t in range(tgt.shape[1] - 1)
            if tgt[b, t + 1] != PAD]  # fmt: skip


def without_head(m, name: str, head: int):
    """A copy of the model with one head's columns of W^O zeroed: that head's context no longer reaches out."""
    ablated = copy.deepcopy(m)
    attn = ablated.get_submodule(name)
    d = attn.out_proj.in_features // m.config.n_heads
    with torch.no_grad():
        attn.out_proj.weight[:, head * d : (head + 1) * d] = 0
    return ablated


def test_each_drop_is_the_mean_probability_lost_when_that_head_is_cut_out(model):
    want_probs = chosen_probabilities(model, SRC, TGT)
    assert len(want_probs) == 4 + 2  # 4 next tokens in the first sentence, 2 in the padded one
    base = float(np.mean(want_probs))
    result = head_importance(model, SRC, TGT)
    assert result.base == pytest.approx(base, abs=1e-6) and result.n_tokens == 6
    assert sorted(result.drops) == ["decoder.cross_attn", "decoder.self_attn", "encoder.self_attn"]
    assert result.drops["encoder.self_attn"].shape == (1, 4) and result.drops["decoder.cross_attn"].shape == (2, 4)
    biggest = 0.0
    for name in attention_names(model):
        stack, layer, attn = name.split(".")
        for head in range(4):
            want = base - float(np.mean(chosen_probabilities(without_head(model, name, head), SRC, TGT)))
            got = result.drops[f"{stack}.{attn}"][int(layer), head]
            assert got == pytest.approx(want, abs=2e-6), (name, head)
            biggest = max(biggest, abs(want))
    assert biggest > 1e-3  # the heads matter enough for a mistake to show


def test_the_pads_default_to_the_models_pad_id_and_the_start_token_is_never_padding(model):
    given = head_importance(model, SRC, TGT, SRC == PAD, torch.cat([torch.zeros(2, 1, dtype=torch.bool),
                                                                    TGT[:, 1:] == PAD], 1))  # fmt: skip
    found = head_importance(model, SRC, TGT)
    assert given.base == found.base and given.n_tokens == found.n_tokens == 6
    for kind in given.drops:
        np.testing.assert_array_equal(given.drops[kind], found.drops[kind])


def test_progress_counts_every_head_and_a_cancel_stops_before_the_next(model):
    seen = []
    head_importance(model, SRC, TGT, progress=lambda done, total: seen.append((done, total)))
    assert seen == [(k, 20) for k in range(1, 21)]  # 5 attentions × 4 heads
    calls = []

    def cancel_after_three():
        calls.append(1)
        return len(calls) > 3

    model.train()
    assert head_importance(model, SRC, TGT, progress=lambda d, t: None, cancelled=cancel_after_three) is None
    assert len(calls) == 4 and model.training  # a training model is given back in training mode
    model.eval()


def test_it_measures_in_eval_mode_whatever_mode_the_model_is_in(model):
    eval_result = head_importance(model, SRC, TGT)
    model.train()
    try:
        torch.manual_seed(0)
        train_result = head_importance(model, SRC, TGT)
        assert model.training
    finally:
        model.eval()
    assert train_result.base == eval_result.base  # dropout (p = 0.2) would move it


def test_padding_given_explicitly_is_honoured_whatever_the_ids_there(model):
    """A model read with explicit padding masks (GPT-2 has no pad token) may hold any id under its padding: the
    masks say what is padding, so the result is the one with pad ids there."""
    other = torch.where(TGT == PAD, torch.tensor(3), TGT)
    other[:, 0] = PAD  # the start token stays
    src_other = torch.where(SRC == PAD, torch.tensor(4), SRC)
    tgt_pad = TGT == PAD
    tgt_pad[:, 0] = False
    got = head_importance(model, src_other, other, SRC == PAD, tgt_pad)
    want = head_importance(model, SRC, TGT)
    assert got.n_tokens == want.n_tokens == 6 and got.base == pytest.approx(want.base, abs=1e-6)
    for kind in want.drops:
        np.testing.assert_allclose(got.drops[kind], want.drops[kind], atol=1e-6)


def test_refusals_are_one_sentence(model):
    short = "^Head importance needs a decoder input of at least one token after the start token.$"
    with pytest.raises(UserError, match=short):
        head_importance(model, SRC, TGT[:, :1])
    with pytest.raises(UserError, match=short):
        head_importance(model, SRC, None)
    assert head_importance(model, SRC, TGT[:, :2]).n_tokens == 2  # the start token and one more: one to predict
    from scratchformer.transformer.model import Transformer

    encoder_only = Transformer(TransformerConfig(**{**SIZES, "n_decoder_layers": 0})).eval()
    with pytest.raises(UserError, match="^Head importance needs a model with a decoder: it measures the output "
                                        "tokens' probability.$"):  # fmt: skip
        head_importance(encoder_only, SRC, TGT)


def test_the_ranking_and_table_put_the_largest_drop_first():
    drops = {"decoder.cross_attn": np.array([[0.01, -0.02, 0.30], [0.05, 0.30, 0.10]])}
    result = HeadImportance(0.5, drops, 7)
    # ties keep reading order (layer 0 head 2 before layer 1 head 1)
    assert result.ranking("decoder.cross_attn") == [(0, 2, 0.30), (1, 1, 0.30), (1, 2, 0.10), (1, 0, 0.05),
                                                    (0, 0, 0.01), (0, 1, -0.02)]  # fmt: skip
    text = format_importance(result).splitlines()
    assert text[0] == ("head importance: drop in the mean probability of the chosen tokens (7 tokens, 50.00% with "
                       "nothing ablated) when one head is zeroed")  # fmt: skip
    assert text[1].split() == ["decoder.cross_attn:", "layer", "head", "1", "head", "2", "head", "3"]
    assert text[2].split() == ["1", "+1.00%", "-2.00%", "+30.00%"]
    assert text[3].split() == ["2", "+5.00%", "+30.00%", "+10.00%"]
    # a column per head, each value right-aligned under its head's name; layer numbers under "layer"
    layer_col = text[1].index("layer")
    assert text[2][layer_col] == "1" and text[3][layer_col] == "2" and text[4].index("most") == layer_col
    assert text[4].lstrip().startswith("most important: ")  # nothing but spaces before it
    for h, value in ((1, "+1.00%"), (2, "-2.00%"), (3, "+30.00%")):
        assert text[2].index(value) + len(value) == text[1].index(f"head {h}") + len(f"head {h}") + 2
    assert text[4].split(": ", 1)[1] == ("decoder.0.cross_attn.head2 +30.00%, decoder.1.cross_attn.head1 +30.00%, "
                                         "decoder.1.cross_attn.head2 +10.00%")  # fmt: skip
    # many ties (a model with many heads whose drops round alike): reading order among equals, layer by layer
    tied = np.round(np.random.default_rng(0).random((12, 12)) * 3) / 10
    ranked = HeadImportance(0.5, {"encoder.self_attn": tied}, 1).ranking("encoder.self_attn")
    want = sorted(((layer, head, tied[layer, head]) for layer in range(12) for head in range(12)),
                  key=lambda e: (-e[2], e[0], e[1]))  # fmt: skip
    assert ranked == want


def test_over_many_pairs_each_batch_counts_by_its_tokens():
    """`evaluate --head-importance`: batches of different lengths weighted by their chosen tokens give what one
    batch of every pair gives (a mean over all chosen tokens), and the gold target is what is measured."""
    from scratchformer.loading.bundle import load_model
    from scratchformer.patching.head_importance import head_importance_on_pairs
    from scratchformer.tasks.splits import Pair

    bundle = load_model("en-hi")
    pairs = [Pair("the girl eats an apple", "लड़की सेब खाती है"), Pair("we are friends", "हम दोस्त हैं"),
             Pair("the boy reads a book", "लड़का किताब पढ़ता है")]  # fmt: skip
    whole = head_importance_on_pairs(bundle, pairs)
    one_by_one = head_importance_on_pairs(bundle, pairs, batch_size=1)
    two_then_one = head_importance_on_pairs(bundle, pairs, batch_size=2)
    singles = [head_importance(bundle.model, *bundle_inputs(bundle, p)) for p in pairs]
    counts = [s.n_tokens for s in singles]
    assert whole.n_tokens == one_by_one.n_tokens == two_then_one.n_tokens == sum(counts)
    assert len(set(counts)) > 1  # unequal weights: a plain mean of the batches would differ
    assert whole.base == pytest.approx(sum(s.base * n for s, n in zip(singles, counts)) / sum(counts), abs=1e-6)
    for other in (one_by_one, two_then_one):
        assert other.base == pytest.approx(whole.base, abs=1e-6)
        for kind in whole.drops:
            np.testing.assert_allclose(other.drops[kind], whole.drops[kind], atol=1e-6)
    with pytest.raises(UserError, match="^There are no pairs to measure head importance on.$"):
        head_importance_on_pairs(bundle, [])


def bundle_inputs(bundle, pair):
    """Source ids and the gold decoder input (the start token, then the target's tokens) of one pair."""
    src = torch.tensor([bundle.encode_source(pair.source)])
    words = bundle.tgt_tokenizer.encode(pair.target)
    return src, torch.tensor([[bundle.start_id(), *words]])
