"""The norm experiment's numbers, rebuilt here: the replaced word drawn by the documented rule with a generator
of the test's own, the first norm's input read from the trace step the model's layout puts first, and both norms
computed by torch (F.layer_norm, F.batch_norm) rather than by the experiment's own formulas."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from scratchformer.errors import UserError
from scratchformer.experiments import run_experiment
from scratchformer.loading.bundle import load_model
from tests.scratchformer.test_derive import FAMILIES, family_bundle

SOURCE = "the girl eats an apple"
HINDI = "सेब लड़की है खाती"

# model → (family options or None for en-hi itself, text, side, the first norm's input step, position replaced)
CASES = {
    # post-norm: the first norm reads the first sublayer's residual sum; the source starts with a word
    "en-hi": (None, SOURCE, "src", "encoder.0.add_norm1.residual", 0),
    # pre-norm decoder-only: the first norm reads the embedding sum; the start token is kept, so the first word
    # (position 1) is replaced. Its source vocabulary is made smaller than its target one: the draw must use the
    # target's
    "gpt2_like": ({**FAMILIES["gpt2_like"], "src_vocab_size": 40}, HINDI, "tgt", "tgt_embed.sum", 1),
}


@pytest.fixture(scope="module")
def en_hi():
    return load_model("en-hi")


def drawn(bundle, side: str, old: int, seed: int) -> int:
    """The replacement the docstrings promise: seeded draws from that side's vocabulary until one is neither the
    old token nor a pad, start or end token (the config's or the tokenizer's)."""
    c = bundle.config
    tok = bundle.src_tokenizer if side == "src" else bundle.tgt_tokenizer
    skip = {old, c.pad_id, c.bos_id, c.eos_id, tok.pad_id, tok.bos_id, tok.eos_id}
    gen, new = torch.Generator().manual_seed(seed), old
    while new in skip:
        new = int(torch.randint(c.src_vocab_size if side == "src" else c.tgt_vocab_size, (1,), generator=gen))
    return new


@pytest.mark.parametrize("which", list(CASES))
def test_the_norms_change_maps_are_torchs_norms_of_the_batch_before_and_after(en_hi, which):
    options, text, side, step_name, position = CASES[which]
    bundle = en_hi if options is None else family_bundle(en_hi, options)
    r = run_experiment("norm", bundle, text, seed=1)
    inputs = bundle.prepare_padded(text, start_only=True)
    ids = (inputs.src if side == "src" else inputs.tgt).clone()  # (3, T)
    pad = inputs.src_pad if side == "src" else inputs.tgt_pad
    tok = bundle.src_tokenizer if side == "src" else bundle.tgt_tokenizer
    old = int(ids[1, position])
    new = drawn(bundle, side, old, 1)
    assert r["changed"] == {"item": 1, "position": position, "from": tok.token_strings([old])[0],
                            "to": tok.token_strings([new])[0]}  # fmt: skip
    assert r["tokens"] == (inputs.source_tokens if side == "src" else inputs.target_tokens)
    ids[1, position] = new

    def first_norm_input(changed):
        _, trace = bundle.run(dataclasses.replace(inputs, **{side: changed}))
        step = trace[step_name]
        return torch.stack([step.item(b) for b in range(3)]).double()  # (3, T, d)

    x, x2 = first_norm_input(inputs.src if side == "src" else inputs.tgt), first_norm_input(ids)
    other = x.clone()
    other[1] = x2[1]
    d, eps = x.shape[-1], bundle.config.layer_norm_eps
    ln = lambda t: F.layer_norm(t, (d,), eps=eps)  # noqa: E731
    bn = lambda t: F.batch_norm(t.reshape(-1, d), None, None, training=True, eps=eps).reshape(t.shape)  # noqa: E731
    for key, norm in (("layernorm", ln), ("batchnorm", bn)):
        delta = norm(other)[0] - norm(x)[0]  # sentence 0, (T, d)
        assert np.array(r[key]["change_map"]) == pytest.approx(delta.numpy(), abs=1e-9)
        assert r[key]["per_position"] == pytest.approx(delta.abs().max(-1).values.tolist(), abs=1e-9)
        assert r[key]["change_from_other_items"] == pytest.approx(float(delta.abs().max()), abs=1e-9)
    assert r["layernorm"]["change_from_other_items"] == 0 and r["batchnorm"]["change_from_other_items"] > 1e-3
    real = ~pad
    bn_real = (x - x[real].mean(0)) / torch.sqrt(x[real].var(0, unbiased=False) + eps)  # the real rows' statistics
    shift = float((bn(x)[0] - bn_real[0]).abs().max())
    assert r["batchnorm"]["padding_shift"] == pytest.approx(shift, abs=1e-9) and r["layernorm"]["padding_shift"] == 0
    assert r["padding"] == {"rows": pad.numel(), "padded": int(pad.sum())} and r["input_step"] == step_name
    c = r["changed"]
    assert r["summary"] == (
        f"Replacing “{c['from']}” by “{c['to']}” in sentence 2 moves sentence 1's normalised values by 0 under "
        f"LayerNorm and by up to {r['batchnorm']['change_from_other_items']:.3g} under BatchNorm; the batch's "
        f"{int(pad.sum())} padding rows (of {pad.numel()}) shift BatchNorm's values by up to {shift:.3g}."
    )


@pytest.mark.parametrize("which", list(CASES))
def test_a_replacement_skips_the_old_token_and_the_configs_and_the_tokenizers_special_ones(en_hi, which, monkeypatch):
    """Here the config names its own pad, start and end ids (5, 6, 7), apart from the tokenizer's; the draws are
    forced to hit the old token and all six special ones before a new id."""
    options, text, side, _, position = CASES[which]
    bundle = family_bundle(en_hi, {**(options or {}), "pad_id": 5, "bos_id": 6, "eos_id": 7})
    tok = bundle.src_tokenizer if side == "src" else bundle.tgt_tokenizer
    inputs = bundle.prepare_padded(text, start_only=True)
    old = int((inputs.src if side == "src" else inputs.tgt)[1, position])
    draws = [old, 5, 6, 7, tok.pad_id, tok.bos_id, tok.eos_id, 30]
    assert None not in draws and 30 not in draws[:-1]
    real = torch.randint
    monkeypatch.setattr(torch, "randint", lambda *a, **k: torch.tensor([draws.pop(0)]) if draws else real(*a, **k))
    r = run_experiment("norm", bundle, text)
    assert (r["changed"]["position"], r["changed"]["to"]) == (position, tok.token_strings([30])[0]) and not draws


def test_the_first_norm_reads_no_target(en_hi, monkeypatch):
    """The encoder's first norm never sees the target, so a typed one (even past the decoder's positions) changes
    nothing, and no translation is made for the batch."""
    from scratchformer.loading import model_bundle

    too_long = " ".join(["लड़की"] * (en_hi.config.max_len + 5))
    monkeypatch.setattr(model_bundle, "greedy", lambda *a, **k: pytest.fail("the norm experiment translated"))
    typed = run_experiment("norm", en_hi, SOURCE, target=too_long, seed=2)
    plain = run_experiment("norm", en_hi, SOURCE, seed=2)
    assert typed.pop("target") == too_long and plain.pop("target") == ""  # the run's record of what was typed
    assert typed == plain
    assert typed["input_step"] == "encoder.0.add_norm1.residual"


def test_the_norm_experiment_refuses_in_one_sentence_what_it_cannot_measure(en_hi):
    with pytest.raises(UserError) as refused:
        run_experiment("norm", en_hi, "girl")
    assert str(refused.value) == "A padded batch needs a sentence of at least two words."
    two = run_experiment("norm", en_hi, "girl eats")  # two words are enough: a batch of the sentence and "girl"
    assert len(two["tokens"]) == 2 and two["changed"]["from"] == "girl" and two["padding"]["padded"] == 1
    # "." is no word of en-hi's source vocabulary: the second sentence is its end token alone
    assert en_hi.src_tokenizer.token_strings(en_hi.encode_source(".")) == ["</s>"]
    with pytest.raises(UserError) as refused:
        run_experiment("norm", en_hi, ". apple")
    assert str(refused.value) == "The norm experiment found no word to change in the batch's second sentence."
