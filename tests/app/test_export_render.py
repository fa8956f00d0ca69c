"""What the renderer writes decodes to the plot: PNG pixels, SVG text and cell shapes, PDF pages and fonts."""

from __future__ import annotations

import re
import subprocess
import unicodedata
import xml.etree.ElementTree as ET

import numpy as np
import pytest
from PySide6.QtGui import QImage, QTextLayout

from app.export.render import MARGIN, VECTOR_CELLS, _font, figure_size, layout, render_bytes, render_image
from app.widgets.colormaps import heatmap_rgba
from scratchformer.exporting import single_figure, step_figure
from scratchformer.loading.bundle import load_model
from scratchformer.plotdata import abbreviate, step_heatmap

SVG = "{http://www.w3.org/2000/svg}"
WORDS = ["लड़का", "😀", "中文", " learning", "Tor", "ch"]  # Devanagari, emoji, CJK, and GPT-2 pieces


@pytest.fixture(scope="module")
def trace():
    bundle = load_model("blog")
    _, trace = bundle.run(bundle.prepare("machine learning using PyTorch", "the answer"))
    trace.source_tokens = [WORDS]  # same length (6) as the real tokens: the labels the plots must carry
    return trace


def _png(data: bytes) -> QImage:
    img = QImage()
    assert img.loadFromData(data, "PNG")
    return img


def _rgb(img: QImage, x: float, y: float) -> tuple[int, int, int]:
    c = img.pixelColor(int(x), int(y))
    return c.red(), c.green(), c.blue()


def test_png_has_the_figure_size_and_the_cells_in_the_screen_colours(qapp, trace):
    hm = step_heatmap(trace, "encoder.0.self_attn.weights", 0, 1)
    fig = single_figure(hm)
    img = _png(render_bytes(fig, "png", scale=2.0))
    size = figure_size(fig)
    assert (img.width(), img.height()) == (int(size.width() * 2), int(size.height() * 2))
    pixels = np.frombuffer(img.constBits(), np.uint8).reshape(img.height(), img.bytesPerLine())
    assert len(np.unique(pixels[:, : img.width() * 4].reshape(-1, 4), axis=0)) > 50  # not blank
    # The map sits where the layout put it; every cell centre has exactly the screen's colour.
    lay = layout(fig)
    panel = lay.panels[0]
    x0, y0 = (MARGIN + panel.row_w) * 2, (MARGIN + lay.header_h + panel.title_h) * 2
    cell = panel.cell * 2
    want = heatmap_rgba(hm)[..., :3]
    for i in range(hm.shape[0]):
        for j in range(hm.shape[1]):
            assert _rgb(img, x0 + (j + 0.5) * cell, y0 + (i + 0.5) * cell) == tuple(int(v) for v in want[i, j])


def _svg_texts(root) -> str:
    return "".join(t.text or "" for t in root.iter(f"{SVG}text"))


def test_svg_keeps_labels_as_text_and_cells_as_rects(qapp, trace):
    fig = step_figure(trace, "encoder.0.self_attn.weights")  # 2 heads side by side
    root = ET.fromstring(render_bytes(fig, "svg"))
    text = _svg_texts(root)
    for word in WORDS:  # Qt splits a run where the font changes; the characters all stay text
        assert abbreviate(word).replace("␣", "") in text.replace("␣", "")
    assert "Head 1" in text and "Head 2" in text and fig.title in text
    sizes: dict[tuple[str, str], int] = {}
    for r in root.iter(f"{SVG}rect"):
        sizes[(r.get("width"), r.get("height"))] = sizes.get((r.get("width"), r.get("height")), 0) + 1
    square = max((k for k in sizes if k[0] == k[1]), key=lambda k: sizes[k])
    assert sizes[square] == 2 * 6 * 6  # one <rect> per cell of each head
    assert not list(root.iter(f"{SVG}image")) or all(
        float(i.get("width")) < 30 for i in root.iter(f"{SVG}image")  # only the narrow colour bar is an image
    )


def test_large_maps_become_one_crisp_image_in_svg(qapp):
    from scratchformer.plotdata import Heatmap

    n = int(VECTOR_CELLS**0.5) + 20
    values = np.random.default_rng(0).random((n, n), dtype=np.float32)
    hm = Heatmap(values, None, None, "tgt_pos", "src_pos", (0.0, 1.0), "viridis", "Large")
    root = ET.fromstring(render_bytes(single_figure(hm), "svg"))
    images = [i for i in root.iter(f"{SVG}image") if float(i.get("width")) > 100]
    assert len(images) == 1 and "pixelated" in images[0].get("style", "")
    assert len(list(root.iter(f"{SVG}rect"))) < 20


def test_pdf_has_one_page_embedded_fonts_and_searchable_labels(qapp, trace, tmp_path):
    fig = step_figure(trace, "encoder.0.self_attn.weights")
    path = tmp_path / "m.pdf"
    path.write_bytes(render_bytes(fig, "pdf"))
    info = subprocess.run(["pdfinfo", str(path)], capture_output=True, text=True, check=True).stdout
    assert re.search(r"^Pages:\s+1$", info, re.M)
    size = figure_size(fig)
    w, h = re.search(r"Page size:\s+([\d.]+) x ([\d.]+) pts", info).groups()
    assert abs(float(w) - size.width()) < 1 and abs(float(h) - size.height()) < 1
    fonts = subprocess.run(["pdffonts", str(path)], capture_output=True, text=True, check=True).stdout
    rows = [line.split() for line in fonts.splitlines()[2:]]
    assert rows and all("yes" in r[-5:-2][:1] for r in rows)  # every font embedded
    assert any("Devanagari" in r[0] for r in rows)
    text = subprocess.run(["pdftotext", str(path), "-"], capture_output=True, text=True, check=True).stdout
    text = unicodedata.normalize("NFD", text)  # the PDF may map ड़ to its precomposed code point U+095C
    for word in ("लड़का", "中文", "Head 1", "Encoder 1"):
        assert unicodedata.normalize("NFD", word) in text


@pytest.mark.parametrize("word", ["लड़का", "中文", "😀", "machine"])
def test_labels_shape_with_real_glyphs_not_boxes(qapp, word):
    """HarfBuzz shaping through the renderer's font: every glyph is a real glyph (index 0 is the missing box)."""
    layout = QTextLayout(word, _font(10))
    layout.beginLayout()
    layout.createLine()
    layout.endLayout()
    runs = layout.glyphRuns()
    assert runs
    for run in runs:
        assert 0 not in list(run.glyphIndexes()), f"{word!r} drew a missing-glyph box with {run.rawFont().familyName()}"
    if word == "लड़का":
        families = {r.rawFont().familyName() for r in runs}
        assert any("Devanagari" in f for f in families)


def test_render_image_draws_masked_cells_distinctly(qapp, trace):
    fig = step_figure(trace, "decoder.0.self_attn.masked_scores")
    img = render_image(fig, 1.0)
    assert img.width() > 100 and img.height() > 100
    from app.widgets.colormaps import MASKED_RGBA

    bits = np.frombuffer(img.constBits(), np.uint8).reshape(img.height(), img.bytesPerLine())[:, : img.width() * 4]
    bgr = bits.reshape(img.height(), img.width(), 4)[..., :3]
    assert np.all(bgr == np.array(MASKED_RGBA[:3][::-1], np.uint8), axis=-1).sum() > 50  # −∞ cells are grey
