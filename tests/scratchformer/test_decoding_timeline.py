"""The step-by-step decoding timeline the Decoding view shows: how many steps it runs (2n + 10 for a source of n
tokens, never past the model's positions, up to and including the end token), what a step's top-k list says
(the 5 most probable next tokens, their probabilities those of a full forward pass computed here), the longest
target it accepts and the sentence for a longer one, the unknown words of both texts, and a decoder-only model's
prompt, which is forced first. Counts and sentences are worked out by hand from the texts."""

from __future__ import annotations

import pytest
import torch

from scratchformer.bundle import ModelBundle
from scratchformer.config import TransformerConfig
from scratchformer.decoding import greedy, timeline
from scratchformer.errors import UserError
from scratchformer.model import Transformer
from scratchformer.tokenizers import word_level_tokenizer

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
