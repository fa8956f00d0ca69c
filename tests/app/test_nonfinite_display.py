"""What the window shows of numbers that are not finite, and two readability fixes of the maps and charts:
the banner names a checkpoint's NaN weights and jumps to the first non-finite step; heatmaps (and exports) draw
NaN, +∞, −∞ and masked cells in colours of their own with a legend and write "NaN", "∞", "−∞" in them; tick marks
point away from the cells, so a row's tick never reads as a minus sign before 0.451; the LayerNorm view's token
labels never run into each other at 13 tokens."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch
from PySide6.QtCore import QPointF, Qt
from PySide6.QtGui import QImage, QPainter

from app.export.render import render_image
from app.views.norm_view import NormView
from app.views.step_view import StepView
from app.widgets.colormaps import (
    MASKED_RGBA,
    NAN_RGBA,
    NEG_INF_RGBA,
    POS_INF_RGBA,
    lookup_table,
)
from app.widgets.heatmap import HeatmapWidget
from scratchformer import Transformer, TransformerConfig
from scratchformer.exporting import single_figure
from scratchformer.loading.checkpoint import save_checkpoint
from scratchformer.loading.tokenizers import word_level_tokenizer
from scratchformer.plotdata import SEQUENTIAL, Heatmap
from tests.app.conftest import run_and_wait

SOURCE, TARGET = "the boy eats an apple", "we are friends"


@pytest.fixture
def nan_checkpoint(tmp_path):
    """A tiny encoder-decoder with one NaN weight in its first feed-forward layer (W_1[3, 2])."""
    tok = word_level_tokenizer([SOURCE, TARGET], "en")
    cfg = TransformerConfig(d_model=8, n_heads=2, d_ff=16, n_encoder_layers=1, n_decoder_layers=1, max_len=12,
                            src_vocab_size=tok.vocab_size, tgt_vocab_size=tok.vocab_size, share_embeddings=False,
                            pad_id=0, bos_id=1, eos_id=2, name="broken")  # fmt: skip
    torch.manual_seed(0)
    model = Transformer(cfg).eval()
    with torch.no_grad():
        model.encoder[0].ffn.w_1.weight[3, 2] = float("nan")
    return save_checkpoint(tmp_path / "broken", model, tok, tok)


def test_banner_names_the_nan_weights_and_jumps_to_the_first_nan_step(qtbot, make_window, nan_checkpoint):
    w = make_window(source=SOURCE, target=TARGET, model=str(nan_checkpoint))
    run_and_wait(qtbot, w)
    assert w.current_trace() is not None, w.message_text()
    banner = w.banner
    assert banner.nonfinite_row.isVisibleTo(w)
    assert "encoder.0.ffn.w_1.weight" in banner.nonfinite.text() and "NaN" in banner.nonfinite.text()
    assert banner.nonfinite_button.isVisibleTo(w)
    qtbot.mouseClick(banner.nonfinite_button, Qt.MouseButton.LeftButton)
    # h = ReLU(x W_1ᵀ + b_1) is the first step that reads W_1
    qtbot.waitUntil(lambda: w.current_step().name == "encoder.0.ffn.hidden", timeout=10_000)
    step_view = next(v for v in w.views if isinstance(v, StepView))
    w.tabs.setCurrentWidget(step_view)
    qtbot.waitUntil(lambda: step_view.heatmap.heatmap is not None and not w.is_busy(), timeout=10_000)
    assert step_view.heatmap.special_legend_entries() == ["NaN"]  # column 3 of the hidden layer

    w.set_model("blog")  # a healthy model: the line goes away
    w.source_edit.setText("machine learning")
    w.target_edit.setText("hello world")
    run_and_wait(qtbot, w)
    assert not banner.nonfinite_row.isVisibleTo(w)


def _special_map() -> Heatmap:
    """0.451 and 0.2 on the 0 … 1 scale; NaN; +∞; a mask's −∞; and a −∞ that no mask explains."""
    values = np.float32([[0.451, np.nan, np.inf], [-np.inf, -np.inf, 0.2]])
    masked = np.array([[False, False, False], [True, False, False]])
    return Heatmap(values, ["a", "b"], ["x", "y", "z"], "tgt_pos", "src_pos", (0.0, 1.0), SEQUENTIAL, "special",
                   masked=masked)  # fmt: skip


def test_heatmap_draws_nan_and_infinities_in_their_own_colours_with_a_legend(qtbot):
    widget = HeatmapWidget()
    qtbot.addWidget(widget)
    widget.resize(700, 500)
    widget.show()
    widget.set_heatmap(_special_map())
    qtbot.waitUntil(lambda: bool(widget.cell_texts()), timeout=5_000)
    image = widget.image.image  # one pixel per cell at this size
    assert tuple(image[0, 1]) == NAN_RGBA and tuple(image[0, 2]) == POS_INF_RGBA
    assert tuple(image[1, 0]) == MASKED_RGBA and tuple(image[1, 1]) == NEG_INF_RGBA
    assert tuple(image[0, 0]) == tuple(lookup_table("viridis")[int(0.451 * 255)])
    colours = [NAN_RGBA, POS_INF_RGBA, NEG_INF_RGBA, MASKED_RGBA]
    assert len(set(colours)) == 4  # apart from each other, and from every colour a colour map draws
    for name in ("viridis", "RdBu_r", "mask"):
        assert not {tuple(c) for c in lookup_table(name)} & set(colours)
    assert widget.special_legend_entries() == ["NaN", "+∞", "−∞ (not a mask)", "−∞ masked"]
    texts = {(r, c): t for r, c, t, _ in widget.cell_texts()}
    assert texts == {(0, 0): "0.451", (0, 1): "NaN", (0, 2): "∞", (1, 0): "−∞", (1, 1): "−∞", (1, 2): "0.200"}
    assert "(not finite)" in widget.describe_cell(0, 1) and "(masked)" in widget.describe_cell(1, 0)


def test_a_finite_map_has_no_special_legend(qtbot):
    widget = HeatmapWidget()
    qtbot.addWidget(widget)
    widget.set_heatmap(Heatmap(np.float32([[0.1, 0.9]]), None, None, "row", "col", (0.0, 1.0), SEQUENTIAL, "ok"))
    assert widget.special_legend_entries() == [] and widget.special_legend.isHidden()


def test_exported_figure_draws_the_same_colours_and_names_them(qapp):
    fig = single_figure(_special_map())
    img = render_image(fig, 1.0).convertToFormat(QImage.Format.Format_RGBA8888)
    pixels = np.frombuffer(img.constBits(), np.uint8).reshape(img.height(), img.bytesPerLine())
    pixels = pixels[:, : img.width() * 4].reshape(img.height(), img.width(), 4)
    for colour in (NAN_RGBA, POS_INF_RGBA, NEG_INF_RGBA, MASKED_RGBA):  # in the map and in the legend's swatches
        assert np.all(pixels == np.array(colour, np.uint8), axis=-1).sum() > 100, colour
    from app.export.render import _special_swatches

    assert [t for _, t in _special_swatches([_special_map()])] == ["NaN", "+∞", "−∞ (not a mask)", "−∞ masked"]


def _drawn(axis):
    """The tick marks (scene line ends) and tick labels (scene rectangles) an axis draws now."""
    image = QImage(10, 10, QImage.Format.Format_ARGB32)
    painter = QPainter(image)
    try:
        _, ticks, texts = axis.generateDrawSpecs(painter)
    finally:
        painter.end()
    marks = [(axis.mapToScene(QPointF(p1)), axis.mapToScene(QPointF(p2))) for _, p1, p2 in ticks]
    rects = [axis.mapRectToScene(rect) for rect, _, _ in texts]
    return marks, rects


def test_tick_marks_stay_outside_the_cells_with_values(qtbot):
    widget = HeatmapWidget()
    qtbot.addWidget(widget)
    widget.resize(700, 500)
    widget.show()
    values = np.float32([[0.451, 0.2, 0.1], [0.3, 0.6, 0.05]])
    widget.set_heatmap(Heatmap(values, ["a", "b"], ["x", "y", "z"], "tgt_pos", "src_pos", (0.0, 1.0), SEQUENTIAL,
                               "weights"))  # fmt: skip
    qtbot.waitUntil(lambda: bool(widget.cell_texts()), timeout=5_000)
    cells = widget.plot.getViewBox().sceneBoundingRect()  # where the cells and their values are drawn
    left, _ = _drawn(widget.plot.getAxis("left"))
    bottom, _ = _drawn(widget.plot.getAxis("bottom"))
    assert left and bottom
    assert all(max(a.x(), b.x()) <= cells.left() + 0.5 for a, b in left)  # no mark reaches into column 0
    assert all(min(a.y(), b.y()) >= cells.bottom() - 0.5 for a, b in bottom)


def test_layer_norm_token_labels_do_not_overlap_at_13_tokens(qtbot, make_window):
    w = make_window(source="the boy eats an apple the girl drinks water in the house", target="", model="en-hi")
    w.resize(1024, 700)
    run_and_wait(qtbot, w, timeout=120_000)
    assert len(w.current_trace().source_tokens[0]) == 13
    w.go_to_step("encoder.0.add_norm1.out")
    view = next(v for v in w.views if isinstance(v, NormView))
    w.tabs.setCurrentWidget(view)
    qtbot.waitUntil(lambda: view._comparison is not None and not w.is_busy(), timeout=20_000)
    qtbot.wait(50)
    for plot in (view.mean_plot, view.std_plot):
        _, rects = _drawn(plot.getAxis("bottom"))
        assert len(rects) >= 3  # thinned, not emptied
        rects.sort(key=lambda r: r.left())
        for a, b in itertools.pairwise(rects):
            assert a.right() <= b.left(), (a, b)
