"""The centre of the window: one tab per group of views (app/views/view_groups.py), and inside each group one tab
per view.

To the rest of the window it looks like one QTabWidget over the flat list of views (the groups read in order):
currentIndex(), setCurrentIndex(i), currentWidget(), setCurrentWidget(w), count(), indexOf(w), widget(i), and
currentChanged(int) with the flat index, emitted once per change. Switching group shows the view last used in it.
A group of one view shows no second tab bar (Qt hides it until a second view is added).

The tab widgets never report a height-for-width. A QTabWidget does whenever one of its pages does (any view with a
word-wrapped label), and then every layout request of the window (a label's new text on each step) made Qt ask
every page of every group for its height at the present width: shaping the text of each wrapped label, 3–5 ms of
the UI thread per step. The views fill the space the splitter gives them, so nothing needs that height.

Each view sits in a LayoutBarrier (widgets/layout_barrier.py): what changes inside a view on a step re-lays out that
view, not the tab widgets and the window around it, unless the view's size hints change.
"""

from __future__ import annotations

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QTabWidget, QVBoxLayout, QWidget

from ..widgets.layout_barrier import LayoutBarrier


class _TabWidget(QTabWidget):
    """A QTabWidget whose size never depends on its pages' heights for a width (see the module's note)."""

    def hasHeightForWidth(self) -> bool:  # noqa: N802 (Qt name)
        return False

    def heightForWidth(self, _width: int) -> int:  # noqa: N802 (Qt name)
        return -1


class ViewTabs(QWidget):
    currentChanged = Signal(int)  # noqa: N815 (QTabWidget's name): the flat index of the view now shown

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self.groups = _TabWidget()  # the top-level bar: one tab per group
        self.groups.setDocumentMode(True)
        self.groups.setObjectName("view_groups")
        bold = self.groups.tabBar().font()
        bold.setBold(True)  # the groups in bold, their views below in the normal weight
        self.groups.tabBar().setFont(bold)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.groups)
        self.setFocusProxy(self.groups)
        self.pages: list[QTabWidget] = []  # one second-level tab widget per group
        self._views: list[QWidget] = []
        self._hosts: list[LayoutBarrier] = []  # each view's host in its group's tab widget
        self._group_of: list[int] = []  # flat index → group index
        self._last = -1
        self.groups.currentChanged.connect(lambda _i: self._changed())

    # --- building ----------------------------------------------------------------------------------------------

    def add_group(self, title: str, tooltip: str = "") -> int:
        page = _TabWidget()
        page.setDocumentMode(True)
        page.setTabBarAutoHide(True)  # one view: no second bar
        page.currentChanged.connect(lambda _i: self._changed())
        self.pages.append(page)
        g = self.groups.addTab(page, title)
        self.groups.setTabToolTip(g, tooltip)
        return g

    def add_view(self, group: int, view: QWidget, title: str, tooltip: str = "") -> int:
        """Add a view at the end of `group`; returns its flat index (views are added in group order)."""
        if self._group_of and group < self._group_of[-1]:
            raise ValueError("views are added group by group, in order")
        page = self.pages[group]
        host = LayoutBarrier(view)  # a step's changes inside the view re-lay out the view alone (see its module)
        i = page.addTab(host, title)
        page.setTabToolTip(i, tooltip)
        self._views.append(view)
        self._hosts.append(host)
        self._group_of.append(group)
        self._changed()
        return len(self._views) - 1

    # --- QTabWidget's API over the flat list of views -------------------------------------------------------------

    def count(self) -> int:
        return len(self._views)

    def widget(self, index: int) -> QWidget | None:
        return self._views[index] if 0 <= index < len(self._views) else None

    def indexOf(self, widget) -> int:  # noqa: N802 (Qt name)
        """The flat index of a view (or of its host)."""
        return next((i for i, (v, h) in enumerate(zip(self._views, self._hosts)) if widget is v or widget is h), -1)

    def currentIndex(self) -> int:  # noqa: N802 (Qt name)
        g = self.groups.currentIndex()
        if g < 0 or not self.pages[g].count():
            return -1
        return self.indexOf(self.pages[g].currentWidget())

    def currentWidget(self) -> QWidget | None:  # noqa: N802 (Qt name)
        return self.widget(self.currentIndex())

    def setCurrentIndex(self, index: int) -> None:  # noqa: N802 (Qt name)
        if not 0 <= index < len(self._views):
            return
        g = self._group_of[index]
        self.pages[g].setCurrentWidget(self._hosts[index])  # first inside the group, so one signal comes out
        self.groups.setCurrentIndex(g)

    def setCurrentWidget(self, widget) -> None:  # noqa: N802 (Qt name)
        self.setCurrentIndex(self.indexOf(widget))

    def tabText(self, index: int) -> str:  # noqa: N802 (Qt name)
        page = self.pages[self._group_of[index]]
        return page.tabText(page.indexOf(self._hosts[index]))

    def tabToolTip(self, index: int) -> str:  # noqa: N802 (Qt name)
        page = self.pages[self._group_of[index]]
        return page.tabToolTip(page.indexOf(self._hosts[index]))

    # --- groups ------------------------------------------------------------------------------------------------------

    def group_count(self) -> int:
        return len(self.pages)

    def group_of(self, index: int) -> int:
        """The group of the view at flat index `index`."""
        return self._group_of[index]

    def views_of(self, group: int) -> list[int]:
        """The flat indices of a group's views, in tab order."""
        return [i for i, g in enumerate(self._group_of) if g == group]

    def current_group(self) -> int:
        return self.groups.currentIndex()

    def set_group(self, group: int) -> None:
        """Show a group, at the view last used in it."""
        if 0 <= group < len(self.pages):
            self.groups.setCurrentIndex(group)

    def show_nth_of_group(self, n: int) -> None:
        """The n-th view (from 0) of the current group, if it has one."""
        views = self.views_of(self.current_group())
        if 0 <= n < len(views):
            self.setCurrentIndex(views[n])

    def step(self, delta: int) -> None:
        """The next (+1) or previous (-1) view in the flat order, across groups, wrapping around."""
        if self._views:
            self.setCurrentIndex((self.currentIndex() + delta) % len(self._views))

    def _changed(self) -> None:
        index = self.currentIndex()
        if index != self._last:
            self._last = index
            self.currentChanged.emit(index)
