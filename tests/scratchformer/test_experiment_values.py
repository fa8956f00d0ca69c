"""The experiments' numbers, each recomputed here another way: the model's own forward pass run by hand for every
variant, torch's norms, numpy for the softmax statistics, a model built without positional encoding, and the
choice rules written out from their docstrings."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
import torch

from scratchformer.errors import UserError
from scratchformer.experiments import NotApplicable, run_experiment
from scratchformer.experiments.measures import entropy, max_abs_diff, row_stats
from scratchformer.experiments.scaling import compare, random_scores
from scratchformer.loading.bundle import load_model
from scratchformer.transformer.model import Transformer
from tests.scratchformer.test_derive import FAMILIES, family_bundle

SOURCE = "the girl eats an apple"


@pytest.fixture(scope="module")
def en_hi():
    return load_model("en-hi")


def softmax_stats(rows: np.ndarray) -> dict:
    """max weight, entropy and mean |∂softmax/∂score| of softmax rows (some entries may be −∞), by numpy."""
    e = np.exp(rows - rows.max(1, keepdims=True))
    p = e / e.sum(1, keepdims=True)
    ent = [-sum(x * math.log(x) for x in row if x > 0) for row in p]
    grads = [np.abs(np.diag(row) - np.outer(row, row)).mean() for row in p]
    return {"max_weight": p.max(1).mean(), "entropy": float(np.mean(ent)), "mean_abs_gradient": float(np.mean(grads))}


def assert_stats(got: dict, want: dict) -> None:
    for key, value in want.items():
        assert got[key] == pytest.approx(value, rel=1e-9, abs=1e-12), key


# --- measures and scaling -------------------------------------------------------------------------------------


def test_entropy_max_weight_and_gradient_of_softmax_rows():
    p = torch.tensor([[0.5, 0.5, 0.0], [0.2, 0.3, 0.5]], dtype=torch.float64)
    want_h = [math.log(2), -(0.2 * math.log(0.2) + 0.3 * math.log(0.3) + 0.5 * math.log(0.5))]
    assert entropy(p).tolist() == pytest.approx(want_h)  # 0·log 0 counts as 0, not NaN
    stats = row_stats(p)
    assert stats["max_weight"] == pytest.approx((0.5 + 0.5) / 2)
    assert stats["entropy"] == pytest.approx(sum(want_h) / 2)
    j0 = np.abs(np.diag([0.5, 0.5, 0]) - np.outer([0.5, 0.5, 0], [0.5, 0.5, 0])).mean()
    j1 = np.abs(np.diag([0.2, 0.3, 0.5]) - np.outer([0.2, 0.3, 0.5], [0.2, 0.3, 0.5])).mean()
    assert stats["mean_abs_gradient"] == pytest.approx((j0 + j1) / 2)
    assert max_abs_diff(torch.tensor([1.0, -2.0]), torch.tensor([1.5, 1.0])) == 3.0
    assert max_abs_diff(torch.zeros(0), torch.zeros(0)) == 0.0


def test_compare_divides_by_root_dk_and_leaves_masked_keys_out():
    s = torch.tensor([[4.0, 0.0, -2.0], [1.0, 3.0, 8.0]], dtype=torch.float64)
    mask = torch.tensor([[True, True, True], [True, True, False]])
    r = compare(s, 4, mask)
    rows = s.numpy().copy()
    rows[1, 2] = -np.inf
    assert_stats(r["unscaled"], softmax_stats(rows))
    assert_stats(r["scaled"], softmax_stats(rows / 2))  # √4
    finite = np.array([4.0, 0.0, -2.0, 1.0, 3.0])  # the masked 8 is not a score any key gets
    assert r["score_std"]["unscaled"] == pytest.approx(finite.std(ddof=1))
    assert r["score_std"]["scaled"] == pytest.approx(finite.std(ddof=1) / 2)
    assert r["d_k"] == 4
    unmasked = compare(s, 9)
    assert_stats(unmasked["scaled"], softmax_stats(s.numpy() / 3))


def test_random_scores_are_dot_products_of_the_first_dk_components_of_one_draw():
    got = random_scores([2, 5], seed=11, rows=4, keys=3)
    gen = torch.Generator().manual_seed(11)
    q = torch.randn(4, 5, generator=gen)  # the draw at the largest d_k, q first
    k = torch.randn(4, 3, 5, generator=gen)
    for d in (2, 5):
        want = [[sum(float(q[r, i]) * float(k[r, j, i]) for i in range(d)) for j in range(3)] for r in range(4)]
        assert got[d].dtype == torch.float64
        np.testing.assert_allclose(got[d].numpy(), want, rtol=1e-5, atol=1e-6)
    assert not torch.equal(random_scores([5], seed=12, rows=4, keys=3)[5], got[5])  # the seed is used


def test_the_scaling_run_lists_its_rows_curve_and_example(en_hi):
    r = run_experiment("scaling", en_hi, SOURCE, d_k=100, seed=4)
    assert [row["d_k"] for row in r["rows"]] == [8, 64, 100, 512]
    assert [c["d_k"] for c in r["curve"]] == [1, 2, 4, 8, 16, 32, 64, 128, 256, 512]
    scores = random_scores([1, 2, 4, 8, 16, 32, 64, 100, 128, 256, 512], 4)
    for row in r["rows"] + r["curve"]:
        assert_stats(row["scaled"], softmax_stats(scores[row["d_k"]].numpy() / math.sqrt(row["d_k"])))
        assert_stats(row["unscaled"], softmax_stats(scores[row["d_k"]].numpy()))
    ex = r["example"]
    assert ex["d_k"] == 100 and ex["scores"] == pytest.approx(scores[100][0].tolist())
    e = np.exp(np.array(ex["scores"]) / 10)
    assert ex["scaled"] == pytest.approx((e / e.sum()).tolist())
    e = np.exp(np.array(ex["scores"]) - max(ex["scores"]))
    assert ex["unscaled"] == pytest.approx((e / e.sum()).tolist())
    assert r["uniform_entropy"] == pytest.approx(math.log(10)) and r["samples"] == 1000
    chosen = r["rows"][2]
    assert r["summary"] == (f"At d_k = 100, the largest weight is {chosen['unscaled']['max_weight']:.2f} without "
                            f"÷√d_k and {chosen['scaled']['max_weight']:.2f} with it (entropy "
                            f"{chosen['unscaled']['entropy']:.2f} against {chosen['scaled']['entropy']:.2f} nats; "
                            "a uniform row of 10 keys has 2.30).")  # fmt: skip
    for bad in (0, 2049):
        with pytest.raises(UserError, match=f"d_k must be between 1 and 2048, not {bad}"):
            run_experiment("scaling", en_hi, SOURCE, d_k=bad)


def test_the_models_own_scores_keep_its_causal_mask(en_hi):
    """A decoder-only model's first attention is causal: query i's row holds keys 0 … i only."""
    gpt2 = family_bundle(en_hi, FAMILIES["gpt2_like"])
    own = run_experiment("scaling", gpt2, SOURCE)["model_qk"]
    _, trace = gpt2.run(gpt2.prepare(SOURCE))
    q, k = trace["decoder.0.self_attn.q"].item(0).double(), trace["decoder.0.self_attn.k"].item(0).double()
    h, t, d = q.shape
    rows = (q @ k.transpose(-2, -1)).reshape(-1, t).numpy().copy()  # (h·T, T)
    rows[np.tile(np.triu(np.ones((t, t), dtype=bool), 1), (h, 1))] = -np.inf
    assert own["attention"] == "decoder.0.self_attn" and (own["heads"], own["queries"], own["keys"]) == (h, t, t)
    assert own["d_k"] == d == 8 and own["model_scales"] is True
    assert_stats(own["unscaled"], softmax_stats(rows))
    assert_stats(own["scaled"], softmax_stats(rows / math.sqrt(d)))


def test_a_typed_target_leaves_the_first_attentions_scores_alone(en_hi):
    """The encoder's first self-attention never reads the target: even one past the decoder's positions."""
    too_long = " ".join(["लड़की"] * (en_hi.config.max_len + 5))
    typed = run_experiment("scaling", en_hi, SOURCE, target=too_long)["model_qk"]
    assert typed == run_experiment("scaling", en_hi, SOURCE)["model_qk"]
    assert typed["attention"] == "encoder.0.self_attn"


# --- mask -----------------------------------------------------------------------------------------------------


def test_each_change_is_the_largest_move_of_a_position_when_one_token_is_replaced(en_hi):
    r = run_experiment("mask", en_hi, SOURCE, seed=5)
    inputs = en_hi.prepare_run(SOURCE)
    ids = inputs.tgt[0].tolist()
    new = [en_hi.tgt_tokenizer.token_id(s) for s in r["replaced_with"][1:]]
    c = en_hi.config
    assert r["replaced_with"][0] == "—" and all(n not in (o, c.pad_id, c.bos_id, c.eos_id) for n, o in
                                                 zip(new, ids[1:]))  # fmt: skip
    assert r["decoder_tokens"] == inputs.target_tokens[0] and r["decoder_input"] == "generated"
    with torch.inference_mode():
        memory = en_hi.model.encode(inputs.src)
        for key, causal in (("with_mask", True), ("without_mask", False)):
            base = en_hi.model.decode(inputs.tgt, memory, causal=causal)[0].double()
            want = np.zeros((len(ids), len(ids)))
            for j in range(1, len(ids)):
                other = inputs.tgt.clone()
                other[0, j] = new[j - 1]
                moved = en_hi.model.decode(other, memory, causal=causal)[0].double()
                want[:, j] = (moved - base).abs().max(-1).values.numpy()
            assert np.array(r[key]["changes"]) == pytest.approx(want, abs=1e-12)
            assert r[key]["max_change_from_future"] == pytest.approx(np.triu(want, 1).max(), abs=1e-12)
    other_seed = run_experiment("mask", en_hi, SOURCE, seed=6)["replaced_with"]
    assert other_seed != r["replaced_with"] and run_experiment("mask", en_hi, SOURCE, seed=5) == r
    without = r["without_mask"]["max_change_from_future"]
    assert r["summary"] == ("Replacing a later token moves an earlier position's output by exactly 0 with the mask "
                            f"and by up to {without:.3g} without it.")  # fmt: skip


def test_a_typed_target_is_the_decoder_input_the_mask_experiment_changes(en_hi):
    target = "सेब लड़की है"  # not the model's translation
    r = run_experiment("mask", en_hi, SOURCE, target)
    assert r["decoder_input"] == "typed" and r["decoder_tokens"] == en_hi.prepare_run(SOURCE, target).target_tokens[0]
    assert r["decoder_tokens"][1:] == target.split()


def test_a_replacement_is_never_the_token_it_replaces_nor_a_special_one(en_hi, monkeypatch):
    """The draw may hit the very token it replaces, or the pad, start or end token: those draws are skipped. Here
    every draw starts with the token being replaced, then the special ones, then a new id."""
    ids = en_hi.prepare_run(SOURCE).tgt[0].tolist()
    c = en_hi.config
    draws = [x for j, old in enumerate(ids[1:], 1) for x in (old, c.pad_id, c.eos_id, en_hi.start_id(), 300 + j)]
    real = torch.randint
    monkeypatch.setattr(torch, "randint", lambda *a, **k: torch.tensor([draws.pop(0)]) if draws else real(*a, **k))
    r = run_experiment("mask", en_hi, SOURCE)
    assert r["replaced_with"] == ["—", *en_hi.tgt_tokenizer.token_strings([300 + j for j in range(1, len(ids))])]


def test_each_side_skips_its_own_tokenizers_special_ids(monkeypatch):
    """A model whose source and target tokenizers number their pad, start and end tokens differently: a
    replacement on each side is drawn from that side's vocabulary and skips that side's special ids (and the
    config's), not the other side's."""
    from types import SimpleNamespace

    from scratchformer.experiments.inputs import replacement, special_ids

    config = SimpleNamespace(pad_id=None, bos_id=None, eos_id=7, src_vocab_size=20, tgt_vocab_size=30)
    bundle = SimpleNamespace(config=config, src_tokenizer=SimpleNamespace(pad_id=0, bos_id=1, eos_id=2),
                             tgt_tokenizer=SimpleNamespace(pad_id=10, bos_id=11, eos_id=12))  # fmt: skip
    assert special_ids(bundle, "src") == {0, 1, 2, 7} and special_ids(bundle, "tgt") == {10, 11, 12, 7}
    draws, vocabularies = [5, 0, 1, 2, 7, 10, 5, 10, 11, 12, 7, 0], []

    def randint(n, size, generator):
        vocabularies.append(n)
        return torch.tensor([draws.pop(0)])

    monkeypatch.setattr(torch, "randint", randint)
    assert replacement(bundle, "src", 5, None) == 10 and vocabularies == [20] * 6
    assert replacement(bundle, "tgt", 5, None) == 0 and vocabularies[6:] == [30] * 6 and not draws


# --- order ----------------------------------------------------------------------------------------------------


ORDER_MODELS = {"en-hi": None, "BERT-like (token types, embedding LayerNorm)": FAMILIES["bert_like"],
                "pre-LN with a final norm": dict(norm_first=True, final_layer_norm=True)}  # fmt: skip


@pytest.mark.parametrize("which", list(ORDER_MODELS))
def test_order_puts_the_shuffled_rows_back_and_compares_them(en_hi, which):
    bundle = en_hi if ORDER_MODELS[which] is None else family_bundle(en_hi, ORDER_MODELS[which])
    r = run_experiment("order", bundle, SOURCE, seed=2)
    perm = r["permutation"]
    src = torch.tensor([bundle.encode_source(SOURCE)])
    assert len(perm) == src.shape[1] and sorted(perm) == list(range(len(perm))) and perm != sorted(perm)
    assert r["source_tokens"] == bundle.src_tokenizer.token_strings(src[0].tolist())
    # without positions: the same weights in a model that adds no positional encoding
    config = dataclasses.replace(bundle.config, positional="none", position_offset=0)
    plain = Transformer(config).eval()
    plain.load_state_dict(bundle.model.state_dict(), strict=False)
    for key, model in (("with_pe", bundle.model), ("without_pe", plain)):
        with torch.inference_mode():
            original = model.encode(src)[0].double()
            moved = model.encode(src[:, perm])[0].double()
        put_back = torch.empty_like(moved)
        put_back[perm] = moved  # moved row k holds original position perm[k]
        rows = (put_back - original).abs().max(-1).values
        assert r[key]["row_diffs"] == pytest.approx(rows.tolist(), abs=1e-5)
        assert r[key]["max_diff_after_unpermuting"] == pytest.approx(float(rows.max()), abs=1e-5)
        assert r[key]["max_diff_in_place"] == pytest.approx(float((moved - original).abs().max()), abs=1e-5)
    assert max(r["with_pe"]["row_diffs"]) > 0.1


def test_the_shuffle_is_seeded_and_always_moves_something():
    from scratchformer.experiments.order import permutation

    assert permutation(6, 2) == permutation(6, 2) and permutation(6, 2) != permutation(6, 3)
    assert {tuple(permutation(2, seed)) for seed in range(20)} == {(1, 0)}  # two positions: the one real shuffle
    assert permutation(1, 0) == [0]  # one position cannot move
    summary = run_experiment("order", load_model("en-hi"), SOURCE, seed=2)["summary"]
    assert summary.startswith("Shuffled and put back, the encoder output differs by at most ")


def test_order_needs_a_positional_encoding_to_remove(en_hi):
    plain = family_bundle(en_hi, {"positional": "none"})
    with pytest.raises(NotApplicable) as why:
        run_experiment("order", plain, SOURCE)
    assert str(why.value) == (f"{plain.name} adds no positional encoding, so there is none to remove: the order "
                              "experiment does not apply.")  # fmt: skip


def test_order_reads_the_source_alone_on_the_models_device(en_hi, monkeypatch):
    """No translation is made and a typed target is not read (even one past the decoder's positions)."""
    from tests.scratchformer.test_rerun_device_moves import Moves

    too_long = " ".join(["लड़की"] * (en_hi.config.max_len + 5))
    plain = run_experiment("order", en_hi, SOURCE, seed=2)
    monkeypatch.setattr(en_hi, "prepare_run", lambda *a, **k: pytest.fail("the order experiment translated"))
    with Moves() as moves:
        typed = run_experiment("order", en_hi, SOURCE, target=too_long, seed=2)
    assert typed.pop("target") == too_long and plain.pop("target") == ""
    assert typed == plain
    devices = [t for t in moves.targets if not isinstance(t, torch.dtype)]
    assert devices and all(t is not None and torch.device(t) == en_hi.device for t in devices), devices


# --- teacher forcing ------------------------------------------------------------------------------------------


def test_teacher_forcing_counts_and_picks_its_snapshot_by_its_rule(en_hi):
    r = run_experiment("teacher_forcing", en_hi, SOURCE)
    curve = [s for s in r["snapshots"] if s["step"] != "final"]
    half = [s for s in curve if s["teacher_forced"] >= 0.5]
    gap = [s for s in half if s["teacher_forced"] > s["free_running"]]
    assert r["snapshot"]["step"] == (gap or half or curve[-1:])[0]["step"]
    ref = r["reference"]["tokens"]
    for key in ("teacher_forced", "free_running"):
        got = r[key]
        assert got["correct"] == [p == t for p, t in zip(got["predicted"], ref)]
        assert got["accuracy"] == sum(got["correct"]) / len(ref)
        wrong = [i for i, ok in enumerate(got["correct"]) if not ok]
        assert got["first_error"] == (wrong[0] if wrong else None)
    err = r["free_running"]["first_error"]
    assert err is not None  # the early snapshot errs free-running
    after = r["after_first_free_error"]
    assert after["positions"] == len(ref) - err - 1
    if after["positions"]:
        assert after["teacher_forced"] == sum(r["teacher_forced"]["correct"][err + 1 :]) / after["positions"]
        assert after["free_running"] == sum(r["free_running"]["correct"][err + 1 :]) / after["positions"]
    at = {s["step"]: s for s in curve}[r["snapshot"]["step"]]
    assert at["teacher_forced"] == r["teacher_forced"]["accuracy"]
    assert at["free_running"] == r["free_running"]["accuracy"]
    assert r["summary"] == (f"At step {r['snapshot']['step']}, {at['teacher_forced']:.0%} of the {len(ref)} reference "
                            f"tokens are right with teacher forcing and {at['free_running']:.0%} free-running (its "
                            f"first mistake at position {err + 1}).")  # fmt: skip
    # a snapshot asked for by its step is the one decoded
    last = curve[-1]["step"]
    chosen = run_experiment("teacher_forcing", en_hi, SOURCE, snapshot=last)
    assert chosen["snapshot"]["step"] == last and chosen["teacher_forced"]["accuracy"] == curve[-1]["teacher_forced"]


def test_a_typed_target_is_the_reference_with_the_end_token(en_hi):
    r = run_experiment("teacher_forcing", en_hi, SOURCE, "लड़की सेब खाती है")
    assert r["reference"]["text"] == "लड़की सेब खाती है"
    assert r["reference"]["tokens"] == [*"लड़की सेब खाती है".split(), en_hi.tgt_tokenizer.token_strings(
        [en_hi.config.eos_id])[0]]  # fmt: skip


def test_without_snapshots_the_model_itself_is_decoded(en_hi):
    plain = family_bundle(en_hi, {})
    r = run_experiment("teacher_forcing", plain, SOURCE, "लड़की सेब खाती है")
    assert r["snapshot"] == {"spec": plain.name, "step": None} and r["snapshots"] == []
    assert r["notes"] == [f"{plain.name} has no training snapshots, so the loaded model itself is decoded both ways."]
    assert r["summary"].startswith(f"At {plain.name}, ")


# --- the text the experiments read ---------------------------------------------------------------------------


def test_the_text_is_read_as_the_window_reads_it_on_the_models_device(en_hi):
    from scratchformer.experiments.inputs import read_text
    from tests.scratchformer.test_rerun_device_moves import Moves

    with Moves() as moves:
        text = read_text(en_hi, SOURCE, "सेब लड़की है")
    assert moves.targets and all(t is not None and torch.device(t) == en_hi.device for t in moves.targets)
    inputs = en_hi.prepare_run(SOURCE, "सेब लड़की है")
    assert torch.equal(text.src, inputs.src) and torch.equal(text.tgt, inputs.tgt) and text.decoder_input == "typed"
    assert text.source_tokens == inputs.source_tokens[0] and text.target_tokens == inputs.target_tokens[0]
    gpt = read_text(family_bundle(en_hi, FAMILIES["gpt2_like"]), "सेब लड़की है")  # no encoder: no source ids
    assert gpt.src is None and gpt.target_tokens[1:] == ["सेब", "लड़की", "है"]


def test_an_input_of_one_token_is_refused_in_one_sentence():
    from scratchformer.experiments.inputs import need_two_tokens

    need_two_tokens(["<s>", "a"], "mask experiment's decoder input")  # two are enough
    with pytest.raises(UserError) as refused:
        need_two_tokens(["<s>"], "mask experiment's decoder input")
    assert str(refused.value) == ("The mask experiment's decoder input needs at least two tokens; this input has 1. "
                                  "Type a longer sentence (or a target).")  # fmt: skip


def test_an_experiment_that_does_not_apply_says_why_in_these_words(en_hi):
    from scratchformer.experiments import NotApplicable

    cases = [
        ("bert_like", "mask", "The mask experiment needs a decoder, and {} has none: its encoder lets every token see "
                              "every other, so there is no causal mask to remove."),
        ("bert_like", "teacher_forcing", "The teacher-forcing experiment needs a decoder, and {} has none: an "
                                         "encoder-only model does not generate text."),
        ("bert_like", "temperature", "The temperature experiment needs an output softmax over next tokens, and {} has "
                                     "no decoder to produce one."),
        ("gpt2_like", "order", "The order experiment shuffles an encoder's source, and {} has no encoder (its "
                               "decoder's causal mask already tells positions apart)."),
        ("t5_like", "order", "{} has no positional encoding to remove: positions enter each attention as a relative "
                             "position bias instead (T5), so the order experiment does not apply."),
    ]  # fmt: skip
    for family, name, sentence in cases:
        bundle = family_bundle(en_hi, FAMILIES[family])
        with pytest.raises(NotApplicable) as why:
            run_experiment(name, bundle, SOURCE)
        assert str(why.value) == sentence.format(bundle.name), (family, name)


# --- the registry ---------------------------------------------------------------------------------------------


def test_controls_are_checked_merged_with_defaults_and_reported(en_hi):
    with pytest.raises(UserError, match="The mask experiment has no control 'd_k'; its controls are masked, seed."):
        run_experiment("mask", en_hi, SOURCE, d_k=8)
    r = run_experiment("mask", en_hi, SOURCE, seed=None)  # None keeps the default
    assert r["controls"] == {"masked": True, "seed": 0} and r["experiment"] == "mask" and r["model"] == "en-hi"
    assert r["source"] == SOURCE and r["target"] == "" and r["claim"].startswith("With the causal mask")


def test_the_scaling_experiment_takes_every_d_k_from_1_to_its_largest_and_refuses_the_rest(en_hi):
    from scratchformer.experiments.scaling import MAX_DK

    for d_k in (1, MAX_DK):
        assert run_experiment("scaling", en_hi, SOURCE, d_k=d_k)["controls"]["d_k"] == d_k
    for d_k in (0, MAX_DK + 1):
        with pytest.raises(UserError) as refused:
            run_experiment("scaling", en_hi, SOURCE, d_k=d_k)
        assert str(refused.value) == f"d_k must be between 1 and {MAX_DK}, not {d_k}."
