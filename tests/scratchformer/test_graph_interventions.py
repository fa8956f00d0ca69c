"""A graph of a run with heads changed or keys knocked out (the window's Interventions panel, `graph --ablate`):
the frozen patterns keep the changes, so the replacement reproduces the changed model's own logits and stays exact
where it claims to be; a patched step, which it has no place for, is one sentence."""

from __future__ import annotations

import pytest
import torch

from scratchformer.cli import main
from scratchformer.errors import UserError
from scratchformer.graph import build_graph
from scratchformer.loading.bundle import load_model
from scratchformer.patching.interventions import HeadChange, KeyKnockout, Patch, intervene
from scratchformer.transformer.masks import pad_from_ids
from tests.scratchformer.graph_fixtures import assert_exact, one_thread  # noqa: F401 - one PyTorch thread
from tests.scratchformer.test_graph_architectures import random_variant

EN_HI = [
    HeadChange("decoder.1.cross_attn", 0, "zero"),
    HeadChange("encoder.0.self_attn", 1, "mean"),
    HeadChange("decoder.0.self_attn", 2, "mean"),
    HeadChange("decoder.1.self_attn", 1, "scale", 2.5),
    HeadChange("encoder.1.self_attn", 3, "keep"),
    KeyKnockout("decoder.0.cross_attn", (1, 3)),
]


def own_logits(bundle, inputs, changes, position: int) -> torch.Tensor:
    """The changed model's own logits at a decoder position (float64), from its own forward."""
    m, c = bundle.model, bundle.config
    tgt = inputs.tgt[:, : position + 1]
    with torch.no_grad(), intervene(m, changes):
        src_pad = pad_from_ids(inputs.src, c.pad_id) if c.has_encoder else None
        memory = m.encode(inputs.src, src_pad) if c.has_encoder else None
        hidden = m.decode(tgt, memory, src_pad, pad_from_ids(tgt, c.pad_id, start=True))  # (1, T, d_model)
        x = hidden[0, position] * (m.generator.scale or 1.0)
        return m.generator.logits(x).double()


def exact(result, bundle, inputs, changes) -> None:
    g = result.graph
    own = own_logits(bundle, inputs, changes, g.position)
    assert g.token_id == int(own.argmax()) and g.logit_error < 1e-4
    assert abs(float(g.real[g.logit_index]) - float(own[g.token_id])) < 1e-4
    assert_exact(result)


@pytest.mark.parametrize("which", range(len(EN_HI) + 1))
def test_each_change_of_en_hi_is_kept_and_the_graph_stays_exact(which):
    bundle = load_model("en-hi")
    inputs = bundle.prepare_run("the old man sees the thirsty teacher", "बूढ़ा आदमी")
    changes = EN_HI if which == len(EN_HI) else [EN_HI[which]]
    result = build_graph(bundle, inputs, prune=False, interventions=changes)
    exact(result, bundle, inputs, changes)
    plain = build_graph(bundle, inputs, prune=False)
    assert plain.graph.adjacency.shape != result.graph.adjacency.shape or not torch.allclose(
        plain.graph.adjacency, result.graph.adjacency
    )
    assert any(c.spec() in n for n in result.notes for c in changes)


def test_a_grouped_query_decoder_with_a_mean_ablated_head_is_exact():
    bundle, sets = random_variant(load_model("llama-tiny"), {})
    inputs = bundle.prepare_run("3 1 4 1 5 9 2 6")
    changes = [HeadChange("decoder.1.self_attn", 3, "mean"), KeyKnockout("decoder.0.self_attn", (2,))]
    exact(build_graph(bundle, inputs, sets, prune=False, interventions=changes), bundle, inputs, changes)


def test_a_patched_step_and_a_head_the_model_lacks_are_one_sentence(capsys):
    bundle = load_model("en-hi")
    inputs = bundle.prepare_run("the girl eats an apple", "लड़की")
    patch = Patch("encoder.0.add_norm2.out", torch.zeros(1, 6, bundle.config.d_model), "'a boy eats an apple'")
    with pytest.raises(UserError, match="^A graph keeps a run's changed heads .* not a patched or edited step"):
        build_graph(bundle, inputs, interventions=[patch])
    assert main(["graph", "--model", "en-hi", "--source", "the girl eats an apple", "--ablate",
                 "decoder.1.cross_attn.head9"]) == 2  # fmt: skip
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "head9" in err and "Traceback" not in err


def test_the_command_takes_ablate(capsys):
    args = ["graph", "--model", "en-hi", "--source", "the girl eats an apple", "--target", "लड़की", "--json"]
    assert main(args) == 0
    plain = capsys.readouterr().out
    assert main([*args, "--ablate", "decoder.1.cross_attn.head0:zero"]) == 0
    captured = capsys.readouterr()
    assert captured.out != plain and "decoder.1.cross_attn.head0:zero" in captured.err
