"""The inspector beside the views: the current step's name, shape, formula and statistics, and the read-out of
the heatmap cell under the mouse."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QFont
from PySide6.QtWidgets import QLabel, QPlainTextEdit, QVBoxLayout, QWidget

from scratchformer.plotdata import TensorStats
from scratchformer.recording.trace import Step

from .stepper import step_path


def inspector_lines(step: Step, stats: TensorStats | None, n_steps: int, batch: int, head: int,
                    params: list[tuple[str, str]] | None = None) -> list[str]:
    """What the inspector says about a step: where it is, its shape, what the heatmap shows, formula, stats
    (None: a large step's statistics are still being made off the UI thread; the window fills them in)."""
    showing = [d for d in step.dims if d not in ("batch", "head", "kv_head")]
    sel = []
    if "batch" in step.dims:
        sel.append(f"batch item {min(batch, step.shape[step.dims.index('batch')] - 1) + 1}")
    if step.head_dim is not None:
        what = "key/value head" if step.head_dim == "kv_head" else "head"
        sel.append(f"{what} {min(head, step.n_heads - 1) + 1}")
    lines = [
        step_path(step),
        "",
        f"name     {step.name}",
        f"kind     {step.kind}",
        f"step     {step.index + 1} of {n_steps}",
        "",
        "shape    " + " × ".join(f"{n} {d}" for n, d in zip(step.shape, step.dims)),
        f"         {tuple(step.shape)}",
        f"showing  {' × '.join(showing)}" + (f"  ({', '.join(sel)})" if sel else ""),
        "",
        "formula",
        f"  {step.formula}",
        "",
        f"statistics ({stats.scope})" if stats is not None else "statistics",
        *([f"  {line}" for line in stats.lines()] if stats is not None else ["  being computed…"]),
    ]
    if params:
        lines += ["", "parameters"] + [f"  {name}: {text}" for name, text in params]
    if "vocab" in step.dims:
        lines += ["", "The heatmap shows the 24 vocabulary columns", "that are in some row's top ranks."]
    return lines


class Inspector(QWidget):
    """'Inspector' text above 'Under the mouse'."""

    def __init__(self) -> None:
        super().__init__()
        self.text = QPlainTextEdit()
        self.text.setReadOnly(True)
        mono = QFont("DejaVu Sans Mono")
        mono.setStyleHint(QFont.StyleHint.Monospace)
        mono.setPointSizeF(9.0)
        self.text.setFont(mono)
        self.text.setLineWrapMode(QPlainTextEdit.LineWrapMode.WidgetWidth)
        self.hover_label = QLabel("Hover a heatmap cell to read its value.")
        self.hover_label.setFont(mono)
        self.hover_label.setWordWrap(True)
        self.hover_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.hover_label.setStyleSheet("background: #f3f6fa; border: 1px solid #d6dde6; padding: 4px;")
        sl = QVBoxLayout(self)
        sl.setContentsMargins(0, 0, 0, 0)
        self.title = QLabel("<b>Inspector</b>")
        sl.addWidget(self.title)
        sl.addWidget(self.text, 1)
        sl.addWidget(QLabel("<b>Under the mouse</b>"))
        sl.addWidget(self.hover_label)

    def show_step(self, step: Step | None, stats: TensorStats | None, n_steps: int, batch: int, head: int,
                  params: list[tuple[str, str]] | None = None) -> None:
        if step is None:
            self.text.setPlainText("")
            return
        self.text.setPlainText("\n".join(inspector_lines(step, stats, n_steps, batch, head, params)))
        self._lay_out_now()

    def _lay_out_now(self) -> None:
        """Lay the text out now rather than as it is painted: laid out while painting, its new length reached the
        scroll bar in a queued call after the paint, and the window painted a second time for the scroll bar on
        most steps (0.5 ms more per step holding Next)."""
        document = self.text.document()
        layout = document.documentLayout()
        block = document.begin()
        while block.isValid():
            layout.ensureBlockLayout(block)
            block = block.next()

    def show_hover(self, text: str) -> None:
        self.hover_label.setText(text)
