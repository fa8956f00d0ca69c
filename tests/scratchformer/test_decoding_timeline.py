"""The step-by-step decoding timeline the Decoding view shows: how many steps it runs (2n + 10 for a source of n
tokens, never past the model's positions, up to and including the end token), what a step's top-k list says
(the 5 most probable next tokens, their probabilities those of a full forward pass computed here), the longest
target it accepts and the sentence for a longer one, the unknown words of both texts, and a decoder-only model's
prompt, which is forced first. Counts and sentences are worked out by hand from the texts."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from scratchformer.errors import UserError
from scratchformer.loading.bundle import ModelBundle
from scratchformer.loading.tokenizers import word_level_tokenizer
from scratchformer.running.decoding import greedy, teacher_forced_hidden, timeline
from scratchformer.transformer.config import TransformerConfig
from scratchformer.transformer.model import Transformer

SRC = ["we are friends", "the boy eats an apple"]
TGT = ["हम दोस्त हैं", "लड़का सेब खाता है"]
END = 2


def _bundle(eos_bias: float = 0.0, max_len: int = 40, decoder_only: bool = False) -> ModelBundle:
    """A random word-level model (<pad> 0, <s> 1, </s> 2, <unk> 3); eos_bias pushes </s> up (or down)."""
    src_tok, tgt_tok = word_level_tokenizer(SRC, "en"), word_level_tokenizer(TGT, "hi")
    if decoder_only:
        src_tok = tgt_tok
    config = TransformerConfig(
        d_model=16, n_heads=2, d_ff=32, n_encoder_layers=0 if decoder_only else 1, n_decoder_layers=2,
        dropout=0.0, src_vocab_size=src_tok.vocab_size, tgt_vocab_size=tgt_tok.vocab_size, max_len=max_len,
        pad_id=0, bos_id=1, eos_id=END, extra={"src_suffix": ["</s>"]}, final_logits_bias=True, share_embeddings=False,
    )
    torch.manual_seed(4)
    model = Transformer(config).eval()
    with torch.no_grad():
        model.generator.final_logits_bias[END] = eos_bias
    return ModelBundle(model, src_tok, tgt_tok, "tiny", "test")


NEVER_ENDS, ENDS_AT_ONCE = -50.0, 50.0


def test_a_free_running_timeline_runs_2n_plus_10_steps_by_default():
    # "we are friends" + </s>: n = 4 source tokens → 2·4 + 10 = 18 steps when the end token never comes
    tl = timeline(_bundle(NEVER_ENDS), "we are friends")
    assert tl.mode == "free" and len(tl.source_tokens) == 4
    assert [s.position for s in tl.steps] == list(range(18))
    assert "</s>" not in tl.output_tokens


def test_a_free_running_timeline_stops_at_the_model_s_positions():
    bundle = _bundle(NEVER_ENDS, max_len=12)
    # by default at most max_len − 1 = 11 steps, though 2n + 10 = 18 …
    assert len(timeline(bundle, "we are friends").steps) == 11
    # … and never more than the 12 positions the decoder reads (the start token at 0, the newest at 11)
    tl = timeline(bundle, "we are friends", max_steps=100)
    assert [s.position for s in tl.steps] == list(range(12))
    assert len(timeline(bundle, "we are friends", max_steps=3).steps) == 3


def test_a_free_running_timeline_ends_with_the_end_token():
    tl = timeline(_bundle(ENDS_AT_ONCE), "we are friends")
    assert [(s.input_token, s.token_id, s.token) for s in tl.steps] == [("<s>", END, "</s>")]


def test_the_longest_target_fills_every_position_and_a_longer_one_is_refused_with_its_length():
    bundle = _bundle(max_len=12)
    longest = " ".join(["हम"] * 11)  # 11 words + the end token = 12 forced tokens, one per position
    tl = timeline(bundle, "we are friends", longest)
    assert tl.mode == "teacher" and tl.output_tokens == ["हम"] * 11 + ["</s>"]
    assert [s.input_token for s in tl.steps] == ["<s>"] + ["हम"] * 11
    with pytest.raises(UserError) as error:
        timeline(bundle, "we are friends", longest + " हम")
    assert str(error.value) == "The target has 13 tokens but this model reads at most 12; shorten it."


def _full_pass_probs(bundle, source: str, ys: list[int]) -> torch.Tensor:
    """(T, vocab) next-token probabilities of one forward pass over the start token and ys."""
    src = torch.tensor([bundle.encode_source(source)])
    with torch.no_grad():
        return bundle.model(src, torch.tensor([[1, *ys]])).softmax(-1)[0]


def test_each_step_lists_the_5_most_probable_next_tokens_of_a_full_pass():
    bundle = _bundle()
    source, target = "the boy eats an apple", "लड़का सेब खाता है"
    tl = timeline(bundle, source, target)
    forced = bundle.tgt_tokenizer.encode(target) + [END]
    probs = _full_pass_probs(bundle, source, forced[:-1])  # (5, vocab)
    names = bundle.tgt_tokenizer.token_strings(range(bundle.config.tgt_vocab_size))
    assert len(tl.steps) == len(forced) == 5
    for step, p in zip(tl.steps, probs):
        order = sorted(range(len(p)), key=lambda i: -float(p[i]))[:5]
        assert [name for name, _ in step.top_k] == [names[i] for i in order]
        assert [q for _, q in step.top_k] == pytest.approx([float(p[i]) for i in order], abs=1e-5)


def test_a_top_k_larger_than_the_vocabulary_lists_every_token():
    bundle = _bundle()
    tl = timeline(bundle, "we are friends", "हम", k=100)
    vocab = bundle.config.tgt_vocab_size
    assert all(len(s.top_k) == vocab for s in tl.steps)
    assert all(sum(p for _, p in s.top_k) == pytest.approx(1.0, abs=1e-5) for s in tl.steps)


def test_unknown_words_of_the_source_and_the_target_are_reported():
    bundle = _bundle()
    tl = timeline(bundle, "we are zebras", "हम ज़ेबरा हैं")
    assert tl.unknown_words == ["zebras", "ज़ेबरा"]
    assert tl.output_tokens == ["हम", "<unk>", "हैं", "</s>"]


def test_a_decoder_only_timeline_forces_the_prompt_then_continues_greedily():
    bundle = _bundle(NEVER_ENDS, decoder_only=True)
    prompt = "हम दोस्त"
    ids = bundle.tgt_tokenizer.encode(prompt)
    tl = timeline(bundle, prompt)
    assert tl.mode == "free" and tl.source_tokens == ["हम", "दोस्त"]
    assert all(s.cross_attention is None for s in tl.steps)
    # 2n + 10 + the prompt's own 2 tokens = 16 steps; the first two emit the prompt's tokens
    assert len(tl.steps) == 16
    made = [s.token_id for s in tl.steps]
    assert made[:2] == ids
    assert made[2:] == greedy(bundle, [], 14, prefix=ids)
    assert tl.steps[2].input_token == "दोस्त"


def test_a_decoder_only_timeline_with_a_target_forces_the_prompt_the_target_and_the_end_token():
    bundle = _bundle(decoder_only=True)
    tl = timeline(bundle, "हम दोस्त", "हैं")
    assert tl.mode == "teacher"
    assert tl.output_tokens == ["हम", "दोस्त", "हैं", "</s>"]
    assert [s.input_token for s in tl.steps] == ["<s>", "हम", "दोस्त", "हैं"]


def test_a_teacher_forced_timeline_stops_after_the_end_token_even_with_steps_to_spare():
    tl = timeline(_bundle(), "we are friends", "हम दोस्त", max_steps=30)
    assert tl.output_tokens == ["हम", "दोस्त", "</s>"]


def test_without_an_end_token_the_target_alone_is_forced():
    """A model whose config and tokenizer name no end token: the typed target is forced, nothing after it."""
    bundle = _bundle()
    bundle.model.config.eos_id = None
    bundle.tgt_tokenizer.hf.eos_token = None
    tl = timeline(bundle, "we are friends", "हम दोस्त हैं")
    assert tl.output_tokens == ["हम", "दोस्त", "हैं"]


@pytest.mark.parametrize("source", ["", "   ", None])
def test_an_empty_source_is_refused_with_a_sentence_saying_so(source):
    with pytest.raises(UserError) as error:
        timeline(_bundle(), source, "हम")
    assert str(error.value) == "The source text is empty; type a sentence first."


def test_the_reference_pass_of_a_decoder_only_model_reads_no_source():
    """teacher_forced_hidden, the one-pass reference the timeline's rows are compared with, for a decoder-only
    model: [start] + the text through the decoder alone, one row per position (a decoder-only model's text is its
    decoder input, as bundle.prepare makes it)."""
    bundle = _bundle(decoder_only=True)
    hidden = teacher_forced_hidden(bundle, "हम दोस्त", "")
    ids = [1, *bundle.tgt_tokenizer.encode("हम दोस्त")]
    with torch.no_grad():
        expected = bundle.model.decode(torch.tensor([ids]))[0].numpy()
    assert hidden.shape == expected.shape and abs(hidden - expected).max() < 1e-5


def test_the_reference_pass_gives_the_model_its_inputs_on_the_model_s_device():
    """The model is on "meta" (standing in for a GPU; the inputs are made on the CPU): what the encoder and the
    decoder are handed must be on it. Their outputs are stood in for by zeros on the CPU."""
    bundle = _bundle()
    model = bundle.model.to("meta")
    seen = []
    model.encode = lambda src, *a, **kw: (seen.append(src.device.type), torch.zeros(1, src.shape[1], 16))[1]
    model.decode = lambda tgt, *a, **kw: (seen.append(tgt.device.type), torch.zeros(1, tgt.shape[1], 16))[1]
    assert teacher_forced_hidden(bundle, "we are friends", "हम").shape == (2, 16)
    assert seen == ["meta", "meta"]


def test_a_padding_token_in_the_source_gets_no_cross_attention_at_any_step():
    """A typed "<pad>" is the padding id (0): masked in the source, so every cross-attention row of every step
    gives it weight 0 and the other positions share all of it."""
    bundle = _bundle()
    tl = timeline(bundle, "we <pad> friends", "हम दोस्त")
    assert tl.source_tokens == ["we", "<pad>", "friends", "</s>"]
    for s in tl.steps:
        assert (s.cross_attention[..., 1] == 0).all()
        assert abs(s.cross_attention.sum(-1) - 1).max() < 1e-5


def _stepped_and_full(bundle, source: str, target: str):
    tl = timeline(bundle, source, target)
    return tl, np.stack([s.hidden for s in tl.steps]), teacher_forced_hidden(bundle, source, target)


def test_a_decoder_only_model_s_reference_pass_reads_the_typed_target_as_the_timeline_does():
    """A decoder-only model's timeline forces the text, then the typed target, then the end token; the one-pass
    reference reads the same tokens behind <s> (the text, then the target), so the two agree row by row."""
    bundle = _bundle(decoder_only=True)
    tl, stepped, full = _stepped_and_full(bundle, "हम दोस्त", "हैं")
    text, typed = bundle.tgt_tokenizer.encode("हम दोस्त"), bundle.tgt_tokenizer.encode("हैं")
    assert [s.token_id for s in tl.steps] == [*text, *typed, END]
    with torch.no_grad():
        expected = bundle.model.decode(torch.tensor([[1, *text, *typed]]))[0].numpy()
    assert full.shape == expected.shape == stepped.shape == (1 + len(text) + len(typed), 16)
    assert abs(full - expected).max() < 1e-5 and abs(stepped - full).max() < 1e-5


def test_a_target_prefix_is_forced_first_by_the_timeline_and_read_by_the_reference():
    """An encoder-decoder whose decoder reads a fixed token after <s> (mBART's language code; here “हम”): the
    timeline forces it before the typed target, and free-running starts behind it as greedy decoding does."""
    bundle = _bundle()
    bundle.config.extra["tgt_prefix"] = ["हम"]
    prefix = bundle.target_prefix()
    assert prefix == bundle.tgt_tokenizer.encode("हम")
    tl, stepped, full = _stepped_and_full(bundle, "we are friends", "दोस्त हैं")
    assert [s.token_id for s in tl.steps] == [*prefix, *bundle.tgt_tokenizer.encode("दोस्त हैं"), END]
    assert stepped.shape == full.shape and abs(stepped - full).max() < 1e-5
    free = timeline(bundle, "we are friends", max_steps=6)
    src_ids = bundle.encode_source("we are friends")
    assert [s.token_id for s in free.steps][1:] == greedy(bundle, src_ids, 5, prefix=prefix, stop_at_eos=False)
