"""Process-wide workaround for a PySide6 6.12 bug that would otherwise crash a long session.

PySide6 6.12.0 on Python < 3.12 drops one reference to None on every call of a Qt method that returns void
(QPainter.drawRect, QGraphicsItem.setPos, …). pyqtgraph makes such calls on every repaint, so after some
ten thousand of them CPython frees None and aborts ("Fatal Python error: none_dealloc"). Python 3.12 made None
immortal; on older versions we give None a reference count so large that the leak can never reach zero.
"""

from __future__ import annotations

import ctypes
import sys

_HEADROOM = 1 << 40  # ≈ 10^12 lost references before it could matter


def keep_none_alive() -> None:
    if sys.version_info >= (3, 12):
        return
    refcnt = ctypes.c_ssize_t.from_address(id(None))  # ob_refcnt is the object's first field
    if refcnt.value < _HEADROOM:
        refcnt.value += _HEADROOM
