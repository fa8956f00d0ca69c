"""scratchformer's desktop window (PySide6 + pyqtgraph). The model core lives in scratchformer/ and never imports Qt."""
