"""A new step's text must not make Qt measure every view: the view tabs report no height-for-width, so a label
that changes on the shown view never has the hidden views' word-wrapped labels shaped again (that was 3–5 ms
of the UI thread per step while holding Next; benchmarks/bench_stalls.py measures the step times)."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QLabel, QSplitter, QVBoxLayout, QWidget

from app.panels.view_tabs import ViewTabs


class CountingLabel(QLabel):
    """A word-wrapped label that counts how often a layout asks it for its height at a width."""

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.setWordWrap(True)
        self.asked = 0

    def heightForWidth(self, width: int) -> int:  # noqa: N802 (Qt name)
        self.asked += 1
        return super().heightForWidth(width)


def view_with_label(text: str) -> tuple[QWidget, CountingLabel]:
    view = QWidget()
    label = CountingLabel(text)
    QVBoxLayout(view).addWidget(label)
    return view, label


def test_a_label_changing_on_one_view_does_not_measure_the_views_behind_it(qtbot):
    splitter = QSplitter(Qt.Orientation.Horizontal)
    tabs = ViewTabs()
    shown, shown_label = view_with_label("the shown view's note")
    group = tabs.add_group("Step")
    tabs.add_view(group, shown, "Step")
    hidden = []
    for g in range(3):  # views behind other tabs, in this group and in others
        group = tabs.add_group(f"Group {g}")
        for v in range(2):
            view, label = view_with_label("a long explanation that wraps over several lines " * 4)
            tabs.add_view(group, view, f"View {g}.{v}")
            hidden.append(label)
    splitter.addWidget(tabs)
    splitter.addWidget(QLabel("side panel"))
    qtbot.addWidget(splitter)
    splitter.resize(900, 600)
    splitter.show()
    qtbot.waitExposed(splitter)
    tabs.setCurrentIndex(0)
    qtbot.wait(20)
    assert not tabs.groups.hasHeightForWidth() and not any(page.hasHeightForWidth() for page in tabs.pages)

    before = [label.asked for label in hidden]
    for i in range(5):  # five steps' worth of new text on the shown view
        shown_label.setText(f"step {i}: " + "a note of a new length " * (i + 1))
        qtbot.wait(5)
    assert [label.asked for label in hidden] == before
    assert shown_label.isVisible() and shown_label.text().startswith("step 4")
