"""The stepping bar at the bottom of the window: first / previous / next / last, play / pause at a chosen speed,
the detail switch (sublayers or every operation), the slider over all steps, the counter and the breadcrumb;
and the keys (← → Home End Space) that step while no text field has the focus.

The window decides which step is current; the bar shows it and forwards clicks to the window.
"""

from __future__ import annotations

from PySide6.QtCore import QKeyCombination, QObject, Qt, QTimer
from PySide6.QtGui import QKeySequence, QShortcut
from PySide6.QtWidgets import (
    QAbstractButton,
    QAbstractSpinBox,
    QApplication,
    QComboBox,
    QHBoxLayout,
    QLineEdit,
    QPlainTextEdit,
    QSizePolicy,
    QSlider,
    QStyle,
    QTextEdit,
    QToolButton,
    QWidget,
)

from scratchformer.recording.trace import Step, step_path

from ..widgets.steady_label import SteadyLabel

SPEEDS = (("Fast (0.25 s)", 250), ("Normal (0.8 s)", 800), ("Slow (2 s)", 2000))
STEP_KEYS = (Qt.Key.Key_Right, Qt.Key.Key_Left, Qt.Key.Key_Home, Qt.Key.Key_End, Qt.Key.Key_Space)
TEXT_INPUTS = (QLineEdit, QTextEdit, QPlainTextEdit, QAbstractSpinBox)


class StepKeys(QObject):
    """← → Home End (and Space to play) step through the walkthrough, except while typing in a text field.

    Window shortcuts, matched by Qt itself: an application-wide event filter in Python would be called for every
    event of the application (thousands per second of stepping), each call waiting for the GIL while a recompute
    thread runs. A text field that uses the key (the cursor keys in the source field) takes it first (Qt's
    ShortcutOverride); Space on a focused button presses the button."""

    def __init__(self, window) -> None:
        super().__init__(window)
        self.window = window
        self.shortcuts: list[QShortcut] = []
        slots = (window.next_step, window.previous_step, window.first_step, window.last_step, self._space)
        for key, slot in zip(STEP_KEYS, slots):
            for modifier in (Qt.KeyboardModifier.NoModifier, Qt.KeyboardModifier.KeypadModifier):
                shortcut = QShortcut(QKeySequence(QKeyCombination(modifier, key)), window)
                shortcut.setContext(Qt.ShortcutContext.WindowShortcut)
                shortcut.activated.connect(lambda slot=slot: self._step(slot))
                self.shortcuts.append(shortcut)

    @staticmethod
    def _typing() -> bool:
        focus = QApplication.focusWidget()
        return isinstance(focus, TEXT_INPUTS) or (isinstance(focus, QComboBox) and focus.isEditable())

    def _step(self, slot) -> None:
        if not self._typing():
            slot()

    def _space(self) -> None:
        focus = QApplication.focusWidget()
        if isinstance(focus, QAbstractButton):
            focus.animateClick()
        else:
            self.window.toggle_play()


class StepperBar(QWidget):
    """Buttons, speed, detail switch, slider, counter and breadcrumb; `window` provides the stepping slots."""

    def __init__(self, window) -> None:
        super().__init__()
        self.play_timer = QTimer(window)
        self.play_timer.timeout.connect(window._play_tick)
        row = QHBoxLayout(self)
        row.setContentsMargins(8, 2, 8, 4)
        sp = QStyle.StandardPixmap
        self.first_button = self._tool(sp.SP_MediaSkipBackward, "First step (Home)", window.first_step)
        self.prev_button = self._tool(sp.SP_MediaSeekBackward, "Previous step (←)", window.previous_step)
        self.next_button = self._tool(sp.SP_MediaSeekForward, "Next step (→)", window.next_step)
        self.last_button = self._tool(sp.SP_MediaSkipForward, "Last step (End)", window.last_step)
        self.play_button = self._tool(sp.SP_MediaPlay, "Play / pause (Space)", window.toggle_play)
        for b in (self.first_button, self.prev_button, self.next_button, self.last_button, self.play_button):
            row.addWidget(b)
        self.speed_combo = QComboBox()
        for text, ms in SPEEDS:
            self.speed_combo.addItem(text, ms)
        self.speed_combo.setToolTip("Playback speed")
        self.speed_combo.currentIndexChanged.connect(
            lambda _i: self.play_timer.setInterval(int(self.speed_combo.currentData()))
        )
        row.addWidget(self.speed_combo)
        self.detail_combo = QComboBox()
        self.detail_combo.addItem("Sublayers only", "major")
        self.detail_combo.addItem("Every operation", "all")
        self.detail_combo.setToolTip("Step through whole sublayers, or every operation inside them")
        self.detail_combo.currentIndexChanged.connect(lambda _i: window._detail_changed())
        row.addWidget(self.detail_combo)
        self.slider = QSlider(Qt.Orientation.Horizontal)
        self.slider.setToolTip("All steps of the walkthrough")
        self.slider.valueChanged.connect(window._slider_moved)
        row.addWidget(self.slider, 2)
        # The counter and the breadcrumb change with every step: SteadyLabels, so that a new text does not re-lay
        # out the whole window (widgets/steady_label.py). The counter has room for four-digit step counts.
        self.counter = SteadyLabel("–")
        self.counter.setMinimumWidth(max(70, self.counter.fontMetrics().horizontalAdvance("9999 / 9999") + 6))
        self.counter.setAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        row.addWidget(self.counter)
        self.crumb = SteadyLabel("Run the model to begin.")
        crumb_font = self.crumb.font()
        crumb_font.setPointSizeF(crumb_font.pointSizeF() * 1.15)
        crumb_font.setBold(True)
        self.crumb.setFont(crumb_font)
        self.crumb.setMinimumWidth(200)  # a long path is clipped, with the whole of it in the tooltip
        self.crumb.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        row.addWidget(self.crumb, 3)

    def _tool(self, pixmap, tip: str, slot) -> QToolButton:
        b = QToolButton()
        b.setIcon(self.style().standardIcon(pixmap))
        b.setToolTip(tip)
        b.setAutoRaise(True)
        b.clicked.connect(slot)
        return b

    def detail(self) -> str:
        """"major" (sublayers only) or "all" (every operation)."""
        return self.detail_combo.currentData()

    def set_detail(self, mode: str, quietly: bool = False) -> None:
        self.detail_combo.blockSignals(quietly)
        self.detail_combo.setCurrentIndex(max(0, self.detail_combo.findData(mode)))
        self.detail_combo.blockSignals(False)

    def set_step_count(self, n: int) -> None:
        """The slider's range for n visible steps (without moving to a step)."""
        self.slider.blockSignals(True)
        self.slider.setRange(0, max(0, n - 1))
        self.slider.setPageStep(max(1, n // 10))
        self.slider.blockSignals(False)

    def show_step(self, position: int, count: int, step: Step) -> None:
        """Slider, counter and breadcrumb for the step at `position` of `count` visible steps."""
        self.slider.blockSignals(True)
        self.slider.setValue(position)
        self.slider.blockSignals(False)
        self.counter.setText(f"{position + 1} / {count}")
        self.crumb.setText(step_path(step))
        self.crumb.setToolTip(f"{step_path(step)}\n{step.name}\n{step.formula}")

    def set_enabled(self, has_steps: bool, at_start: bool, at_end: bool) -> None:
        self.first_button.setEnabled(not at_start)
        self.prev_button.setEnabled(not at_start)
        self.next_button.setEnabled(not at_end)
        self.last_button.setEnabled(not at_end)
        self.play_button.setEnabled(has_steps)
        self.slider.setEnabled(has_steps)

    def is_playing(self) -> bool:
        return self.play_timer.isActive()

    def start_play(self) -> None:
        self.play_timer.start(int(self.speed_combo.currentData()))
        self.play_button.setIcon(self.style().standardIcon(QStyle.StandardPixmap.SP_MediaPause))

    def stop_play(self) -> None:
        self.play_timer.stop()
        self.play_button.setIcon(self.style().standardIcon(QStyle.StandardPixmap.SP_MediaPlay))
