"""Diff two models step by step: a model against itself, against an early snapshot of its training, and against
a copy of itself with one weight changed; two tokenizers that read the input differently; the side-by-side maps
and the diagram's shading; the command line's JSON and its refusals."""

from __future__ import annotations

import copy
import json
import math

import numpy as np
import pytest
import torch

from scratchformer.analyses import diff
from scratchformer.analyses.stream import residual_points
from scratchformer.cli import main
from scratchformer.errors import UserError
from scratchformer.loading.bundle import load_model
from scratchformer.loading.checkpoint import save_checkpoint
from scratchformer.loading.model_bundle import ModelBundle
from scratchformer.plotdata.diff import block_differences, block_shades, diff_bars, diff_step_maps
from tests.scratchformer.test_derive import FAMILIES, family_bundle

SOURCE = "the girl eats an apple"
CHANGED = "decoder.1.cross_attn.out_proj.weight"  # W^O of the second decoder layer's cross-attention


@pytest.fixture(scope="module")
def en_hi():
    return load_model("en-hi")


@pytest.fixture(scope="module")
def one_weight_changed(en_hi, tmp_path_factory):
    """A small model saved as a checkpoint, and a copy saved with one entry of one W^O changed, both loaded back."""
    root = tmp_path_factory.mktemp("diff")
    small = family_bundle(en_hi, {})
    save_checkpoint(root / "a", small.model, small.src_tokenizer, small.tgt_tokenizer)
    changed = copy.deepcopy(small.model)
    with torch.no_grad():
        changed.state_dict()[CHANGED][3, 5] += 0.5
    save_checkpoint(root / "b", changed, small.src_tokenizer, small.tgt_tokenizer)
    return load_model(str(root / "a")), load_model(str(root / "b"))


def test_a_model_against_itself_is_zero_everywhere(en_hi):
    d = diff.compute(en_hi, en_hi, SOURCE)
    assert d.first_difference is None
    assert len(d.steps) == len(d.trace_a) and not d.only_in_a and not d.only_in_b
    assert all(s.max_abs_diff == 0 and s.relative_diff == 0 for s in d.steps)
    assert d.parameters == [] and d.equal_parameters == len(en_hi.model.state_dict())
    assert set(block_shades(d).values()) == {0.0}


def test_an_early_snapshot_differs_from_the_embeddings_on(en_hi):
    early = load_model("en-hi@step-000032")
    d = diff.compute(en_hi, early, SOURCE)
    by_name = {s.step: s for s in d.steps}
    assert by_name["src_embed.tokens"].max_abs_diff == 0  # both read the same ids
    assert d.first_difference == "src_embed.lookup"
    c = en_hi.config
    for stack in ("encoder", "decoder"):  # every point of both residual streams differs well beyond the tolerance
        for name in residual_points(d.trace_a, stack, c.norm_first):
            assert by_name[name].relative_diff > 1e-2, name
    # the numbers are max |a − b| of the two traces' own tensors
    a, b = d.trace_a["decoder.1.add_norm3.out"].tensor, d.trace_b["decoder.1.add_norm3.out"].tensor
    assert by_name["decoder.1.add_norm3.out"].max_abs_diff == pytest.approx(float((a - b).abs().max()), rel=1e-6)
    assert by_name["decoder.1.add_norm3.out"].relative_diff == pytest.approx(
        float((a - b).abs().max() / torch.maximum(a.abs().max(), b.abs().max())), rel=1e-6)
    trained = {n for n, p in en_hi.model.named_parameters()}
    assert trained <= {p.name for p in d.parameters}  # every trained weight moved after step 32
    # both read the final model's own translation behind the start token
    assert d.trace_a.target_tokens == d.trace_b.target_tokens
    assert any("read en-hi's own output" in n for n in d.notes)


def test_one_changed_weight_differs_first_at_its_step(one_weight_changed):
    a, b = one_weight_changed
    d = diff.compute(a, b, SOURCE, target="लड़की सेब खाती है")
    assert d.first_difference == "decoder.1.cross_attn.out"  # the step W^O computes
    names = [s.step for s in d.steps]
    before = names[: names.index("decoder.1.cross_attn.out")]
    assert all(d.step(n).max_abs_diff == 0 for n in before)
    assert [p.name for p in d.parameters] == [CHANGED]
    assert d.parameters[0].max_abs_diff == pytest.approx(0.5, rel=1e-6)
    assert d.step("generator.probs").max_abs_diff > 0  # and it carries on to the output
    blocks = block_differences(d)
    assert blocks["decoder.1.cross_attn"] > d.tolerance and blocks["decoder.0.cross_attn"] == 0
    assert block_shades(d)["encoder.1.ffn"] == 0 and block_shades(d)["decoder.1.cross_attn"] > 0
    bars = diff_bars(d)
    assert bars.steps[bars.first_difference] == "decoder.1.cross_attn.out"


def test_the_side_by_side_maps_are_the_two_runs_and_their_difference(one_weight_changed):
    a, b = one_weight_changed
    d = diff.compute(a, b, SOURCE, target="लड़की सेब खाती है")
    maps = diff_step_maps(d, "decoder.1.cross_attn.weights", head=2)
    wa = d.trace_a["decoder.1.cross_attn.weights"].item(0)[2].numpy()  # (T, S)
    wb = d.trace_b["decoder.1.cross_attn.weights"].item(0)[2].numpy()
    np.testing.assert_array_equal(maps.a.values, wa)
    np.testing.assert_array_equal(maps.b.values, wb)
    np.testing.assert_allclose(maps.difference.values, wa - wb, atol=1e-7)
    assert maps.a.levels == maps.b.levels and maps.difference.levels[0] == -maps.difference.levels[1]
    assert maps.a.row_labels == d.trace_a.target_tokens[0] and maps.a.col_labels == d.trace_a.source_tokens[0]
    assert maps.largest == pytest.approx(float(np.abs(wa - wb).max()), rel=1e-6)
    logits = diff_step_maps(d, "generator.logits")  # a vocabulary axis: the same chosen columns in all three
    assert logits.a.values.shape == logits.b.values.shape == logits.difference.values.shape
    with pytest.raises(UserError, match="Only steps both models compute"):
        diff_step_maps(d, "decoder.7.ffn.out")


class _Swapped:
    """en-hi's tokenizer with the ids of two words exchanged: the same tokens, other ids for those two."""

    def __init__(self, tok, first: str, second: str):
        self._tok = tok
        i, j = tok.token_id(first), tok.token_id(second)
        self._swap = {i: j, j: i}

    def __getattr__(self, name):
        return getattr(self._tok, name)

    def encode(self, text):
        return [self._swap.get(i, i) for i in self._tok.encode(text)]

    def token_strings(self, ids):
        return self._tok.token_strings([self._swap.get(int(i), int(i)) for i in ids])


def test_two_tokenizers_are_compared_where_the_ids_agree(en_hi):
    small = family_bundle(en_hi, {})
    other = ModelBundle(small.model, _Swapped(small.src_tokenizer, "girl", "boy"), small.tgt_tokenizer, "swapped",
                        "preset")  # fmt: skip
    d = diff.compute(small, other, SOURCE, target="लड़की सेब खाती है")
    ids_a = small.encode_source(SOURCE)
    ids_b = other.encode_source(SOURCE)
    agree = [i for i in range(len(ids_a)) if ids_a[i] == ids_b[i]]
    assert d.positions == {"src_pos": agree, "tgt_pos": list(range(len(d.trace_a.target_tokens[0])))}
    assert len(agree) == len(ids_a) - 1
    assert sum("tokenize this input differently" in n for n in d.notes) == 1
    # the same weights read the same ids at the compared positions: equal until attention mixes in the other word
    assert d.step("src_embed.lookup").max_abs_diff == 0 and d.step("encoder.0.self_attn.scores").max_abs_diff == 0
    assert d.first_difference == "encoder.0.self_attn.weights"
    assert d.step("encoder.0.self_attn.weights").shape_a == d.step("encoder.0.self_attn.weights").shape_b
    maps = diff_step_maps(d, "encoder.0.self_attn.weights")
    assert maps.a.values.shape == (len(agree), len(agree)) and "girl" not in maps.a.row_labels


def test_models_without_a_step_in_common_are_refused_in_one_sentence(en_hi):
    encoder = family_bundle(en_hi, FAMILIES["bert_like"])
    decoder = family_bundle(en_hi, FAMILIES["gpt2_like"])
    with pytest.raises(UserError, match="have no step in common.*such as a model and one of its snapshots"):
        diff.compute(encoder, decoder, SOURCE)


def test_masked_cells_in_both_runs_count_as_equal():
    a = torch.tensor([[0.0, -math.inf], [1.0, 2.0]])
    b = torch.tensor([[0.0, -math.inf], [1.0, 2.5]])
    c = torch.tensor([[0.0, 3.0], [1.0, 2.0]])
    (d_ab, m_ab), (d_ac, _) = diff.largest_differences([(a, b), (a, c)])
    assert (d_ab, m_ab) == (0.5, 2.5)
    assert d_ac == math.inf  # finite in one model only


def test_the_command_line_prints_json_of_the_designed_shape(capsys, en_hi):
    assert main(["diff", "--model", "en-hi", "--against", "en-hi@step-000064", "--source", SOURCE, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert {"steps", "first_difference", "tolerance", "parameters"} <= set(out)
    assert out["tolerance"] == diff.TOLERANCE and out["first_difference"] == "src_embed.lookup"
    step = out["steps"][1]
    assert set(step) == {"step", "max_abs_diff", "relative_diff", "shape_a", "shape_b"}
    assert step["shape_a"] == step["shape_b"] and isinstance(step["max_abs_diff"], float)
    assert all({"name", "max_abs_diff"} <= set(p) for p in out["parameters"])
    assert main(["diff", "--model", "en-hi", "--against", "en-hi", "--source", SOURCE]) == 0
    text = capsys.readouterr().out
    assert "first difference: none" in text and "parameters: all" in text


def test_the_command_line_refuses_in_one_sentence(capsys):
    def refused(*argv) -> str:
        assert main(["diff", *argv]) == 2
        err = capsys.readouterr().err.strip()
        assert err.startswith("scratchformer: ") and "\n" not in err
        return err

    assert "no snapshot at step 99; its snapshots are at steps 32, 64, 128 and 256" in refused(
        "--model", "en-hi", "--against", "en-hi@step-000099", "--source", SOURCE)
    assert "The tolerance must be a number of at least 0" in refused(
        "--model", "en-hi", "--against", "en-hi", "--source", SOURCE, "--tolerance", "-1")
    assert "Give a sentence with --source" in refused("--model", "en-hi", "--against", "en-hi")


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_every_family_against_itself_and_a_nudged_copy(name, en_hi):
    """Each family's small model: 0 against itself; a copy with every weight nudged by 0.01 differs from its
    embeddings on, at every point of its residual stream."""
    a = family_bundle(en_hi, FAMILIES[name])
    assert diff.compute(a, a, SOURCE).first_difference is None
    nudged = copy.deepcopy(a.model)
    with torch.no_grad():
        for p in nudged.parameters():
            p.add_(0.01)
    b = ModelBundle(nudged, a.src_tokenizer, a.tgt_tokenizer, "nudged", "preset")
    d = diff.compute(a, b, SOURCE)
    first = d.first_difference
    assert first is not None and first.split(".")[0] in ("src_embed", "tgt_embed")
    c = a.config
    for stack in [s for s, has in (("encoder", c.has_encoder), ("decoder", c.has_decoder)) if has]:
        for point in residual_points(d.trace_a, stack, c.norm_first):
            assert d.step(point).differs(d.tolerance), point


def test_the_csv_holds_every_step_and_parameter(one_weight_changed):
    import csv
    import io

    from scratchformer.plotdata.diff import diff_csv

    a, b = one_weight_changed
    d = diff.compute(a, b, SOURCE, target="लड़की सेब खाती है")
    rows = list(csv.DictReader(io.StringIO(diff_csv(d))))
    steps = [r for r in rows if r["kind"] == "step"]
    assert [r["name"] for r in steps] == [s.step for s in d.steps]
    first = next(r for r in steps if r["differs"] == "1")
    assert first["name"] == d.first_difference
    assert float(first["max_abs_diff"]) == pytest.approx(d.step(first["name"]).max_abs_diff, rel=1e-5)
    assert [r["name"] for r in rows if r["kind"] == "parameter"] == [CHANGED]


TARGET = "लड़की सेब खाती है"


@pytest.fixture(scope="module")
def tiny_change(en_hi, tmp_path_factory):
    """(a small model's checkpoint folder, a copy's folder with one entry of one W^O changed by 2e-4 of itself):
    a change far below the default tolerance at the step it makes, yet not zero."""
    root = tmp_path_factory.mktemp("diff-tiny")
    small = family_bundle(en_hi, {}, seed=2)
    save_checkpoint(root / "a", small.model, small.src_tokenizer, small.tgt_tokenizer)
    changed = copy.deepcopy(small.model)
    with torch.no_grad():
        changed.state_dict()[CHANGED][3, 5] *= 1 + 2e-4
    save_checkpoint(root / "b", changed, small.src_tokenizer, small.tgt_tokenizer)
    return str(root / "a"), str(root / "b")


def test_at_tolerance_zero_identical_steps_do_not_differ_and_any_change_does(tiny_change):
    """Tolerance 0 means "bit for bit": a model against a second opening of itself has no first difference (equal
    steps are not "more than 0" apart), while a one-weight change far below the default tolerance is found at the
    step that weight computes — and only at tolerance 0."""
    path_a, path_b = tiny_change
    a, a_again, b = load_model(path_a), load_model(path_a), load_model(path_b)
    same = diff.compute(a, a_again, SOURCE, target=TARGET, tolerance=0)
    assert all(s.max_abs_diff == 0 and s.relative_diff == 0 for s in same.steps)
    assert same.tolerance == 0 and same.first_difference is None
    assert not any(s.differs(0) for s in same.steps) and same.parameters == []

    tiny = diff.compute(a, b, SOURCE, target=TARGET, tolerance=0)
    step = tiny.step("decoder.1.cross_attn.out")
    assert 0 < step.relative_diff < diff.TOLERANCE  # the default would let it pass …
    assert diff.compute(a, b, SOURCE, target=TARGET).first_difference is None
    assert tiny.first_difference == "decoder.1.cross_attn.out"  # … tolerance 0 does not
    names = [s.step for s in tiny.steps]
    assert all(tiny.step(n).max_abs_diff == 0 for n in names[: names.index(step.step)])
    assert [p.name for p in tiny.parameters] == [CHANGED]
    # a tolerance just below the step's own relative difference still finds it; one at it does not
    assert diff.compute(a, b, SOURCE, target=TARGET, tolerance=step.relative_diff * 0.999).first_difference == step.step
    at = diff.compute(a, b, SOURCE, target=TARGET, tolerance=step.relative_diff).first_difference
    assert at != step.step


def test_the_command_line_and_the_python_api_diff_at_tolerance_zero(tiny_change, capsys):
    import scratchformer as sf

    path_a, path_b = tiny_change
    common = ["--model", path_a, "--source", SOURCE, "--target", TARGET, "--tolerance", "0"]
    assert main(["diff", *common, "--against", path_a, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["tolerance"] == 0 and out["first_difference"] is None
    assert all(s["relative_diff"] == 0 for s in out["steps"])
    assert main(["diff", *common, "--against", path_b, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["first_difference"] == "decoder.1.cross_attn.out"
    assert main(["diff", *common, "--against", path_a]) == 0
    assert "first difference: none" in capsys.readouterr().out

    run = sf.run(path_a, SOURCE, TARGET)
    assert run.diff(run, tolerance=0)["first_difference"] is None
    assert run.diff(path_a, tolerance=0)["first_difference"] is None  # opened a second time
    found = run.diff(path_b, tolerance=0)
    assert found["tolerance"] == 0 and found["first_difference"] == "decoder.1.cross_attn.out"
    assert run.diff(path_b)["first_difference"] is None  # below the default tolerance
