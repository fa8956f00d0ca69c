"""The application icon: the SVG shipped in resources/icons/, as a pixmap or a QIcon (the window, Help › About)."""

from __future__ import annotations

from pathlib import Path


def icon_path() -> Path:
    """The application icon, an SVG shipped in resources/icons/ (inside the installed package, not the checkout)."""
    import importlib.resources

    return Path(str(importlib.resources.files("resources"))) / "icons" / "scratchformer.svg"


def icon_pixmap(size: int = 64):
    """The icon drawn at size × size pixels (needs a QGuiApplication). QIcon reads SVG through Qt's svg icon-engine
    plugin; where a Qt build lacks it, QtSvg's renderer draws the file directly."""
    from PySide6.QtGui import QIcon

    pixmap = QIcon(str(icon_path())).pixmap(size, size)
    if pixmap.isNull() or pixmap.width() < size:
        pixmap = _render_svg(size)
    return pixmap


def _render_svg(size: int):
    from PySide6.QtCore import Qt
    from PySide6.QtGui import QPainter, QPixmap
    from PySide6.QtSvg import QSvgRenderer

    pixmap = QPixmap(size, size)
    pixmap.fill(Qt.GlobalColor.transparent)
    renderer = QSvgRenderer(str(icon_path()))
    if renderer.isValid():
        painter = QPainter(pixmap)
        renderer.render(painter)
        painter.end()
    return pixmap


def application_icon():
    """The window and application icon as a QIcon, at the sizes desktops ask for."""
    from PySide6.QtGui import QIcon

    icon = QIcon(str(icon_path()))
    if icon.isNull() or icon.pixmap(64, 64).isNull():
        icon = QIcon()
        for size in (16, 24, 32, 48, 64, 128, 256):
            icon.addPixmap(_render_svg(size))
    return icon
