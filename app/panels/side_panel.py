"""The right-hand column: the explanation above the inspector, or — when the window is small — the two as tabs, so
neither is squeezed into a column of broken words."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QSplitter, QStackedLayout, QTabWidget, QWidget

TABBED_BELOW = (1250, 820)  # window width or height under which the two panels become tabs


class SidePanel(QWidget):
    def __init__(self, explain: QWidget, inspector: QWidget) -> None:
        super().__init__()
        self.explain, self.inspector = explain, inspector
        self.split = QSplitter(Qt.Orientation.Vertical)
        self.split.setChildrenCollapsible(False)
        self.tabs = QTabWidget()
        self.tabs.setDocumentMode(True)
        self.stack = QStackedLayout(self)
        self.stack.setContentsMargins(0, 0, 0, 0)
        self.stack.addWidget(self.split)
        self.stack.addWidget(self.tabs)
        self.tabbed: bool | None = None
        self.set_tabbed(False)
        self.setMinimumWidth(250)

    def set_tabbed(self, tabbed: bool) -> None:
        """Move the two panels between the splitter and the tabs (Qt re-parents them; nothing is rebuilt)."""
        if tabbed == self.tabbed:
            return
        self.tabbed = tabbed
        for panel in (self.explain, self.inspector):  # a tab names its panel: no title line needed
            title = getattr(panel, "title", None)
            if isinstance(title, QWidget):
                title.setVisible(not tabbed)
        if tabbed:
            self.tabs.addTab(self.explain, "Explanation")
            self.tabs.addTab(self.inspector, "Inspector")
            self.stack.setCurrentWidget(self.tabs)
        else:
            self.split.addWidget(self.explain)
            self.split.addWidget(self.inspector)
            self.explain.show()  # the tab widget hid the page that was not current
            self.inspector.show()
            self.split.setSizes([520, 330])
            self.stack.setCurrentWidget(self.split)

    def fit_window(self, width: int, height: int) -> None:
        self.set_tabbed(width < TABBED_BELOW[0] or height < TABBED_BELOW[1])
