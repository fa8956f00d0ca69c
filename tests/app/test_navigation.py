"""Finding one's way in the window: the groups of views fit a 1024 × 700 window, every view is in the View menu and
a shortcut away, the explanation follows the view, and no text is drawn below 8 pt (the diagram scrolls instead)."""

from __future__ import annotations

import pyqtgraph as pg
import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QKeySequence
from PySide6.QtWidgets import QGraphicsSimpleTextItem, QGraphicsTextItem, QGraphicsView, QToolButton, QWidget

from app.panels.explain_panel import STEP_TITLE, TAB_TITLE
from app.views.view_groups import GROUPS, MAX_GROUPS
from app.widgets.fonts import MIN_POINT_SIZE, points
from tests.app.conftest import run_and_wait


@pytest.fixture
def small_window(qtbot, make_window):
    """A run of the en-hi model (two stacks, six layers' worth of blocks) in a 1024 × 700 window."""
    w = make_window(source="the girl eats an apple", target="", model="en-hi")
    w.resize(1024, 700)
    run_and_wait(qtbot, w)
    assert w.current_trace() is not None, w.message_text()
    qtbot.waitUntil(lambda: w.width() == 1024 and w.height() == 700)
    return w


def fits(bar) -> bool:
    """A tab bar shows all its tabs: its natural width fits and it shows no scroll arrows."""
    arrows = [b for b in bar.findChildren(QToolButton) if b.isVisible()]
    last = bar.tabRect(bar.count() - 1)
    return bar.sizeHint().width() <= bar.width() and last.right() <= bar.width() and not arrows


def test_every_group_and_every_view_tab_fits_a_1024_by_700_window(qtbot, small_window):
    w = small_window
    tabs = w.tabs
    assert 1 < tabs.group_count() <= MAX_GROUPS
    assert [tabs.groups.tabText(g) for g in range(tabs.group_count())] == [title for title, _ in GROUPS]
    assert fits(tabs.groups.tabBar()), (tabs.groups.tabBar().sizeHint().width(), tabs.groups.tabBar().width())
    for g, page in enumerate(tabs.pages):
        tabs.set_group(g)
        qtbot.waitUntil(page.isVisible)
        bar = page.tabBar()
        if page.count() == 1:  # a group of one view shows no second bar
            assert not bar.isVisible()
            continue
        assert bar.isVisible() and fits(bar), (tabs.groups.tabText(g), bar.sizeHint().width(), bar.width())
    # the check itself notices a bar that does not fit
    tabs.groups.tabBar().setFixedWidth(tabs.groups.tabBar().sizeHint().width() // 2)
    assert not fits(tabs.groups.tabBar())


def test_flat_index_api_and_the_group_remembers_its_view(qtbot, ran_window):
    w = ran_window
    tabs = w.tabs
    assert tabs.count() == len(w.views) == sum(len(classes) for _, classes in GROUPS)
    assert [type(v) for v in w.views] == [cls for _, classes in GROUPS for cls in classes]
    seen: list[int] = []
    tabs.currentChanged.connect(seen.append)
    for i, view in enumerate(w.views):
        tabs.setCurrentIndex(i)
        assert tabs.currentIndex() == i and tabs.currentWidget() is view and tabs.widget(i) is view
        assert tabs.indexOf(view) == i and view.isVisible()
    assert seen == list(range(1, len(w.views)))  # one signal per change, with the flat index
    heads = next(i for i, v in enumerate(w.views) if v.title == "Heads")
    tabs.setCurrentIndex(heads)
    tabs.set_group(tabs.group_of(heads) + 1)
    assert tabs.group_of(tabs.currentIndex()) == tabs.group_of(heads) + 1
    tabs.set_group(tabs.group_of(heads))
    assert tabs.currentIndex() == heads  # back at the view last used in the group


def test_every_view_is_in_the_view_menu_and_a_shortcut_away(qtbot, ran_window):
    w = ran_window
    tabs = w.tabs
    w.activateWindow()
    qtbot.waitUntil(w.isActiveWindow)  # the window's shortcuts act only once it is active (the platform says so later)
    view_menu = next(a.menu() for a in w.menuBar().actions() if a.text() == "&View")
    assert set(w.view_actions) <= set(view_menu.actions()) and set(w.group_actions) <= set(view_menu.actions())
    for i, action in enumerate(w.view_actions):  # from the menu
        tabs.setCurrentIndex((i + 1) % len(w.views))
        action.trigger()
        assert tabs.currentWidget() is w.views[i] and action.isChecked()
    w.views[0].setFocus()
    for g in range(tabs.group_count()):  # by the keyboard: Ctrl+<group>, then Alt+<view in the group>
        assert w.group_actions[g].shortcut() == QKeySequence(f"Ctrl+{g + 1}")
        for n, i in enumerate(tabs.views_of(g)):
            tabs.setCurrentIndex(0 if g else len(w.views) - 1)
            qtbot.keyClick(w, Qt.Key(Qt.Key.Key_1 + g), Qt.KeyboardModifier.ControlModifier)
            assert tabs.current_group() == g
            qtbot.keyClick(w, Qt.Key(Qt.Key.Key_1 + n), Qt.KeyboardModifier.AltModifier)
            assert tabs.currentIndex() == i, (g, n, w.views[i].title)
    tabs.setCurrentIndex(0)
    qtbot.keyClick(w, Qt.Key.Key_PageDown, Qt.KeyboardModifier.ControlModifier)
    assert tabs.currentIndex() == 1
    qtbot.keyClick(w, Qt.Key.Key_PageUp, Qt.KeyboardModifier.ControlModifier)
    qtbot.keyClick(w, Qt.Key.Key_PageUp, Qt.KeyboardModifier.ControlModifier)
    assert tabs.currentIndex() == len(w.views) - 1  # wraps around


def test_no_two_actions_share_a_shortcut_and_the_help_lists_the_view_keys(ran_window):
    from app.panels.menus import shortcut_rows
    from app.panels.stepper import STEP_KEYS

    w = ran_window
    keys = [k.toString() for a in w.findChildren(type(w.view_actions[0])) for k in a.shortcuts() if not k.isEmpty()]
    assert len(keys) == len(set(keys)), sorted(k for k in keys if keys.count(k) > 1)
    assert not {QKeySequence(k).toString() for k in map(int, STEP_KEYS)} & set(keys)  # the bare step keys stay free
    rows = dict(shortcut_rows(w))
    assert f"Ctrl+1 … Ctrl+{w.tabs.group_count()}" in rows and "Alt+1 … Alt+9" in rows
    assert all(title in rows[f"Ctrl+1 … Ctrl+{w.tabs.group_count()}"] for title, _ in GROUPS)


def test_the_explanation_follows_the_view(qtbot, ran_window):
    w = ran_window
    w.go_to_step("encoder.0.self_attn.weights")
    for i, view in enumerate(w.views):
        w.view_actions[i].trigger()
        if view.explains is not None:  # a view with its own explanation: what it shows, why, this run's numbers
            qtbot.waitUntil(lambda view=view: w.explain_panel.title.text() == TAB_TITLE and view.title in
                            w.explain_panel.plain_text(), timeout=5_000)
        else:  # the step's explanation
            qtbot.waitUntil(lambda: w.explain_panel.title.text() == STEP_TITLE and "softmax" in
                            w.explain_panel.plain_text().lower(), timeout=5_000)


def test_the_diagram_stacks_and_scrolls_rather_than_shrink_its_text(qtbot, small_window):
    w = small_window
    d = w.diagram
    assert d.transform().m11() == 1.0 and d.smallest_point_size() >= MIN_POINT_SIZE
    assert d.columns == 1 and d.verticalScrollBar().maximum() > 0  # one stack above the other, scrolling
    items = d.items_by_key
    assert items["decoder.0.self_attn"].sceneBoundingRect().top() > max(
        i.sceneBoundingRect().bottom() for k, i in items.items() if k.startswith("encoder"))
    w.go_to_step("decoder.1.cross_attn.weights")  # the current block is scrolled into sight
    block = items["decoder.1.cross_attn"]
    assert d.mapToScene(d.viewport().rect()).boundingRect().contains(block.sceneBoundingRect())
    shape = block.shape_text.text()
    w.splitter.setSizes([d.two_column_width() + 10, 600, 300])  # room for both stacks: side by side again
    w.resize(1800, 900)
    qtbot.waitUntil(lambda: d.columns == 2)
    assert d.transform().m11() == 1.0 and items is not d.items_by_key  # drawn again, still at full size
    assert d.items_by_key["decoder.1.cross_attn"].shape_text.text() == shape != ""  # the shapes are kept
    assert d.current_key == "decoder.1.cross_attn"


def _scene_fonts(view: QGraphicsView):
    """(what, point size on screen) of the text a graphics view draws."""
    scale = view.transform().m11()
    dpi = view.logicalDpiY()
    for item in view.scene().items():
        if not item.isVisible():
            continue
        if isinstance(item, (QGraphicsSimpleTextItem, QGraphicsTextItem)) and (
                item.text() if isinstance(item, QGraphicsSimpleTextItem) else item.toPlainText()):
            yield repr(item.toPlainText() if isinstance(item, QGraphicsTextItem) else item.text()), \
                points(item.font(), dpi) * scale * abs(item.sceneTransform().determinant()) ** 0.5  # rotated too
        elif isinstance(item, pg.AxisItem) and item.style.get("tickFont") is not None:
            yield f"ticks of {type(view.parent()).__name__}", points(item.style["tickFont"], dpi)
        elif type(item).__name__ == "CellValues" and item.cells:
            yield "cell values", points(item.font, dpi)


def test_no_text_in_the_window_is_below_8_points_and_every_view_fits(qtbot, small_window):
    """Every widget's font and every drawn text (diagram, plot titles and ticks, cell values), in every view; and
    every view, drawn, fits a 1024-pixel window."""
    w = small_window
    w.go_to_step("decoder.0.cross_attn.weights")
    small: list[tuple[str, float]] = []
    for i, view in enumerate(w.views):
        w.tabs.setCurrentIndex(i)
        qtbot.waitUntil(lambda view=view: not w.is_busy() and not (hasattr(view, "is_busy") and view.is_busy()),
                        timeout=30_000)
        qtbot.wait(20)
        # drawn, the view still fits: the window is not pushed wider than 1024 pixels
        assert w.minimumSizeHint().width() <= 1024 and w.width() == 1024, (view.title, w.minimumSizeHint())
        for widget in [w, *w.findChildren(QWidget)]:
            if not widget.isVisible():
                continue
            widget.ensurePolished()
            size = points(widget.font(), widget.logicalDpiY())
            if size < MIN_POINT_SIZE:
                small.append((f"{view.title}: {type(widget).__name__} {widget.objectName()}", size))
            if isinstance(widget, QGraphicsView):
                small += [(f"{view.title}: {what}", s) for what, s in _scene_fonts(widget) if s < MIN_POINT_SIZE - 1e-6]
    assert not small, small
