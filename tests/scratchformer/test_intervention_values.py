"""The `scale` and `mean` head interventions give the values their definitions give, computed here by hand from
an untouched run (not "cached equals uncached", which shares the formula): scale multiplies one head's context
by the factor; an encoder's mean replaces every row by the average over all positions; a decoder's mean replaces
row t by the average of rows 0 … t (count t + 1), so no later token leaks in."""

import pytest
import torch

from scratchformer.loading.bundle import load_model
from scratchformer.patching.interventions import HeadChange, intervene

SENTENCE = ("the girl eats an apple", "लड़की सेब खाती है")


@pytest.fixture(scope="module")
def en_hi():
    bundle = load_model("en-hi")
    inputs = bundle.prepare(*SENTENCE)
    _, clean = bundle.run(inputs)
    return bundle, inputs, clean


def changed(bundle, inputs, change):
    with intervene(bundle.model, [change]):
        _, trace = bundle.run(inputs)
    return trace


def test_scale_multiplies_one_heads_context_by_the_factor(en_hi):
    bundle, inputs, clean = en_hi
    name = "decoder.1.cross_attn.context"
    trace = changed(bundle, inputs, HeadChange("decoder.1.cross_attn", 2, "scale", 0.25))
    before, after = clean[name].tensor, trace[name].tensor  # (B, h, T, d_k)
    assert torch.allclose(after[:, 2], 0.25 * before[:, 2], atol=1e-6)
    others = [0, 1, 3]
    assert torch.allclose(after[:, others], before[:, others], atol=1e-6)
    # and the output projection reads the changed heads: out = concat W^Oᵀ + b, by hand
    mha = bundle.model.get_submodule("decoder.1.cross_attn")
    concat = after.transpose(1, 2).reshape(after.shape[0], after.shape[2], -1)  # (B, T, h·d_k)
    by_hand = concat @ mha.out_proj.weight.T + mha.out_proj.bias
    assert torch.allclose(trace["decoder.1.cross_attn.out"].tensor, by_hand, atol=1e-5)


def test_an_encoders_mean_is_the_average_over_all_positions(en_hi):
    bundle, inputs, clean = en_hi
    name = "encoder.1.self_attn.context"
    trace = changed(bundle, inputs, HeadChange("encoder.1.self_attn", 1, "mean"))
    before, after = clean[name].tensor[0, 1], trace[name].tensor[0, 1]  # (S, d_k)
    average = sum(before[j] for j in range(before.shape[0])) / before.shape[0]
    for row in after:
        assert torch.allclose(row, average, atol=1e-6)


def test_a_decoders_mean_is_the_running_average_of_the_rows_so_far(en_hi):
    bundle, inputs, clean = en_hi
    name = "decoder.0.self_attn.context"
    trace = changed(bundle, inputs, HeadChange("decoder.0.self_attn", 3, "mean"))
    before, after = clean[name].tensor[0, 3], trace[name].tensor[0, 3]  # (T, d_k)
    for t in range(before.shape[0]):
        running = sum(before[j] for j in range(t + 1)) / (t + 1)
        assert torch.allclose(after[t], running, atol=1e-6), t
    assert not torch.allclose(after[0], before.mean(dim=0), atol=1e-4)  # not the all-positions mean


def test_an_encoders_mean_averages_each_batch_item_over_its_own_positions():
    """Two different sources in one batch: each item's head becomes the average of its own rows, not a mix."""
    from scratchformer import Transformer, TransformerConfig

    torch.manual_seed(0)
    config = TransformerConfig(src_vocab_size=20, tgt_vocab_size=20, d_model=8, n_heads=2, d_ff=16,
                               n_encoder_layers=1, n_decoder_layers=1, dropout=0.0, max_len=16)
    model = Transformer(config).eval()
    src, tgt = torch.randint(4, 20, (2, 5)), torch.randint(4, 20, (2, 3))
    _, clean = model.run_with_trace(src, tgt)
    with intervene(model, [HeadChange("encoder.0.self_attn", 1, "mean")]):
        _, trace = model.run_with_trace(src, tgt)
    name = "encoder.0.self_attn.context"
    for b in range(2):
        before, after = clean[name].tensor[b, 1], trace[name].tensor[b, 1]  # (S, d_k)
        average = sum(before[j] for j in range(5)) / 5
        for row in after:
            assert torch.allclose(row, average, atol=1e-6), b


def test_a_decoders_mean_carried_in_the_cache_is_the_running_average_over_every_chunk():
    """One token at a time with the KV cache (a prompt of 3, then 1 and 1): row t is the average of rows 0 … t
    of all the chunks so far, as one pass over the 5 rows gives."""
    from scratchformer.patching.interventions import change_head

    torch.manual_seed(0)
    rows = torch.randn(1, 2, 5, 4)  # (B, h, T, d_k)
    change = HeadChange("decoder.0.self_attn", 1, "mean")
    cache: dict = {}
    chunks = [change_head(rows[:, :, a:b], change, True, cache) for a, b in ((0, 3), (3, 4), (4, 5))]
    out = torch.cat(chunks, dim=2)
    for t in range(5):
        running = sum(rows[0, 1, j] for j in range(t + 1)) / (t + 1)
        assert torch.allclose(out[0, 1, t], running, atol=1e-6), t
    assert torch.equal(out[:, 0], rows[:, 0])  # the other head untouched
    assert torch.allclose(change_head(rows, change, True, None), out, atol=1e-6)  # one pass, no cache


def test_a_decoders_mean_is_made_on_the_contexts_device():
    """On the "meta" device (standing in for a GPU) the counts are made there too, not on the CPU."""
    from scratchformer.patching.interventions import change_head

    rows = torch.empty(1, 2, 3, 4, device="meta")
    out = change_head(rows, HeadChange("decoder.0.self_attn", 0, "mean"), True, {})
    assert out.device.type == "meta" and out.shape == (1, 2, 3, 4)


def tiny_model(**overrides):
    from scratchformer import Transformer, TransformerConfig

    torch.manual_seed(0)
    config = TransformerConfig(**{**dict(src_vocab_size=20, tgt_vocab_size=20, d_model=8, n_heads=2, d_ff=16,
                                         n_encoder_layers=1, n_decoder_layers=1, dropout=0.0, max_len=16),
                                  **overrides})
    return Transformer(config).eval()


def test_a_decoders_mean_decoded_one_token_at_a_time_gives_the_whole_passs_hidden_states():
    """The running sum lives in the layer's KV cache: token by token, the hidden states are those of one pass over
    the whole target (whose running average is checked by hand above)."""
    model = tiny_model()
    src, tgt = torch.randint(4, 20, (1, 5)), torch.randint(4, 20, (1, 4))
    with torch.inference_mode(), intervene(model, [HeadChange("decoder.0.self_attn", 1, "mean")]):
        memory = model.encode(src)
        whole = model.decode(tgt, memory)  # (1, 4, d_model)
        cache = model.new_cache()
        steps = [model.decode(tgt[:, t:t + 1], memory, cache=cache, offset=t) for t in range(4)]
    assert torch.allclose(torch.cat(steps, dim=1), whole, atol=1e-5)


def test_patched_q_k_v_and_weights_give_the_attention_their_values_by_hand(en_hi):
    """Zero keys: every score 0, so each query weighs the S keys 1/S. Zero values: the context is 0 and the
    sublayer gives only W^O's bias. Uniform weights patched in: each context row is the mean of the value rows."""
    from scratchformer.patching.interventions import Patch

    bundle, inputs, clean = en_hi
    att = "encoder.0.self_attn"
    v = clean[f"{att}.v"].tensor  # (1, h, S, d_k)
    s = v.shape[2]
    for part in ("q", "k"):
        with intervene(bundle.model, [Patch(f"{att}.{part}", torch.zeros_like(clean[f"{att}.{part}"].tensor))]):
            _, trace = bundle.run(inputs)
        assert torch.allclose(trace[f"{att}.weights"].tensor, torch.full_like(v[..., :1].expand(-1, -1, -1, s), 1 / s),
                              atol=1e-6), part
    with intervene(bundle.model, [Patch(f"{att}.v", torch.zeros_like(v))]):
        _, trace = bundle.run(inputs)
    assert torch.equal(trace[f"{att}.context"].tensor, torch.zeros_like(v))
    bias = bundle.model.get_submodule(att).out_proj.bias.detach()
    assert torch.allclose(trace[f"{att}.out"].tensor, bias.expand_as(trace[f"{att}.out"].tensor), atol=1e-6)
    uniform = torch.full((1, v.shape[1], s, s), 1 / s)
    with intervene(bundle.model, [Patch(f"{att}.weights", uniform)]):
        _, trace = bundle.run(inputs)
    assert torch.equal(trace[f"{att}.weights"].tensor, uniform)  # the trace shows the patched weights
    context = trace[f"{att}.context"].tensor
    for h in range(v.shape[1]):
        average = sum(v[0, h, j] for j in range(s)) / s
        for row in context[0, h]:
            assert torch.allclose(row, average, atol=1e-6), h
    with intervene(bundle.model, [Patch(f"{att}.context", torch.zeros_like(v))]):  # the context itself
        _, trace = bundle.run(inputs)
    assert torch.equal(trace[f"{att}.context"].tensor, torch.zeros_like(v))


def test_an_intervention_that_changes_nothing_keeps_t5s_position_bias():
    """A scale of 1 sends the attention down the written-out path without changing a number: its weights are
    those of the untouched run, relative position bias included."""
    model = tiny_model(relative_buckets=8, relative_max_distance=16, positional="none", n_decoder_layers=0)
    src = torch.randint(4, 20, (1, 6))
    _, clean = model.run_with_trace(src, None)
    with intervene(model, [HeadChange("encoder.0.self_attn", 0, "scale", 1.0)]):
        _, trace = model.run_with_trace(src, None)
    name = "encoder.0.self_attn.weights"
    assert torch.allclose(trace[name].tensor, clean[name].tensor, atol=1e-6)


def test_a_key_position_past_the_encoders_keys_is_one_sentence(en_hi):
    from scratchformer import UserError
    from scratchformer.patching.interventions import KeyKnockout

    bundle, inputs, _ = en_hi
    s = inputs.src.shape[1]
    with intervene(bundle.model, [KeyKnockout("encoder.0.self_attn", (1, s))]):
        with pytest.raises(UserError, match=rf"keys:1,{s}: key position {s} does not exist; this input's keys are 0 "
                                            rf"to {s - 1}\."):
            bundle.run(inputs)
    with intervene(bundle.model, [KeyKnockout("decoder.0.cross_attn", (s,))]):  # cross-attention reads the source
        with pytest.raises(UserError, match="does not exist"):
            bundle.run(inputs)


def test_a_knockout_listed_after_a_head_change_of_the_same_attention_still_applies(en_hi):
    from scratchformer.patching.interventions import KeyKnockout

    bundle, inputs, _ = en_hi
    att = "encoder.0.self_attn"
    with intervene(bundle.model, [HeadChange(att, 0, "scale", 1.0), KeyKnockout(att, (1,))]):
        _, trace = bundle.run(inputs)
    weights = trace[f"{att}.weights"].tensor  # (1, h, S, S)
    assert torch.equal(weights[..., 1], torch.zeros_like(weights[..., 1]))


def test_a_knockout_mask_is_made_on_the_models_device():
    """Where nothing else masks the attention, the knockout's own mask is made on the device of the attention's
    weights ("meta" stands in for a GPU), one (Tq, Tk) mask per batch item."""
    from types import SimpleNamespace

    from scratchformer.patching.interventions import Interventions, KeyKnockout

    module = SimpleNamespace(trace_name="encoder.0.self_attn", q_dim="src_pos", cross=False,
                             out_proj=SimpleNamespace(weight=torch.empty(1, device="meta")))
    mask = Interventions([KeyKnockout("encoder.0.self_attn", (1,))])._knock_out(module, None, 2, 3, 4)
    assert mask.device.type == "meta" and mask.shape == (2, 3, 4) and mask.dtype == torch.bool


def test_a_patch_takes_the_device_and_dtype_of_the_step_it_replaces():
    """A float64 tensor from elsewhere patched into a float32 step on "meta" (standing in for a GPU)."""
    from scratchformer.patching.interventions import Interventions, Patch

    active = Interventions([Patch("encoder.0.add_norm1.out", torch.zeros(1, 3, 8, dtype=torch.float64))])
    out = active.patched("encoder.0.add_norm1.out", torch.empty(1, 3, 8, device="meta"))
    assert out.device.type == "meta" and out.dtype == torch.float32
    step = torch.ones(1, 3, 8)
    assert active.patched("encoder.0.add_norm2.out", step) is step  # another step: its own tensor


def test_patchable_steps_are_named_as_the_trace_names_them_in_every_layout():
    """BERT's embedding LayerNorm, pre-LN residuals and final norms: each patchable step is a step of the trace."""
    from scratchformer.patching.interventions import patchable_steps

    model = tiny_model(embed_layer_norm=True, norm_first=True, final_layer_norm=True)
    _, trace = model.run_with_trace(torch.randint(4, 20, (1, 5)), torch.randint(4, 20, (1, 3)))
    names = {s.name for s in trace}
    steps = patchable_steps(model)
    assert set(steps) <= names, sorted(set(steps) - names)
    for step in ("src_embed.layer_norm", "tgt_embed.layer_norm", "encoder.0.add_norm1.residual",
                 "decoder.0.add_norm3.residual", "encoder.final_norm.out", "decoder.final_norm.out"):
        assert step in steps, step
    assert "src_embed.sum" not in steps and "encoder.0.add_norm1.out" not in steps
    plain = patchable_steps(tiny_model())  # the paper's layout: no embedding norm, post-LN, no final norms
    assert {"src_embed.sum", "encoder.0.add_norm1.out"} <= set(plain)
    assert "encoder.final_norm.out" not in plain
    # a final norm's output is patched like any module's: the trace and everything after it read the patch
    from scratchformer.patching.interventions import Patch

    src, tgt = torch.randint(4, 20, (1, 5)), torch.randint(4, 20, (1, 3))
    with intervene(model, [Patch("encoder.final_norm.out", torch.zeros(1, 5, 8))]):
        _, patched = model.run_with_trace(src, tgt)
    assert torch.equal(patched["encoder.final_norm.out"].tensor, torch.zeros(1, 5, 8))
