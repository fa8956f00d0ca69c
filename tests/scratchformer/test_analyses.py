"""Logit lens, attention rollout and flow, and attribution: each checked against a computation made another way
(the model's own forward pass, rollout and max-flow written out by hand, autograd through forward hooks, the
model run on padding ids), the command line's JSON, and the one sentence each refusal says."""

from __future__ import annotations

import json
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from scratchformer.analyses import attribute, flow, lens, rollout
from scratchformer.cli import main
from scratchformer.errors import UserError
from scratchformer.loading.bundle import load_model
from scratchformer.loading.checkpoint import save_checkpoint
from tests.scratchformer.test_derive import FAMILIES, family_bundle

SOURCE = "the girl eats an apple"


@pytest.fixture(scope="module")
def en_hi():
    return load_model("en-hi")


@pytest.fixture(scope="module")
def small(en_hi):
    """Seeded random models with each family's departures (2 + 2 layers, d_model 32), read by en-hi's tokenizers."""
    out = {"paper": family_bundle(en_hi, {})}
    out.update({name: family_bundle(en_hi, FAMILIES[name]) for name in ("gpt2_like", "t5_like", "bart_like",
                                                                       "bert_like")})  # fmt: skip
    return out


def traced(bundle, source=SOURCE, target=""):
    inputs = bundle.prepare_run(source, target)
    _, trace = bundle.run(inputs)
    return inputs, trace


def model_log_probs(bundle, inputs) -> torch.Tensor:
    """log P (T, vocab) from the model's plain forward pass (no trace, no analysis code)."""
    m = bundle.model
    with torch.no_grad():
        logits = m(inputs.src if m.config.has_encoder else None, inputs.tgt)  # (1, T, vocab)
    return logits[0].log_softmax(-1)


# --- lens --------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["en-hi", "paper", "gpt2_like", "t5_like", "bart_like"])
def test_the_lens_last_point_is_the_models_own_output(name, en_hi, small):
    bundle = en_hi if name == "en-hi" else small[name]
    inputs, trace = traced(bundle)
    result = lens.compute(bundle, trace, k=3)
    layers = bundle.config.n_decoder_layers
    per_layer = 3 if bundle.config.has_encoder else 2  # self-attention, (cross-attention,) feed-forward
    assert len(result.steps) == 1 + per_layer * layers  # after the embeddings and after every sublayer
    assert result.labels[0] == "embeddings" and result.labels[-1] == f"layer {layers} feed-forward"
    want = model_log_probs(bundle, inputs).exp()  # (T, vocab)
    top = want.topk(3, dim=-1)
    assert result.emitted_ids == want.argmax(-1).tolist()
    assert torch.equal(result.top_ids[-1], top.indices)
    torch.testing.assert_close(result.top_probs[-1], top.values, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(result.final_probs[-1], want.max(-1).values, rtol=1e-5, atol=1e-6)
    assert result.final_ranks[-1].tolist() == [1] * want.shape[0]


def test_the_lens_reads_each_point_through_the_final_norm_and_output_layer(small):
    """The first point of a pre-LN model (GPT-2-like): its embeddings through ln_f and the tied output layer."""
    bundle = small["gpt2_like"]
    inputs, trace = traced(bundle)
    m = bundle.model
    with torch.no_grad():
        x = m.tgt_embed.tokens.weight[inputs.tgt[0]] + m.tgt_embed.positions.weight[: inputs.tgt.shape[1]]
        p = (m.decoder_norm(x) @ m.tgt_embed.tokens.weight.T).softmax(-1)  # (T, vocab), the embedding tied
    result = lens.compute(bundle, trace, k=2)
    assert result.steps[0] == "tgt_embed.sum" and result.steps[1] == "decoder.0.add_norm1.residual"
    torch.testing.assert_close(result.top_probs[0], p.topk(2, dim=-1).values, rtol=1e-5, atol=1e-6)
    emitted = torch.tensor(result.emitted_ids)
    ranks = (p > p.gather(-1, emitted[:, None])).sum(-1) + 1
    assert result.final_ranks[0].tolist() == ranks.tolist()


def test_an_encoder_without_an_output_layer_has_no_lens(small):
    bundle = small["bert_like"]
    _, trace = traced(bundle)
    with pytest.raises(UserError, match=r"^This model is an encoder alone without an output layer") as err:
        lens.compute(bundle, trace)
    assert "\n" not in str(err.value)


# --- rollout and flow --------------------------------------------------------------------------------------------


def hand_residual(w: np.ndarray) -> np.ndarray:
    """0.5·mean_h(A) + 0.5·I, rows renormalised, cell by cell."""
    h, tq, tk = w.shape
    out = np.zeros((tq, tk))
    for i in range(tq):
        for j in range(tk):
            out[i, j] = 0.5 * sum(w[k, i, j] for k in range(h)) / h + (0.5 if i == j else 0.0)
        out[i] /= out[i].sum()
    return out


def weights_of(trace, kind):
    stack, attn = kind.split(".")
    return [trace[f"{stack}.{i}.{attn}.weights"].item(0).double().numpy() for i in range(2)]


def test_rollout_equals_a_hand_computation(small):
    bundle = small["paper"]
    _, trace = traced(bundle)
    enc = [hand_residual(w) for w in weights_of(trace, "encoder.self_attn")]
    dec = [hand_residual(w) for w in weights_of(trace, "decoder.self_attn")]
    cross = [w.mean(0) for w in weights_of(trace, "decoder.cross_attn")]
    enc_roll, dec_roll = enc[1] @ enc[0], dec[1] @ dec[0]
    # through cross-attention: each decoder layer mixes by its self-attention, then keeps half of each position
    # and takes half from the encoder output, whose origin over the source is the encoder's rollout
    t, s = dec[0].shape[0], enc[0].shape[0]
    from_dec, from_src = np.eye(t), np.zeros((t, s))
    for a, c in zip(dec, cross):
        from_dec, from_src = a @ from_dec, a @ from_src
        from_dec, from_src = 0.5 * from_dec, 0.5 * from_src + 0.5 * c @ enc_roll
    assert np.allclose(from_dec.sum(1) + from_src.sum(1), 1.0)  # nothing lost on the way
    result = rollout.compute(bundle, trace, "rollout")
    np.testing.assert_allclose(result.encoder.numpy(), enc_roll, atol=1e-6)
    np.testing.assert_allclose(result.decoder.numpy(), dec_roll, atol=1e-6)
    np.testing.assert_allclose(result.cross.numpy(), from_src / from_src.sum(1, keepdims=True), atol=1e-6)
    assert np.allclose(result.decoder.numpy()[np.triu_indices(t, 1)], 0.0)  # no decoder position sees a later one


def test_flow_through_two_layers_is_the_sum_of_path_bottlenecks(small):
    """Two layers: every path top i → middle k → input j is its own pair of edges, so the max flow is
    Σ_k min(Ã₂[i, k], Ã₁[k, j]); rows then normalised to 1."""
    bundle = small["paper"]
    _, trace = traced(bundle)
    a1, a2 = (hand_residual(w) for w in weights_of(trace, "encoder.self_attn"))
    n = a1.shape[0]
    want = np.array([[sum(min(a2[i, k], a1[k, j]) for k in range(n)) for j in range(n)] for i in range(n)])
    result = rollout.compute(bundle, trace, "flow")
    np.testing.assert_allclose(result.encoder.numpy(), want / want.sum(1, keepdims=True), atol=1e-6)
    assert np.allclose(result.cross.numpy().sum(1), 1.0) and np.allclose(result.decoder.numpy().sum(1), 1.0)
    # one layer: the flow from i to j is the edge itself
    one = flow.flows([trace["encoder.0.self_attn.weights"].item(0)], [], [])[0]
    np.testing.assert_allclose(one.numpy(), a1, atol=1e-9)


def test_rollout_covers_the_stacks_each_model_has(small):
    gpt = rollout.compute(small["gpt2_like"], traced(small["gpt2_like"])[1])
    bert = rollout.compute(small["bert_like"], traced(small["bert_like"])[1])
    assert gpt.encoder is None and gpt.cross is None and gpt.decoder is not None
    assert bert.decoder is None and bert.cross is None and torch.allclose(bert.encoder.sum(1), torch.ones(1))


def test_agreement_is_one_for_equal_rows_and_zero_for_disjoint_ones():
    from scratchformer.plotdata.analyses import agreement

    a = torch.tensor([[0.2, 0.8], [1.0, 0.0]])
    assert agreement(a, a) == pytest.approx(1.0)
    assert agreement(torch.tensor([[1.0, 0.0]]), torch.tensor([[0.0, 1.0]])) == pytest.approx(0.0)
    assert agreement(torch.tensor([[0.5, 0.5]]), torch.tensor([[1.0, 0.0]])) == pytest.approx(0.5)


# --- attribution -------------------------------------------------------------------------------------------------


def hooked_gradients(bundle, inputs, position: int, token: int):
    """∂ log P(token at position) / ∂ (embedding outputs), through plain forward hooks and autograd."""
    m, kept = bundle.model, {}

    def keep(name):
        def hook(module, args, output):
            output.retain_grad()
            kept[name] = output

        return hook

    handles = [m.tgt_embed.register_forward_hook(keep("tgt"))]
    if m.src_embed is not None:
        handles.append(m.src_embed.register_forward_hook(keep("src")))
    try:
        logits = m(inputs.src if m.config.has_encoder else None, inputs.tgt)
        logits[0, position].log_softmax(-1)[token].backward()
    finally:
        for h in handles:
            h.remove()
    m.zero_grad(set_to_none=True)
    return {k: (v.detach()[0], v.grad[0]) for k, v in kept.items()}


@pytest.mark.parametrize("name", ["paper", "gpt2_like"])
def test_gradient_times_input_equals_autograd(name, small):
    bundle = small[name]
    inputs, trace = traced(bundle)
    result = attribute.compute(bundle, inputs, trace, 2, "grad-input")
    grads = hooked_gradients(bundle, inputs, 2, result.token_id)
    x, g = grads["tgt"]
    torch.testing.assert_close(result.target, (x * g).sum(-1).double(), rtol=1e-4, atol=1e-7)
    assert result.target[3:].abs().max() == 0  # later decoder positions cannot reach position 2 (causal mask)
    if "src" in grads:
        x, g = grads["src"]
        torch.testing.assert_close(result.source, (x * g).sum(-1).double(), rtol=1e-4, atol=1e-7)
    else:
        assert result.source is None


@pytest.mark.parametrize(("name", "steps", "positions"), [("paper", 64, range(5)), ("gpt2_like", 64, range(5)),
                                                           ("en-hi", 256, (1, 3))])  # fmt: skip
def test_integrated_gradients_are_complete_within_two_percent(name, steps, positions, small, en_hi):
    """en-hi's position 3 is its hardest: log P("है") jumps within a thousandth of the path from zero."""
    bundle = en_hi if name == "en-hi" else small[name]
    inputs, trace = traced(bundle)
    want = model_log_probs(bundle, inputs)
    for position in positions:
        result = attribute.compute(bundle, inputs, trace, position, "ig", steps)
        assert result.f_input == pytest.approx(float(want[position].max()), abs=1e-5)
        assert abs(result.total - result.delta) <= 0.02 * abs(result.delta), (position, result.total, result.delta)


def test_the_pad_baseline_is_the_model_reading_padding(en_hi):
    """f(baseline) of the pad baseline: the model's own output when every token is the padding token."""
    inputs, trace = traced(en_hi)
    result = attribute.compute(en_hi, inputs, trace, 1, "ig", 16, baseline="pad")
    pad = en_hi.config.pad_id
    with torch.no_grad():
        logits = en_hi.model(torch.full_like(inputs.src, pad), torch.full_like(inputs.tgt, pad))
    assert result.f_baseline == pytest.approx(float(logits[0, 1].log_softmax(-1)[result.token_id]), abs=1e-5)


def test_attribution_refuses_in_one_sentence(small, en_hi):
    inputs, trace = traced(en_hi)
    t = inputs.tgt.shape[1]
    with pytest.raises(UserError, match=rf"^Position {t} is beyond the decoder input: it has {t} positions"):
        attribute.compute(en_hi, inputs, trace, t, "ig")
    with pytest.raises(UserError, match="^Integrated Gradients needs at least 1 step, not 0"):
        attribute.compute(en_hi, inputs, trace, 0, "ig", 0)
    bert = small["bert_like"]
    b_inputs, b_trace = traced(bert)
    with pytest.raises(UserError) as refused:
        attribute.compute(bert, b_inputs, b_trace, 0, "ig")
    assert str(refused.value) == ("This model has no decoder (an encoder alone), so it puts no token at a decoder "
                                  "position; attribute needs an encoder-decoder or a decoder-only model.")  # fmt: skip


# --- command line ------------------------------------------------------------------------------------------------


def run_json(capsys, *argv):
    assert main([*argv, "--model", "en-hi", "--source", SOURCE, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_the_command_lines_print_json_of_the_designed_shape(capsys, en_hi):
    inputs, _ = traced(en_hi)
    t, s = inputs.tgt.shape[1], inputs.src.shape[1]
    out = run_json(capsys, "lens", "--top", "3")
    assert len(out["points"]) == 1 + 3 * en_hi.config.n_decoder_layers
    assert out["points"][0]["step"] == "tgt_embed.sum"
    assert all(len(p["top"]) == t and all(len(row) == 3 for row in p["top"]) for p in out["points"])
    assert set(out["points"][0]["top"][0][0]) == {"id", "token", "p"}
    last = out["points"][-1]
    assert [row[0]["id"] for row in last["top"]] == [e["id"] for e in out["emitted"]]
    assert all(f["rank"] == 1 for f in last["final"])

    for method in ("rollout", "flow"):
        out = run_json(capsys, "rollout", "--method", method)
        assert np.array(out["encoder"]).shape == (s, s) and np.array(out["decoder"]).shape == (t, t)
        assert np.allclose(np.array(out["cross"]).sum(1), 1.0) and np.array(out["cross"]).shape == (t, s)

    out = run_json(capsys, "attribute", "--position", "1", "--method", "grad-input")
    assert len(out["source"]) == s and len(out["target"]) == t
    assert set(out["completeness"]) >= {"sum", "delta"}
    assert out["completeness"]["sum"] == pytest.approx(sum(out["source"]) + sum(out["target"]))


def test_the_command_lines_refuse_in_one_sentence(capsys, tmp_path, small):
    def refused(*argv) -> str:
        assert main(list(argv)) == 2
        err = capsys.readouterr().err.strip()
        assert err.startswith("scratchformer: ") and "\n" not in err
        return err

    common = ["--model", "en-hi", "--source", SOURCE]
    assert "Position 40 is beyond the decoder input" in refused("attribute", "--position", "40", *common)
    assert "needs at least 1 step, not 0" in refused("attribute", "--position", "1", "--steps", "0", *common)
    bert = small["bert_like"]
    save_checkpoint(tmp_path / "bert", bert.model, bert.src_tokenizer, bert.tgt_tokenizer)
    bert_args = ["--model", str(tmp_path / "bert"), "--source", SOURCE]
    assert "This model has no decoder" in refused("attribute", "--position", "0", *bert_args)
    assert "encoder alone without an output layer" in refused("lens", *bert_args)
    assert main(["rollout", *bert_args, "--json"]) == 0  # an encoder has its rollout
    assert json.loads(capsys.readouterr().out)["decoder"] is None


# --- plot data (what the views draw and export) ------------------------------------------------------------------


def test_plot_data_draws_and_writes_the_results_numbers(en_hi):
    import csv
    import io

    from scratchformer.plotdata.analyses import (
        attribution_csv,
        attribution_maps,
        lens_csv,
        lens_map,
        lens_table,
        rollout_beside_raw,
        rollout_csv,
    )

    inputs, trace = traced(en_hi)
    result = lens.compute(en_hi, trace, k=3)
    m = lens_map(result)
    assert m.values.shape == (len(result.steps), inputs.tgt.shape[1]) and m.levels == (0.0, 1.0)
    assert m.row_labels[0] == "embeddings" and m.col_labels[0] == f"<s> → {result.emitted[0]}"
    rows = lens_table(result, 0)
    assert rows[-1][2][0][0] == result.emitted[0] and rows[-1][4] == 1
    lines = list(csv.reader(io.StringIO(lens_csv(result))))
    assert len(lines) == 1 + len(result.steps) * inputs.tgt.shape[1]

    roll = rollout.compute(en_hi, trace)
    left, right, agree = rollout_beside_raw(roll, trace, "cross")
    raw = trace[f"decoder.{en_hi.config.n_decoder_layers - 1}.cross_attn.weights"].item(0).mean(0)
    np.testing.assert_allclose(right.values, raw.numpy(), atol=1e-6)
    tv = 0.5 * (roll.cross.double() - raw.double()).abs().sum(-1)  # total variation distance per row
    assert agree == pytest.approx(float((1 - tv).mean()))
    assert len(list(csv.reader(io.StringIO(rollout_csv(roll))))) == 1 + sum(
        getattr(roll, k).numel() for k in ("encoder", "decoder", "cross"))

    a = attribute.compute(en_hi, inputs, trace, 1, "grad-input")
    maps = attribution_maps(a)
    assert [mm.row_labels for mm in maps] == [["source"], ["decoder input"]]
    assert maps[0].levels[0] == -maps[0].levels[1] == -maps[1].levels[1]  # one scale for both inputs
    written = list(csv.reader(io.StringIO(attribution_csv(a))))
    assert float(written[-2][3]) == pytest.approx(a.total, rel=1e-5)


def padded_pair(bundle, pads_given: bool):
    """A batch of a long and a short sentence pair: the short one padded on both sides (its pads given as masks,
    or left for compute to find from the ids)."""
    import dataclasses

    long, short = bundle.prepare_run(SOURCE, "लड़की सेब खाती है"), bundle.prepare_run("we are friends", "हम दोस्त")
    pad = bundle.config.pad_id
    grow = lambda a, b: torch.cat([a, torch.nn.functional.pad(b, (0, a.shape[1] - b.shape[1]), value=pad)])  # noqa: E731
    src, tgt = grow(long.src, short.src), grow(long.tgt, short.tgt)
    src_pad, tgt_pad = src == pad, tgt == pad
    tgt_pad[:, 0] = False
    batch = dataclasses.replace(long, src=src, tgt=tgt, src_pad=src_pad if pads_given else None,
                                tgt_pad=tgt_pad if pads_given else None,
                                source_tokens=[*long.source_tokens, *short.source_tokens],
                                target_tokens=[*long.target_tokens, *short.target_tokens])  # fmt: skip
    return short, batch


@pytest.mark.parametrize("pads_given", [True, False])
def test_a_padded_batch_item_is_attributed_as_the_sentence_alone(en_hi, pads_given):
    """The short item of a padded batch gets the attributions it gets alone: the padding is masked in every path
    point (source and decoder side), and only its own row of the batch is read."""
    short, batch = padded_pair(en_hi, pads_given)
    _, alone_trace = en_hi.run(short)
    _, trace = en_hi.run(batch)
    s, t = short.src.shape[1], short.tgt.shape[1]
    for method in ("grad-input", "ig"):
        alone = attribute.compute(en_hi, short, alone_trace, 1, method, 8)
        got = attribute.compute(en_hi, batch, trace, 1, method, 8, batch=1)
        assert got.token_id == alone.token_id and got.f_input == pytest.approx(alone.f_input, abs=1e-5)
        torch.testing.assert_close(got.source[:s], alone.source, rtol=1e-3, atol=1e-5)
        torch.testing.assert_close(got.target[:t], alone.target, rtol=1e-3, atol=1e-5)


def test_the_pad_baseline_path_ends_at_the_input_so_ig_is_complete(en_hi):
    inputs, trace = traced(en_hi)
    result = attribute.compute(en_hi, inputs, trace, 1, "ig", 64, baseline="pad")
    assert abs(result.total - result.delta) <= 0.02 * abs(result.delta), (result.total, result.delta)


def test_path_points_run_in_batches_of_at_most_chunk_positions(en_hi, monkeypatch):
    """Memory stays bounded: N path points × (S + T) positions never pass CHUNK_POSITIONS in one forward pass,
    batches are as large as that allows, and at least one point runs however long the input."""
    inputs, trace = traced(en_hi)
    positions = inputs.src.shape[1] + inputs.tgt.shape[1]  # 6 + 5
    sizes = []
    real = attribute._Objective.__call__
    counted = lambda self, s, t: sizes.append(t.shape[0]) or real(self, s, t)  # noqa: E731
    monkeypatch.setattr(attribute._Objective, "__call__", counted)
    for limit, per_batch in ((3 * positions + 2, 3), (positions - 1, 1)):
        monkeypatch.setattr(attribute, "CHUNK_POSITIONS", limit)
        sizes.clear()
        attribute.compute(en_hi, inputs, trace, 1, "ig", 4)
        path = sizes[2:]  # after f(input) and f(baseline)
        assert max(path) == per_batch and all(n * positions <= max(limit, positions) for n in path), sizes


def test_a_cell_holding_a_jump_is_cut_inside_that_cell():
    seen = []

    def f_at(a):
        seen.append(np.asarray(a))
        return (np.asarray(a) >= 0.3).astype(float)

    attribute.path_points(f_at, 2)  # grid 0, 0.125, …, 1: the jump sits in the cell [0.25, 0.375]
    np.testing.assert_allclose(seen[1], 0.25 + 0.125 * np.arange(1, 8) / 8)


def test_baselines_that_cannot_be_made_are_refused_in_one_sentence(en_hi):
    inputs, trace = traced(en_hi)
    with pytest.raises(UserError, match=r"^Unknown baseline 'mean'; choose zero or pad\.$"):
        attribute.compute(en_hi, inputs, trace, 1, "ig", 4, baseline="mean")
    no_pad = SimpleNamespace(config=SimpleNamespace(pad_id=None))
    with pytest.raises(UserError, match=r"^This model's vocabulary has no padding token; use --baseline zero\.$"):
        attribute._baseline(no_pad, "src_embed.sum", inputs.src, torch.zeros(1), "pad")


def test_a_bfloat16_model_is_attributed_in_its_own_precision(en_hi):
    """The path points, weights and inputs take the model's dtype: a bfloat16 copy gives the float32 model's
    attributions to bfloat16's precision, and its f(input) is its own output."""
    import copy

    half = copy.deepcopy(family_bundle(en_hi, {}))
    inputs, trace = traced(half, SOURCE, "लड़की सेब खाती है")
    want = attribute.compute(half, inputs, trace, 2, "ig", 8)
    half.model.to(torch.bfloat16)
    _, half_trace = half.run(inputs)
    got = attribute.compute(half, inputs, half_trace, 2, "ig", 8)
    assert got.token_id == want.token_id
    torch.testing.assert_close(got.source, want.source, atol=0.01, rtol=0.05)
    torch.testing.assert_close(got.target, want.target, atol=0.01, rtol=0.05)
    assert got.f_input == pytest.approx(float(model_log_probs(half, inputs)[2, got.token_id]), abs=0.02)


def test_the_python_api_defaults_to_integrated_gradients_from_a_zero_baseline(en_hi):
    inputs, trace = traced(en_hi)
    result = attribute.compute(en_hi, inputs, trace, 1, steps=4)
    assert (result.method, result.asked_steps, result.baseline) == ("ig", 4, "zero")
    assert result.steps in (4, 8, 16, 32, 64, 128, 256, 512, 1024)  # 4 first, doubled while not complete
    assert result.f_baseline != pytest.approx(result.f_input)  # a real path was walked
