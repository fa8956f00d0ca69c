"""Interventions (issue 14): ablating heads, knocking out keys and patching steps change exactly what they say,
everywhere the model runs (traced, untraced, generating with the KV cache), and nothing at all when none is on."""

import json

import pytest
import torch

import scratchformer.patching.interventions as interventions_module
import scratchformer.transformer.attention as attention_module
from scratchformer.cli import main
from scratchformer.errors import UserError
from scratchformer.loading.bundle import load_model
from scratchformer.patching.head_importance import head_importance
from scratchformer.patching.interventions import HeadChange, KeyKnockout, Patch, intervene, parse_spec, patchable_steps
from scratchformer.running.decoding import beam_search, greedy

CLEAN, CORRUPTED = "the girl eats an apple", "the boy eats an apple"  # the same number of tokens
TARGET = "लड़की सेब खाती है"
GUIDED = "decoder.1.cross_attn"  # en-hi's guided-alignment head is head 0 of this attention


@pytest.fixture(scope="module")
def bundle():
    return load_model("en-hi")


def logits(bundle, inputs):
    with torch.inference_mode():
        return bundle.model(inputs.src, inputs.tgt)  # (1, T, vocab)


def test_no_interventions_is_bit_identical_and_keeps_the_fused_kernel(bundle, monkeypatch):
    inputs = bundle.prepare(CLEAN, TARGET)
    before = logits(bundle, inputs)
    calls, written = [], []
    fused, by_hand = attention_module.fast_attention, interventions_module.attention
    monkeypatch.setattr(attention_module, "fast_attention", lambda *a, **k: calls.append(1) or fused(*a, **k))
    monkeypatch.setattr(interventions_module, "attention", lambda *a, **k: written.append(1) or by_hand(*a, **k))
    with intervene(bundle.model, []) as active:
        assert active is None
        after = logits(bundle, inputs)
    assert torch.equal(before, after)
    assert len(calls) == 6 and not written  # every attention (2 encoder, 2 × 2 decoder) took the fast path
    calls.clear()
    with intervene(bundle.model, [HeadChange(GUIDED, 0)]):
        logits(bundle, inputs)
    assert len(written) == 1  # only the changed attention writes out its maps (its context: the fused kernel's)
    calls.clear()
    written.clear()
    assert torch.equal(logits(bundle, inputs), before)  # and leaving the block undoes everything
    assert len(calls) == 6 and not written


def test_zeroing_a_head_zeroes_its_context_and_changes_the_output(bundle):
    inputs = bundle.prepare(CLEAN, TARGET)
    clean_out, clean = bundle.run(inputs)
    with intervene(bundle.model, [parse_spec(f"{GUIDED}.head0", bundle.model)]):
        out, trace = bundle.run(inputs)
    context = trace[f"{GUIDED}.context"]
    assert torch.equal(context.tensor[:, 0], torch.zeros_like(context.tensor[:, 0]))
    assert torch.equal(context.tensor[:, 1:], clean[f"{GUIDED}.context"].tensor[:, 1:])
    assert not torch.equal(out, clean_out)
    assert context.title == "Weighted sum of values (head 1 zeroed)"
    assert [(s.name, s.kind) for s in trace] == [(s.name, s.kind) for s in clean]  # names and kinds unchanged
    assert [i.spec() for i in trace.interventions] == [f"{GUIDED}.head0:zero"]
    assert clean.interventions == []


def test_ablating_every_head_leaves_only_the_residual(bundle):
    """W^O · 0 + b = b: the attention sublayer adds nothing but its output bias to the residual stream."""
    model = bundle.model
    inputs = bundle.prepare(CLEAN, TARGET)
    every = [HeadChange("encoder.0.self_attn", h) for h in range(model.config.n_heads)]
    with intervene(model, every):
        _, trace = bundle.run(inputs)
    attn = model.encoder[0].self_attn
    out = trace["encoder.0.self_attn.out"].tensor  # (1, S, d_model)
    assert torch.equal(out, attn.out_proj.bias.detach().expand_as(out))
    x = trace["src_embed.sum"].tensor
    with torch.inference_mode():
        expected = model.encoder[0].add_norm1.norm(x + attn.out_proj.bias)
    assert torch.equal(trace["encoder.0.add_norm1.out"].tensor, expected)
    # keeping one head is zeroing all the others
    with intervene(model, [HeadChange("encoder.0.self_attn", 2, "keep")]):
        kept = logits(bundle, inputs)
    with intervene(model, [HeadChange("encoder.0.self_attn", h) for h in (0, 1, 3)]):
        assert torch.equal(kept, logits(bundle, inputs))


def test_patching_every_step_from_the_clean_run_gives_the_clean_output(bundle):
    clean_inputs, corrupted_inputs = bundle.prepare(CLEAN, TARGET), bundle.prepare(CORRUPTED, TARGET)
    clean_out, clean = bundle.run(clean_inputs)
    corrupted_out, _ = bundle.run(corrupted_inputs)
    assert not torch.equal(clean_out, corrupted_out)
    patches = [Patch(name, clean[name].tensor, "the clean run") for name in patchable_steps(bundle.model)]
    with intervene(bundle.model, patches):
        patched_out, trace = bundle.run(corrupted_inputs)
    assert torch.equal(patched_out, clean_out)
    assert trace["encoder.0.self_attn.weights"].title.endswith("(patched from the clean run)")
    assert torch.equal(trace["decoder.1.add_norm3.out"].tensor, clean["decoder.1.add_norm3.out"].tensor)
    # the encoder output alone carries the whole difference between the two sources
    with intervene(bundle.model, [Patch("encoder.1.add_norm2.out", clean["encoder.1.add_norm2.out"].tensor)]):
        assert torch.equal(bundle.run(corrupted_inputs)[0], clean_out)


def test_patching_refuses_a_sentence_of_another_length(bundle):
    _, clean = bundle.run(bundle.prepare("the girl eats", TARGET))
    with intervene(bundle.model, [Patch("encoder.1.add_norm2.out", clean["encoder.1.add_norm2.out"].tensor)]):
        with pytest.raises(UserError, match="same length"):
            bundle.run(bundle.prepare(CLEAN, TARGET))


def test_interventions_apply_while_generating_with_and_without_the_kv_cache(bundle):
    src = bundle.prepare(CLEAN).src[0].tolist()
    plain = greedy(bundle, src, 20)
    for changes in ([KeyKnockout(GUIDED, (1,))], [HeadChange("decoder.0.self_attn", 1, "mean")],
                    [HeadChange(GUIDED, 0, "mean"), HeadChange("decoder.1.self_attn", 2, "scale", 0.5)]):
        with intervene(bundle.model, changes):
            cached, uncached = greedy(bundle, src, 20), greedy(bundle, src, 20, cache=False)
            assert cached == uncached
            assert beam_search(bundle, src, 20, k=3) == beam_search(bundle, src, 20, k=3, cache=False)
    with intervene(bundle.model, [KeyKnockout(GUIDED, (1,))]):  # no attention to "girl": the girl is gone
        assert greedy(bundle, src, 20) != plain


def test_key_knockout_renormalises_over_the_other_keys(bundle):
    with intervene(bundle.model, [parse_spec("encoder.0.self_attn.keys:1,3", bundle.model)]):
        _, trace = bundle.run(bundle.prepare(CLEAN, TARGET))
    weights = trace["encoder.0.self_attn.weights"].tensor  # (1, h, S, S)
    assert torch.equal(weights[..., [1, 3]], torch.zeros_like(weights[..., [1, 3]]))
    assert torch.allclose(weights.sum(-1), torch.ones(weights.shape[:-1]))
    assert trace["encoder.0.self_attn.mask"].title.endswith("(keys 2, 4 knocked out)")


def test_mean_ablation_replaces_an_encoder_head_by_its_average(bundle):
    with intervene(bundle.model, [HeadChange("encoder.1.self_attn", 3, "mean")]):
        _, trace = bundle.run(bundle.prepare(CLEAN, TARGET))
    head = trace["encoder.1.self_attn.context"].tensor[0, 3]  # (S, d_k): every position the same row
    assert torch.equal(head, head[:1].expand_as(head))


@pytest.mark.parametrize("spec", ["decoder.2.cross_attn.head0", "decoder.1.cross_attn.head4",
                                  "encoder.0.cross_attn.head0", "decoder.1.cross_attn.head0:half",
                                  "decoder.1.cross_attn"])
def test_bad_specs_are_one_sentence_listing_what_is_valid(bundle, spec):
    with pytest.raises(UserError) as error:
        parse_spec(spec, bundle.model)
    message = str(error.value)
    assert "\n" not in message and "ATTENTION.headN[:zero|mean|keep|scale=F]" in message
    assert "N is a head from 0 to 3" in message


def test_head_importance_ranks_the_guided_head_first_for_cross_attention(bundle):
    inputs = bundle.prepare(CLEAN, TARGET)
    seen = []
    result = head_importance(bundle.model, inputs.src, inputs.tgt, progress=lambda done, total: seen.append(total))
    assert len(seen) == 6 * 4 and set(seen) == {24}
    assert result.drops["decoder.cross_attn"].shape == (2, 4)
    assert result.ranking("decoder.cross_attn")[0][:2] == (1, 0)
    assert 0 < result.base <= 1
    assert head_importance(bundle.model, inputs.src, inputs.tgt, cancelled=lambda: True) is None


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_translate_and_trace_take_the_interventions(capsys):
    code, out, err = run(capsys, "translate", "--source", CLEAN, "--ablate", f"{GUIDED}.keys:1")
    assert code == 0, err
    changed, before = out.splitlines()
    assert before == f"without the interventions: {TARGET}" and changed != TARGET
    code, out, err = run(capsys, "translate", "--source", CORRUPTED, "--patch", "encoder.1.add_norm2.out",
                         "--from-source", CLEAN)
    assert code == 0, err
    assert out.splitlines()[0] == TARGET  # the clean sentence's encoder output makes the boy a girl
    code, out, err = run(capsys, "trace", "--source", CLEAN, "--target", TARGET, "--json",
                         "--ablate", f"{GUIDED}.head0:mean", "--ablate", "encoder.0.self_attn.head1:scale=2")
    assert code == 0, err
    data = json.loads(out)
    assert data["interventions"] == [f"{GUIDED}.head0:mean", "encoder.0.self_attn.head1:scale=2"]
    titles = {s["name"]: s["title"] for s in data["steps"]}
    assert titles[f"{GUIDED}.context"].endswith("(head 1 mean-ablated)")
    assert titles["encoder.0.self_attn.context"].endswith("(head 2 scaled ×2)")
    code, out, err = run(capsys, "trace", "--source", CORRUPTED, "--target", TARGET, "--json",
                         "--patch", "decoder.0.add_norm2.out", "--from-source", CLEAN)
    assert code == 0, err
    assert json.loads(out)["interventions"] == [f"patch decoder.0.add_norm2.out from '{CLEAN}'"]


@pytest.mark.parametrize("argv, says", [
    (["trace", "--source", CLEAN, "--ablate", "decoder.1.cross_attn.head7"], "Cannot read the intervention"),
    (["translate", "--source", CLEAN, "--ablate", "nonsense"], "Cannot read the intervention"),
    (["trace", "--source", CLEAN, "--patch", "encoder.0.add_norm1.out", "--from-source", "the girl eats"],
     "same length"),
    (["trace", "--source", CLEAN, "--patch", "encoder.0.ffn.hidden", "--from-source", CORRUPTED], "cannot be patched"),
    (["trace", "--source", CLEAN, "--patch", "encoder.0.add_norm1.out"], "--from-source"),
    (["translate", "--source", CLEAN, "--patch", "decoder.0.add_norm1.out", "--from-source", CORRUPTED],
     "only the encoder's steps"),
    (["evaluate", "--data", "unused.tsv", "--ablate", "decoder.1.cross_attn.head"], "Cannot read the intervention"),
])
def test_cli_bad_interventions_are_one_sentence(capsys, argv, says):
    code, out, err = run(capsys, *argv)
    assert code == 2 and out == ""
    assert err.startswith("scratchformer: ") and err.count("\n") == 1 and says in err


def test_cli_evaluate_with_an_ablated_head(capsys, tmp_path):
    pairs = tmp_path / "pairs.tsv"
    pairs.write_text(f"{CLEAN}\t{TARGET}\nthe boy eats\tलड़का खाता है\n", encoding="utf-8")
    code, out, err = run(capsys, "evaluate", "--data", str(pairs), "--json", "--ablate", f"{GUIDED}.head0",
                         "--head-importance")
    assert code == 0, err
    data = json.loads(out)
    assert data["interventions"] == [f"{GUIDED}.head0:zero"] and 0 <= data["exact_match"] <= 1
    assert len(data["head_importance"]["drops"]["decoder.cross_attn"]) == 2
