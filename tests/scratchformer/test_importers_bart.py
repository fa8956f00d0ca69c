"""BART and mBART import: a small random BartForConditionalGeneration / MBartForConditionalGeneration saved with a
tiny tokenizer, opened through load_model(path), equals transformers' eager implementation on every hidden state,
every attention map (encoder self, decoder self, cross) and the logits of a padded batch; greedy decoding with the
KV cache gives generate()'s tokens; the trace walks the diagram's blocks (pre-LN for mBART)."""

import json

import pytest
import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import (
    BartConfig,
    BartForConditionalGeneration,
    BartTokenizerFast,
    MBartConfig,
    MBartForConditionalGeneration,
    MBartTokenizerFast,
)

from scratchformer.errors import UserError
from scratchformer.loading.bundle import load_model
from scratchformer.plotdata import architecture, block_steps
from scratchformer.running.decoding import greedy
from scratchformer.transformer.departures import departures
from tests.scratchformer.hf_fixtures import attention_pairs, max_diffs, padded_batch

SOURCES = ["the cat sat on the mat", "a dog ran in the park today while the cat slept"]
TARGETS = ["a dog ran in the park", "the cat sat"]
ATOL = 1e-4
SPECIALS = ["<s>", "<pad>", "</s>", "<unk>", "<mask>"]  # BART's ids 0 … 4
WORDS = sorted(set(" ".join(SOURCES + TARGETS).split()))
FAMILIES = {"bart": (BartConfig, BartForConditionalGeneration), "mbart": (MBartConfig, MBartForConditionalGeneration)}
ATTENTION_STEPS = ["qkv", "q", "k", "v", "scores", "scaled_scores", "mask", "masked_scores", "weights", "context",
                   "concat", "out"]  # fmt: skip
CROSS_STEPS = ["q_proj", "kv_proj", "q", "k", "v", "scores", "scaled_scores", "mask", "masked_scores", "weights",
               "context", "concat", "out"]  # fmt: skip


def _save_bart_tokenizer(directory) -> int:
    """A tiny byte-level BPE trained on the test sentences (BART's tokenizer is GPT-2's BPE with <s> … </s>)."""
    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=300, special_tokens=SPECIALS,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())  # fmt: skip
    tok.train_from_iterator((SOURCES + TARGETS) * 3, trainer)
    hf = BartTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>", cls_token="<s>",  # as BART saves
                                 sep_token="</s>", pad_token="<pad>", unk_token="<unk>",
                                 mask_token="<mask>")  # fmt: skip
    hf.save_pretrained(str(directory))
    return len(hf)


def _save_mbart_tokenizer(directory) -> int:
    """A tiny SentencePiece (Unigram) vocabulary in MBartTokenizerFast: … </s> en_XX around the source."""
    vocab = [(t, 0.0) for t in ("<s>", "<pad>", "</s>", "<unk>")] + [("▁", -2.0)]
    vocab += [("▁" + w, -1.0) for w in WORDS] + [(c, -5.0) for c in "abcdefghijklmnopqrstuvwxyz"]
    hf = MBartTokenizerFast(vocab=vocab, src_lang="en_XX", tgt_lang="ro_RO")
    hf.save_pretrained(str(directory))
    return len(hf)


def _sharpen(ref, eos_id: int) -> None:
    """Weights that make mistakes show: peaked attention, LayerNorms and biases that are not 1 and 0."""
    with torch.no_grad():
        for stack in (ref.model.encoder, ref.model.decoder):
            stack.embed_positions.weight.mul_(20.0)  # positions that matter (a wrong offset shows)
            for layer in stack.layers:
                for attn in (layer.self_attn, getattr(layer, "encoder_attn", None)):
                    if attn is not None:
                        attn.q_proj.weight.mul_(20.0)
                        attn.k_proj.weight.mul_(20.0)
                        attn.v_proj.bias.normal_(0, 0.3)
            for module in stack.modules():
                if isinstance(module, torch.nn.LayerNorm):
                    module.weight.normal_(1.0, 0.3)
                    module.bias.normal_(0, 0.3)
        ref.final_logits_bias.normal_()  # zero at init: make it count
        ref.final_logits_bias[0, eos_id] = -20.0  # so greedy decoding runs its full length


def _save(family, directory, seed=0, **overrides):
    config_class, model_class = FAMILIES[family]
    vocab = _save_bart_tokenizer(directory) if family == "bart" else _save_mbart_tokenizer(directory)
    values = dict(vocab_size=vocab, d_model=32, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
                  decoder_attention_heads=4, encoder_ffn_dim=64, decoder_ffn_dim=64, max_position_embeddings=40,
                  pad_token_id=1, bos_token_id=0, eos_token_id=2)  # fmt: skip
    values.update(overrides)
    torch.manual_seed(seed)
    ref = model_class(config_class(**values))
    _sharpen(ref, values["eos_token_id"])
    ref.save_pretrained(str(directory), safe_serialization=True)
    return model_class.from_pretrained(str(directory), attn_implementation="eager").eval()


@pytest.fixture(scope="module")
def bart_dir(tmp_path_factory):
    directory = tmp_path_factory.mktemp("bart-tiny")
    return directory, _save("bart", directory)


@pytest.fixture(scope="module")
def mbart_dir(tmp_path_factory):
    directory = tmp_path_factory.mktemp("mbart-tiny")
    return directory, _save("mbart", directory)


def _outputs(bundle, stack: str, n: int) -> list[str]:
    """Our steps that equal transformers' hidden_states of one stack: the embeddings (after their LayerNorm),
    then each layer's output — the last one after the final LayerNorm when the model has one (mBART)."""
    embed = "src_embed" if stack == "encoder" else "tgt_embed"
    last_norm = "add_norm2" if stack == "encoder" else "add_norm3"
    if not bundle.config.norm_first:
        return [f"{embed}.layer_norm"] + [f"{stack}.{i}.{last_norm}.out" for i in range(n)]
    return ([f"{embed}.layer_norm"] + [f"{stack}.{i}.{last_norm}.residual" for i in range(n - 1)]
            + [f"{stack}.final_norm.out"])  # fmt: skip


def _compare(bundle, ref, sources, targets):
    """(max |ours − theirs| by what, our trace) on a padded batch."""
    src, tgt, src_mask, tgt_mask = padded_batch(bundle, sources, targets)
    assert (src_mask == 0).any() and (tgt_mask == 0).any(), "the batch must contain padding on both sides"
    with torch.no_grad():
        expected = ref(input_ids=src, attention_mask=src_mask, decoder_input_ids=tgt, decoder_attention_mask=tgt_mask,
                       output_hidden_states=True, output_attentions=True)  # fmt: skip
    logits, trace = bundle.model.run_with_trace(src, tgt, src_mask == 0, tgt_mask == 0)
    c = bundle.config
    pairs = {"logits": (logits, expected.logits)}
    for stack, theirs in (("encoder", expected.encoder_hidden_states), ("decoder", expected.decoder_hidden_states)):
        names = _outputs(bundle, stack, c.n_encoder_layers if stack == "encoder" else c.n_decoder_layers)
        for i, (name, hidden) in enumerate(zip(names, theirs, strict=True)):
            pairs[f"{stack} hidden {i}"] = (trace[name].tensor, hidden)
    # Every row, padded ones included: padding only removes keys and no row is fully masked (the first source
    # token and the start token are never padding), so transformers' large negative mask and our −∞ agree.
    pairs.update(attention_pairs(c, trace, expected))
    return max_diffs(pairs), trace


def _assert_peaked(bundle, trace):
    """Attention far from uniform, so that a wrong mapping cannot hide behind flat maps."""
    c = bundle.config
    maps = [f"encoder.{i}.self_attn.weights" for i in range(c.n_encoder_layers)]
    maps += [f"decoder.{i}.{a}.weights" for i in range(c.n_decoder_layers) for a in ("self_attn", "cross_attn")]
    for name in maps:
        weights = trace[name].tensor[:, :, 2:]  # from the third query on a decoder row could spread out
        peak = weights.max(-1).values.mean().item()
        assert peak > 0.5, f"{name}: attention too flat to tell implementations apart ({peak:.2f})"


@pytest.mark.parametrize("family", ["bart", "mbart"])
def test_padded_batch_matches_transformers(family, bart_dir, mbart_dir):
    directory, ref = bart_dir if family == "bart" else mbart_dir
    bundle = load_model(str(directory))
    assert bundle.config.extra["architecture"] == family
    diffs, trace = _compare(bundle, ref, SOURCES, TARGETS)
    assert max(diffs.values()) < ATOL, diffs
    _assert_peaked(bundle, trace)


def test_bart_variants_match_transformers(tmp_path):
    """√d_model scaling, untied embeddings and output layer, 3 heads, ReLU, 1 + 3 layers: all still equal."""
    ref = _save("bart", tmp_path, seed=3, scale_embedding=True, tie_word_embeddings=False, d_model=24,
                encoder_attention_heads=3, decoder_attention_heads=3, encoder_layers=1, decoder_layers=3,
                activation_function="relu")  # fmt: skip
    bundle = load_model(str(tmp_path))
    c = bundle.config
    assert (c.scale_embedding, c.share_embeddings, c.tie_output, c.activation) == (True, False, False, "relu")
    diffs, _ = _compare(bundle, ref, SOURCES, TARGETS)
    assert max(diffs.values()) < ATOL, diffs


@pytest.mark.parametrize("family", ["bart", "mbart"])
def test_fast_path_and_greedy_decoding_match(family, bart_dir, mbart_dir):
    directory, ref = bart_dir if family == "bart" else mbart_dir
    bundle = load_model(str(directory))
    src, tgt, src_mask, tgt_mask = padded_batch(bundle, SOURCES, TARGETS)
    with torch.no_grad():  # untraced: the fused attention kernel
        got = bundle.model(src, tgt, src_mask == 0, tgt_mask == 0)
        expected = ref(input_ids=src, attention_mask=src_mask, decoder_input_ids=tgt,
                       decoder_attention_mask=tgt_mask).logits  # fmt: skip
    assert (got - expected).abs().max() < ATOL
    ref.generation_config.forced_eos_token_id = None  # the plain greedy search, as ours is
    for source in SOURCES:
        src_ids = bundle.encode_source(source)
        ours = greedy(bundle, src_ids, 8)  # with the KV cache
        with torch.no_grad():
            theirs = ref.generate(torch.tensor([src_ids]), max_new_tokens=8, do_sample=False, num_beams=1,
                                  decoder_start_token_id=bundle.start_id(), use_cache=True)  # fmt: skip
        assert theirs[0, 0].item() == bundle.start_id()
        assert ours == theirs[0, 1:].tolist() and len(ours) == 8


def test_bart_config_departures_and_tokens(bart_dir):
    directory, _ = bart_dir
    bundle = load_model(str(directory))
    c = bundle.config
    assert (c.positional, c.position_offset, c.max_len, c.activation) == ("learned", 2, 40, "gelu")
    assert (c.embed_layer_norm, c.final_logits_bias, c.norm_first, c.final_layer_norm) == (True, True, False, False)
    assert (c.scale_embedding, c.share_embeddings, c.tie_output) == (False, True, True)
    m = bundle.model
    assert m.generator.proj.weight is m.tgt_embed.tokens.weight is m.src_embed.tokens.weight
    assert m.src_embed.positions.weight.shape == (42, 32)  # max_position_embeddings + the offset of 2
    listed = departures(c)
    for phrase in ("learned position embeddings instead of sinusoids, counted from 2", "LayerNorm on the embeddings",
                   "GELU instead of ReLU", "not scaled by √d_model", "a bias added to the output logits"):
        assert any(phrase in d for d in listed), (phrase, listed)
    assert not any("pre-LN" in d or "final LayerNorm" in d for d in listed)
    assert bundle.start_id() == c.bos_id == 2 and c.eos_id == 2 and c.pad_id == 1  # BART starts from </s>
    assert c.extra["decoder_start"].startswith("decoder_start_token_id 2")
    inputs = bundle.prepare("the cat sat", "a dog")
    assert inputs.source_tokens == [["<s>", "the", " cat", " sat", "</s>"]]
    assert inputs.target_tokens == [["</s>", "a", " dog"]]


def test_mbart_config_departures_and_start_token(mbart_dir, tmp_path):
    directory, _ = mbart_dir
    bundle = load_model(str(directory))
    c = bundle.config
    assert (c.norm_first, c.final_layer_norm, c.embed_layer_norm, c.position_offset) == (True, True, True, 2)
    listed = departures(c)
    for phrase in ("pre-LN", "a final LayerNorm after the encoder and decoder stacks", "LayerNorm on the embeddings",
                   "learned position embeddings instead of sinusoids, counted from 2", "GELU instead of ReLU",
                   "a bias added to the output logits"):  # fmt: skip
        assert any(phrase in d for d in listed), (phrase, listed)
    # mBART-cc25 names no decoder_start_token_id: the decoder starts with the target language code.
    ro = bundle.tgt_tokenizer.token_id("ro_RO")
    assert bundle.start_id() == ro and "ro_RO" in c.extra["decoder_start"]
    inputs = bundle.prepare("the cat sat", "a dog")
    assert inputs.source_tokens == [["▁the", "▁cat", "▁sat", "</s>", "en_XX"]]
    assert inputs.target_tokens == [["ro_RO", "▁a", "▁dog"]]
    # With decoder_start_token_id (mBART-50 uses </s>) and forced_bos_token_id, config.json decides.
    _save("mbart", tmp_path, decoder_layers=1, encoder_layers=1, decoder_start_token_id=2)
    config = json.loads((tmp_path / "config.json").read_text())
    config["forced_bos_token_id"] = ro  # as hub folders write it (transformers 5 keeps it out of the config)
    (tmp_path / "config.json").write_text(json.dumps(config))
    other = load_model(str(tmp_path))
    assert other.start_id() == 2 and other.config.extra["tgt_prefix"] == ["ro_RO"]
    # the forced token follows the start token in what the decoder reads: typed, and generated
    assert other.prepare("the cat sat", "a dog").target_tokens == [["</s>", "ro_RO", "▁a", "▁dog"]]
    generated = other.prepare_run("the cat sat")
    assert generated.decoder_input == "generated" and generated.target_tokens[0][:2] == ["</s>", "ro_RO"]


@pytest.mark.parametrize("family", ["bart", "mbart"])
def test_trace_walks_the_diagram(family, bart_dir, mbart_dir):
    directory, _ = bart_dir if family == "bart" else mbart_dir
    bundle = load_model(str(directory))
    _, trace = bundle.run(bundle.prepare("the cat sat", "a dog"))
    names = trace.names()
    embed = ["src_embed.tokens", "src_embed.lookup", "src_embed.positional_encoding", "src_embed.sum",
             "src_embed.layer_norm"]  # fmt: skip
    assert names[:5] == embed
    attention = [f"encoder.0.self_attn.{s}" for s in ATTENTION_STEPS]
    self_attn = [f"decoder.0.self_attn.{s}" for s in ATTENTION_STEPS]
    cross = [f"decoder.0.cross_attn.{s}" for s in CROSS_STEPS]
    if family == "bart":  # post-LN: sublayer, then Add & Norm
        encoder0 = attention + ["encoder.0.add_norm1.residual", "encoder.0.add_norm1.out", "encoder.0.ffn.hidden",
                                "encoder.0.ffn.out", "encoder.0.add_norm2.residual", "encoder.0.add_norm2.out"]
        decoder0 = (self_attn + ["decoder.0.add_norm1.residual", "decoder.0.add_norm1.out"] + cross
                    + ["decoder.0.add_norm2.residual", "decoder.0.add_norm2.out", "decoder.0.ffn.hidden",
                       "decoder.0.ffn.out", "decoder.0.add_norm3.residual", "decoder.0.add_norm3.out"])
        assert names[-2:] == ["generator.logits", "generator.probs"]
    else:  # pre-LN: the LayerNorm before each sublayer, then the residual add; a final LayerNorm per stack
        encoder0 = (["encoder.0.add_norm1.norm"] + attention + ["encoder.0.add_norm1.residual",
                    "encoder.0.add_norm2.norm", "encoder.0.ffn.hidden", "encoder.0.ffn.out",
                    "encoder.0.add_norm2.residual"])  # fmt: skip
        decoder0 = (["decoder.0.add_norm1.norm"] + self_attn + ["decoder.0.add_norm1.residual",
                    "decoder.0.add_norm2.norm"] + cross + ["decoder.0.add_norm2.residual", "decoder.0.add_norm3.norm",
                    "decoder.0.ffn.hidden", "decoder.0.ffn.out", "decoder.0.add_norm3.residual"])  # fmt: skip
        assert names[-3:] == ["decoder.final_norm.out", "generator.logits", "generator.probs"]
        assert "encoder.final_norm.out" in names
    assert names[5 : 5 + len(encoder0)] == encoder0
    start = names.index("tgt_embed.tokens")
    assert names[start : start + 5] == [n.replace("src_", "tgt_") for n in embed]
    assert names[start + 5 : start + 5 + len(decoder0)] == decoder0
    # The diagram: every block gets steps, in the diagram's order, and every step lies in a drawn block.
    keys = [b.key for b in architecture(bundle.config)]
    assert list(block_steps(trace)) == keys


def test_bart_tokenizer_from_vocab_and_merges(tmp_path):
    """A folder with vocab.json + merges.txt (no tokenizer.json) reads the same ids."""
    _save("bart", tmp_path, encoder_layers=1, decoder_layers=1)
    with_json = load_model(str(tmp_path))
    expected = with_json.encode_source("the cat sat on the mat")
    data = json.loads((tmp_path / "tokenizer.json").read_text())
    (tmp_path / "vocab.json").write_text(json.dumps(data["model"]["vocab"]))
    merges = [m if isinstance(m, str) else " ".join(m) for m in data["model"]["merges"]]
    (tmp_path / "merges.txt").write_text("#version: 0.2\n" + "\n".join(merges) + "\n")
    (tmp_path / "tokenizer.json").unlink()
    bundle = load_model(str(tmp_path))
    assert bundle.encode_source("the cat sat on the mat") == expected


def test_folder_problems_are_one_sentence(tmp_path):
    _save("bart", tmp_path, encoder_layers=1, decoder_layers=1)
    config = json.loads((tmp_path / "config.json").read_text())
    config["encoder_ffn_dim"] = config["decoder_ffn_dim"] = 48
    (tmp_path / "config.json").write_text(json.dumps(config))
    with pytest.raises(UserError, match=r"weight model\.encoder\.layers\.0\.fc1\.weight has shape \(64, 32\) "
                                        r"but config\.json says \(48, 32\)"):  # fmt: skip
        load_model(str(tmp_path))
    config["decoder_ffn_dim"] = 64
    (tmp_path / "config.json").write_text(json.dumps(config))
    with pytest.raises(UserError, match="different sizes"):
        load_model(str(tmp_path))
    (tmp_path / "tokenizer.json").unlink()
    with pytest.raises(UserError, match="has no tokenizer"):
        load_model(str(tmp_path))
