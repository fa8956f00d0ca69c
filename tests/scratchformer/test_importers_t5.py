"""T5 import: small random T5ForConditionalGeneration models — v1.0 (ReLU, tied output with the d_model^-0.5
rescaling) and v1.1 / Flan-T5 (gated GELU, an output matrix of its own) — with d_kv · heads ≠ d_model, saved with
a tiny T5 tokenizer, opened through load_model(path), equal transformers' eager implementation on every hidden
state, every attention map (encoder self, decoder self, cross) and the logits of a padded batch; greedy decoding
with the KV cache gives generate()'s tokens; the trace shows the relative position bias, RMSNorm and the gate."""

import json
import re

import pytest
import torch
from transformers import T5Config, T5ForConditionalGeneration, T5Tokenizer

from scratchformer.errors import UserError
from scratchformer.explain import explain_step
from scratchformer.loading.bundle import load_model
from scratchformer.loading.checkpoint import save_checkpoint
from scratchformer.plotdata import architecture, block_key, norm_comparison
from scratchformer.plotdata.heatmap import step_heatmap
from scratchformer.running.decoding import greedy
from scratchformer.transformer.attention import relative_position_bucket
from scratchformer.transformer.config import TransformerConfig
from scratchformer.transformer.departures import departures
from scratchformer.transformer.parameters import parameter_counts

SOURCES = ["the cat sat on the mat", "a dog is good"]
TARGETS = ["studies have shown that owning a dog", "good for you"]
WORDS = sorted(set(" ".join(SOURCES + TARGETS).split()) | {"translate", "English", "to", "German"})
ATOL = 1e-4
N_LAYERS, D_MODEL, D_KV, HEADS, D_FF, VOCAB = 2, 32, 8, 3, 64, 72
PLACEHOLDER = re.compile(r"\{[^{}]*\}")


def _save_tokenizer(directory) -> int:
    """A tiny SentencePiece unigram vocabulary in T5's tokenizer: <pad> 0, </s> 1, <unk> 2, no sentinel ids."""
    vocab = [("<pad>", 0.0), ("</s>", 0.0), ("<unk>", 0.0), ("▁", -5.0)]
    vocab += [("▁" + w, -1.0 - i / 10) for i, w in enumerate(WORDS)]
    vocab += [(c, -8.0) for c in "abcdefghijklmnopqrstuvwxyz."]
    tok = T5Tokenizer(vocab=vocab, extra_ids=0)
    tok.save_pretrained(str(directory))
    return len(tok)


def _save_t5(directory, gated: bool, seed: int = 0) -> T5ForConditionalGeneration:
    """A random T5 (v1.0: ReLU, tied; v1.1: gated GELU, untied) with sharp attention, saved with its tokenizer;
    returns transformers' eager model read back from the folder."""
    assert _save_tokenizer(directory) <= VOCAB
    torch.manual_seed(seed)
    config = T5Config(vocab_size=VOCAB, d_model=D_MODEL, d_kv=D_KV, num_heads=HEADS, d_ff=D_FF, num_layers=N_LAYERS,
                      num_decoder_layers=N_LAYERS, relative_attention_num_buckets=8,
                      relative_attention_max_distance=20, dropout_rate=0.0, decoder_start_token_id=0,
                      feed_forward_proj="gated-gelu" if gated else "relu",
                      tie_word_embeddings=not gated)  # fmt: skip
    ref = T5ForConditionalGeneration(config)
    with torch.no_grad():  # default initialisation gives near-flat attention maps that hide mistakes
        for stack in (ref.encoder, ref.decoder):
            for block in stack.block:
                for layer in block.layer:
                    att = getattr(layer, "SelfAttention", None) or getattr(layer, "EncDecAttention", None)
                    if att is not None:
                        att.q.weight.mul_(12.0)
                        if att.has_relative_attention_bias:
                            att.relative_attention_bias.weight.mul_(15.0)  # positions that matter
                    layer.layer_norm.weight.normal_(1.0, 0.3)
            stack.final_layer_norm.weight.normal_(1.0, 0.3)
        if gated:  # v1.1 / Flan-T5 keep an lm_head of their own
            ref.lm_head.weight = torch.nn.Parameter(torch.randn(VOCAB, D_MODEL) * 0.5)
        else:  # small token vectors: the sublayers steer the residual stream, so greedy decoding does not just
            ref.shared.weight.mul_(0.2)  # repeat the last token (the tied output reads the same table)
    ref.save_pretrained(str(directory), safe_serialization=True)
    if gated:  # as the hub's v1.1 / Flan-T5 config.json files say it
        config = json.loads((directory / "config.json").read_text())
        config["tie_word_embeddings"] = False
        config.pop("scale_decoder_outputs", None)
        (directory / "config.json").write_text(json.dumps(config))
    return T5ForConditionalGeneration.from_pretrained(str(directory), attn_implementation="eager").eval()


@pytest.fixture(scope="module")
def t5_dir(tmp_path_factory):
    directory = tmp_path_factory.mktemp("t5-v1.0")
    return directory, _save_t5(directory, gated=False)


@pytest.fixture(scope="module")
def t5_v11_dir(tmp_path_factory):
    directory = tmp_path_factory.mktemp("t5-v1.1")
    return directory, _save_t5(directory, gated=True, seed=1)


@pytest.fixture(params=["v1.0", "v1.1"])
def family(request):
    return request.getfixturevalue("t5_dir" if request.param == "v1.0" else "t5_v11_dir")


def _padded(bundle):
    """Two sources and two decoder inputs of different lengths, right-padded, with their padding masks."""
    rows = [bundle.encode_source(s) for s in SOURCES]
    n = max(map(len, rows))
    src = torch.tensor([r + [0] * (n - len(r)) for r in rows])  # (B, S)
    src_pad = torch.tensor([[False] * len(r) + [True] * (n - len(r)) for r in rows])
    rows = [[bundle.start_id()] + bundle.tgt_tokenizer.encode(t) for t in TARGETS]
    m = max(map(len, rows))
    tgt = torch.tensor([r + [0] * (m - len(r)) for r in rows])  # (B, T), starting with <pad> = the start token
    tgt_pad = torch.tensor([[False] * len(r) + [True] * (m - len(r)) for r in rows])
    assert src_pad.any() and tgt_pad.any() and not tgt_pad[:, 0].any()
    return src, src_pad, tgt, tgt_pad


def _max_diffs(bundle, ref, src, src_pad, tgt, tgt_pad):
    with torch.no_grad():
        e = ref(input_ids=src, attention_mask=(~src_pad).long(), decoder_input_ids=tgt,
                decoder_attention_mask=(~tgt_pad).long(), output_hidden_states=True,
                output_attentions=True)  # fmt: skip
    logits, trace = bundle.model.run_with_trace(src, tgt, src_pad, tgt_pad)
    pairs = {}
    for stack, theirs, embed, last in (("encoder", e.encoder_hidden_states, "src_embed", "add_norm2"),
                                       ("decoder", e.decoder_hidden_states, "tgt_embed", "add_norm3")):  # fmt: skip
        # transformers' hidden states: the embeddings, each block's output but the last, then the final RMSNorm
        ours = [trace[f"{embed}.sum"].tensor]
        ours += [trace[f"{stack}.{i}.{last}.residual"].tensor for i in range(N_LAYERS - 1)]
        ours.append(trace[f"{stack}.final_norm.out"].tensor)
        assert len(ours) == len(theirs), stack
        pairs.update({f"{stack} hidden {i}": (a, b) for i, (a, b) in enumerate(zip(ours, theirs))})
    for i in range(N_LAYERS):
        pairs[f"encoder {i} self-attention"] = (trace[f"encoder.{i}.self_attn.weights"].tensor, e.encoder_attentions[i])
        pairs[f"decoder {i} self-attention"] = (trace[f"decoder.{i}.self_attn.weights"].tensor, e.decoder_attentions[i])
        pairs[f"decoder {i} cross-attention"] = (trace[f"decoder.{i}.cross_attn.weights"].tensor, e.cross_attentions[i])
    pairs["logits"] = (logits, e.logits)
    diffs = {}
    for what, (a, b) in pairs.items():  # every row, padded ones included: they still see the real keys
        assert a.shape == b.shape, what
        diffs[what] = (a - b).abs().max().item()
    return diffs, trace


def test_padded_batch_matches_transformers(family):
    directory, ref = family
    bundle = load_model(str(directory))
    src, src_pad, tgt, tgt_pad = _padded(bundle)
    diffs, trace = _max_diffs(bundle, ref, src, src_pad, tgt, tgt_pad)
    assert max(diffs.values()) < ATOL, diffs
    for name in ("encoder.0.self_attn", "encoder.1.self_attn", "decoder.0.cross_attn", "decoder.1.self_attn"):
        weights = trace[f"{name}.weights"].tensor
        rows = weights if name.startswith("encoder") or "cross" in name else weights[:, :, 2:]
        peak = rows.max(-1).values.mean()
        assert peak > 0.5, f"{name}: attention too flat to tell implementations apart ({peak:.2f})"
    with torch.no_grad():  # the untraced path (the fused kernel with the bias as its additive mask) agrees
        expected = ref(input_ids=src, attention_mask=(~src_pad).long(), decoder_input_ids=tgt,
                       decoder_attention_mask=(~tgt_pad).long()).logits  # fmt: skip
        assert (bundle.model(src, tgt, src_pad, tgt_pad) - expected).abs().max() < ATOL
        one = bundle.model(src[1:, :5], tgt[1:, :4])  # no padding at all: the pure causal path
        assert (one - ref(input_ids=src[1:, :5], decoder_input_ids=tgt[1:, :4]).logits).abs().max() < ATOL


def test_greedy_decoding_with_the_cache_gives_generates_tokens(family):
    directory, ref = family
    bundle = load_model(str(directory))
    distinct = set()
    for source in SOURCES:
        src_ids = bundle.encode_source(source)
        ours = greedy(bundle, src_ids, 8)  # with the KV cache: one new position at a time, bias offset by the past
        assert greedy(bundle, src_ids, 8, cache=False) == ours
        with torch.no_grad():
            theirs = ref.generate(torch.tensor([src_ids]), max_new_tokens=8, do_sample=False, num_beams=1,
                                  decoder_start_token_id=bundle.start_id(), use_cache=True)[0].tolist()  # fmt: skip
        assert theirs[0] == bundle.start_id()
        theirs = theirs[1:]
        if bundle.config.eos_id in theirs:  # generate() writes the end token and stops; greedy() stops before it
            theirs = theirs[: theirs.index(bundle.config.eos_id)]
        assert ours == theirs and len(ours) > 2
        distinct |= set(ours)
    assert len(distinct) > 2, "the decoded tokens should vary, or the comparison says little"


def test_configs_name_every_departure(t5_dir, t5_v11_dir):
    v10 = load_model(str(t5_dir[0]))
    v11 = load_model(str(t5_v11_dir[0]))
    for bundle in (v10, v11):
        c = bundle.config
        assert (c.norm, c.norm_first, c.final_layer_norm, c.positional, c.scale_embedding) == (
            "rmsnorm", True, True, "none", False)
        assert (c.d_kv, c.d_head, c.d_attn) == (D_KV, D_KV, D_KV * HEADS)
        assert (c.linear_bias, c.scale_attention) == (False, False)
        assert (c.relative_buckets, c.relative_max_distance, c.layer_norm_eps) == (8, 20, 1e-6)
        assert (c.pad_id, c.bos_id, c.eos_id, bundle.start_id()) == (0, 0, 1, 0)
        assert TransformerConfig.from_dict(c.to_dict()) == c
    assert (v10.config.activation, v10.config.ffn_gated, v10.config.tie_output, v10.config.scale_decoder_output) == (
        "relu", False, True, True)
    assert v10.model.generator.proj.weight is v10.model.src_embed.tokens.weight
    assert (v11.config.activation, v11.config.ffn_gated, v11.config.tie_output, v11.config.scale_decoder_output) == (
        "gelu_tanh", True, False, False)
    common = ["pre-LN: RMSNorm before each sublayer", "RMSNorm instead of LayerNorm", "no positional encoding",
              "embeddings not scaled by √d_model", "relative position bias added to the attention scores",
              "no 1/√d_k scaling", "heads of d_k = 8: h·d_k = 24 ≠ d_model = 32", "no biases",
              "a final RMSNorm after the encoder and decoder stacks"]  # fmt: skip
    for bundle, own in ((v10, ["the decoder output scaled by d_model^-0.5"]),
                        (v11, ["gated GELU, as in T5 v1.1", "GELU (tanh approximation) instead of ReLU",
                               "an output layer of its own"])):  # fmt: skip
        listed = departures(bundle.config)
        for phrase in common + own:
            assert any(phrase in d for d in listed), (phrase, listed)
    assert not any("gated" in d or "output layer of its own" in d for d in departures(v10.config))
    # the tokenizer ends every source with </s>, as T5's does; the decoder starts from <pad>
    inputs = v10.prepare("the cat sat", "a dog")
    assert inputs.source_tokens == [["▁the", "▁cat", "▁sat", "</s>"]]
    assert inputs.target_tokens == [["<pad>", "▁a", "▁dog"]]


def test_trace_shows_the_position_bias_rmsnorm_and_the_gate(family):
    directory, _ = family
    bundle = load_model(str(directory))
    gated = bundle.config.ffn_gated
    inputs = bundle.prepare("the cat sat on the mat", "a dog is good")
    _, trace = bundle.run(inputs)
    names = trace.names()
    attention = ["qkv", "q", "k", "v", "scores", "scaled_scores", "position_bias", "mask", "masked_scores", "weights",
                 "context", "concat", "out"]  # fmt: skip
    ffn = ["gate", "linear", "hidden", "out"] if gated else ["hidden", "out"]
    layer0 = (["encoder.0.add_norm1.norm"] + [f"encoder.0.self_attn.{s}" for s in attention]
              + ["encoder.0.add_norm1.residual", "encoder.0.add_norm2.norm"] + [f"encoder.0.ffn.{s}" for s in ffn]
              + ["encoder.0.add_norm2.residual"])  # fmt: skip
    start = names.index("encoder.0.add_norm1.norm")
    assert names[:start] == ["src_embed.tokens", "src_embed.lookup", "src_embed.positional_encoding", "src_embed.sum"]
    assert names[start : start + len(layer0)] == layer0
    assert not any(n.startswith("decoder.") and ".cross_attn.position_bias" in n for n in names)  # no bias there
    tail = ["decoder.final_norm.out"] + (["generator.scaled"] if not gated else []) + ["generator.logits",
                                                                                       "generator.probs"]
    assert names[-len(tail):] == tail

    s = len(inputs.source_tokens[0])
    for stack, n in (("encoder", s), ("decoder", len(inputs.target_tokens[0]))):
        bias = trace[f"{stack}.0.self_attn.position_bias"]
        pos = "src_pos" if stack == "encoder" else "tgt_pos"
        assert (bias.kind, bias.dims, bias.shape) == ("position_bias", ("head", pos, pos), (HEADS, n, n))
        assert "computed here" in bias.title and "buckets" in bias.formula
        shared = trace[f"{stack}.1.self_attn.position_bias"]
        assert "shared" in shared.title and torch.equal(shared.tensor, bias.tensor)
        table = getattr(bundle.model, stack)[0].self_attn.relative_bias
        assert torch.equal(bias.tensor, table(n, n).detach())
        assert getattr(bundle.model, stack)[1].self_attn.relative_bias is None  # one table per stack
        scores = trace[f"{stack}.0.self_attn.scores"].tensor
        masked = trace[f"{stack}.0.self_attn.masked_scores"].tensor
        finite = torch.isfinite(masked)
        assert torch.allclose(masked[finite], (scores + bias.tensor)[finite])  # S + B, no √d_k, before the mask
    decoder_bias = trace["decoder.0.self_attn.position_bias"].tensor
    assert decoder_bias.shape[-1] > 1
    assert (trace["encoder.0.self_attn.position_bias"].formula.count("bidirectional"),
            trace["decoder.0.self_attn.position_bias"].formula.count("causal")) == (1, 1)

    step = trace["encoder.0.self_attn.scaled_scores"]
    assert step.title == "Not scaled (no ÷√d_k)" and "no scaling (T5 folds it into the initialisation)" in step.formula
    assert torch.equal(step.tensor, trace["encoder.0.self_attn.scores"].tensor)
    assert trace["encoder.0.self_attn.masked_scores"].formula == "S + B + M"
    assert trace["decoder.1.self_attn.weights"].formula == "A = softmax(QKᵀ + B + M)"
    assert trace["decoder.1.self_attn.masked_scores"].title == "Relative position bias and mask added"
    assert trace["decoder.0.cross_attn.weights"].formula == "A = softmax(QKᵀ + M)"
    assert trace["encoder.0.self_attn.qkv"].shape[-1] == 3 * D_KV * HEADS
    assert trace["encoder.0.self_attn.concat"].dims[-1] == "d_attn"

    norms = [x for x in trace if x.kind == "layer_norm"]
    assert len(norms) == 2 * N_LAYERS + 3 * N_LAYERS + 2  # every sublayer's norm and the two final ones
    for norm in norms:
        assert "RMSNorm" in norm.title and norm.formula.startswith("RMSNorm(x) = γ·x/√(mean(x²) + ε)"), norm.name
    x = trace["src_embed.sum"].tensor
    gamma = bundle.model.encoder[0].add_norm1.norm.weight.detach()
    expected = gamma * x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)  # no mean subtracted, no β
    assert torch.allclose(trace["encoder.0.add_norm1.norm"].tensor, expected, atol=1e-5)
    assert trace["encoder.0.add_norm1.residual"].formula == "x + Sublayer(RMSNorm(x))"
    assert step_heatmap(trace, "encoder.0.add_norm1.norm").title.startswith("Encoder 1 › Add & Norm 1 › RMSNorm › ")
    assert step_heatmap(trace, "decoder.final_norm.out").title.startswith("Decoder › Final RMSNorm › ")
    comparison = norm_comparison(trace, "encoder.0.add_norm1.norm", eps=1e-6)
    assert comparison is not None and comparison.layer_norm.title.startswith("RMSNorm")
    assert torch.allclose(torch.from_numpy(comparison.layer_norm.values), (expected / gamma)[0], atol=1e-4)

    if gated:
        gate, linear = trace["decoder.1.ffn.gate"], trace["decoder.1.ffn.linear"]
        assert (gate.kind, linear.kind) == ("ffn_gate", "ffn_gate")
        assert torch.allclose(trace["decoder.1.ffn.hidden"].tensor, gate.tensor * linear.tensor)
        assert trace["decoder.1.ffn.out"].formula == "FFN(x) = (GELU_TANH(x W_1) ⊙ x V) W_2"
    else:
        assert trace["decoder.1.ffn.hidden"].formula == "max(0, ·)(x W_1)"
        scaled = trace["generator.scaled"]
        assert scaled.kind == "output_scale"
        assert torch.allclose(scaled.tensor, trace["decoder.final_norm.out"].tensor * D_MODEL**-0.5)

    # the diagram: RMSNorm before each sublayer, the trace walks its blocks in order; parameters add up
    blocks = architecture(bundle.config)
    keys = [b.key for b in blocks]
    assert keys[2:8] == ["encoder.0.add_norm1.norm", "encoder.0.self_attn", "encoder.0.add_norm1",
                         "encoder.0.add_norm2.norm", "encoder.0.ffn", "encoder.0.add_norm2"]  # fmt: skip
    assert [b.label for b in blocks[2:4]] == ["RMSNorm", "Multi-head self-attention"]
    assert "Final RMSNorm" in [b.label for b in blocks] and blocks[1].label == "⊕ No positional encoding"
    assert list(dict.fromkeys(block_key(x) for x in trace)) == keys
    counts = parameter_counts(bundle.model)
    total = sum(p.numel() for p in bundle.model.parameters())
    assert counts["total"].count == total
    assert sum(counts[k].count for k in keys) == total
    assert counts["encoder.0.self_attn"].count == 4 * D_MODEL * D_KV * HEADS + 8 * HEADS  # + the bias table
    assert counts["encoder.1.self_attn"].count == 4 * D_MODEL * D_KV * HEADS
    assert counts["encoder.0.add_norm1.norm"].count == D_MODEL  # γ only
    assert counts["encoder.0.ffn"].count == (3 if gated else 2) * D_MODEL * D_FF


def test_every_step_is_explained(family):
    directory, ref = family
    bundle = load_model(str(directory))
    src, src_pad, tgt, tgt_pad = _padded(bundle)
    _, trace = bundle.model.run_with_trace(src, tgt, src_pad, tgt_pad)
    for batch in (0, 1):
        for step in trace:
            ex = explain_step(trace, step, bundle.config, batch=batch)
            for text in (ex.what, ex.why, ex.numbers):
                assert text.strip() and not PLACEHOLDER.search(text), (step.name, text)
            assert ex.complete, (step.name, ex.key, ex.numbers)
            assert ex.key.split(".")[0] == step.kind
    text = {s.name: explain_step(trace, s, bundle.config) for s in trace}
    assert text["encoder.0.self_attn.position_bias"].key == "position_bias"
    assert text["decoder.1.self_attn.position_bias"].key == "position_bias.shared"
    assert "decoder.0.self_attn.position_bias" in text["decoder.1.self_attn.position_bias"].link_names
    assert "RMSNorm" in text["encoder.0.add_norm1.norm"].what and "β" in text["encoder.0.add_norm1.norm"].what
    assert "root mean square" in text["decoder.final_norm.out"].numbers
    assert text["encoder.0.self_attn.scaled_scores"].key == "scaled_scores.none"
    assert "relative position bias" in text["src_embed.positional_encoding"].what
    assert text["decoder.0.self_attn.masked_scores"].key == "masked_scores.bias"
    assert f"({D_KV * HEADS} × {D_MODEL})" in text["encoder.0.self_attn.out"].what  # W^O is h·d_k × d_model
    if bundle.config.ffn_gated:
        assert text["encoder.0.ffn.gate"].key == "ffn_gate" and text["encoder.0.ffn.linear"].key == "ffn_gate.linear"
        assert "W_1, V and W_2 hold 3 · 32 · 64 = 6144" in text["encoder.0.ffn.out"].numbers
    else:
        assert "d_model^-0.5" in text["generator.scaled"].what


def test_buckets_equal_transformers(t5_dir):
    from transformers.models.t5.modeling_t5 import T5Attention

    relative = torch.arange(-300, 300)
    for buckets, distance in ((8, 20), (32, 128), (16, 64)):
        for bidirectional in (True, False):
            ours = relative_position_bucket(relative, bidirectional, buckets, distance)
            theirs = T5Attention._relative_position_bucket(relative, bidirectional, buckets, distance)
            assert torch.equal(ours, theirs), (buckets, distance, bidirectional)
            assert ours.min() >= 0 and ours.max() < buckets


def test_a_t5_checkpoint_saves_and_loads(t5_v11_dir, tmp_path):
    bundle = load_model(str(t5_v11_dir[0]))
    save_checkpoint(tmp_path / "t5", bundle.model, bundle.src_tokenizer, bundle.tgt_tokenizer)
    again = load_model(str(tmp_path / "t5"))
    assert again.config == bundle.config
    src, src_pad, tgt, tgt_pad = _padded(bundle)
    with torch.no_grad():
        assert torch.equal(again.model(src, tgt, src_pad, tgt_pad), bundle.model(src, tgt, src_pad, tgt_pad))


def test_options_are_validated():
    small = dict(d_model=32, n_heads=3, d_ff=16, n_encoder_layers=1, n_decoder_layers=1, src_vocab_size=20,
                 tgt_vocab_size=20, max_len=16)  # fmt: skip
    with pytest.raises(UserError, match="not divisible by n_heads"):
        TransformerConfig(**small)
    assert TransformerConfig(**small, d_kv=8).d_attn == 24
    with pytest.raises(UserError, match="d_kv must be a positive whole number"):
        TransformerConfig(**small, d_kv=0)
    with pytest.raises(UserError, match="norm 'batchnorm' is not one of layernorm, rmsnorm"):
        TransformerConfig(**small, d_kv=8, norm="batchnorm")
    with pytest.raises(UserError, match="relative_buckets must be 0"):
        TransformerConfig(**small, d_kv=8, relative_buckets=2)
    with pytest.raises(UserError, match="relative_max_distance 3 must exceed"):
        TransformerConfig(**small, d_kv=8, relative_buckets=8, relative_max_distance=3)
    with pytest.raises(UserError, match="ffn_gated must be true or false"):
        TransformerConfig(**small, d_kv=8, ffn_gated="yes")
    for options, phrase in ((dict(norm="rmsnorm"), "RMSNorm instead of LayerNorm"),
                            (dict(relative_buckets=8), "relative position bias"),
                            (dict(scale_attention=False), "no 1/√d_k scaling"),
                            (dict(linear_bias=False), "no biases"),
                            (dict(ffn_gated=True), "gated feed-forward: (ReLU(x W_1) ⊙ x V) W_2"),
                            (dict(scale_decoder_output=True), "the decoder output scaled by d_model^-0.5")):
        listed = departures(TransformerConfig(**{**small, "n_heads": 4}, **options))
        assert len(listed) == 1 and listed[0].startswith(phrase), (options, listed)


def test_folder_problems_are_one_sentence(tmp_path):
    _save_t5(tmp_path, gated=False)
    config = json.loads((tmp_path / "config.json").read_text())
    config["feed_forward_proj"] = "gated-tanh"
    (tmp_path / "config.json").write_text(json.dumps(config))
    with pytest.raises(UserError, match="feed-forward 'gated-tanh'"):
        load_model(str(tmp_path))
    config["feed_forward_proj"] = "relu"
    config["d_kv"] = 16
    (tmp_path / "config.json").write_text(json.dumps(config))
    with pytest.raises(UserError, match=r"SelfAttention\.q\.weight has shape \(24, 32\) but config\.json says "
                                        r"\(48, 32\)"):  # fmt: skip
        load_model(str(tmp_path))
    (tmp_path / "tokenizer.json").unlink()
    with pytest.raises(UserError, match="has no tokenizer.json"):
        load_model(str(tmp_path))
