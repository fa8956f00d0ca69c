"""Attention rollout and flow (Abnar & Zuidema 2020) on small hand-made attention weights: Ã = 0.5·mean_h(A) + 0.5·I
with rows renormalised, rollout multiplied from the first layer up, the decoder's path through cross-attention,
max-flow worked out as path bottlenecks, the flow's length limit, and what the command prints."""

from __future__ import annotations

import json
import re
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from scratchformer.analyses import flow, rollout
from scratchformer.analyses.mixing import residual_attention
from scratchformer.cli import main
from scratchformer.errors import UserError


def hand_tilde(a: list[list[float]]) -> np.ndarray:
    """0.5·A + 0.5·I, each row divided by its sum (A already head-averaged)."""
    a = np.array(a, dtype=np.float64)
    t = a * 0.5 + np.eye(len(a)) * 0.5
    return t / t.sum(1, keepdims=True)


def test_residual_attention_averages_heads_adds_the_identity_and_renormalises_rows():
    # two heads over 2 positions; head mean [[0.5, 0.5], [0.3, 0.7]]
    w = torch.tensor([[[1.0, 0.0], [0.2, 0.8]], [[0.0, 1.0], [0.4, 0.6]]])
    got = residual_attention(w)
    want = [[0.75, 0.25], [0.15, 0.85]]  # 0.5·mean + 0.5·I: rows already sum to 1
    assert got.dtype == torch.float64
    np.testing.assert_allclose(got.numpy(), want, atol=1e-12)
    # rows of A that do not sum to 1 (a fully masked row is all zero): renormalised, the masked row keeps only I
    w = torch.tensor([[[0.0, 0.0], [0.2, 0.2]]])
    np.testing.assert_allclose(residual_attention(w).numpy(), [[1.0, 0.0], [0.1 / 0.7, 0.6 / 0.7]], atol=1e-12)


def test_rollout_multiplies_the_layers_from_the_first_up():
    a1 = torch.tensor([[1.0, 0.0], [0.5, 0.5]], dtype=torch.float64)
    a2 = torch.tensor([[0.5, 0.5], [0.0, 1.0]], dtype=torch.float64)
    a3 = torch.tensor([[0.25, 0.75], [1.0, 0.0]], dtype=torch.float64)
    # A2·A1 = [[0.75, 0.25], [0.5, 0.5]]; A3·(A2·A1) = [[0.5625, 0.4375], [0.75, 0.25]] (A1·A2·A3 differs)
    np.testing.assert_allclose(rollout.rollout([a1, a2]).numpy(), [[0.75, 0.25], [0.5, 0.5]])
    np.testing.assert_allclose(rollout.rollout([a1, a2, a3]).numpy(), [[0.5625, 0.4375], [0.75, 0.25]])
    assert torch.equal(rollout.rollout([a3]), a3)


def test_the_decoder_rollout_keeps_half_and_takes_half_from_the_encoder():
    a_self = torch.tensor([[1.0, 0.0], [0.25, 0.75]], dtype=torch.float64)
    cross = torch.tensor([[[1.0, 0.0, 0.0], [0.0, 0.5, 0.5]], [[0.0, 0.0, 1.0], [0.0, 0.5, 0.5]]])  # 2 heads
    enc = torch.tensor([[0.5, 0.5, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]], dtype=torch.float64)
    dd, ds = rollout.decoder_rollout([a_self], [cross], enc)
    # one layer: dd = 0.5·Ã_self·I; ds = 0.5·mean_h(cross)·enc, mean_h(cross) = [[.5, 0, .5], [0, .5, .5]]
    np.testing.assert_allclose(dd.numpy(), [[0.5, 0.0], [0.125, 0.375]])
    np.testing.assert_allclose(ds.numpy(), [[0.125, 0.125, 0.25], [0.0, 0.25, 0.25]])
    # a second layer mixes both shares by its Ã_self first, then halves them again
    dd2, ds2 = rollout.decoder_rollout([a_self, a_self], [cross, cross], enc)
    np.testing.assert_allclose(dd2.numpy(), 0.5 * (a_self @ dd).numpy())
    np.testing.assert_allclose(ds2.numpy(), 0.5 * (a_self @ ds).numpy() + ds.numpy())


class _Step:
    def __init__(self, w):
        self.w = w

    def item(self, batch):
        return self.w[batch]


class _Trace:
    """What compute reads of a trace: steps found by name, and the tokens of each batch item."""

    def __init__(self, steps, src, tgt):
        self.steps, self.source_tokens, self.target_tokens = steps, src, tgt

    def find(self, name):
        return self.steps.get(name)


def _weights(b, h, t, s, causal=False, seed=0):
    g = torch.Generator().manual_seed(seed)
    logits = torch.randn(b, h, t, s, generator=g)
    if causal:
        logits = logits.masked_fill(torch.ones(t, s, dtype=torch.bool).triu(1), float("-inf"))
    return logits.softmax(-1)


def _fake(n_enc, n_dec, s, t, batch=2):
    config = SimpleNamespace(has_encoder=n_enc > 0, has_decoder=n_dec > 0)
    steps = {}
    for i in range(n_enc):
        steps[f"encoder.{i}.self_attn.weights"] = _Step(_weights(batch, 2, s, s, seed=i))
    for i in range(n_dec):
        steps[f"decoder.{i}.self_attn.weights"] = _Step(_weights(batch, 2, t, t, causal=True, seed=10 + i))
        if n_enc:
            steps[f"decoder.{i}.cross_attn.weights"] = _Step(_weights(batch, 2, t, s, seed=20 + i))
    src = [[f"s{b}{j}" for j in range(s)] for b in range(batch)] if n_enc else []
    tgt = [[f"t{b}{j}" for j in range(t)] for b in range(batch)] if n_dec else []
    return SimpleNamespace(config=config), _Trace(steps, src, tgt)


def test_compute_reads_the_batch_item_asked_for_and_returns_float32():
    bundle, trace = _fake(2, 2, 3, 4)
    r = rollout.compute(bundle, trace, "rollout", batch=1)
    enc = [residual_attention(trace.steps[f"encoder.{i}.self_attn.weights"].w[1]).numpy() for i in range(2)]
    dec = [residual_attention(trace.steps[f"decoder.{i}.self_attn.weights"].w[1]).numpy() for i in range(2)]
    assert r.method == "rollout" and r.encoder.dtype == r.decoder.dtype == r.cross.dtype == torch.float32
    np.testing.assert_allclose(r.encoder.numpy(), enc[1] @ enc[0], atol=1e-6)
    np.testing.assert_allclose(r.decoder.numpy(), dec[1] @ dec[0], atol=1e-6)
    assert r.cross.shape == (4, 3)
    np.testing.assert_allclose(r.cross.sum(-1).numpy(), np.ones(4), atol=1e-6)
    assert r.source_tokens == ["s10", "s11", "s12"] and r.target_tokens == ["t10", "t11", "t12", "t13"]


def test_compute_without_an_encoder_or_decoder_has_no_such_matrix():
    bundle, trace = _fake(0, 2, 0, 3)
    r = rollout.compute(bundle, trace)
    assert r.encoder is None and r.cross is None and r.decoder.shape == (3, 3) and r.source_tokens == []
    bundle, trace = _fake(2, 0, 3, 0)
    r = rollout.compute(bundle, trace)
    assert r.decoder is None and r.cross is None and r.encoder.shape == (3, 3) and r.target_tokens == []


def test_an_unknown_method_is_refused_in_one_sentence():
    bundle, trace = _fake(1, 1, 2, 2)
    with pytest.raises(UserError, match=r"^Unknown method 'max'; choose rollout or flow\.$"):
        rollout.compute(bundle, trace, "max")


@pytest.mark.parametrize(("s", "t"), [(49, 3), (3, 49)])
def test_flow_is_refused_beyond_48_positions_in_either_stack(s, t, monkeypatch):
    monkeypatch.setattr(flow, "flows", lambda *a: pytest.fail("flow ran"))
    bundle, trace = _fake(1, 1, s, t, batch=1)
    with pytest.raises(UserError, match=r"^Attention flow solves one max-flow problem per pair of positions, too "
                       r"slow for 49 tokens; use --method rollout, or at most 48 tokens\.$"):  # fmt: skip
        rollout.compute(bundle, trace, "flow")


def test_flow_runs_at_48_positions(monkeypatch):
    seen = []
    monkeypatch.setattr(flow, "flows", lambda enc, dec, cross: seen.append((enc, dec, cross)) or (None, None, None))
    bundle, trace = _fake(1, 1, 48, 48, batch=1)
    r = rollout.compute(bundle, trace, "flow")
    assert r.method == "flow" and len(seen) == 1
    enc, dec, cross = seen[0]
    assert [w.shape for w in enc] == [(2, 48, 48)] and len(dec) == 1 and len(cross) == 1


def test_one_decoder_layers_flow_is_its_residual_attention():
    w = _weights(1, 2, 3, 3, causal=True)[0]
    _, dec, cross = flow.flows([], [w], [])
    assert cross is None
    np.testing.assert_allclose(dec.numpy(), residual_attention(w).numpy(), atol=1e-9)


def test_flow_through_cross_attention_is_the_sum_of_its_path_bottlenecks():
    """An encoder whose attention is the identity (Ã_e = I) and two decoder layers. From top decoder position i to
    source token j the paths are: the second layer's cross-attention, capacity 0.5·C₂[i, j]; or the half the
    position keeps (0.5), its second self-attention to k (Ã₂[i, k]) and the first layer's cross-attention of k
    (0.5·C₁[k, j]). Ã_e's edge (1) never binds: flow[i, j] = 0.5·C₂[i, j] + min(0.5, Σ_k min(Ã₂[i, k],
    0.5·C₁[k, j])), rows then normalised."""
    enc = torch.eye(2)[None]  # (1 head, S, S)
    d1 = torch.tensor([[[1.0, 0.0], [0.5, 0.5]]])
    d2 = torch.tensor([[[1.0, 0.0], [0.2, 0.8]]])
    c1 = torch.tensor([[[0.9, 0.1], [0.3, 0.7]]])
    c2 = torch.tensor([[[0.6, 0.4], [0.0, 1.0]]])
    a2 = hand_tilde([[1.0, 0.0], [0.2, 0.8]])  # [[1, 0], [0.1, 0.9]]
    want = np.zeros((2, 2))
    for i in range(2):
        for j in range(2):
            kept = sum(min(a2[i, k], 0.5 * float(c1[0, k, j])) for k in range(2))
            want[i, j] = 0.5 * float(c2[0, i, j]) + min(0.5, kept)
    encoder, _, cross = flow.flows([enc], [d1, d2], [c1, c2])
    np.testing.assert_allclose(encoder.numpy(), np.eye(2), atol=1e-12)
    np.testing.assert_allclose(cross.numpy(), want / want.sum(1, keepdims=True), atol=1e-9)


def test_the_dictionary_holds_every_matrix_and_the_tokens():
    r = rollout.Rollout("flow", torch.tensor([[1.0, 0.0], [0.25, 0.75]]), torch.tensor([[1.0]]),
                        torch.tensor([[0.5, 0.5]]), ["a", "b"], ["x"])  # fmt: skip
    assert r.to_dict() == {"method": "flow", "encoder": [[1.0, 0.0], [0.25, 0.75]], "decoder": [[1.0]],
                           "cross": [[0.5, 0.5]], "source_tokens": ["a", "b"], "target_tokens": ["x"]}  # fmt: skip
    assert json.loads(json.dumps(r.to_dict())) == r.to_dict()
    assert rollout.Rollout("rollout", None, None, None).to_dict()["decoder"] is None


def test_the_text_report_prints_each_stack_as_a_table():
    r = rollout.Rollout("rollout", torch.tensor([[1.0, 0.0], [0.25, 0.75]]), torch.tensor([[1.0]]),
                        torch.tensor([[0.5, 0.5]]), ["a", "a-very-long-token"], ["a-very-long-target"])  # fmt: skip
    assert rollout.text_report(r).split("\n") == [
        "encoder (rollout): rows = top encoder positions, columns = source tokens",
        "                     a a-very-l",
        "a                1.000    0.000",
        "a-very-long-     0.250    0.750",
        "decoder self-attention (rollout): rows = decoder positions, columns = decoder input",
        "              a-very-l",
        "a-very-long-     1.000",
        "through cross-attention (rollout): rows = decoder positions, columns = source tokens",
        "                     a a-very-l",
        "a-very-long-     0.500    0.500",
    ]
    assert rollout.text_report(rollout.Rollout("flow", None, None, None)) == ""


def test_the_command_prints_the_rollout_tables_by_default(capsys):
    assert main(["rollout", "--model", "en-hi", "--source", "the girl eats"]) == 0
    out = capsys.readouterr().out.split("\n")
    titles = [line for line in out if "rows =" in line]
    assert titles == ["encoder (rollout): rows = top encoder positions, columns = source tokens",
                      "decoder self-attention (rollout): rows = decoder positions, columns = decoder input",
                      "through cross-attention (rollout): rows = decoder positions, columns = source tokens"]


def test_the_command_writes_one_line_of_json_with_the_tokens_as_they_are(capsys):
    assert main(["rollout", "--model", "en-hi", "--source", "the girl eats", "--json"]) == 0
    raw = capsys.readouterr().out
    assert raw.endswith("}\n") and raw.count("\n") == 1
    out = json.loads(raw)
    assert out["method"] == "rollout" and out["source_tokens"][:2] == ["the", "girl"]
    assert any(ord(ch) > 127 for t in out["target_tokens"] for ch in t)  # Hindi written as itself, not \\u escapes
    assert "\\u" not in raw


def _documented_flow_graph(enc_w, dec_w, cross_w):
    """The graph flow.py's docstring describes, built here from that text: encoder node (E, l, i) passes Ã_l[i, j]
    to (E, l − 1, j); decoder position i after layer l, (D, l, i), passes 0.5 to its own vector before the
    cross-attention, (M, l, i), and 0.5·C_l[i, j] to the encoder's top position j; (M, l, i) passes Ã_l[i, k] of
    layer l's self-attention to (D, l − 1, k)."""
    import networkx as nx

    g = nx.DiGraph()
    for layer, w in enumerate(enc_w, start=1):
        for (i, j), cap in np.ndenumerate(hand_tilde(w.double().mean(0).tolist())):
            g.add_edge(("E", layer, i), ("E", layer - 1, j), capacity=cap)
    for layer, (w, c) in enumerate(zip(dec_w, cross_w), start=1):
        for (i, k), cap in np.ndenumerate(hand_tilde(w.double().mean(0).tolist())):
            g.add_edge(("M", layer, i), ("D", layer - 1, k), capacity=cap)
        for (i, j), cap in np.ndenumerate(c.double().mean(0).numpy()):
            g.add_edge(("D", layer, i), ("M", layer, i), capacity=0.5)
            g.add_edge(("D", layer, i), ("E", len(enc_w), j), capacity=0.5 * cap)
    return g


@pytest.mark.parametrize(("n_enc", "n_dec"), [(2, 3), (1, 1)])
def test_flow_through_cross_attention_is_the_max_flow_of_the_documented_graph(n_enc, n_dec):
    """Random weights, several layers on each side: each decoder position's flow to each source token is the
    maximum flow of the graph the docstring describes, rows normalised. One decoder layer over an encoder that
    attends to itself only: a row carries just its cross-attention's half (sum 0.5) before it is normalised."""
    import networkx as nx

    s, t = 3, 3
    enc_w = [_weights(1, 2, s, s, seed=i)[0] if n_dec > 1 else torch.eye(s)[None] for i in range(n_enc)]
    dec_w = [_weights(1, 2, t, t, causal=True, seed=10 + i)[0] for i in range(n_dec)]
    cross_w = [_weights(1, 2, t, s, seed=20 + i)[0] for i in range(n_dec)]
    g = _documented_flow_graph(enc_w, dec_w, cross_w)
    raw = np.array([[nx.maximum_flow_value(g, ("D", n_dec, i), ("E", 0, j)) for j in range(s)] for i in range(t)])
    encoder, _, cross = flow.flows(enc_w, dec_w, cross_w)
    np.testing.assert_allclose(cross.numpy(), raw / raw.sum(1, keepdims=True), atol=1e-9)
    if n_dec == 1:
        np.testing.assert_allclose(raw.sum(1), 0.5, atol=1e-9)  # only the cross-attention's half reaches a token
    top = np.array([[nx.maximum_flow_value(g, ("E", n_enc, i), ("E", 0, j)) for j in range(s)] for i in range(s)])
    np.testing.assert_allclose(encoder.numpy(), top / top.sum(1, keepdims=True), atol=1e-9)


def test_the_command_reads_the_batch_item_asked_for(capsys, tmp_path):
    """--item picks a window of a --text-file batch: its tokens and its own rollout, not the first item's."""
    from scratchformer.loading.bundle import load_model

    text = tmp_path / "two.txt"
    text.write_text("the girl eats an apple the boy reads a book", encoding="utf-8")
    args = ["rollout", "--model", "en-hi", "--text-file", str(text), "--seq-len", "4", "--batch", "2", "--json"]
    items = []
    for item in ("1", "2"):
        assert main([*args, "--item", item]) == 0
        items.append(json.loads(capsys.readouterr().out))
    bundle = load_model("en-hi")
    _, trace = bundle.run(bundle.prepare_windows(text.read_text(encoding="utf-8"), 4, 2))
    for batch, out in enumerate(items):
        want = rollout.compute(bundle, trace, "rollout", batch)
        assert out["source_tokens"] == trace.source_tokens[batch]
        np.testing.assert_allclose(out["encoder"], want.encoder.numpy(), atol=1e-6)
        np.testing.assert_allclose(out["cross"], want.cross.numpy(), atol=1e-6)
    assert items[0]["source_tokens"] != items[1]["source_tokens"]


def test_an_unknown_method_on_the_command_line_is_refused_before_the_model_loads(capsys, model_never_opened):
    with pytest.raises(SystemExit) as exit_:
        main(["rollout", "--model", "en-hi", "--source", "the girl eats", "--method", "max"])
    assert exit_.value.code == 2
    assert re.search(r"invalid choice: 'max' \(choose from '?rollout'?, '?flow'?\)", capsys.readouterr().err)
