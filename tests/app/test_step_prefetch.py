"""While the user looks at a step, the prefetch thread makes the next steps' maps and display images, so Next
only hands a ready image to the plot (views/step_view.py ahead_work); the image is the one the plot would make."""

from __future__ import annotations

import threading

import numpy as np

import app.views.step_view as step_view_module
import app.widgets.heatmap as heatmap_module
from app.main import drawn
from scratchformer.plotdata.special import heatmap_classes
from tests.app.conftest import run_and_wait


def test_the_next_steps_images_are_made_ahead_off_the_ui_thread(qtbot, make_window, monkeypatch):
    made_ahead: dict[int, threading.Thread] = {}  # id of each image the Step view's prefetch made → its thread
    real = step_view_module.display_image

    def recording(*args):
        image = real(*args)
        made_ahead[id(image)] = threading.current_thread()
        return image

    monkeypatch.setattr(step_view_module, "display_image", recording)
    w = make_window()
    run_and_wait(qtbot, w)
    w.go_to_step("encoder.0.self_attn.scores")
    drawn(w)
    plot = w.views[0].heatmap
    for _ in range(3):
        qtbot.waitUntil(lambda: not w.is_prefetching(), timeout=30_000)
        w.next_step()
        drawn(w)
        shown = plot.image.image
        used = plot.image_cache.get((plot._key, plot.display_block))  # what the plot found (or made, on a miss)
        assert made_ahead.get(id(used)) not in (None, threading.main_thread())  # made on the prefetch thread
        np.testing.assert_array_equal(shown, used)
        hm = plot.heatmap
        assert hm.title == w.heatmap_for(w.current_step(), 0, 0).title
        expected = heatmap_module.rgba_image(
            heatmap_module.block_reduce(hm.values, plot.display_block, heatmap_module.display_reduction(hm.colormap)),
            hm.levels, hm.colormap, heatmap_classes(hm))  # what the plot makes itself
        np.testing.assert_array_equal(shown, expected)


def test_the_prefetch_starts_after_the_new_step_is_painted(qtbot, make_window, monkeypatch):
    """Started at once, the prefetch thread competed with painting the step just drawn for the CPU and the GIL;
    it waits for that turn's painting now."""
    import pyqtgraph as pg

    events: list[str] = []
    real_paint = pg.GraphicsView.paintEvent
    monkeypatch.setattr(pg.GraphicsView, "paintEvent", lambda self, e: events.append("paint") or real_paint(self, e))
    w = make_window()
    run_and_wait(qtbot, w)
    w.go_to_step("encoder.0.self_attn.scores")
    drawn(w)
    qtbot.waitUntil(lambda: not w.is_prefetching(), timeout=30_000)
    prefetcher = w._prefetcher
    real_start = prefetcher.start

    def start(*args, **kwargs):
        events.append(f"start {prefetcher.name}")
        return real_start(*args, **kwargs)

    monkeypatch.setattr(prefetcher, "start", start)
    events.clear()
    w.next_step()
    assert "start scratchformer-prefetch" not in events  # not from inside Next
    qtbot.waitUntil(lambda: "start scratchformer-prefetch" in events, timeout=10_000)
    assert "paint" in events[: events.index("start scratchformer-prefetch")]
