"""What the teacher-forcing experiment decodes: its reference and forced start for each kind of model (decoder-only,
a target prefix, a long source, a training snapshot), the snapshots it keeps loaded, and a run with no mistake.
Each expectation is built here from the tokenizers, the config and the fully trained model's own translation."""

from __future__ import annotations

from collections import OrderedDict
from types import SimpleNamespace

import pytest
import torch

from scratchformer.errors import UserError
from scratchformer.experiments import run_experiment, snapshots, teacher_forcing
from scratchformer.experiments.teacher_forcing import reference_ids
from scratchformer.loading.bundle import load_model, snapshots_of
from scratchformer.loading.model_bundle import ModelBundle
from tests.scratchformer.test_derive import FAMILIES, family_bundle
from tests.scratchformer.test_rerun_device_moves import Moves

SOURCE = "the girl eats an apple"
HINDI = "लड़की सेब खाती है"  # four words of en-hi's target vocabulary


@pytest.fixture(scope="module")
def en_hi():
    return load_model("en-hi")


def _without_snapshots(en_hi) -> ModelBundle:
    """en-hi's trained weights under another name, with no snapshots: the experiment decodes the model itself."""
    return ModelBundle(en_hi.model, en_hi.src_tokenizer, en_hi.tgt_tokenizer, "en-hi copy", "preset")


def _watch_loads(monkeypatch) -> list[tuple[str, object]]:
    """(spec, device) of every model the experiment loads, in order."""
    loads, real = [], teacher_forcing.load

    def load(spec, device):
        loads.append((spec, device))
        return real(spec, device)

    monkeypatch.setattr(teacher_forcing, "load", load)
    return loads


def test_a_decoder_only_model_predicts_its_own_text_after_the_start_token(en_hi):
    gpt = family_bundle(en_hi, {**FAMILIES["gpt2_like"], "max_len": 4})
    tok = gpt.tgt_tokenizer
    src, forced, ref = reference_ids(gpt, f"  {HINDI}  ", None)
    assert src == [] and forced == [gpt.start_id()]
    assert ref == tok.encode(HINDI)[:3]  # no end token; at most max_len − 1 tokens after the start token
    two = " ".join(HINDI.split()[:2])
    assert reference_ids(gpt, two, None)[2] == tok.encode(two)  # two tokens are enough
    with pytest.raises(UserError) as refused:
        reference_ids(gpt, HINDI.split()[0], None)
    assert str(refused.value) == "The teacher-forcing experiment needs a text of at least two tokens."


def test_a_target_prefix_follows_the_start_token_and_the_reference_makes_room_for_it(en_hi):
    tok = en_hi.tgt_tokenizer
    prefix_word = HINDI.split()[1]
    extra = {**en_hi.config.extra, "tgt_prefix": [prefix_word, "<no such token>"]}  # an unknown one is left out
    model = family_bundle(en_hi, {"max_len": 6, "extra": extra})
    target = " ".join([HINDI] * 3)  # 12 words
    src, forced, ref = reference_ids(model, " ".join([SOURCE] * 4), target)
    assert forced == [model.start_id(), tok.token_id(prefix_word)]
    # start + prefix + reference fill max_len: 6 − 1 start − 1 prefix − 1 end = 3 words, then the end token
    assert ref == tok.encode(target)[:3] + [model.config.eos_id]
    # a source longer than max_len is cut to fit, not refused
    assert src == model.encode_source(" ".join([SOURCE] * 4), truncate=True) and len(src) == 6


def test_a_snapshots_reference_is_the_trained_models_translation_on_its_device(en_hi, monkeypatch):
    loads = _watch_loads(monkeypatch)
    early = load_model(snapshots_of("en-hi")[0].spec)
    final_words = en_hi.prepare_run(SOURCE).generated
    assert early.prepare_run(SOURCE).generated != final_words  # the early snapshot translates it wrong
    _, forced, ref = reference_ids(early, SOURCE, None)
    assert ref == final_words + [en_hi.config.eos_id] and forced == [early.start_id()]
    assert loads == [("en-hi", early.device)]
    loads.clear()
    assert reference_ids(en_hi, SOURCE, None)[2] == ref  # the trained model is its own reference: nothing loaded
    assert loads == []


def test_a_model_that_makes_no_mistake_has_no_first_mistake(en_hi):
    alone = _without_snapshots(en_hi)
    r = run_experiment("teacher_forcing", alone, SOURCE)  # its own translation, which it gets right both ways
    n = len(r["reference"]["tokens"])
    assert r["teacher_forced"]["first_error"] is None and r["free_running"]["first_error"] is None
    assert r["after_first_free_error"] == {"positions": 0, "teacher_forced": None, "free_running": None}
    assert r["summary"] == (f"At en-hi copy, 100% of the {n} reference tokens are right with teacher forcing and "
                            "100% free-running.")  # fmt: skip


def test_a_typed_target_is_the_reference_even_when_the_model_would_say_otherwise(en_hi):
    target = "सेब लड़की है"  # not en-hi's translation of the source
    r = run_experiment("teacher_forcing", en_hi, SOURCE, target)
    assert r["reference"]["text"] == target and r["reference"]["tokens"][:3] == target.split()


def test_free_running_stops_at_the_end_token_and_the_rest_is_blank(en_hi):
    alone = _without_snapshots(en_hi)
    said = en_hi.tgt_tokenizer.token_strings(en_hi.prepare_run(SOURCE).generated)  # what it translates
    end = en_hi.tgt_tokenizer.token_strings([en_hi.config.eos_id])[0]
    r = run_experiment("teacher_forcing", alone, SOURCE, " ".join(said + ["सेब", "सेब"]))  # two words too many
    assert r["free_running"]["predicted"] == [*said, end, "—", "—"]  # it ended; nothing is decoded after the end
    assert r["free_running"]["correct"] == [True] * len(said) + [False] * 3
    assert r["free_running"]["first_error"] == len(said)
    assert r["free_running"]["text"] == en_hi.tgt_tokenizer.decode(en_hi.prepare_run(SOURCE).generated)  # no end


def test_a_loaded_snapshot_is_the_one_decoded_and_the_final_point_is_the_trained_model(en_hi, monkeypatch):
    snap = snapshots_of("en-hi")[1]
    loads = _watch_loads(monkeypatch)
    bundle = load_model(snap.spec)
    r = run_experiment("teacher_forcing", bundle, SOURCE)
    assert r["snapshot"] == {"spec": snap.spec, "step": snap.step}
    assert r["free_running"]["accuracy"] < 1  # this snapshot still errs, while the trained model ...
    assert r["snapshots"][-1] == {"step": "final", "teacher_forced": 1.0, "free_running": 1.0}  # ... does not
    assert ("en-hi", bundle.device) in loads and all(device == bundle.device for _, device in loads)


@pytest.mark.parametrize("curve, chosen", [
    ([(0.4, 0.2), (0.5, 0.5), (0.5, 0.3), (1.0, 1.0)], 2),  # half right and better teacher-forced: the third
    ([(0.4, 0.2), (0.6, 0.6), (1.0, 1.0), (1.0, 1.0)], 1),  # half right, never better: the first half right
    ([(0.1, 0.0), (0.3, 0.1), (0.4, 0.2), (0.45, 0.2)], 3),  # never half right: the last
])  # fmt: skip
def test_the_snapshot_shown_by_default_follows_the_documented_rule(en_hi, monkeypatch, curve, chosen):
    """The earliest snapshot with at least half of the reference right teacher-forced and fewer right
    free-running; else the earliest with half right; else the last (run's docstring), on curves made up here."""
    snaps = snapshots_of("en-hi")[: len(curve)]
    made_up = {s.spec: pair for s, pair in zip(snaps, curve)}
    monkeypatch.setattr(teacher_forcing, "snapshots_for", lambda bundle: snaps)
    monkeypatch.setattr(teacher_forcing, "load", lambda spec, device: SimpleNamespace(name=spec))

    def decoded(bundle, src, forced, ref):
        tf, fr = made_up.get(bundle.name, (1.0, 1.0))
        return {"teacher": list(ref), "free": list(ref), "teacher_forced": tf, "free_running": fr}

    monkeypatch.setattr(teacher_forcing, "_decoded", decoded)
    r = run_experiment("teacher_forcing", en_hi, SOURCE)
    assert r["snapshot"] == {"spec": snaps[chosen].spec, "step": snaps[chosen].step}
    assert [(c["teacher_forced"], c["free_running"]) for c in r["snapshots"]] == [*curve, (1.0, 1.0)]


def test_a_snapshot_step_that_does_not_exist_is_refused_with_the_steps_there_are(en_hi):
    steps = ", ".join(str(s.step) for s in snapshots_of("en-hi"))
    with pytest.raises(UserError) as refused:
        run_experiment("teacher_forcing", en_hi, SOURCE, snapshot=5)
    assert str(refused.value) == f"en-hi has no training snapshot at step 5; its snapshots are at steps {steps}."
    alone = _without_snapshots(en_hi)
    with pytest.raises(UserError) as refused:
        run_experiment("teacher_forcing", alone, SOURCE, snapshot=5)
    assert str(refused.value) == "en-hi copy has no training snapshot at step 5; it has none."


def test_every_id_tensor_and_every_snapshot_is_made_on_the_models_device(en_hi, monkeypatch):
    """A model on a GPU needs its ids there too; this machine has no GPU, so the calls are watched instead."""
    loads = _watch_loads(monkeypatch)
    moves, decode_both = Moves(), teacher_forcing.decode_both

    def watched(*args):  # the decoding itself (the reference's own translation moves its CPU ids with .to)
        with moves:
            return decode_both(*args)

    monkeypatch.setattr(teacher_forcing, "decode_both", watched)
    run_experiment("teacher_forcing", en_hi, SOURCE)
    devices = [d for d, _ in moves.made]
    assert devices and all(d is not None and torch.device(d) == en_hi.device for d in devices), devices
    assert len(loads) == len(snapshots_of("en-hi")) and all(d == en_hi.device for _, d in loads)


def test_the_end_token_is_the_configs_before_the_tokenizers(en_hi):
    tok = en_hi.tgt_tokenizer
    other = next(i for i in range(4, 100) if i != tok.eos_id)
    for config_end, end in ((other, other), (None, tok.eos_id)):
        model = family_bundle(en_hi, {"eos_id": config_end})
        assert model.end_id() == end
        assert reference_ids(model, SOURCE, HINDI)[2] == tok.encode(HINDI) + [end]


# --- the snapshots it keeps -----------------------------------------------------------------------------------


def test_loaded_snapshots_are_kept_per_device_and_the_least_recently_used_leaves_first(monkeypatch):
    made = []

    def load_model(spec, device):
        made.append((spec, device))
        return SimpleNamespace(spec=spec, device=device)

    monkeypatch.setattr(snapshots, "_loaded", OrderedDict())
    monkeypatch.setattr(snapshots, "load_model", load_model)
    first = snapshots.load("m@step-1", "cpu")
    assert first.device == "cpu" and made == [("m@step-1", "cpu")]
    assert snapshots.load("m@step-1", "cpu") is first and len(made) == 1  # kept
    assert snapshots.load("m@step-1", "meta") is not first and made[-1] == ("m@step-1", "meta")  # per device
    for step in range(2, snapshots.KEEP):  # (1, cpu), (1, meta) and steps 2 … KEEP − 1: KEEP, full
        snapshots.load(f"m@step-{step}", "cpu")
    assert len(snapshots._loaded) == snapshots.KEEP
    snapshots.load("m@step-1", "cpu")  # used again: now the most recent
    made.clear()
    snapshots.load("m@step-new", "cpu")  # one too many: the least recently used, (1, meta), leaves
    assert len(snapshots._loaded) == snapshots.KEEP
    assert snapshots.load("m@step-1", "cpu") is first and made == [("m@step-new", "cpu")]
    snapshots.load("m@step-1", "meta")
    assert made[-1] == ("m@step-1", "meta")  # it had left, so it is loaded again


def test_which_models_are_snapshots_and_whose(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "preset").mkdir()  # a folder named like the tag does not make a preset a trained model
    folder = tmp_path / "my-run"
    folder.mkdir()
    (tmp_path / "model.safetensors").write_bytes(b"")
    cases = [
        (SimpleNamespace(name="en-hi@step-000032", origin="bundled"), True, "en-hi"),
        (SimpleNamespace(name="en-hi", origin="bundled"), False, "en-hi"),
        (SimpleNamespace(name="tiny", origin="preset"), False, None),
        (SimpleNamespace(name="my-run", origin=str(folder)), False, str(folder)),
        (SimpleNamespace(name="model", origin=str(tmp_path / "model.safetensors")), False, None),  # not a folder
        (SimpleNamespace(name="bert", origin="hf:bert-base-uncased"), False, None),
    ]
    for bundle, is_snapshot, spec in cases:
        assert snapshots.is_snapshot(bundle) is is_snapshot, bundle.name
        assert snapshots.trained_spec(bundle) == spec, bundle.name
    assert snapshots.snapshots_for(cases[2][0]) == []
    assert [s.spec for s in snapshots.snapshots_for(cases[0][0])] == [s.spec for s in snapshots_of("en-hi")]



def test_after_the_first_free_running_mistake_each_way_counts_its_own_right_tokens(en_hi, monkeypatch):
    """Made-up decodings: free-running errs at position 1 and is right again at 2 and 3; teacher-forced errs at 3."""
    alone = _without_snapshots(en_hi)
    target = "सेब लड़की खाती है"  # with the end token: 5 reference tokens

    def decode_both(bundle, src, forced, ref):
        wrong = next(t for t in range(10, 20) if t not in ref)
        return ([*ref[:3], wrong, ref[4]], [ref[0], wrong, *ref[2:]])

    monkeypatch.setattr(teacher_forcing, "decode_both", decode_both)
    r = run_experiment("teacher_forcing", alone, SOURCE, target)
    assert r["free_running"]["first_error"] == 1 and r["teacher_forced"]["first_error"] == 3
    assert r["after_first_free_error"] == {"positions": 3, "teacher_forced": 2 / 3, "free_running": 1.0}
