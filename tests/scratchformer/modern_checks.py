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
    from scratchformer.patching.interventions import HeadChange, Patch, intervene
    from scratchformer.running.generation import Continuation, continue_ids

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


def padded_batch(bundle, sentences, pad_id: int):
    """Right-padded (B, T) ids [start, text…] and (B, T) bool padding, as the walkthrough starts them."""
    rows = [[bundle.start_id()] + bundle.tgt_tokenizer.encode(s) for s in sentences]
    n = max(map(len, rows))
    ids = torch.tensor([r + [pad_id] * (n - len(r)) for r in rows])  # (B, T)
    pad = torch.tensor([[False] * len(r) + [True] * (n - len(r)) for r in rows])  # (B, T)
    return ids, pad


def transformers_pairs(bundle, ref, ids, pad):
    with torch.no_grad():
        expected = ref(input_ids=ids, attention_mask=(~pad).long(), output_hidden_states=True,
                       output_attentions=True)  # fmt: skip
    logits, trace = bundle.model.run_with_trace(None, ids, None, pad)
    n = bundle.config.n_decoder_layers
    # transformers' hidden_states: the embeddings, each layer's output but the last, then the final norm
    ours = [trace["tgt_embed.sum"].tensor]
    ours += [trace[f"decoder.{i}.add_norm3.residual"].tensor for i in range(n - 1)]
    ours.append(trace["decoder.final_norm.out"].tensor)
    pairs = {f"hidden {i}": (a, b) for i, (a, b) in enumerate(zip(ours, expected.hidden_states, strict=True))}
    for i in range(n):
        pairs[f"attention {i}"] = (trace[f"decoder.{i}.self_attn.weights"].tensor, expected.attentions[i])
    pairs["logits"] = (logits, expected.logits)
    return pairs, trace


def relative_diffs(pairs, pad):
    """max |ours − theirs| / (1 + max |theirs|) per pair (attention maps are in [0, 1]; logits can be ~10), over
    the real positions' rows: a padding query whose window holds only padding has no keys, a row of zeros here
    and transformers' uniform row there, and nothing reads either."""
    out = {}
    for what, (a, b) in pairs.items():
        assert a.shape == b.shape, what
        rows = ~pad[:, None, :, None] if a.dim() == 4 else ~pad[:, :, None]  # (B, 1, T, 1) or (B, T, 1)
        real = rows.expand_as(b) & ~torch.isinf(b)
        out[what] = ((a - b).abs()[real].max() / (1 + b[real].abs().max())).item()
    return out


def sharpened_reference(families: dict, base: dict, family: str, spread, seed: int = 0, dtype=None, **overrides):
    """(transformers' model of `family` — families[family] = (config class, model class, extra config) — built
    from `base` with `overrides`, every parameter redrawn from normal(*spread(name)), then cast to `dtype` if
    given; its model class's name). The default initialisation gives near-flat attention maps (and router rows)
    that hide mistakes; each test file's `spread` sharpens them for its families."""
    import transformers

    config_name, model_name, extra = families[family]
    torch.manual_seed(seed)
    ref = getattr(transformers, model_name)(getattr(transformers, config_name)(**{**base, **extra, **overrides}))
    with torch.no_grad():
        for name, p in ref.named_parameters():
            p.normal_(*spread(name))
    return (ref if dtype is None else ref.to(dtype)), model_name


def save_and_reopen(ref, directory, model_class: str, shard: str | None = None):
    """Save a transformers model with GPT-2's vocabulary (offline) as a Hugging Face folder, and reopen it as the
    eager reference every family test compares with."""
    import transformers

    from scratchformer.loading.tokenizers import gpt2_tokenizer

    ref.save_pretrained(str(directory), max_shard_size=shard or "5GB")
    gpt2_tokenizer().hf.save_pretrained(str(directory))
    cls = getattr(transformers, model_class)
    return cls.from_pretrained(str(directory), attn_implementation="eager", dtype=torch.float32).eval()


def check_padded_batch(bundle, ref, family: str, sentences, pad_id: int, atol: float):
    """Every hidden state, attention map and logit of a right-padded batch equals transformers' (real rows, within
    `atol` relative), on maps far from uniform, and the untraced fast path agrees too. Returns (ids, padding,
    trace) for checks of a family's own steps."""
    ids, pad = padded_batch(bundle, sentences, pad_id)
    assert pad.any()
    pairs, trace = transformers_pairs(bundle, ref, ids, pad)
    diffs = relative_diffs(pairs, pad)
    assert max(diffs.values()) < atol, diffs
    for i in range(bundle.config.n_decoder_layers):  # rows far from uniform, so a wrong map could not pass
        peak = trace[f"decoder.{i}.self_attn.weights"].tensor[:, :, 3:].max(-1).values.mean()
        assert peak > 0.4, f"{family} layer {i}: attention too flat to tell implementations apart ({peak:.2f})"
    with torch.no_grad():  # the untraced fast path (the fused kernel, or written out where scores are capped)
        fast = bundle.model(None, ids, tgt_pad=pad)
    assert (fast - pairs["logits"][1]).abs()[~pad].max() < 1e-4
    return ids, pad, trace


def check_greedy_equals_generate(bundle, ref, pad_id: int, new: int = 12) -> None:
    """The text behind the start token, continued greedily with and without the KV cache: generate()'s tokens
    (longer than the test models' sliding windows, so cached keys outside a window must stay unseen)."""
    from scratchformer.running.decoding import greedy

    prompt = bundle.tgt_tokenizer.encode("machine learning using PyTorch")
    with torch.no_grad():
        theirs = ref.generate(torch.tensor([[bundle.start_id()] + prompt]), max_new_tokens=new, do_sample=False,
                              num_beams=1, use_cache=True, pad_token_id=pad_id)[0, 1 + len(prompt):].tolist()
    for cache in (True, False):
        assert greedy(bundle, [], new, cache=cache, stop_at_eos=False, prefix=prompt) == theirs, cache
    assert len(set(theirs)) > 1  # a real continuation, not one token repeated


def check_explains_and_derives(bundle, family: str, cells=lambda step: 2) -> None:
    """Every step has a complete explanation in this run's numbers, and `cells(step)` random cells of it recompute
    from the cells and parameters they name."""
    import random
    import re

    from scratchformer.analyses import derive
    from scratchformer.explain import explain_step

    _, trace = bundle.run(bundle.prepare("machine learning using PyTorch is fun"))
    rng = random.Random(0)
    for step in trace:
        ex = explain_step(trace, step, bundle.config)
        assert ex.complete and not re.search(r"\{\w+\}", ex.what + ex.why + ex.numbers), (family, step.name)
        for _ in range(cells(step)):
            index = tuple(rng.randrange(n) for n in step.shape)
            d = derive.compute(bundle, trace, step.name, index)
            assert d.agrees(), (family, step.name, index, d.expression)


def check_diagram_order(bundle) -> list:
    """The trace walks the diagram's blocks in the diagram's order, and a rotary model's positional box says
    where its positions go. Returns the blocks."""
    from scratchformer.plotdata.blocks import architecture, block_key

    blocks = architecture(bundle.config)
    assert blocks[1].label == "⊕ No positional encoding (RoPE: in attention)"
    _, trace = bundle.run(bundle.prepare("machine learning"))
    firsts = list(dict.fromkeys(block_key(s) for s in trace))
    assert firsts == [b.key for b in blocks], "the trace must walk the diagram's blocks in the diagram's order"
    return blocks
