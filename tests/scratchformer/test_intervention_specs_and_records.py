"""What an intervention says about itself and what a traced run records of it: the spec text --ablate reads back,
the sentence listing valid specs, the notes in step titles, and a patched module output shown in the trace with
the patch's values (not the ones the module computed). Found by mutation testing (scripts/mutation.sh
interventions): the value tests checked the numbers and left these unchecked."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from scratchformer import TransformerConfig, UserError
from scratchformer.loading.bundle import load_model
from scratchformer.patching.interventions import HeadChange, KeyKnockout, Patch, head_name, intervene, parse_spec

CLEAN, CORRUPTED = "the girl eats an apple", "the boy eats an apple"  # the same number of tokens
TARGET = "लड़की सेब खाती है"


@pytest.fixture(scope="module")
def bundle():
    return load_model("en-hi")  # 2 encoder and 2 decoder layers of 4 heads


def test_head_names_count_layers_and_heads_from_0():
    assert head_name("decoder.cross_attn", 1, 0) == "decoder.1.cross_attn.head0"
    assert head_name("encoder.self_attn", 0, 3) == "encoder.0.self_attn.head3"


def test_a_key_knockouts_spec_is_what_ablate_reads_back(bundle):
    knockout = KeyKnockout("encoder.0.self_attn", (1, 3))
    assert knockout.spec() == "encoder.0.self_attn.keys:1,3"
    assert parse_spec(knockout.spec(), bundle.model) == knockout
    assert parse_spec("encoder.0.self_attn.keys:3,1,3", bundle.model) == knockout  # sorted, once each
    assert HeadChange("decoder.1.cross_attn", 2, "scale", 0.5).spec() == "decoder.1.cross_attn.head2:scale=0.5"


def test_the_sentence_of_valid_specs_gives_the_layer_and_head_ranges(bundle):
    with pytest.raises(UserError) as error:
        parse_spec("decoder.1.cross_attn.head9", bundle.model)
    assert str(error.value) == (
        "Cannot read the intervention 'decoder.1.cross_attn.head9': write ATTENTION.headN[:zero|mean|keep|scale=F] "
        "or ATTENTION.keys:P[,P…], where ATTENTION is encoder.L.self_attn (L 0–1) or decoder.L.self_attn or "
        "decoder.L.cross_attn (L 0–1), N is a head from 0 to 3 and P a key position from 0.")
    # a decoder-only model of 3 layers and 2 heads has no cross-attention to offer
    gpt = SimpleNamespace(config=TransformerConfig(n_encoder_layers=0, n_decoder_layers=3, n_heads=2, d_model=8,
                                                   d_ff=16, src_vocab_size=10, tgt_vocab_size=10))
    with pytest.raises(UserError) as error:
        parse_spec("decoder.0.cross_attn.head0", gpt)
    assert str(error.value).endswith("where ATTENTION is decoder.L.self_attn (L 0–2), N is a head from 0 to 1 and "
                                     "P a key position from 0.")


def test_a_knockout_of_one_key_notes_it_on_the_mask_scores_and_weights(bundle):
    with intervene(bundle.model, [KeyKnockout("encoder.0.self_attn", (2,))]):
        _, trace = bundle.run(bundle.prepare(CLEAN, TARGET))
    for step in ("mask", "masked_scores", "weights"):
        assert trace[f"encoder.0.self_attn.{step}"].title.endswith(" (key 3 knocked out)"), step
    assert not trace["encoder.0.self_attn.scores"].title.endswith("knocked out)")  # before the mask: unchanged


def test_two_changes_of_one_step_are_both_noted_in_its_title(bundle):
    changes = [HeadChange("encoder.0.self_attn", 0), HeadChange("encoder.0.self_attn", 1, "scale", 0.5)]
    with intervene(bundle.model, changes):
        _, trace = bundle.run(bundle.prepare(CLEAN, TARGET))
    assert trace["encoder.0.self_attn.context"].title == (
        "Weighted sum of values (head 1 zeroed; head 2 scaled ×0.5)")


def test_a_patched_module_output_is_recorded_with_the_patchs_values(bundle):
    _, clean = bundle.run(bundle.prepare(CLEAN, TARGET))
    corrupted = bundle.prepare(CORRUPTED, TARGET)
    _, unpatched = bundle.run(corrupted)
    step = "encoder.0.add_norm1.out"
    assert not torch.equal(clean[step].tensor, unpatched[step].tensor)
    with intervene(bundle.model, [Patch(step, clean[step].tensor, "the clean run")]):
        _, trace = bundle.run(corrupted)
    assert torch.equal(trace[step].tensor, clean[step].tensor)
    assert trace[step].title.endswith("(patched from the clean run)")
    # the step the module computed before it (the residual sum inside Add & Norm) is left as computed
    names = [s.name for s in trace]
    before = names[names.index(step) - 1]
    assert torch.equal(trace[before].tensor, unpatched[before].tensor), before


@pytest.mark.parametrize("factor", ["1e", "--", "."])
def test_a_scale_factor_that_is_no_number_is_the_same_sentence(bundle, factor):
    with pytest.raises(UserError) as error:
        parse_spec(f"decoder.1.cross_attn.head0:scale={factor}", bundle.model)
    assert str(error.value).startswith(f"Cannot read the intervention 'decoder.1.cross_attn.head0:scale={factor}': "
                                       "write ATTENTION.headN")
