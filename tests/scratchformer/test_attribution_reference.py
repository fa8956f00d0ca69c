"""Attribution against a reference written here without the interventions' patches: the embedding layers'
outputs are replaced by forward hooks, f = log P(y_P) is read from the model's plain forward pass in float64,
and the gradients come from autograd at each path point. IG is then Σ_k w_k (x − x′)·∂f/∂x(x′ + α_k(x − x′)) on
the very points and weights the attribution chose (recorded from `path_points`, which has tests of its own), so
the two must agree to rounding; gradient × input is (x − x′)·∂f/∂x at the input. A small float64 model keeps
this sharp and fast."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from scratchformer.analyses import attribute
from scratchformer.loading.bundle import load_model
from tests.scratchformer.test_derive import FAMILIES, SENTENCE, family_bundle


@pytest.fixture(scope="module")
def en_hi():
    return load_model("en-hi")


def small(en_hi, options: dict):
    bundle = family_bundle(en_hi, options, seed=2)
    bundle.model.double()
    return bundle


def reference_f(model, inputs, e_src, e_tgt, position: int, token: int) -> torch.Tensor:
    """log P(token at `position`) with the embedding layers' outputs replaced by e_src (S, d) and e_tgt (T, d)."""
    hooks = [model.tgt_embed.register_forward_hook(lambda m, a, out: e_tgt[None])]
    if e_src is not None:
        hooks.append(model.src_embed.register_forward_hook(lambda m, a, out: e_src[None]))
    try:
        logits = model(inputs.src if model.config.has_encoder else None, inputs.tgt)  # (1, T, vocab)
    finally:
        for h in hooks:
            h.remove()
    return logits[0, position].log_softmax(-1)[token]


def reference(bundle, inputs, x, base, alphas, weights, position, token):
    """Σ_k w_k (x − x′)·∂f/∂x at x′ + α_k(x − x′), per token of each side: (source (S,) or None, target (T,))."""
    total = [None if v is None else torch.zeros(v.shape[0], dtype=torch.float64) for v in x]
    for a, w in zip(alphas, weights):
        point = [None if v is None else (b + float(a) * (v - b)).requires_grad_(True) for v, b in zip(x, base)]
        f = reference_f(bundle.model, inputs, point[0], point[1], position, token)
        grads = torch.autograd.grad(f, [p for p in point if p is not None])
        grads = [None, *grads] if point[0] is None else list(grads)
        for i, (v, b, g) in enumerate(zip(x, base, grads)):
            if v is not None:
                total[i] += float(w) * ((v - b) * g).sum(-1)
    return total


def embeddings(bundle, inputs, pad: bool):
    """The embedding layers' outputs for the input (x) and for the padding token at every position (x′ = pad)."""
    m = bundle.model
    with torch.no_grad():
        x_src = m.src_embed(inputs.src)[0] if m.config.has_encoder else None
        x_tgt = m.tgt_embed(inputs.tgt)[0]
        if not pad:
            return (x_src, x_tgt), (None if x_src is None else torch.zeros_like(x_src), torch.zeros_like(x_tgt))
        p = m.config.pad_id
        b_src = m.src_embed(torch.full_like(inputs.src, p))[0] if x_src is not None else None
        return (x_src, x_tgt), (b_src, m.tgt_embed(torch.full_like(inputs.tgt, p))[0])


CASES = {"paper": {}, "gpt2_like": FAMILIES["gpt2_like"], "bart_like": FAMILIES["bart_like"]}


@pytest.mark.parametrize("baseline", ["zero", "pad"])
@pytest.mark.parametrize("name", list(CASES))
def test_integrated_gradients_equal_the_hooked_reference_on_the_same_points(en_hi, name, baseline, monkeypatch):
    bundle = small(en_hi, CASES[name])
    inputs = bundle.prepare(*SENTENCE)
    _, trace = bundle.run(inputs)
    position = 2
    chosen, measured = [], []
    real = attribute.path_points

    def recording(f_at, steps):
        measured.append(f_at)
        chosen.append(real(f_at, steps))
        return chosen[-1]

    monkeypatch.setattr(attribute, "path_points", recording)
    got = attribute.compute(bundle, inputs, trace, position, "ig", 6, baseline=baseline, max_steps=6)
    with torch.no_grad():
        logits = bundle.model(inputs.src if bundle.config.has_encoder else None, inputs.tgt)[0, position]
    token = int(logits.argmax())
    assert got.token_id == token and got.token == bundle.tgt_tokenizer.token_strings([token])[0]
    x, base = embeddings(bundle, inputs, baseline == "pad")
    with torch.no_grad():
        assert got.f_input == pytest.approx(float(logits.log_softmax(-1)[token]), abs=1e-12)
        assert got.f_baseline == pytest.approx(float(reference_f(bundle.model, inputs, *base, position, token)),
                                               abs=1e-12)  # fmt: skip
    (alphas, weights), = chosen
    # the points are placed by f measured along the whole path: both sides move from x′ to x together
    probe = np.array([0.0, 0.37, 1.0])
    with torch.no_grad():
        along = [float(reference_f(bundle.model, inputs, *[None if v is None else b + a * (v - b)
                                                           for v, b in zip(x, base)], position, token))
                 for a in probe]  # fmt: skip
    np.testing.assert_allclose(measured[0](probe), along, rtol=0, atol=1e-12)
    assert len(alphas) == 6 and weights.sum() == pytest.approx(1.0)
    want_src, want_tgt = reference(bundle, inputs, x, base, alphas, weights, position, token)
    torch.testing.assert_close(got.target, want_tgt, rtol=1e-9, atol=1e-12)
    if want_src is None:
        assert got.source is None
    else:
        torch.testing.assert_close(got.source, want_src, rtol=1e-9, atol=1e-12)
    assert got.total == pytest.approx(float(want_tgt.sum() + (0 if want_src is None else want_src.sum())))
    assert (got.method, got.position, got.steps, got.baseline) == ("ig", position, 6, baseline)
    assert got.target_tokens == list(trace.target_tokens[0])


@pytest.mark.parametrize("name", list(CASES))
def test_gradient_times_input_is_the_gradient_at_the_input_times_the_input(en_hi, name):
    bundle = small(en_hi, CASES[name])
    inputs = bundle.prepare(*SENTENCE)
    _, trace = bundle.run(inputs)
    got = attribute.compute(bundle, inputs, trace, 1, "grad-input")
    x, base = embeddings(bundle, inputs, pad=False)
    want_src, want_tgt = reference(bundle, inputs, x, base, [1.0], [1.0], 1, got.token_id)
    torch.testing.assert_close(got.target, want_tgt, rtol=1e-9, atol=1e-12)
    if want_src is not None:
        torch.testing.assert_close(got.source, want_src, rtol=1e-9, atol=1e-12)
    assert got.steps == 1 and got.method == "grad-input"


def test_padding_masks_given_are_honoured_whatever_ids_sit_under_them(en_hi):
    """A batch whose padding is given as masks (a model without a pad token reads it so) may hold any id under
    the padding: the short item is attributed as the sentence alone, not as a sentence with those tokens."""
    import dataclasses

    bundle = small(en_hi, {})
    long, short = bundle.prepare(*SENTENCE), bundle.prepare("we are friends", "हम दोस्त")
    filler = 5  # a real token, not the pad id

    def grow(a, b):
        return torch.cat([a, torch.nn.functional.pad(b, (0, a.shape[1] - b.shape[1]), value=filler)])

    src, tgt = grow(long.src, short.src), grow(long.tgt, short.tgt)
    src_pad = torch.zeros_like(src, dtype=torch.bool)
    tgt_pad = torch.zeros_like(tgt, dtype=torch.bool)
    src_pad[1, short.src.shape[1] :] = True
    tgt_pad[1, short.tgt.shape[1] :] = True
    batch = dataclasses.replace(long, src=src, tgt=tgt, src_pad=src_pad, tgt_pad=tgt_pad)
    _, trace = bundle.model.run_with_trace(src, tgt, src_pad, tgt_pad)
    _, alone_trace = bundle.run(short)
    alone = attribute.compute(bundle, short, alone_trace, 1, "grad-input")
    got = attribute.compute(bundle, batch, trace, 1, "grad-input", batch=1)
    assert got.token_id == alone.token_id and got.f_input == pytest.approx(alone.f_input, abs=1e-9)
    torch.testing.assert_close(got.source[: short.src.shape[1]], alone.source, rtol=1e-7, atol=1e-9)
    torch.testing.assert_close(got.target[: short.tgt.shape[1]], alone.target, rtol=1e-7, atol=1e-9)


def test_a_bfloat16_models_log_probability_is_taken_in_float32(en_hi):
    """bfloat16 logits are widened before the log-softmax: f(input) is the float32 log-softmax of the model's own
    bfloat16 logits at P, not a bfloat16 one (whose steps near −5 are 1/32)."""
    bundle = family_bundle(en_hi, {}, seed=2)
    bundle.model.to(torch.bfloat16)
    inputs = bundle.prepare(*SENTENCE)
    _, trace = bundle.run(inputs)
    got = attribute.compute(bundle, inputs, trace, 2, "grad-input")
    with torch.no_grad():
        logits = bundle.model(inputs.src, inputs.tgt)[0, 2]  # bfloat16
    assert logits.dtype == torch.bfloat16
    assert got.f_input == float(logits.float().log_softmax(-1)[got.token_id])


def test_path_points_spread_over_many_chunks_add_up_to_the_same_attribution(en_hi, monkeypatch):
    """Path points run in batches of at most CHUNK_POSITIONS positions; the gradients of every batch add up, so a
    run one point per batch gives the attribution of a run in one batch."""
    bundle = small(en_hi, {})
    inputs = bundle.prepare(*SENTENCE)
    _, trace = bundle.run(inputs)
    whole = attribute.compute(bundle, inputs, trace, 2, "ig", 6, max_steps=6)
    monkeypatch.setattr(attribute, "CHUNK_POSITIONS", 1)  # one path point per batch
    split = attribute.compute(bundle, inputs, trace, 2, "ig", 6, max_steps=6)
    torch.testing.assert_close(split.target, whole.target, rtol=1e-9, atol=1e-12)
    torch.testing.assert_close(split.source, whole.source, rtol=1e-9, atol=1e-12)


def test_a_model_that_starts_decoding_from_its_pad_token_keeps_the_start_token(en_hi):
    """MarianMT starts decoding from <pad>: the start token holds the pad id but is no padding, so attribution
    must not mask it (f at the input is the model's own log-probability, read from its plain forward pass)."""
    bundle = small(en_hi, {"bos_id": en_hi.config.pad_id})
    inputs = bundle.prepare(*SENTENCE)
    assert int(inputs.tgt[0, 0]) == bundle.config.pad_id and inputs.tgt_pad is None
    _, trace = bundle.run(inputs)
    for position in (0, 2):
        got = attribute.compute(bundle, inputs, trace, position, "grad-input")
        with torch.no_grad():
            want = bundle.model(inputs.src, inputs.tgt)[0, position].log_softmax(-1)[got.token_id]
        assert got.f_input == pytest.approx(float(want), abs=1e-9), position
