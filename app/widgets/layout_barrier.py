"""A host for one widget that passes the widget's layout changes on only when its size hints change.

Qt re-lays out every ancestor of a widget whose layout changed: each layout, once done, asks its own widget's parent
to lay out again, "ideally only if sizeHint() or sizePolicy() has changed" (Qt's comment) — but always, up to the
main window, and each tab widget on the way repaints itself and everything in it. A view's inside changes on
every step (a spin box shown, a table in place of the map), its size hints almost never. LayoutBarrier holds the
widget without a layout of its own: the widget's layout requests stop here, and the barrier asks its parent for a
new layout only when the widget's size hints, explicit sizes or policy did change, as Qt's comment intends.
"""

from __future__ import annotations

from PySide6.QtCore import QEvent, QSize
from PySide6.QtWidgets import QWidget


class LayoutBarrier(QWidget):
    def __init__(self, child: QWidget, parent=None) -> None:
        super().__init__(parent)
        self.child = child
        child.setParent(self)
        self._hints = None
        self._sync()

    def _current(self) -> tuple:
        c = self.child
        return (c.sizeHint(), c.minimumSizeHint(), c.minimumSize(), c.maximumSize(), c.sizePolicy(),
                c.isHidden())

    def _sync(self) -> bool:
        """Take the child's hints; True when they changed."""
        hints = self._current()
        if hints == self._hints:
            return False
        self._hints = hints
        self.setSizePolicy(self.child.sizePolicy())
        self.setMinimumSize(self.child.minimumSize())
        self.setMaximumSize(self.child.maximumSize())
        return True

    def sizeHint(self) -> QSize:  # noqa: N802 (Qt name)
        return self.child.sizeHint()

    def minimumSizeHint(self) -> QSize:  # noqa: N802 (Qt name)
        return self.child.minimumSizeHint()

    def event(self, event) -> bool:
        if event.type() == QEvent.Type.LayoutRequest:
            if self._sync():
                self.updateGeometry()  # the child wants other room: lay out around it
            return True
        return super().event(event)

    def resizeEvent(self, event) -> None:  # noqa: N802 (Qt name)
        super().resizeEvent(event)
        self.child.setGeometry(self.rect())
