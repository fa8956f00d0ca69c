"""LayoutBarrier (app/widgets/layout_barrier.py): what changes inside a view re-lays out the view alone, unless its
size hints change; the views of the window sit in one."""

from __future__ import annotations

from PySide6.QtWidgets import QApplication, QLabel, QSpinBox, QVBoxLayout, QWidget

from app.widgets.layout_barrier import LayoutBarrier
from tests.app.conftest import LayoutRequests


def build(qtbot):
    outer = QWidget()
    qtbot.addWidget(outer)
    view = QWidget()
    inner = QVBoxLayout(view)
    label, spin = QLabel("step 1"), QSpinBox()
    inner.addWidget(QLabel("a title wider than any step's counter"))
    inner.addWidget(label)
    inner.addWidget(spin)
    barrier = LayoutBarrier(view)
    QVBoxLayout(outer).addWidget(barrier)
    outer.resize(300, 200)
    outer.show()
    qtbot.waitExposed(outer)
    QApplication.processEvents()
    return outer, barrier, view, label, spin


def test_a_change_inside_lays_out_the_view_but_not_around_it(qtbot):
    outer, barrier, view, label, spin = build(qtbot)
    around = LayoutRequests(outer)
    label.setText("step 2")  # the view's size hints stay: the title is still the widest
    spin.setRange(1, 8)
    for _ in range(3):
        QApplication.processEvents()
    assert around.count == 0
    assert view.geometry() == barrier.rect() and label.text() == "step 2"


def test_new_size_hints_are_passed_on(qtbot):
    outer, barrier, view, label, _spin = build(qtbot)
    around = LayoutRequests(outer)
    view.setMinimumHeight(400)
    for _ in range(3):  # the view's request reaches the barrier, which passes one on
        QApplication.processEvents()
    assert around.count > 0 and barrier.minimumHeight() == 400


def test_the_windows_views_sit_in_barriers_and_stay_the_tabs_widgets(qtbot, make_window):
    w = make_window()
    for i, view in enumerate(w.views):
        assert isinstance(view.parentWidget(), LayoutBarrier)
        assert w.tabs.widget(i) is view and w.tabs.indexOf(view) == i
    w.tabs.setCurrentIndex(1)
    assert w.tabs.currentWidget() is w.views[1] and w.tabs.currentIndex() == 1
