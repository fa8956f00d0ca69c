"""Checks shared by the tests of today's decoder families (Llama-style, Gemma, mixtures of experts): the analyses
a researcher runs work on them."""

import pytest
import torch

from scratchformer.errors import UserError


def check_analyses(bundle, family: str, complete: bool) -> None:
    """The logit lens, rollout, Integrated Gradients, head ablation, patching and sampling all work on `bundle`.
    `complete`: IG is complete within 1 % at its defaults. Where saturating norms near the zero baseline (QK-norm,
    Gemma's norms after each sublayer) or jumps in f (a router switching experts along the path, which no gradient
    sees) keep it from converging, the answer must say the budget ran out and by how much it missed."""
    from scratchformer.analyses import attribute, lens, rollout
    from scratchformer.generation import Continuation, continue_ids
    from scratchformer.interventions import HeadChange, Patch, intervene

    inputs = bundle.prepare("machine learning using PyTorch is fun")
    logits, trace = bundle.run(inputs)
    n = bundle.config.n_decoder_layers
    seen = lens.compute(bundle, trace)  # the last point is the model's own output, through its final norm
    assert torch.equal(seen.top_ids[-1, :, 0], logits[0].argmax(-1)), family
    roll = rollout.compute(bundle, trace)
    assert roll.decoder.shape == (logits.shape[1],) * 2 and torch.allclose(roll.decoder.sum(-1), torch.ones(1))
    ig = attribute.compute(bundle, inputs, trace, position=3, method="ig")
    assert ig.complete_enough or (ig.steps == ig.max_steps and f"ran out {ig.gap:.1%}" in ig.steps_text()), family
    assert ig.complete_enough or not complete, family
    last = f"decoder.{n - 1}.self_attn"
    with intervene(bundle.model, [HeadChange(last, 0, "zero")]):
        ablated, _ = bundle.run(inputs)
    assert not torch.allclose(ablated, logits), family
    other = bundle.prepare("deep learning using PyTorch is fun")
    _, other_trace = bundle.run(other)
    scored_q = f"{last}.q_rotated"
    with intervene(bundle.model, [Patch(scored_q, other_trace[scored_q].tensor)]):
        patched, patched_trace = bundle.run(inputs)
    assert torch.equal(patched_trace[scored_q].tensor, other_trace[scored_q].tensor)
    assert not torch.allclose(patched, logits), family
    with pytest.raises(UserError, match="q_rotated and k_rotated"):  # the unrotated q is not what scores read
        with intervene(bundle.model, [Patch(f"{last}.q", other_trace[f"{last}.q"].tensor)]):
            pass
    how = Continuation(max_new=5, sample=True, temperature=0.8, top_k=20, seed=3)
    prompt = bundle.tgt_tokenizer.encode("machine learning")
    first = continue_ids(bundle, prompt, how, stop_at_eos=False)
    assert first == continue_ids(bundle, prompt, how, stop_at_eos=False) and len(first) == 5, family
