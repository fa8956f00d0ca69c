"""Patching sweeps checked against computations made another way: the batched sweep against one whole forward
pass per patch through the Patch intervention (every model family, a GPT-2 folder saved by transformers, en-hi),
attribution patching against finite differences in float64, path patching against the sender's write added by
hand to the receiver's input; identical inputs give 0 everywhere, the last layer's output restores m_clean."""

from __future__ import annotations

import pytest
import torch
from transformers import GPT2Config, GPT2LMHeadModel

from scratchformer.loading.bundle import load_model
from scratchformer.loading.tokenizers import gpt2_tokenizer
from scratchformer.patching import components as C
from scratchformer.patching.attribution import estimate
from scratchformer.patching.batched import one_at_a_time, patched_metrics
from scratchformer.patching.interventions import Patch, intervene
from scratchformer.patching.pair import final_hidden, make_pair
from scratchformer.patching.paths import path_patch, path_sweep
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


IOI = ("When Mary and John went to the store, John gave", "When Mary and John went to the store, Mary gave")
SOFTCAP = 2.0  # small enough that capping changes the logit difference several times over


@pytest.fixture(scope="module")
def gemma2_folder(tmp_path_factory):
    """A Gemma 2 folder saved by transformers (2 layers) whose final logits are soft-capped at SOFTCAP, and
    transformers' eager model of it."""
    from tests.scratchformer.test_importers_gemma import _save

    directory = tmp_path_factory.mktemp("gemma2-sweep")
    ref = _save(directory, "gemma2", num_hidden_layers=2, final_logit_softcapping=SOFTCAP)
    return load_model(str(directory)), ref


def _metric_by_hand(logits: torch.Tensor, metric) -> float:
    """m from one position's (vocab,) logits, in float64."""
    logits = logits.double()
    if metric.kind == "logprob":
        return float(logits.log_softmax(-1)[metric.answer])
    return float(logits[metric.answer] - logits[metric.wrong])


def _last_logits(model, tgt: torch.Tensor, patches=()) -> torch.Tensor:
    """The model's own output (what forward returns, soft-cap included) at the last position, (vocab,)."""
    with torch.inference_mode(), intervene(model, list(patches)):
        return model(None, tgt)[0, -1]


@pytest.mark.parametrize("kind", ["logit-diff", "logprob"])
def test_the_metric_of_a_soft_capped_model_reads_the_capped_logits(gemma2_folder, kind):
    """Gemma 2 soft-caps its output, c·tanh(z / c): the sweep's m_clean, m_corrupt and patched metrics are those of
    the capped logits the model outputs — equal to transformers' Gemma2 logits and to c·tanh(z / c) computed by
    hand in float64 from the raw logits z = lm_head(final hidden) — not of the raw ones."""
    from scratchformer.analyses import sweep

    bundle, ref = gemma2_folder
    model = bundle.model
    assert model.config.final_softcap == SOFTCAP
    pair = pair_of(bundle, kind=kind)
    by_hand, raw_m = {}, {}
    for which, tgt in (("clean", pair.tgt_clean), ("corrupt", pair.tgt_corrupt)):
        with torch.no_grad():
            out = ref(input_ids=tgt, output_hidden_states=True)
            raw = ref.lm_head(out.hidden_states[-1])[0, -1].double()  # (vocab,) before the cap
        capped = SOFTCAP * torch.tanh(raw / SOFTCAP)
        assert torch.allclose(out.logits[0, -1].double(), capped, atol=1e-5)  # transformers caps them so
        assert torch.allclose(_last_logits(model, tgt).double(), capped, atol=1e-5)  # and so does our model
        by_hand[which], raw_m[which] = _metric_by_hand(capped, pair.metric), _metric_by_hand(raw, pair.metric)
    assert pair.m_clean == pytest.approx(by_hand["clean"], abs=1e-5)
    assert pair.m_corrupt == pytest.approx(by_hand["corrupt"], abs=1e-5)
    for which in by_hand:  # the cap changes m far beyond the tolerance: the raw logits could not pass
        assert abs(raw_m[which] - by_hand[which]) > 0.5, which
    gap = by_hand["clean"] - by_hand["corrupt"]
    assert abs(gap) > 0.15

    # the sweep: its two ends, and one component patched by hand — the output of layer 0 at the last position
    # (layer 1 still reads the corrupted earlier positions), taken from a trace of the clean run, put into the
    # corrupted run, read off the model's own capped output
    result = sweep.compute(bundle, bundle.prepare(IOI[0]), bundle.prepare(IOI[1]), metric=kind,
                           per_position=True).to_dict()  # fmt: skip
    assert result["clean"] == pytest.approx(by_hand["clean"], abs=1e-5)
    assert result["corrupt"] == pytest.approx(by_hand["corrupt"], abs=1e-5)
    step = C.residual_steps(model, "decoder")[2]  # decoder.0's output: after its attention and feed-forward
    last = pair.n_positions("tgt") - 1
    _, clean_trace = model.run_with_trace(None, pair.tgt_clean, lazy=False)
    _, corrupt_trace = model.run_with_trace(None, pair.tgt_corrupt, lazy=False)
    values = corrupt_trace[step].tensor.clone()
    values[:, last] = clean_trace[step].tensor[:, last]
    m_patched = _metric_by_hand(_last_logits(model, pair.tgt_corrupt, [Patch(step, values)]), pair.metric)
    entry = next(e for e in result["positions"] if e["step"] == step and e["position"] == last)
    expected = (m_patched - by_hand["corrupt"]) / gap
    assert entry["effect"] == pytest.approx(expected, abs=1e-4)
    assert 0.5 < abs(expected) and abs(expected - 1) > 0.02  # it moves the metric, and not simply to m_clean


def _patched_by_hand(model, step: str, cells, clean_trace, corrupt_trace, tgt) -> torch.Tensor:
    """The model's last-position output on `tgt` with `step`'s cells (an index into its tensor) taken from the
    clean trace and the rest from the corrupted one."""
    values = corrupt_trace[step].tensor.clone()
    values[cells] = clean_trace[step].tensor[cells]
    return _last_logits(model, tgt, [Patch(step, values)])


@pytest.mark.parametrize("kind", ["logit-diff", "logprob"])
def test_effects_keep_their_sign_when_the_clean_metric_is_below_the_corrupted_one(gpt2_folder, kind):
    """--answer / --wrong chosen so that m_clean < m_corrupt (the tokens the corruption favours): an effect is
    still (m_patched − m_corrupt) / (m_clean − m_corrupt), its negative denominator kept — the last two layers'
    heads, feed-forwards and residual points at the last position against patches made by hand through the
    intervention API, m read off the model's own output in float64 — and the last layer's output there restores
    m_clean: effect +1, not −1. Attribution's estimates divide by the same signed difference."""
    from scratchformer.analyses import sweep

    bundle, model = gpt2_folder, gpt2_folder.model
    clean, corrupt = bundle.prepare(IOI[0]), bundle.prepare(IOI[1])
    z_clean, z_corrupt = _last_logits(model, clean.tgt).double(), _last_logits(model, corrupt.tgt).double()
    if kind == "logprob":  # the token whose log-probability the corruption raises most
        rise = z_corrupt.log_softmax(-1) - z_clean.log_softmax(-1)
        answer, wrong = int(rise.argmax()), None
    else:  # the pair whose logit difference it raises most
        rise = z_corrupt - z_clean
        answer, wrong = int(rise.argmax()), int(rise.argmin())
    result = sweep.compute(bundle, clean, corrupt, f"id:{answer}", None if wrong is None else f"id:{wrong}",
                           kind, method="both", per_position=True)  # fmt: skip
    out = result.to_dict()
    metric = result.metric
    assert (metric.answer, metric.wrong, metric.kind) == (answer, wrong, kind)
    m_clean, m_corrupt = _metric_by_hand(z_clean, metric), _metric_by_hand(z_corrupt, metric)
    gap = m_clean - m_corrupt
    assert gap < -0.5  # the clean metric well below the corrupted one
    assert out["clean"] == pytest.approx(m_clean, abs=1e-5) and out["corrupt"] == pytest.approx(m_corrupt, abs=1e-5)
    assert not any("noisy" in n for n in out["notes"])  # |gap| is large: no warning about a small one

    _, clean_trace = model.run_with_trace(None, clean.tgt, lazy=False)
    _, corrupt_trace = model.run_with_trace(None, corrupt.tgt, lazy=False)
    last = clean.tgt.shape[1] - 1
    checked = []
    for entry in out["heads"]:
        if entry["layer"] == 2 and entry["position"] == last:  # the last layer's heads at the last position
            step, cells = f"{entry['attention']}.context", (0, entry["head"], last)
            checked.append((entry, step, cells))
    for entry in out["positions"] + out["mlp"]:
        if entry["position"] == last and entry["step"].startswith(("decoder.1.", "decoder.2.")):
            checked.append((entry, entry["step"], (0, last)))
    by_hand = []
    for entry, step, cells in checked:
        m = _metric_by_hand(_patched_by_hand(model, step, cells, clean_trace, corrupt_trace, corrupt.tgt), metric)
        by_hand.append((m - m_corrupt) / gap)
        assert entry["effect"] == pytest.approx(by_hand[-1], abs=1e-4), (entry, by_hand[-1])
    assert len(checked) >= 8 and sum(abs(e) > 0.1 for e in by_hand) >= 3  # patches that move the metric
    final = C.residual_steps(model, "decoder")[-1]
    restored = next(e for e in out["positions"] if e["step"] == final and e["position"] == last)
    assert restored["effect"] == pytest.approx(1.0, abs=1e-4)

    # attribution patching's estimates share the same denominator: the estimated change of m over m_clean − m_corrupt
    pair = make_pair(bundle, clean, corrupt, f"id:{answer}", None if wrong is None else f"id:{wrong}", kind)
    comps = C.residual_components(model, pair.n_positions("tgt"), 0)
    raw = estimate(pair, comps)  # m_patched − m_corrupt to first order (checked by finite differences above)
    assert raw.abs().max() > 0.1
    for c, change in zip(comps, raw):
        entry = next(e for e in out["positions"] if e["step"] == c.step and e["position"] == c.position)
        assert entry["estimate"] == pytest.approx(float(change) / gap, abs=1e-5)
