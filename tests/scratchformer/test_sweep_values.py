"""Patching sweeps checked against computations made another way: the batched sweep against one whole forward
pass per patch through the Patch intervention (every model family, a GPT-2 folder saved by transformers, en-hi),
attribution patching against finite differences in float64, path patching against the sender's write added by
hand to the receiver's input; identical inputs give 0 everywhere, the last layer's output restores m_clean."""

from __future__ import annotations

import pytest
import torch
from transformers import GPT2Config, GPT2LMHeadModel

from scratchformer.bundle import load_model
from scratchformer.interventions import Patch, intervene
from scratchformer.patching import components as C
from scratchformer.patching.attribution import estimate
from scratchformer.patching.batched import one_at_a_time, patched_metrics
from scratchformer.patching.pair import final_hidden, make_pair
from scratchformer.patching.paths import path_patch, path_sweep
from scratchformer.tokenizers import gpt2_tokenizer
from tests.scratchformer.test_derive import FAMILIES, family_bundle

EN = ("the girl eats an apple", "the boy eats an apple")
HI = ("वह लड़की किताब पढ़ती है", "वह लड़का किताब पढ़ती है")  # the corrupted token in the middle
WITH_DECODER = sorted(name for name, options in FAMILIES.items() if options.get("n_decoder_layers", 2))


@pytest.fixture(scope="module")
def en_hi():
    return load_model("en-hi")


@pytest.fixture(scope="module")
def gpt2_folder(tmp_path_factory):
    """A GPT-2 folder saved by transformers (3 layers, 4 heads, 32 wide), weights wide enough (σ 0.3) that the
    corrupted name moves the logits."""
    directory = tmp_path_factory.mktemp("gpt2-sweep")
    torch.manual_seed(0)
    config = GPT2Config(vocab_size=50257, n_positions=32, n_embd=32, n_layer=3, n_head=4, initializer_range=0.3)
    GPT2LMHeadModel(config).save_pretrained(str(directory))
    gpt2_tokenizer().hf.save_pretrained(str(directory))
    return load_model(str(directory))


def pair_of(bundle, clean=None, corrupt=None, **kw):
    encoder = bundle.config.has_encoder
    if bundle.tgt_tokenizer.kind == "gpt2-bpe":
        texts = ("When Mary and John went to the store, John gave",
                 "When Mary and John went to the store, Mary gave")  # fmt: skip
    else:
        texts = EN if encoder else HI
    clean, corrupt = clean or texts[0], corrupt or texts[1]
    # an encoder-decoder reads its start token alone: the first translated token is the answer
    return make_pair(bundle, bundle.prepare_run(clean, start_only=encoder), bundle.prepare(corrupt), **kw)


def grid(bundle, pair, per_position=False):
    t, s = pair.n_positions("tgt"), pair.n_positions("src") if pair.src_clean is not None else 0
    m = bundle.model
    return (C.head_components(m, t, s, per_position) + C.residual_components(m, t, s)
            + C.mlp_components(m, t, s))  # fmt: skip


def check_batched(bundle, per_position=False):
    pair = pair_of(bundle)
    comps = grid(bundle, pair, per_position)
    batched = patched_metrics(pair, comps)
    single = torch.tensor([one_at_a_time(pair, c) for c in comps])
    assert (batched - single).abs().max() <= 1e-5
    assert (single - pair.m_corrupt).abs().max() > 1e-3  # some patch moves the metric: the check is not vacuous


@pytest.mark.parametrize("name", WITH_DECODER)
def test_the_batched_sweep_equals_one_patched_pass_per_component_in_every_family(en_hi, name):
    check_batched(family_bundle(en_hi, FAMILIES[name]), per_position=True)


def test_the_batched_sweep_equals_one_patched_pass_per_component_on_en_hi(en_hi):
    check_batched(en_hi)
    check_batched(en_hi, per_position=True)


def test_the_batched_sweep_equals_one_patched_pass_per_component_on_a_gpt2_folder(gpt2_folder):
    check_batched(gpt2_folder)
    check_batched(gpt2_folder, per_position=True)


@pytest.mark.parametrize("which", ["en_hi", "gpt2_folder"])
def test_identical_inputs_give_zero_everywhere(which, request):
    bundle = request.getfixturevalue(which)
    text = "the girl eats an apple" if which == "en_hi" else "When Mary and John went to the store"
    pair = pair_of(bundle, text, text)
    comps = grid(bundle, pair, per_position=True)
    assert pair.m_clean == pair.m_corrupt
    assert torch.equal(pair.effect(patched_metrics(pair, comps)), torch.zeros(len(comps)))
    assert torch.equal(pair.share(estimate(pair, comps)), torch.zeros(len(comps)))


@pytest.mark.parametrize("which", ["en_hi", "gpt2_folder"])
def test_patching_the_last_layer_restores_the_clean_output(which, request):
    bundle = request.getfixturevalue(which)
    pair = pair_of(bundle)
    model = bundle.model
    last = C.residual_steps(model, "decoder")[-1]  # the last decoder layer's output: everything it computed
    with torch.inference_mode(), intervene(model, [Patch(last, pair.clean[last])]):
        m = pair.metric.values(model, final_hidden(model, pair.src_corrupt, pair.tgt_corrupt))
    assert float(m[0]) == pytest.approx(pair.m_clean, abs=1e-5)
    t = pair.n_positions("tgt")
    comps = C.point_components(model, [last], t, 0, "resid")
    m = patched_metrics(pair, comps)
    assert float(m[-1]) == pytest.approx(pair.m_clean, abs=1e-5)  # the last position is what the metric reads
    assert float(pair.effect(m)[-1]) == pytest.approx(1.0, abs=1e-4)
    if not model.config.has_encoder:  # earlier positions reach the metric only through later layers: none left
        assert (m[:-1] - pair.m_corrupt).abs().max() <= 1e-5
        first = C.residual_steps(model, "decoder")[0]  # the embeddings at the one token that differs
        changed = int((pair.tgt_clean != pair.tgt_corrupt).nonzero()[0, 1])
        m = patched_metrics(pair, [C.Component("resid", first, "decoder", -1, None, changed)])
        assert float(m[0]) == pytest.approx(pair.m_clean, abs=1e-5)


def m_along(pair, step, along, t):
    """m of the corrupted run with `step` moved t of the way along `along`."""
    model = pair.model
    with torch.inference_mode(), intervene(model, [Patch(step, pair.corrupt[step] + t * along)]):
        return float(pair.metric.values(model, final_hidden(model, None, pair.tgt_corrupt))[0])


def test_attribution_patching_is_the_gradient_times_the_difference(en_hi):
    """In float64, each estimate against the central difference of m along the clean − corrupted line."""
    bundle = family_bundle(en_hi, FAMILIES["gpt2_like"], seed=1)
    bundle.model.double()
    pair = pair_of(bundle)
    comps = grid(bundle, pair, per_position=True)
    picked = [c for c in comps if c.position is not None and c.position >= 2][::7]
    got = estimate(pair, picked)
    eps = 1e-6
    for c, g in zip(picked, got):
        diff = pair.clean[c.step] - pair.corrupt[c.step]
        mask = torch.zeros_like(diff, dtype=torch.bool)
        index = (0, c.head, c.position) if c.head_axis else (0, c.position)
        mask[index] = True
        along = torch.where(mask, diff, torch.zeros_like(diff))

        by_hand = (m_along(pair, c.step, along, eps) - m_along(pair, c.step, along, -eps)) / (2 * eps)
        assert float(g) == pytest.approx(by_hand, abs=1e-6, rel=1e-6)
    assert got.abs().max() > 1e-3


def test_a_path_to_a_receiver_that_runs_first_is_zero_and_a_real_one_is_the_write_added_by_hand(gpt2_folder):
    bundle, model = gpt2_folder, gpt2_folder.model
    pair = pair_of(bundle)
    back = path_patch(pair, "decoder.2.self_attn.head1", "decoder.0.self_attn.head3.q")
    same = path_patch(pair, "decoder.1.self_attn.head1", "decoder.1.self_attn.head0.k")
    assert not back.possible and not same.possible
    assert back.path == 0.0 and same.path == 0.0
    assert back.total != 0.0  # the sender matters, only not through a receiver before it
    receivers, effects = path_sweep(pair, "decoder.1.self_attn.head1", "v")
    assert all(float(e) == 0.0 for c, e in zip(receivers, effects) if c.layer <= 1)
    assert any(abs(float(e)) > 1e-4 for c, e in zip(receivers, effects) if c.layer == 2)
    # by hand (TransformerLens's direct path): layer 2's input in the corrupted run plus the sender's clean −
    # corrupted write z_h W^O_h, through layer 2's pre-norm and W^Q of head 0, patched into the corrupted run
    found = path_patch(pair, "decoder.1.self_attn.head1", "decoder.2.self_attn.head0.q")
    sender = model.decoder[1].self_attn
    d = sender.d_head
    w_o = sender.out_proj.weight[:, d : 2 * d]  # (d_model, d_head): head 1's slice of W^O
    z = pair.clean["decoder.1.self_attn.context"][:, 1] - pair.corrupt["decoder.1.self_attn.context"][:, 1]
    x = pair.corrupt[C.layer_input_step(model, "decoder", 2)] + z @ w_o.T  # (1, T, d_model)
    receiver = model.decoder[2]
    with torch.inference_mode():
        q = receiver.self_attn.split_heads(receiver.self_attn.qkv(receiver.add_norm1.norm(x))[..., :d * 4])
        values = pair.corrupt["decoder.2.self_attn.q"].clone()
        values[:, 0] = q[:, 0]
        with intervene(model, [Patch("decoder.2.self_attn.q", values)]):
            m = float(pair.metric.values(model, final_hidden(model, None, pair.tgt_corrupt))[0])
    assert found.possible
    assert found.m_path == pytest.approx(m, abs=1e-5)
    assert abs(found.path) > 1e-4


def test_a_small_memory_budget_shrinks_the_batches_says_so_once_and_changes_nothing(gpt2_folder):
    pair = pair_of(gpt2_folder)
    comps = grid(gpt2_folder, pair, per_position=True)
    weights = sum(p.numel() * p.element_size() for p in gpt2_folder.model.parameters())
    notes: list[str] = []
    from scratchformer.patching.batched import bytes_per_item

    small = patched_metrics(pair, comps, budget=weights + 3 * bytes_per_item(pair), notes=notes)
    assert len(notes) == 1 and "3 patched copies at a time" in notes[0]
    assert (small - patched_metrics(pair, comps)).abs().max() <= 1e-5


def test_a_sweep_reports_progress_per_batch_and_stops_when_cancelled(gpt2_folder):
    pair = pair_of(gpt2_folder)
    comps = grid(gpt2_folder, pair)
    seen: list[tuple[int, int]] = []
    patched_metrics(pair, comps, progress=lambda done, total: seen.append((done, total)))
    assert seen and seen[-1][0] == seen[-1][1] and [d for d, _ in seen] == list(range(1, len(seen) + 1))
    assert patched_metrics(pair, comps, cancelled=lambda: True) is None
