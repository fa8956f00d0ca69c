"""What `derive` tells people besides the arithmetic: which cell it is (batch item, head, tokens), the formula in the
paper's notation, the numbers its note quotes (a rank, a share, a unit's head, a wavelength), the labels of the
terms, and the table the command prints (terms, and how many cells and parameter entries were read)."""

import math
import re

import pytest
import torch

from scratchformer.analyses import derive
from scratchformer.analyses.derive.result import num
from scratchformer.cli import main
from scratchformer.loading.bundle import load_model
from tests.scratchformer.test_derive import FAMILIES, SENTENCE, family_bundle, padded_run


@pytest.fixture(scope="module")
def en_hi():
    bundle = load_model("en-hi")
    return bundle, bundle.run(bundle.prepare(*SENTENCE))[1]


def ints(text: str) -> list[int]:
    return [int(x) for x in re.findall(r"\d+", text)]


def test_a_cell_is_named_by_batch_item_head_and_tokens(en_hi):
    bundle, trace = en_hi
    b = bundle.run(bundle.prepare("we are friends", "हम दोस्त हैं"))[1]  # a second run for a batch of one item
    src, tgt = trace.source_tokens[0], trace.target_tokens[0]
    assert derive.explain_index(trace, "decoder.0.cross_attn.weights", (0, 2, 1, 3)) == (
        f"batch item 1, head 3, tgt_pos 1 “{tgt[1]}”, src_pos 3 “{src[3]}”")  # fmt: skip
    assert derive.explain_index(trace, "generator.probs", (0, 4, 17)) == f"batch item 1, tgt_pos 4 “{tgt[4]}”, vocab 17"
    # no batch axis: the labels are the first item's
    words = derive.explain_index(b, "src_embed.positional_encoding", (2, 9))
    assert words == f"src_pos 2 “{b.source_tokens[0][2]}”, d_model 9"


def test_the_cell_of_a_later_batch_item_reads_that_items_tokens(en_hi):
    trace = padded_run(en_hi[0])
    tokens = trace.source_tokens
    assert derive.explain_index(trace, "encoder.0.self_attn.weights", (1, 0, 2, 1)) == (
        f"batch item 2, head 1, src_pos 2 “{tokens[1][2]}”, src_pos 1 “{tokens[1][1]}”")  # fmt: skip
    assert tokens[1][2] != tokens[0][2]
    # a token cell shows that item's piece of text
    p = next(p for p in range(len(tokens[1])) if tokens[1][p] != tokens[0][p])
    d = derive.compute(en_hi[0], trace, "src_embed.tokens", (1, p))
    assert d.expression.startswith(f"“{tokens[1][p]}” → vocabulary piece ")
    # a step without a batch axis (the positional encoding) is labelled with the first item's tokens
    words = derive.explain_index(trace, "src_embed.positional_encoding", (1, 0))
    assert words == f"src_pos 1 “{tokens[0][1]}”, d_model 0"
    assert tokens[0][1] != tokens[1][1]


FORMULA_SYMBOLS = {  # what each kind's formula must show, in the paper's notation
    "tokens": "id", "embedding": "E[", "positional_encoding": "P", "input": "E[x]", "qkv": "Σ_d x",
    "heads": "h·d_k + e", "scores": "q_i · k_j", "scaled_scores": "√d_k", "mask": "−∞", "masked_scores": "M",
    "attention_weights": "exp(s_ij) / Σ_k exp(s_ik)", "context": "Σ_j A[i, j]·v_j[e]", "concat": "Concat",
    "projection": "W^O", "residual": "Sublayer(x)", "layer_norm": "γ[d]", "ffn_hidden": "act(",
    "ffn_out": "W_2", "logits": "W_vocab", "probabilities": "exp(logit_v)", "ffn_gate": "[f]",
    "position_bias": "bucket(j − i)", "output_scale": "d_model^-0.5", "dropout": "1 − p",
    "rotary": "x[e]", "qk_norm": "γ[d]", "router": "[e]", "softcap": "tanh(",
}  # fmt: skip


def every_run(en_hi):
    """en-hi, each family's small model, and a training-mode run (the only one with dropout steps)."""
    bundle, trace = en_hi
    yield bundle, trace
    for options in [*FAMILIES.values(), {"dropout": 0.25}]:
        family = family_bundle(bundle, options)
        if "dropout" in options:
            family.model.train()
            torch.manual_seed(0)
        yield family, family.run(family.prepare(*SENTENCE))[1]


# kinds whose derivation is a lookup or an index mapping: nothing to list as terms
NO_TERMS = {"embedding", "positional_encoding", "heads", "position_bias", "mask", "concat", "dropout"}


def test_every_formula_is_written_in_the_papers_notation_and_every_step_has_a_note(en_hi):
    kinds = set()
    for bundle, trace in every_run(en_hi):
        for step in trace:
            d = derive.compute(bundle, trace, step.name, tuple(min(1, n - 1) for n in step.shape))
            assert FORMULA_SYMBOLS[step.kind] in d.formula, (step.name, d.formula)
            if step.kind == "residual":  # x + Sublayer(x), or x + Dropout(Sublayer(x)) in a training run
                dropped = trace.find(step.name.replace(".residual", ".dropout")) is not None
                added = "PostNorm(Sublayer(x))" if bundle.config.post_norm else "Sublayer(x)"  # Gemma's sandwich
                assert d.formula == (f"x + Dropout({added})" if dropped else f"x + {added}"), step.name
            # an unmasked score has nothing to add, and neither has T5's output scaling
            assert d.note or step.kind in ("masked_scores", "output_scale"), step.name
            assert all(t.label for t in d.terms), (step.name, d.terms)
            unscaled = step.kind == "scaled_scores" and not bundle.config.scale_attention
            lookup = step.kind in NO_TERMS and not step.name.endswith(".scaled")  # E[x]·√d_model has two terms
            assert d.terms or lookup or unscaled, step.name
            if step.kind in ("ffn_hidden", "ffn_gate"):  # each branch of the unit names itself
                assert d.formula.startswith(f"{step.name.rsplit('.', 1)[1]}[f] = "), d.formula
            kinds.add(step.kind)
    assert kinds == set(FORMULA_SYMBOLS)


def test_the_position_bias_names_the_distance_and_t5s_bucket(en_hi):
    from transformers.models.t5.modeling_t5 import T5Attention

    bundle = family_bundle(en_hi[0], FAMILIES["t5_like"])
    _, trace = bundle.run(bundle.prepare(*SENTENCE))
    for stack, bidirectional in (("encoder", True), ("decoder", False)):
        name = f"{stack}.1.self_attn.position_bias"  # every layer adds the table of the stack's first layer
        table = bundle.model.get_submodule(f"{stack}.0.self_attn.relative_bias")
        weight = table.weight.detach()
        assert table.bidirectional is bidirectional
        for h, i, j in [(0, 0, 3), (2, 4, 1), (3, 2, 2), (1, 3, 0)]:
            bucket = int(T5Attention._relative_position_bucket(torch.tensor(j - i), bidirectional, 8, 16))
            d = derive.compute(bundle, trace, name, (h, i, j))
            assert d.expression == (f"distance j − i = {j - i} → bucket {bucket} → b_{h + 1}[{bucket}] = "
                                    f"{num(float(weight[bucket, h]))}")  # fmt: skip
            assert ("bidirectional" if bidirectional else "causal") in d.note


def test_the_notes_quote_this_cells_own_numbers(en_hi):
    bundle, trace = en_hi
    c = bundle.config
    d_head = c.d_model // c.n_heads
    # a weight: its share in percent, its rank in the row and how many keys the query may see
    row = trace["decoder.1.self_attn.weights"].tensor[0, 2, 3].double()  # query 3 sees keys 0–3 (causal)
    rank = int((row > row[1]).sum()) + 1
    d = derive.compute(bundle, trace, "decoder.1.self_attn.weights", (0, 2, 3, 1))
    assert d.note == (f"Key 1 gets {num(float(row[1]) * 100)}% of query 3's attention; the row's weights add up "
                      f"to 1. It ranks {rank} of 4 in its row.")  # fmt: skip
    # the weighted sum of values: which key weighs most
    d = derive.compute(bundle, trace, "encoder.1.self_attn.context", (0, 1, 4, 6))
    top = int(trace["encoder.1.self_attn.weights"].tensor[0, 1, 4].argmax())
    assert ints(d.note)[:2] == [6, top]
    # a fused projection's unit: which of Q, K, V, which head, which dimension
    for u in (5, c.d_model + 2 * d_head + 3, 2 * c.d_model + 3 * d_head):
        part, rest = divmod(u, c.d_model)
        d = derive.compute(bundle, trace, "encoder.0.self_attn.qkv", (0, 1, u))
        assert f"Unit {u} is the {'QKV'[part]} of head {rest // d_head + 1}, dimension {rest % d_head}:" in d.note
    d = derive.compute(bundle, trace, "decoder.0.cross_attn.kv_proj", (0, 1, c.d_model + 1))
    assert "is the V of head 1, dimension 1:" in d.note
    # the sinusoid's wavelength 2π·10000^(2i/d_model)
    d = derive.compute(bundle, trace, "src_embed.positional_encoding", (2, 7))
    assert f"wavelength about {num(2 * math.pi * 10000 ** (6 / c.d_model))} positions" in d.note
    # a norm counts the numbers of its position; the concat names its head and dimension
    d = derive.compute(bundle, trace, "encoder.0.add_norm1.out", (0, 1, 3))
    assert f"this position's {c.d_model} numbers" in d.note
    d = derive.compute(bundle, trace, "encoder.0.self_attn.concat", (0, 1, 2 * d_head + 6))
    assert f"the {c.n_heads} heads' outputs" in d.note and f"column {2 * d_head + 6} is head 3's dimension 6." in d.note
    # the output: the token's rank over the whole vocabulary
    logits = trace["generator.logits"].tensor[0, 1].double()
    d = derive.compute(bundle, trace, "generator.probs", (0, 1, 5))
    assert d.note.endswith(f" ranks {int((logits > logits[5]).sum()) + 1} of {logits.numel()} at position 1.")
    assert ints(derive.compute(bundle, trace, "generator.logits", (0, 1, 5)).note)[:2] == [1, 5]
    # tokens and rows
    assert derive.compute(bundle, trace, "src_embed.tokens", (0, 2)).note.endswith("this is piece 3.")
    assert "start token" in derive.compute(bundle, trace, "tgt_embed.tokens", (0, 0)).note
    token = int(trace["src_embed.tokens"].tensor[0, 1])
    assert ints(derive.compute(bundle, trace, "src_embed.lookup", (0, 1, 3)).note) == [token, 3]


def test_a_feed_forward_unit_says_whether_relu_silenced_it(en_hi):
    bundle, trace = en_hi
    z = trace["encoder.0.ffn.hidden"].tensor[0, 1]
    silent, live = int((z == 0).nonzero()[0]), int((z > 0).nonzero()[0])
    d = derive.compute(bundle, trace, "encoder.0.ffn.hidden", (0, 1, silent))
    pre = d.terms[-1]
    assert pre.label == "z (pre-activation)" and pre.value < 0
    assert d.note == f"ReLU cut the negative pre-activation {num(pre.value)} to 0: this unit is silent for this " \
        "position."
    d = derive.compute(bundle, trace, "encoder.0.ffn.hidden", (0, 1, live))
    assert d.note.startswith(f"Unit {live} of d_ff = {bundle.config.d_ff}: ") and d.note.endswith("then ReLU.")


def test_each_product_term_is_named_by_the_indices_it_multiplies(en_hi):
    bundle, trace = en_hi
    params = {name: p.detach() for name, p in bundle.model.named_parameters()}
    q, k = trace["decoder.1.cross_attn.q"].tensor[0, 0], trace["decoder.1.cross_attn.k"].tensor[0, 0]
    for t in derive.compute(bundle, trace, "decoder.1.cross_attn.scores", (0, 0, 2, 4)).terms[:6]:
        e, e2 = ints(t.label)
        assert e == e2 and t.value == pytest.approx(float(q[2, e].double() * k[4, e].double()), rel=1e-9)
    x, w = trace["encoder.0.add_norm2.out"].tensor[0, 3], params["encoder.1.self_attn.qkv.weight"]
    for t in derive.compute(bundle, trace, "encoder.1.self_attn.qkv", (0, 3, 40)).terms[:6]:
        d, u, d2 = ints(t.label)
        assert (u, d2) == (40, d) and t.value == pytest.approx(float(x[d].double() * w[40, d].double()), rel=1e-6)
        assert t.label == f"x[{d}]·W[40, {d}]"  # the formula's names: x, the row read, and W
    a, v = trace["decoder.0.self_attn.weights"].tensor[0, 1, 3], trace["decoder.0.self_attn.v"].tensor[0, 1]
    for t in derive.compute(bundle, trace, "decoder.0.self_attn.context", (0, 1, 3, 5)).terms:
        i, j, j2, e = ints(t.label)
        assert (i, j2, e) == (3, j, 5) and t.value == pytest.approx(float(a[j].double() * v[j, 5].double()), rel=1e-9)
    d = derive.compute(bundle, trace, "encoder.0.add_norm1.out", (0, 1, 3))
    z = trace["encoder.0.add_norm1.residual"].tensor[0, 1].double()
    named = {t.label: t.value for t in d.terms}
    assert named["z[d]"] == float(z[3]) and named["μ"] == pytest.approx(float(z.mean()), rel=1e-9)
    assert named["σ²"] == pytest.approx(float(z.var(unbiased=False)), rel=1e-9)
    assert named["γ[d]"] == float(params["encoder.0.add_norm1.norm.weight"][3])
    assert named["β[d]"] == float(params["encoder.0.add_norm1.norm.bias"][3])


def test_the_table_lists_the_terms_and_counts_what_was_read(capsys, en_hi):
    bundle, _ = en_hi
    c = bundle.config
    argv = ["derive", "--model", "en-hi", "--source", SENTENCE[0], "--target", SENTENCE[1]]
    assert main([*argv, "encoder.0.self_attn.qkv", "0", "1", "200"]) == 0
    out = capsys.readouterr().out.rstrip("\n").split("\n")
    terms = out[out.index("terms:") + 1: out.index("reads:")]
    assert len(terms) == 8 and terms[6].split() == ["122", "smaller", "terms", terms[6].split()[-1]]
    assert terms[7].split()[0] == "b[200]"
    assert out[out.index("reads:") + 1:] == [
        f"  {c.d_model:>5} cells of step src_embed.sum",
        f"  {c.d_model:>5} entries of parameter encoder.0.self_attn.qkv.weight",
        "      1 entry of parameter encoder.0.self_attn.qkv.bias"]  # fmt: skip
    assert main([*argv, "src_embed.lookup", "0", "1", "3"]) == 0
    out = capsys.readouterr().out.rstrip("\n").split("\n")
    assert out[0].endswith("  [src_embed.lookup]")
    assert out[1] == "cell: batch item 1, src_pos 1 “girl”, d_model 3"
    assert out[out.index("reads:") + 1:] == ["      1 cell of step src_embed.tokens",
                                              "      1 entry of parameter src_embed.tokens.weight"]  # fmt: skip
    assert "terms:" not in out


def test_the_table_says_when_the_formula_does_not_give_the_traces_value(en_hi, monkeypatch):
    bundle, trace = en_hi
    off_by_one = lambda r, s, i, v, b: dict(recomputed=v + 1, formula="x", expression="x")  # noqa: E731
    monkeypatch.setitem(derive.RULES, "residual", off_by_one)
    d = derive.compute(bundle, trace, "encoder.0.add_norm1.residual", (0, 1, 2))
    assert f"recomputed:  {num(d.value + 1)}  (DIFFERS FROM the trace's value)" in derive.text_report(trace, d)
    d = derive.compute(bundle, trace, "encoder.0.add_norm1.out", (0, 1, 2))
    assert f"recomputed:  {num(d.recomputed)}  (equals the trace's value)" in derive.text_report(trace, d)


def test_the_table_counts_one_two_and_unlisted_inputs(en_hi, monkeypatch):
    """'1 cell' and '2 cells', '1 entry' and '2 entries', a rule that reads only a parameter, and the count of
    cells too many to list (a softmax row longer than the listing limit, here lowered below the vocabulary)."""
    from scratchformer.analyses.derive import reader

    tiny = family_bundle(en_hi[0], dict(d_model=2, n_heads=1, d_ff=4, positional="learned", scale_embedding=False))
    _, trace = tiny.run(tiny.prepare("the girl", "लड़की"))  # decoder input: <s>, लड़की
    reads = lambda name, index: derive.text_report(trace, derive.compute(tiny, trace, name, index)).split("reads:\n")[1]  # noqa: E731
    two = reads("decoder.0.self_attn.weights", (0, 0, 1, 0))
    assert two == "      2 cells of step decoder.0.self_attn.masked_scores"
    assert reads("encoder.0.self_attn.qkv", (0, 1, 3)) == (
        "      2 cells of step src_embed.sum\n      2 entries of parameter encoder.0.self_attn.qkv.weight\n"
        "      1 entry of parameter encoder.0.self_attn.qkv.bias")  # fmt: skip
    assert reads("src_embed.positional_encoding", (1, 0)) == "      1 entry of parameter src_embed.positions.weight"
    vocab = tiny.config.tgt_vocab_size
    assert derive.compute(tiny, trace, "generator.probs", (0, 1, 5)).unlisted == 0  # the whole row is listed
    monkeypatch.setattr(reader, "INPUT_LIMIT", vocab - 1)
    d = derive.compute(tiny, trace, "generator.probs", (0, 1, 5))
    assert d.unlisted == vocab and d.to_dict()["unlisted_inputs"] == vocab
    assert not any(c.step == "generator.logits" and len(c.index) == 3 and c.index[:2] == (0, 1) and c.index[2] != 5
                   for c in d.inputs)  # fmt: skip
    assert derive.text_report(trace, d).endswith(f"{vocab:>7} more cells (not listed one by one)")


def listed_exps(expression: str) -> tuple[list[str], int]:
    """The scores written inside the denominator 'exp(a − max) + … + N more' and N (0 if every one is written)."""
    denominator = expression.split(" / (", 1)[1].split(") = ", 1)[0]
    more = re.search(r" \+ (\d+) more$", denominator)
    items = [item for item in denominator.split(" + ") if item.startswith("exp(")]
    return [item[4:].split(" − ")[0].strip("()") for item in items], int(more.group(1)) if more else 0


def test_a_softmax_writes_its_largest_exponentials_and_counts_the_rest(en_hi):
    """A weight's denominator lists the row's four largest scores, largest first, and 'N more' for the other keys
    the query may see (masked keys are not listed); the output layer's lists three of the whole vocabulary. The
    terms are exp(s − max) — at most 1, and exactly 1 for the row's largest — and their sum."""
    bundle, trace = en_hi
    for name, index, shown in [("decoder.1.cross_attn.weights", (0, 1, 2, 3), 4),  # 6 source keys
                               ("decoder.0.self_attn.weights", (0, 0, 2, 1), 3),  # query 2 sees keys 0–2
                               ("generator.probs", (0, 3, 11), 3)]:  # fmt: skip
        scores_step = "generator.logits" if name == "generator.probs" else name.replace("weights", "masked_scores")
        row = trace[scores_step].tensor[index[:-1]].double()
        visible = row[torch.isfinite(row)]
        largest = visible.sort(descending=True).values[:shown]
        written, more = listed_exps(derive.compute(bundle, trace, name, index).expression)
        assert written == [num(float(v)) for v in largest]
        assert more == visible.numel() - shown
        if more == 0:  # every key listed: nothing more to count
            assert " more" not in derive.compute(bundle, trace, name, index).expression
        assert [t.label for t in derive.compute(bundle, trace, name, index).terms][1] in (
            "Σ_k exp(s_ik − max)", "Σ exp(logit − max)")  # fmt: skip
        d = derive.compute(bundle, trace, name, index)
        exps = torch.exp(row - row.max())
        assert d.terms[0].value == pytest.approx(float(exps[index[-1]]), rel=1e-9) and d.terms[0].value <= 1
        assert d.terms[1].value == pytest.approx(float(exps[torch.isfinite(row)].sum()), rel=1e-9)


def test_a_query_that_may_see_no_key_gets_weight_zero_and_says_why(en_hi):
    """A row whose every score is −∞ (a padding query, or every key knocked out) gets weights 0, not a softmax's
    NaN."""
    bundle = en_hi[0]
    prepared = bundle.prepare(*SENTENCE)
    _, trace = bundle.model.run_with_trace(prepared.src, prepared.tgt, lazy=False)
    for name, value in (("masked_scores", float("-inf")), ("weights", 0.0)):
        step = trace[f"encoder.0.self_attn.{name}"]
        step.data = step.tensor.clone()
        step.data[0, 1, 2] = value
    d = derive.compute(bundle, trace, "encoder.0.self_attn.weights", (0, 1, 2, 4))
    assert d.value == d.recomputed == 0.0 and d.agrees()
    assert d.formula == "A[i, j] = 0 for a query that may see no key"
    assert d.expression == "every score of this row is −∞ → 0"
    assert d.note == ("Every key of this row is masked (a padding query): its weights are set to 0 instead of the NaN "
                      "a softmax of only −∞ would give.")  # fmt: skip


def test_the_embedding_sum_names_what_it_adds_and_the_sinusoid_its_exponent(en_hi):
    bundle, trace = en_hi
    d = derive.compute(bundle, trace, "src_embed.sum", (0, 1, 2))
    assert [t.label for t in d.terms] == ["E[x]·√d_model", "PE"]
    bert = family_bundle(bundle, FAMILIES["bert_like"])
    _, bert_trace = bert.run(bert.prepare(SENTENCE[0]))
    d = derive.compute(bert, bert_trace, "src_embed.sum", (0, 1, 2))
    assert [t.label for t in d.terms] == ["E[x]", "PE", "T[type 0]"]
    bart = family_bundle(bundle, FAMILIES["bart_like"])  # Marian's layout: every sine first, then every cosine
    _, bart_trace = bart.run(bart.prepare(*SENTENCE))
    for dim, fn, two_i in ((3, "sin", 6), (16 + 5, "cos", 10)):
        d = derive.compute(bart, bart_trace, "src_embed.positional_encoding", (2, dim))
        assert d.expression.startswith(f"PE(2, {dim}) = {fn}(2 / 10000^({two_i}/32)) = "), d.expression
    d = derive.compute(bundle, trace, "src_embed.positional_encoding", (2, 7))  # the paper's: odd dimensions are cos
    assert d.expression.startswith(f"PE(2, 7) = cos(2 / 10000^(6/{bundle.config.d_model})) = ")


def test_product_terms_name_their_input_and_notes_name_the_token_and_activation(en_hi):
    bundle, trace = en_hi
    assert derive.compute(bundle, trace, "encoder.0.self_attn.out", (0, 1, 2)).terms[0].label.startswith("concat[")
    assert derive.compute(bundle, trace, "encoder.0.ffn.out", (0, 1, 2)).terms[0].label.startswith("hidden[")
    token = bundle.tgt_tokenizer.token_strings([5])[0]
    assert derive.compute(bundle, trace, "generator.logits", (0, 1, 5)).note.endswith(f"entry 5 (“{token}”).")
    assert derive.compute(bundle, trace, "generator.probs", (0, 1, 5)).note.startswith(f"“{token}” ranks ")
    gelu = family_bundle(bundle, FAMILIES["bart_like"])
    _, gelu_trace = gelu.run(gelu.prepare(*SENTENCE))
    d = derive.compute(gelu, gelu_trace, "encoder.0.ffn.hidden", (0, 1, 3))
    assert d.note.endswith(", then GELU.") and "act(z) = z·Φ(z)" in d.formula


def test_the_command_keeps_json_on_stdout_and_notes_on_stderr(capsys):
    """Notes about the input (a word outside the vocabulary) go to stderr, so --json's stdout stays one JSON
    document; Hindi is written as itself."""
    import json

    assert main(["derive", "--model", "en-hi", "--source", "the zzyzx eats", "--target", SENTENCE[1],
                 "tgt_embed.tokens", "0", "1", "--json"]) == 0  # fmt: skip
    out, err = capsys.readouterr()
    data = json.loads(out)
    assert err.startswith("note: ") and "zzyzx" in err
    assert "लड़की" in out and data["terms"][0]["label"] == "piece “लड़की”"


def test_a_mask_cell_says_whether_the_query_may_read_the_key(en_hi):
    bundle, trace = en_hi
    d = derive.compute(bundle, trace, "decoder.0.self_attn.mask", (0, 3, 1))
    assert d.recomputed == 0.0 and d.note == "0: query position 3 may read key position 1."
    d = derive.compute(bundle, trace, "decoder.0.self_attn.mask", (0, 1, 3))
    assert d.recomputed == float("-inf") and d.note.startswith("−∞: key position 3 comes after query position 1")


def test_every_note_is_written_as_sentences(en_hi):
    """A note reads as prose: it starts with a capital letter (or a number, a symbol or a quoted token), ends with
    a full stop, and is not written in capitals."""
    for bundle, trace in every_run(en_hi):
        for step in trace:
            note = derive.compute(bundle, trace, step.name, tuple(min(1, n - 1) for n in step.shape)).note
            if note:
                assert note[0].isupper() or note[0] in "0123456789−“μ", (step.name, note)
                assert note.endswith(".") and note != note.upper(), (step.name, note)


# Every formula a derivation shows, written out here from the paper (§3.1–§3.5) and the departures' own papers, in
# the notation docs/following-numbers.md uses: each step's formula must be one of its kind's.
GELU = "z·Φ(z) = z·(1 + erf(z/√2))/2"
GELU_TANH = "z·(1 + tanh(√(2/π)·(z + 0.044715·z³)))/2"
SINUSOID = "PE(pos, 2i) = sin(pos/10000^(2i/d_model)), PE(pos, 2i+1) = cos(pos/10000^(2i/d_model))"
FORMULAS = {
    "tokens": {"x = id of the piece in the vocabulary"},
    "embedding": {"E[x][d] = E[id, d]", "E[x] · √d_model"},
    "positional_encoding": {SINUSOID, "P[pos, d] (a learned table)", "PE = 0",
                            "PE(pos, i) = sin(pos/10000^(2i/d_model)) for the first half, cos for the second"},
    "input": {"E[x]", "E[x] + P[pos]", "E[x] + P[pos] + T[type]", "E[x]·√d_model + PE", "E[x]·√d_model"},
    "qkv": {"Q[i, u] = Σ_d x[i, d]·W[u, d] + b[u]", "[K V][j, u] = Σ_d x_enc[j, d]·W[u, d] + b[u]",
            "[Q K V][i, u] = Σ_d x[i, d]·W[u, d] + b[u]"},
    # q's columns come first in a fused projection; k's too in cross-attention's [K V]; v's never
    # under grouped-query attention K and V are narrower than Q: their columns start at an offset
    "heads": {f"{p}[h, pos, e] = projection[pos, {o}h·d_k + e]" for p, o in (("q", ""), ("k", ""),
                                                                            ("k", "part·d_model + "),
                                                                            ("v", "part·d_model + "),
                                                                            ("k", "offset + "), ("v", "offset + "))},
    "rotary": {"x'[e] = x[e]·cos(pos·ω_i) − x[e + d/2]·sin(pos·ω_i),  ω_i = θ^(−2i/d_rot)",
               "x'[e] = x[e]·cos(pos·ω_i) + x[e − d/2]·sin(pos·ω_i),  ω_i = θ^(−2i/d_rot)",
               "x'[e] = x[e] (past the rotating dimensions)"},
    "qk_norm": {"RMSNorm(z)[d] = γ[d]·z[d]/√(mean(z²) + ε)", "RMSNorm(z)[d] = (1 + γ[d])·z[d]/√(mean(z²) + ε)"},
    "scores": {"S[i, j] = q_i · k_j = Σ_e q_i[e]·k_j[e]"},
    "scaled_scores": {"S[i, j] / √d_k", "S (no ÷ √d_k)", "S[i, j] / √s  (√s in place of √d_k)"},
    "softcap": {"c·tanh(x / c)"},
    "position_bias": {"B[h, i, j] = b_h[bucket(j − i)]"},
    "mask": {"M[i, j] = 0 if query i may see key j, else −∞"},
    "masked_scores": {"S/√d_k + M", "S + M", "S + B + M", "c·tanh(S/c) + M"},
    "attention_weights": {"A[i, j] = exp(s_ij) / Σ_k exp(s_ik)"},
    "context": {"head[i, e] = Σ_j A[i, j]·v_j[e]"},
    "concat": {"Concat[i, u] = head_(u div d_k)[i, u mod d_k]"},
    "projection": {"MultiHead[i, u] = Σ_d Concat[i, d]·W^O[u, d] + b^O[u]"},
    "dropout": {"Dropout(x) = 0 with probability p, else x/(1 − p)"},
    "residual": {"x + Sublayer(x)", "x + Dropout(Sublayer(x))", "x + PostNorm(Sublayer(x))"},
    "layer_norm": {"LayerNorm(z)[d] = γ[d]·(z[d] − μ)/√(σ² + ε) + β[d]", "RMSNorm(z)[d] = γ[d]·z[d]/√(mean(z²) + ε)",
                   "RMSNorm(z)[d] = (1 + γ[d])·z[d]/√(mean(z²) + ε)"},
    "ffn_hidden": {f"hidden[f] = act(Σ_d x[d]·W_1[f, d] + b_1[f]),  act(z) = {a}"
                   for a in ("max(0, z)", GELU, GELU_TANH)}
                  | {"hidden[f] = act(x W_1)[f] · (x V)[f]"},
    "ffn_gate": {"gate[f] = act(Σ_d x[d]·W_1[f, d] + b_1[f]),  act(z) = z·σ(z) = z/(1 + e^−z)",
                 f"gate[f] = act(Σ_d x[d]·W_1[f, d] + b_1[f]),  act(z) = {GELU_TANH}", "linear[f] = Σ_d x[d]·V[f, d]"},
    "ffn_out": {"FFN(x)[u] = Σ_f hidden[f]·W_2[u, f] + b_2[u]",
                # a mixture of experts: one chosen expert's output, and their weighted sum
                "FFN_e(x)[u] = Σ_f hidden_e[f]·W_2^e[u, f],  hidden_e = act(x W_1^e) ⊙ x V^e,  e = the token's j-th "
                "chosen expert,  act(z) = z·σ(z) = z/(1 + e^−z)",
                "MoE(x)[u] = Σ_j w_(e_j) · FFN_(e_j)(x)[u] over the chosen experts, FFN_e(x)[u] = Σ_f "
                "hidden_e[f]·W_2^e[u, f],  hidden_e = act(x W_1^e) ⊙ x V^e"},
    "router": {"logit[e] = Σ_d x[d]·W_router[e, d]", "p[e] = exp(logit[e]) / Σ_e' exp(logit[e'])",
               "w[e] = p[e] if e is among the token's k most probable experts, else 0"},  # moe_like: no renormalising
    "output_scale": {"x · d_model^-0.5"},
    "logits": {"logit[v] = Σ_d x[d]·W_vocab[v, d]"},
    "probabilities": {"P(v) = exp(logit_v) / Σ_w exp(logit_w)"},
}  # fmt: skip

# the terms of the derivations whose terms are named quantities rather than indexed products
TERM_LABELS = {
    "scaled_scores": ["S", "√d_k"], "output_scale": ["x", "d_model^-0.5"],
    "masked_scores": {"S/√d_k + M": ["S/√d_k", "M"], "S + M": ["S", "M"],
                      "S + B + M": ["S", "B (relative position bias)", "M"],
                      "c·tanh(S/c) + M": ["c·tanh(S/c) (soft-capped)", "M"]},
    "layer_norm": {"L": ["z[d]", "μ", "σ²", "γ[d]", "β[d]"], "R": ["z[d]", "mean(z²)", "γ[d]"]},
}  # fmt: skip


def test_each_formula_is_its_kinds_in_the_papers_notation_exactly(en_hi):
    shown = set()
    for bundle, trace in every_run(en_hi):
        for step in trace:
            index = tuple(min(1, n - 1) for n in step.shape)
            d = derive.compute(bundle, trace, step.name, index)
            assert d.formula in FORMULAS[step.kind], (step.name, d.formula)
            shown.add(d.formula)
            labels = [t.label for t in d.terms]
            if step.name.endswith(".scaled") and step.kind == "embedding":
                assert labels == ["E[x]", "√d_model"], step.name
            if step.kind == "scaled_scores" and d.terms:
                custom = bundle.config.attn_scale_dim is not None  # Gemma: √s in place of √d_k
                assert labels == (["S", "√s"] if custom else TERM_LABELS["scaled_scores"]), step.name
            if step.kind == "output_scale":
                assert labels == TERM_LABELS["output_scale"], step.name
            if step.kind == "masked_scores":
                assert labels == TERM_LABELS["masked_scores"][d.formula], step.name
            if step.kind == "layer_norm":
                assert labels[: len(TERM_LABELS["layer_norm"][d.formula[0]])] == TERM_LABELS["layer_norm"][
                    d.formula[0]], (step.name, labels)  # fmt: skip
            if step.kind == "probabilities":
                assert labels == [f"exp(logit_{index[-1]} − max)", "Σ exp(logit − max)"], step.name
            if step.kind == "rotary":  # the second half of each pair, and a dimension that does not turn
                for e in (bundle.config.d_rotary // 2 + 1, step.shape[-1] - 1):
                    other = derive.compute(bundle, trace, step.name, (*index[:-1], e))
                    assert other.formula in FORMULAS["rotary"], (step.name, other.formula)
                    shown.add(other.formula)
    unseen = set().union(*FORMULAS.values()) - shown
    assert unseen == set(), unseen  # every formula of the table is one some model shows


ACRONYMS = {"GELU", "PE", "SILU", "TANH"}  # the words a note may write in capitals (and RMSNorm, as its paper does)


def test_notes_expressions_and_terms_never_shout(en_hi):
    """No word written in capitals but the activations' and PE's names, and no word with its first letters stuck
    in capitals ("THe"): what a reader sees is prose and the paper's symbols."""
    import re

    for b, t in every_run(en_hi):
        for step in t:
            for index in (tuple(min(1, n - 1) for n in step.shape), tuple(0 for _ in step.shape)):
                d = derive.compute(b, t, step.name, index)
                for text in (d.note or "", d.expression or "", *(term.label for term in d.terms)):
                    words = re.findall(r"[A-Za-z]{2,}", text)
                    assert {w for w in words if w.isupper()} <= ACRONYMS, (step.name, text)
                    assert {w for w in words if re.match(r"[A-Z]{2,}[a-z]", w)} <= {"RMSNorm"}, (step.name, text)


def test_a_token_cell_shows_its_text_its_vocabulary_piece_and_which_tokenizer_cut_it(en_hi):
    bundle, trace = en_hi
    for stack, tokenizer, labels in (("src_embed", bundle.src_tokenizer, trace.source_tokens[0]),
                                     ("tgt_embed", bundle.tgt_tokenizer, trace.target_tokens[0])):
        for p in (0, 2):
            token_id = int(trace[f"{stack}.tokens"].item(0)[p])
            piece = tokenizer.hf.convert_ids_to_tokens(token_id)
            d = derive.compute(bundle, trace, f"{stack}.tokens", (0, p))
            assert d.recomputed == token_id == tokenizer.hf.get_vocab()[piece]
            assert d.expression == f"“{labels[p]}” → vocabulary piece “{piece}” → id {num(token_id)}", (stack, p)
            if stack == "tgt_embed" and p == 0:
                assert d.note == ("The decoder input starts with the start token, then reads the target shifted "
                                  "right by one.")  # fmt: skip
            else:
                assert d.note == f"The tokenizer ({tokenizer.name}) cut the text into pieces; this is piece {p + 1}."
    assert bundle.src_tokenizer.hf.get_vocab() != bundle.tgt_tokenizer.hf.get_vocab()  # so the choice shows
    # a trace made from ids alone has no text to show
    inputs = bundle.prepare(*SENTENCE)
    _, bare = bundle.model.run_with_trace(inputs.src, inputs.tgt)
    assert not bare.labels("src_pos", 0)
    token_id = int(bare["src_embed.tokens"].item(0)[3])
    piece = bundle.src_tokenizer.hf.convert_ids_to_tokens(token_id)
    d = derive.compute(bundle, bare, "src_embed.tokens", (0, 3))
    assert d.expression == f"“” → vocabulary piece “{piece}” → id {num(token_id)}"


def test_each_projection_names_its_matrices_and_the_part_a_unit_belongs_to(en_hi):
    bundle, trace = en_hi
    c = bundle.config
    d_head = c.d_model // c.n_heads
    d = derive.compute(bundle, trace, "encoder.0.self_attn.qkv", (0, 1, 3))
    assert d.formula == "[Q K V][i, u] = Σ_d x[i, d]·W[u, d] + b[u]"
    d = derive.compute(bundle, trace, "decoder.0.cross_attn.q_proj", (0, 1, d_head + 2))
    assert d.formula == "Q[i, u] = Σ_d x[i, d]·W[u, d] + b[u]"
    assert d.note.startswith(f"Unit {d_head + 2} is the Q of head 2, dimension 2: ")
    d = derive.compute(bundle, trace, "decoder.0.cross_attn.kv_proj", (0, 1, 2 * d_head + 1))
    assert d.formula == "[K V][j, u] = Σ_d x_enc[j, d]·W[u, d] + b[u]"
    assert d.note.startswith(f"Unit {2 * d_head + 1} is the K of head 3, dimension 1: ")


@pytest.mark.parametrize("options, note", [
    (FAMILIES["bert_like"], "This model learned one vector per position instead of the paper's sinusoids; its "
                            "position ids start at 2."),
    (FAMILIES["gpt2_like"], "This model learned one vector per position instead of the paper's sinusoids."),
    (FAMILIES["t5_like"], "Zero: positions enter each attention as a relative position bias."),
    ({"positional": "none"}, "Zero: this model adds no positional encoding."),
])  # fmt: skip
def test_the_positional_encoding_says_what_kind_of_positions_the_model_has(en_hi, options, note):
    bundle = family_bundle(en_hi[0], options)
    _, trace = bundle.run(bundle.prepare(*SENTENCE))
    stack = "src_embed" if bundle.config.has_encoder else "tgt_embed"
    assert derive.compute(bundle, trace, f"{stack}.positional_encoding", (1, 3)).note == note


def test_the_sinusoids_formula_is_the_layout_the_model_uses(en_hi):
    interleaved = "PE(pos, 2i) = sin(pos/10000^(2i/d_model)), PE(pos, 2i+1) = cos(pos/10000^(2i/d_model))"
    halves = "PE(pos, i) = sin(pos/10000^(2i/d_model)) for the first half, cos for the second"
    for bundle, trace, formula in ((*en_hi, interleaved),
                                   (b := family_bundle(en_hi[0], FAMILIES["bart_like"]),
                                    b.run(b.prepare(*SENTENCE))[1], halves)):  # fmt: skip
        assert derive.compute(bundle, trace, "src_embed.positional_encoding", (2, 5)).formula == formula
