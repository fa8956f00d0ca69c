"""How `derive` writes and checks its numbers, on numbers worked out by hand: four significant figures with real
minus signs and ∞, the agreement test between the trace's value and the recomputed one, a long sum cut to its
largest terms plus one summary term, JSON's infinities, the inputs grouped by step, and the cap on listed inputs."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from scratchformer.analyses.derive.reader import INPUT_LIMIT, Cell, Reader, check_index, json_number, split_batch
from scratchformer.analyses.derive.result import TOP_TERMS, Derivation, Term, num, paren, summed
from scratchformer.errors import UserError
from scratchformer.recording.trace import Step, Trace


def test_numbers_are_written_with_four_significant_figures_and_real_signs():
    assert num(0.41327) == "0.4133"
    assert num(-12.5) == "−12.5"
    assert num(0.0) == "0" and num(-0.0) == "0"
    assert num(123456.0) == "1.235e5"  # not 1.235e+05
    assert num(-1.5e-7) == "−1.5e−7"
    assert num(float("inf")) == "∞" and num(float("-inf")) == "−∞"
    assert num(float("nan")) == "NaN"
    assert paren(-0.31) == "(−0.31)" and paren(0.31) == "0.31" and paren(float("-inf")) == "(−∞)"


def _derivation(value, recomputed, terms=()):
    return Derivation("s", (0,), value, recomputed, "f", "e", terms=[Term(str(i), t) for i, t in enumerate(terms)])


def test_agreement_is_relative_to_the_largest_term():
    # a cell that is the small difference of two large terms: 1000 − 1000 = 0, checked to 1e-5 of 1000 = 0.01
    assert _derivation(0.0, 0.009, [1000.0, -1000.0]).agrees()
    assert not _derivation(0.0, 0.011, [1000.0, -1000.0]).agrees()
    # without terms the value itself sets the scale: 1e-5 of 50 = 5e-4, plus an absolute 1e-7
    assert _derivation(50.0, 50.0004).agrees() and not _derivation(50.0, 50.0006).agrees()
    assert _derivation(0.0, 0.9e-7).agrees() and not _derivation(0.0, 1.2e-7).agrees()
    assert _derivation(0.0, 1e-7).agrees()  # a difference of exactly the tolerance agrees
    assert _derivation(1.0, 1.0 + 2e-5).agrees(rtol=1e-4) and not _derivation(1.0, 1.0 + 2e-5).agrees()
    # ∞ agrees only with the same ∞; an infinite term does not make every error small
    assert _derivation(float("-inf"), float("-inf")).agrees()
    assert not _derivation(float("-inf"), float("inf")).agrees()
    assert not _derivation(float("-inf"), 0.0).agrees() and not _derivation(0.0, float("-inf")).agrees()
    assert not _derivation(1.0, 2.0, [float("inf"), 1.0]).agrees()


def test_a_long_sum_lists_its_largest_products_and_one_summary_term():
    left = np.array([1.0, -2.0, 3.0, 0.5, -0.25, 4.0, 0.1, -5.0])
    right = np.array([2.0, 1.0, -1.0, 2.0, 4.0, 0.5, 1.0, 1.0])
    products = left * right  # 2, −2, −3, 1, −1, 2, 0.1, −5
    bias = Term("b", 0.25)
    total, expression, terms = summed(products, lambda j: f"p{j}", left, right, [bias])
    assert TOP_TERMS == 6
    assert total == pytest.approx(-5.65)  # 2 − 2 − 3 + 1 − 1 + 2 + 0.1 − 5 + 0.25
    # by size, ties in their order: −5 (7), −3 (2), 2 (0), −2 (1), 2 (5), 1 (3); then 2 smaller: −1 + 0.1
    assert [t.label for t in terms] == ["p7", "p2", "p0", "p1", "p5", "p3", "2 smaller terms", "b"]
    assert terms[6].value == pytest.approx(-0.9)
    assert sum(t.value for t in terms) == pytest.approx(total)
    assert expression == ("(−5)·1 + 3·(−1) + 1·2 + (−2)·1 + 4·0.5 + 0.5·2 + 2 smaller terms (−0.9) + 0.25 = −5.65")
    short_total, short, short_terms = summed(products[:2], lambda j: f"p{j}", left[:2], right[:2])
    assert short == "1·2 + (−2)·1 = 0" and short_total == 0.0 and len(short_terms) == 2  # no summary term


def test_json_has_no_infinities_and_inputs_are_grouped_by_step():
    assert json_number(float("-inf")) == "-inf" and json_number(float("inf")) == "inf"
    assert json_number(float("nan")) == "nan" and json_number(-2.5) == -2.5
    d = Derivation("a.weights", (0, 1), float("-inf"), float("-inf"), "F", "E", terms=[Term("t", float("inf"))],
                   inputs=[Cell((0, 1), 1.0, step="a.q"), Cell((2,), -1.0, param="w"), Cell((0, 2), 3.0, step="a.k"),
                           Cell((0, 3), float("nan"), step="a.q")], unlisted=7, note="n")  # fmt: skip
    assert d.to_dict() == {
        "step": "a.weights", "index": [0, 1], "value": "-inf", "recomputed": "-inf", "formula": "F",
        "expression": "E", "unlisted_inputs": 7, "note": "n", "terms": [{"label": "t", "value": "inf"}],
        "inputs": [{"step": "a.q", "index": [0, 1], "value": 1.0}, {"param": "w", "index": [2], "value": -1.0},
                   {"step": "a.k", "index": [0, 2], "value": 3.0}, {"step": "a.q", "index": [0, 3], "value": "nan"}],
    }  # fmt: skip
    assert d.input_groups() == [("a.q", [(0, 1), (0, 3)]), ("a.k", [(0, 2)])]


def _trace(*steps: tuple[str, tuple[str, ...], torch.Tensor]) -> Trace:
    return Trace([Step(i, name, "context", name, "", t, dims, name.rsplit(".", 1)[0], size=tuple(t.shape))
                  for i, (name, dims, t) in enumerate(steps)])  # fmt: skip


def test_the_reader_lists_inputs_up_to_its_limit_and_counts_the_rest():
    n = INPUT_LIMIT
    long = torch.arange(2.0 * (n + 1)).reshape(1, 2, n + 1)  # (batch, rows, columns)
    exact = torch.arange(2.0 * n).reshape(1, 2, n)
    reader = Reader(_trace(("x.long", ("batch", "p", "d"), long), ("x.exact", ("batch", "p", "d"), exact)),
                    torch.nn.Linear(2, 3))  # fmt: skip
    row = reader.row("x.long", (0, 1))
    assert row.dtype == np.float64 and row[0] == n + 1 and len(row) == n + 1
    assert reader.cells == [] and reader.unlisted == n + 1  # one more than the limit: counted, not listed
    reader.row("x.exact", (0, 1))
    assert len(reader.cells) == n and reader.cells[-1] == Cell((0, 1, n - 1), float(2 * n - 1), step="x.exact")
    reader.row("x.exact", (0, 0), listed=False)
    assert reader.unlisted == 2 * n + 1 and len(reader.cells) == n
    column = reader.column("x.exact", (0,), (3,))  # rows 0 and 1 of column 3
    assert column.tolist() == [3.0, n + 3.0]
    assert reader.cells[-2:] == [Cell((0, 0, 3), 3.0, step="x.exact"), Cell((0, 1, 3), n + 3.0, step="x.exact")]
    assert reader.cell("x.exact", (0, 1, 2)) == n + 2.0 and reader.cells[-1].index == (0, 1, 2)
    with torch.no_grad():
        reader.model.weight.copy_(torch.tensor([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]))
    weights = reader.param_row("weight", (2,))
    assert weights.tolist() == [5.0, 6.0] and weights.dtype == np.float64  # recomputed in float64
    assert reader.cells[-2:] == [Cell((2, 0), 5.0, param="weight"), Cell((2, 1), 6.0, param="weight")]
    assert reader.param_cell("weight", (1, 0)) == 3.0 and reader.cells[-1] == Cell((1, 0), 3.0, param="weight")
    assert reader.has_param("bias") and not reader.has_param("nothing")
    with pytest.raises(UserError, match="This run has no step named 'x.none'."):
        reader.cell("x.none", (0,))


def test_indices_are_checked_axis_by_axis():
    t = torch.zeros(2, 3, 4)
    trace = _trace(("s.v", ("batch", "tgt_pos", "d_model"), t), ("s.pe", ("src_pos", "d_model"), t[0]))
    step, pe = trace["s.v"], trace["s.pe"]
    assert split_batch(step, (1, 2, 3)) == (1, (2, 3)) and split_batch(pe, (2, 3)) == (0, (2, 3))
    check_index(step, (1, 2, 3))  # the last cell is in range
    with pytest.raises(UserError, match=r"^s\.v has 3 axes, batch \(2\) × tgt_pos \(3\) × d_model \(4\): give 3 "
                                        r"indices, one per axis, not 2\.$"):  # fmt: skip
        check_index(step, (1, 2))
    with pytest.raises(UserError, match=r"^Index 4 is out of range for axis 3 of s\.v \(d_model\), which runs "
                                        r"from 0 to 3\.$"):  # fmt: skip
        check_index(step, (0, 0, 4))
    with pytest.raises(UserError, match="Index -1 is out of range for axis 1"):
        check_index(step, (-1, 0, 0))
