"""The embedding steps people read in the trace: which steps there are for each kind of model, their titles and
formulas (the paper's §3.4 and §3.5, and what an imported model adds instead), written out here from the config."""

from __future__ import annotations

import torch

from scratchformer import TransformerConfig
from scratchformer.recording.trace import tracing
from scratchformer.transformer.embeddings import Embeddings

INTERLEAVED = "PE(pos,2i) = sin(pos/10000^(2i/d_model)), PE(pos,2i+1) = cos(pos/10000^(2i/d_model))"
HALVES = "PE(pos,i) = sin(pos/10000^(2i/d_model)), PE(pos,⌈d/2⌉+i) = cos(pos/10000^(2i/d_model))"


def _steps(pos_dim: str = "src_pos", train: bool = False, **kw) -> dict:
    config = TransformerConfig(**{"d_model": 6, "n_heads": 2, "max_len": 10, "dropout": 0.0, **kw})
    emb = Embeddings(config, 13, pos_dim, "x_embed").train(train)
    with tracing() as tracer, torch.no_grad():
        emb(torch.tensor([[3, 7, 1]]))
    return {s.name.removeprefix("x_embed."): (s.title, s.formula, s.major, s.dims) for s in tracer.steps}


def test_the_papers_embedding_steps():
    steps = _steps()
    assert list(steps) == ["tokens", "lookup", "scaled", "positional_encoding", "sum"]
    assert steps["tokens"][:2] == ("Token ids of the source", "x = tokenizer(text)")
    assert steps["tokens"][3] == ("batch", "src_pos")
    assert steps["scaled"][:2] == ("Embedding × √d_model", "E[x] · √d_model  (√6 = 2.449)")
    assert steps["positional_encoding"] == ("Positional encoding", INTERLEAVED, True, ("src_pos", "d_model"))
    assert steps["sum"] == ("Embedding + positional encoding", "E[x]·√d_model + PE", True,
                            ("batch", "src_pos", "d_model"))  # fmt: skip
    target = _steps("tgt_pos")
    assert target["tokens"][0] == "Token ids of the target" and target["tokens"][3] == ("batch", "tgt_pos")


def test_learned_positions_name_their_offset():
    steps = _steps(positional="learned", scale_embedding=False, position_offset=2)
    assert "scaled" not in steps  # no × √d_model step when nothing is scaled
    assert steps["positional_encoding"][1] == "learned position embedding P[pos + 2]"
    assert steps["sum"][1] == "E[x] + P[pos]"
    assert _steps(positional="learned")["positional_encoding"][1] == "learned position embedding P[pos]"


def test_marians_halves_and_models_without_positions():
    assert _steps(positional="sinusoidal_halves")["positional_encoding"][1] == HALVES
    none = _steps(positional="none", scale_embedding=False)
    assert none["positional_encoding"][:2] == ("Positional encoding (none: all zeros)",
                                                "PE = 0: no positional encoding")  # fmt: skip
    assert none["sum"][:2] == ("Embedding (no positional encoding added)", "E[x]")
    t5 = _steps(positional="none", scale_embedding=False, relative_buckets=8)
    assert t5["positional_encoding"][1] == "PE = 0: positions enter each attention as a relative position bias instead"


def test_berts_token_types_and_embedding_norm():
    steps = _steps(positional="learned", scale_embedding=False, type_vocab_size=2, embed_layer_norm=True)
    assert list(steps)[-2:] == ["sum", "layer_norm"]
    assert steps["sum"][1:3] == ("E[x] + P[pos] + T[type]", False)  # the norm, not the sum, is the stream's point
    assert steps["layer_norm"][:3] == ("LayerNorm of the embeddings", "LayerNorm(E[x] + P[pos] + T[type])", True)


def test_dropout_is_a_step_only_when_training_with_a_rate():
    assert _steps(train=True, dropout=0.1)["dropout"][:2] == ("Dropout", "Dropout(p=0.1)")
    assert "dropout" not in _steps(train=True, dropout=0.0)
    assert "dropout" not in _steps(train=False, dropout=0.1)


def test_the_embedding_norm_step_holds_the_norm_and_dropout_comes_after_it():
    """BERT's order in training: sum → LayerNorm → dropout. The LayerNorm step shows the normalised sum (not the
    dropped values) and the dropout step is 0 or that ÷ (1 − p)."""
    config = TransformerConfig(d_model=6, n_heads=2, max_len=10, dropout=0.5, positional="learned",
                               scale_embedding=False, embed_layer_norm=True)  # fmt: skip
    torch.manual_seed(0)
    emb = Embeddings(config, 13, "src_pos", "x_embed").train()
    with torch.no_grad():
        emb.layer_norm.weight.normal_()
        emb.layer_norm.bias.normal_()
    with tracing() as tracer, torch.no_grad():
        out = emb(torch.tensor([[3, 7, 1, 5]]))
    steps = {s.name.removeprefix("x_embed."): s.tensor for s in tracer.steps}
    assert list(steps)[-3:] == ["sum", "layer_norm", "dropout"]
    norm = emb.layer_norm
    want = torch.nn.functional.layer_norm(steps["sum"], (6,), norm.weight, norm.bias, norm.eps)
    torch.testing.assert_close(steps["layer_norm"], want)
    kept = steps["dropout"] != 0
    assert 0 < kept.sum() < kept.numel() and torch.equal(out, steps["dropout"])
    torch.testing.assert_close(steps["dropout"][kept], want[kept] * 2)
