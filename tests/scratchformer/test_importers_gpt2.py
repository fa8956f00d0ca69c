"""GPT-2 import: a small random GPT2LMHeadModel saved with the walkthrough's GPT-2 tokenizer, opened through
load_model(path), equals transformers' eager implementation on every hidden state, attention map and logit of a
padded batch; the trace shows the pre-LN norms before their sublayers; the diagram has no cross-attention."""

import json

import pytest
import torch
from transformers import GPT2Config, GPT2LMHeadModel

from scratchformer.errors import UserError
from scratchformer.loading.bundle import load_model
from scratchformer.loading.tokenizers import gpt2_tokenizer
from scratchformer.plotdata.blocks import architecture, block_key
from scratchformer.transformer.departures import departures
from tests.scratchformer.modern_checks import padded_batch, transformers_pairs

SENTENCES = ["machine learning using PyTorch is fun", "Attention is all you need."]
ATOL = 1e-4
N_LAYER = 2


def _save_gpt2(directory, seed=0, **overrides):
    values = dict(vocab_size=50257, n_positions=32, n_embd=32, n_layer=N_LAYER, n_head=4,
                  resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)  # fmt: skip
    values.update(overrides)
    torch.manual_seed(seed)
    ref = GPT2LMHeadModel(GPT2Config(**values))
    with torch.no_grad():  # sharpen attention: default init gives near-flat maps that hide mistakes
        d = values["n_embd"]
        for block in ref.transformer.h:
            block.attn.c_attn.weight[:, : 2 * d] *= 15.0  # W^Q and W^K (Conv1D: (in, out), Q K V side by side)
            block.attn.c_attn.bias.normal_(0, 0.5)
            block.ln_1.weight.normal_(1.0, 0.3)
            block.ln_2.bias.normal_(0, 0.3)
        ref.transformer.wpe.weight.mul_(20.0)  # positions that matter
    ref.save_pretrained(str(directory), safe_serialization=True)
    gpt2_tokenizer().hf.save_pretrained(str(directory))
    return GPT2LMHeadModel.from_pretrained(str(directory), attn_implementation="eager").eval()


@pytest.fixture(scope="module")
def gpt2_dir(tmp_path_factory):
    directory = tmp_path_factory.mktemp("gpt2-tiny")
    ref = _save_gpt2(directory)
    return directory, ref


def _batch(bundle, sentences):
    """Right-padded (B, T) ids [<|endoftext|>, text…] and (B, T) bool padding, as the walkthrough starts them."""
    return padded_batch(bundle, sentences, bundle.config.eos_id)


def _max_diffs(bundle, ref, ids, pad):
    """max |ours − theirs| per compared tensor, over every row (with right padding a padded query still sees the
    real tokens before it, so GPT-2's rows all agree)."""
    pairs, _trace = transformers_pairs(bundle, ref, ids, pad)
    diffs = {}
    for what, (a, b) in pairs.items():
        assert a.shape == b.shape, what
        diffs[what] = (a - b).abs().max().item()
    return diffs


def test_gpt2_padded_batch_matches_transformers(gpt2_dir):
    directory, ref = gpt2_dir
    bundle = load_model(str(directory))
    ids, pad = _batch(bundle, SENTENCES)
    assert pad.any() and not pad[:, 0].any()
    diffs = _max_diffs(bundle, ref, ids, pad)
    assert max(diffs.values()) < ATOL, diffs
    _, trace = bundle.model.run_with_trace(None, ids, None, pad)
    for i in range(N_LAYER):  # rows from the third token on could spread out; they must not be near-uniform
        peak = trace[f"decoder.{i}.self_attn.weights"].tensor[:, :, 2:].max(-1).values.mean()
        assert peak > 0.5, f"layer {i}: attention too flat to tell implementations apart ({peak:.2f})"


def test_gpt2_fast_path_and_single_sentence_match(gpt2_dir):
    directory, ref = gpt2_dir
    bundle = load_model(str(directory))
    ids, pad = _batch(bundle, SENTENCES)
    with torch.no_grad():
        expected = ref(input_ids=ids, attention_mask=(~pad).long()).logits
        got = bundle.model(None, ids, tgt_pad=pad)  # untraced: the fused attention kernel
        one = bundle.model(None, ids[:1, :5])  # no padding: the pure causal path
        expected_one = ref(input_ids=ids[:1, :5]).logits
    assert (got - expected).abs().max() < ATOL
    assert (one - expected_one).abs().max() < ATOL


def test_gpt2_config_departures_and_tokenizer(gpt2_dir):
    directory, _ = gpt2_dir
    bundle = load_model(str(directory))
    c = bundle.config
    assert (c.n_encoder_layers, c.n_decoder_layers, c.d_ff) == (0, N_LAYER, 128)
    assert (c.norm_first, c.final_layer_norm, c.positional, c.activation, c.scale_embedding, c.tie_output) == (
        True, True, "learned", "gelu_tanh", False, True)
    assert bundle.model.generator.proj.weight is bundle.model.tgt_embed.tokens.weight
    listed = departures(c)
    for phrase in ("decoder-only", "pre-LN", "learned position embeddings", "GELU (tanh approximation)",
                   "final LayerNorm after the decoder stack", "not scaled by √d_model"):
        assert any(phrase in d for d in listed), (phrase, listed)
    tok = bundle.tgt_tokenizer
    walkthrough = "<|endoftext|> machine learning using PyTorch"
    assert tok.encode(walkthrough) == [50256, 4572, 4673, 1262, 9485, 15884, 354]
    assert tok.unknown_words(walkthrough) == []
    inputs = bundle.prepare("machine learning")
    assert inputs.src is None and inputs.tgt[0, 0].item() == 50256
    assert inputs.target_tokens == [["<|endoftext|>", "machine", " learning"]]


def test_gpt2_trace_shows_pre_norm_steps(gpt2_dir):
    directory, _ = gpt2_dir
    bundle = load_model(str(directory))
    _, trace = bundle.run(bundle.prepare("machine learning"))
    attention = ["qkv", "q", "k", "v", "scores", "scaled_scores", "mask", "masked_scores", "weights", "context",
                 "concat", "out"]  # fmt: skip
    layer0 = (["decoder.0.add_norm1.norm"] + [f"decoder.0.self_attn.{s}" for s in attention]
              + ["decoder.0.add_norm1.residual", "decoder.0.add_norm3.norm", "decoder.0.ffn.hidden",
                 "decoder.0.ffn.out", "decoder.0.add_norm3.residual"])  # fmt: skip
    names = trace.names()
    assert names[:4] == ["tgt_embed.tokens", "tgt_embed.lookup", "tgt_embed.positional_encoding", "tgt_embed.sum"]
    assert names[4 : 4 + len(layer0)] == layer0
    assert names[-3:] == ["decoder.final_norm.out", "generator.logits", "generator.probs"]
    assert not any("cross_attn" in n or "add_norm2" in n for n in names)
    norm = trace["decoder.0.add_norm1.norm"]
    assert (norm.kind, norm.sublayer) == ("layer_norm", "decoder.0.add_norm1.norm")
    assert trace["decoder.0.add_norm1.residual"].formula == "x + Sublayer(LayerNorm(x))"
    # The diagram: each norm before its sublayer, no cross-attention, and every step inside a drawn block.
    keys = [b.key for b in architecture(bundle.config)]
    assert keys[2:8] == ["decoder.0.add_norm1.norm", "decoder.0.self_attn", "decoder.0.add_norm1",
                         "decoder.0.add_norm3.norm", "decoder.0.ffn", "decoder.0.add_norm3"]  # fmt: skip
    assert not any("cross_attn" in k for k in keys)
    firsts = list(dict.fromkeys(block_key(s) for s in trace))
    assert firsts == keys, "the trace must walk the diagram's blocks in the diagram's order"


def test_gpt2_untied_output_head(tmp_path):
    ref = _save_gpt2(tmp_path, seed=2, tie_word_embeddings=False, n_layer=1, n_inner=48)
    with torch.no_grad():
        ref.lm_head.weight.normal_(0, 0.2)
    ref.save_pretrained(str(tmp_path), safe_serialization=True)
    bundle = load_model(str(tmp_path))
    assert not bundle.config.tie_output and bundle.config.d_ff == 48
    ids, pad = _batch(bundle, SENTENCES)
    diffs = _max_diffs(bundle, ref, ids, pad)
    assert max(diffs.values()) < ATOL, diffs


def test_gpt2_folder_problems_are_one_sentence(tmp_path):
    _save_gpt2(tmp_path, n_layer=1)
    config = json.loads((tmp_path / "config.json").read_text())
    config["add_cross_attention"] = True
    (tmp_path / "config.json").write_text(json.dumps(config))
    with pytest.raises(UserError, match="adds cross-attention to GPT-2"):
        load_model(str(tmp_path))
    config["add_cross_attention"] = False
    config["n_embd"] = 64
    (tmp_path / "config.json").write_text(json.dumps(config))
    with pytest.raises(UserError, match=r"weight transformer\.wte\.weight has shape \(50257, 32\) but config\.json "
                                        r"says \(50257, 64\)"):  # fmt: skip
        load_model(str(tmp_path))
    (tmp_path / "tokenizer.json").unlink()
    with pytest.raises(UserError, match="has no tokenizer"):
        load_model(str(tmp_path))


def test_greedy_generation_equals_transformers_generate(gpt2_dir):
    """The prompt behind <|endoftext|>, continued greedily with the KV cache: the same tokens as generate()."""
    from scratchformer.running.decoding import greedy

    directory, ref = gpt2_dir
    bundle = load_model(str(directory))
    prompt = bundle.tgt_tokenizer.encode("machine learning using PyTorch")
    for cache in (True, False):
        ours = greedy(bundle, [], 10, cache=cache, stop_at_eos=False, prefix=prompt)
        with torch.no_grad():
            theirs = ref.generate(torch.tensor([[bundle.start_id()] + prompt]), max_new_tokens=10, do_sample=False,
                                  num_beams=1, use_cache=True, pad_token_id=bundle.config.eos_id)
        assert ours == theirs[0, 1 + len(prompt):].tolist()
    assert len(set(ours)) > 1  # a real continuation, not one token repeated
