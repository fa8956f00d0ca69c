"""Large maps wait their turn to draw, a few per turn of the event loop, maps on screen first (draw_queue.py)."""

from __future__ import annotations

import numpy as np
import pytest
from PySide6.QtCore import QEvent
from PySide6.QtWidgets import QApplication

from app.widgets import draw_queue as queue_module
from app.widgets.draw_queue import draw_queue
from app.widgets.heatmap import DEFER_CELLS, HeatmapWidget
from scratchformer.plotdata import SEQUENTIAL, Heatmap


def big_map(seed: int, n: int = 256) -> Heatmap:
    assert n * n >= DEFER_CELLS
    values = np.random.default_rng(seed).uniform(0, 1, (n, n)).astype(np.float32)
    return Heatmap(values=values, row_labels=None, col_labels=None, row_dim="query", col_dim="key",
                   levels=(0.0, 1.0), colormap=SEQUENTIAL, title=f"map {seed}")


def small_map() -> Heatmap:
    return Heatmap(values=np.eye(4, dtype=np.float32), row_labels=None, col_labels=None, row_dim="r", col_dim="c",
                   levels=(0.0, 1.0), colormap=SEQUENTIAL, title="small")


@pytest.fixture
def widgets(qtbot):
    out = []
    for _ in range(3):
        w = HeatmapWidget()
        qtbot.addWidget(w)
        w.resize(400, 300)
        out.append(w)
    return out


def test_a_large_map_is_the_widgets_map_at_once_and_drawn_on_a_later_turn(qtbot, widgets):
    w = widgets[0]
    w.show()
    hm = big_map(0)
    w.set_heatmap(hm)
    assert w.heatmap is hm and not w.is_drawn() and w.image.image is None
    assert w.stack.currentWidget() is not w.view  # a plot never drawn waits blank: it is painted once drawn
    qtbot.waitUntil(w.is_drawn, timeout=5000)
    assert w.image.image is not None and w.title_label.text() == "map 0" and w.stack.currentWidget() is w.view
    w.set_heatmap(big_map(1))  # a drawn plot keeps its map on screen while the next one waits (no blank flash)
    assert not w.is_drawn() and w.stack.currentWidget() is w.view and w.title_label.text() == "map 0"
    qtbot.waitUntil(w.is_drawn, timeout=5000)
    assert w.title_label.text() == "map 1"


def test_one_turn_draws_the_maps_on_screen_first(qtbot, widgets, monkeypatch):
    monkeypatch.setattr(queue_module, "SLICE_S", 0.0)  # one map per turn
    hidden, shown, also_hidden = widgets
    shown.show()
    for i, w in enumerate((hidden, shown, also_hidden)):
        w.set_heatmap(big_map(i))
    draw_queue().wait_prepared()  # their images are made off the UI thread first
    draw_queue()._run()  # one turn
    assert (hidden.is_drawn(), shown.is_drawn(), also_hidden.is_drawn()) == (False, True, False)
    draw_queue()._run()  # then in the order they were set
    assert (hidden.is_drawn(), also_hidden.is_drawn()) == (True, False)
    draw_queue()._run()
    assert also_hidden.is_drawn() and draw_queue().pending() == 0


def test_a_small_map_set_after_a_waiting_large_one_wins(qtbot, widgets):
    w = widgets[0]
    w.show()
    w.set_heatmap(big_map(1))
    w.set_heatmap(small_map())
    assert w.is_drawn() and draw_queue().pending() == 0
    QApplication.processEvents()
    assert w.heatmap.title == "small" and w.image.image.shape[:2] == (4, 4)


def test_the_latest_of_several_large_maps_is_drawn_once(qtbot, widgets, monkeypatch):
    w = widgets[0]
    w.show()
    drawn = []
    real = w._draw
    monkeypatch.setattr(w, "_draw", lambda hm, reset, key: drawn.append(hm.title) or real(hm, reset, key))
    for i in range(3):
        w.set_heatmap(big_map(i))
    qtbot.waitUntil(w.is_drawn, timeout=5000)
    assert drawn == ["map 2"]


def test_a_widget_closed_before_its_turn_is_skipped(qtbot):
    w = HeatmapWidget()
    w.set_heatmap(big_map(3))
    w.deleteLater()
    QApplication.sendPostedEvents(None, QEvent.Type.DeferredDelete)
    draw_queue().finish()  # no error: the deleted widget has nothing to draw
    assert draw_queue().pending() == 0


def test_the_window_is_busy_until_its_large_maps_are_drawn(qtbot, make_window):
    w = make_window()
    view = HeatmapWidget(w)
    view.set_heatmap(big_map(4))
    assert w.is_busy()
    qtbot.waitUntil(lambda: not w.is_busy(), timeout=5000)
    assert view.is_drawn()


def test_a_large_map_whose_image_is_made_ahead_is_drawn_at_once(qtbot, widgets, monkeypatch):
    """A step the Step view made ahead (its display image in the cache) is drawn in the same turn as Next: one
    paint for the new step, not the old map painted again while the new one waits its turn."""
    from app.widgets.heatmap import ImageCache, display_image
    from scratchformer.plotdata import display_blocks
    from scratchformer.plotdata.special import heatmap_classes

    w = widgets[0]
    w.image_cache = ImageCache()
    w.show()
    qtbot.waitExposed(w)
    w.set_heatmap(big_map(0), key="first")
    qtbot.waitUntil(w.is_drawn, timeout=5000)
    ahead = big_map(1)
    block = display_blocks(ahead.values.shape, w._plot_pixels())  # as the Step view's prefetch makes it
    made = display_image(ahead, block, heatmap_classes(ahead))
    w.image_cache.put(("second", block), made)
    import app.widgets.heatmap as heatmap_module

    remade = []
    monkeypatch.setattr(heatmap_module, "display_image", lambda *a: remade.append(a) or display_image(*a))
    w.set_heatmap(ahead, reset_view=False, key="second")
    assert w.is_drawn() and draw_queue().pending() == 0 and w.title_label.text() == "map 1"
    assert not remade  # the image made ahead, not one made again
    np.testing.assert_array_equal(w.image.image, made)
    w.set_heatmap(big_map(2), reset_view=False, key="third")  # nothing made ahead: it waits its turn as before
    assert not w.is_drawn() and w.title_label.text() == "map 1"
    qtbot.waitUntil(w.is_drawn, timeout=5000)
    assert w.title_label.text() == "map 2"


def test_a_waiting_maps_image_is_made_off_the_ui_thread_and_drawn_as_made_there(qtbot, widgets, monkeypatch):
    """The numbers of a large map (its cells' classes, its image reduced and coloured) are made by the queue's
    job, not on the UI thread; what is drawn is exactly the image made from the map."""
    import threading

    import app.widgets.heatmap as heatmap_module
    from app.widgets.heatmap import display_image
    from scratchformer.plotdata import display_blocks
    from scratchformer.plotdata.special import heatmap_classes

    threads = []
    monkeypatch.setattr(heatmap_module, "display_image",
                        lambda *a: threads.append(threading.current_thread()) or display_image(*a))
    w = widgets[0]
    w.show()
    qtbot.waitExposed(w)
    hm = big_map(5)
    w.set_heatmap(hm)
    qtbot.waitUntil(w.is_drawn, timeout=5000)
    assert threads and all(t is not threading.main_thread() for t in threads)
    expected = display_image(hm, display_blocks(hm.values.shape, w._plot_pixels()), heatmap_classes(hm))
    np.testing.assert_array_equal(w.image.image, expected)


def test_a_map_set_while_the_previous_ones_image_is_made_is_the_one_drawn(qtbot, widgets):
    w = widgets[0]
    w.show()
    first, second = big_map(6), big_map(7)
    w.set_heatmap(first)
    draw_queue()._prepare()  # the job for the first map is under way…
    w.set_heatmap(second)  # …when the user moves on
    qtbot.waitUntil(w.is_drawn, timeout=5000)
    assert w.heatmap is second and w.title_label.text() == "map 7"
    from app.widgets.heatmap import display_image
    from scratchformer.plotdata.special import heatmap_classes

    assert np.array_equal(w.image.image, display_image(second, w.display_block, heatmap_classes(second)))


def test_a_resized_plot_keeps_its_map_and_gets_the_new_resolution_from_the_queue(qtbot, widgets, monkeypatch):
    """A layout that settles after a view's maps are drawn resizes them: the map stays on screen at its present
    resolution while the queue's job makes the one for the new size, which is then exactly what the map gives."""
    import threading

    import app.widgets.heatmap as heatmap_module
    from app.widgets.heatmap import display_image
    from scratchformer.plotdata.special import heatmap_classes

    w = widgets[0]
    w.show()
    qtbot.waitExposed(w)
    hm = big_map(8, n=512)
    w.set_heatmap(hm)
    qtbot.waitUntil(w.is_drawn, timeout=5000)
    before = w.display_block
    threads = []
    monkeypatch.setattr(heatmap_module, "display_image",
                        lambda *a: threads.append(threading.current_thread()) or display_image(*a))
    w.resize(300, 200)  # a smaller plot: fewer pixels, larger blocks
    QApplication.processEvents()
    assert w.heatmap is hm and w.image.image is not None  # the map is still on screen meanwhile
    qtbot.waitUntil(w.is_drawn, timeout=5000)
    assert w.display_block != before
    assert threads and all(t is not threading.main_thread() for t in threads)
    np.testing.assert_array_equal(w.image.image, display_image(hm, w.display_block, heatmap_classes(hm)))
