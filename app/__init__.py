"""scratchformer's desktop window (PySide6 + pyqtgraph). The model core lives in scratchformer/ and never imports Qt."""

from .pyside_workarounds import keep_none_alive

keep_none_alive()
