"""Compare: the current step of the run without the interventions and of the run with them, side by side, and
their difference (after − before) on a diverging colour map, so that what an ablated head changed stands out
and the steps before it show a blank difference. A run that names its two sides (RunRequest.sides) is captioned
and titled with those names: a patching sweep's cell shows the corrupted run beside the patched run."""

from __future__ import annotations

import html

from PySide6.QtWidgets import QHBoxLayout, QLabel, QVBoxLayout, QWidget

from scratchformer.errors import UserError
from scratchformer.plotdata import Comparison, Heatmap, compare_step

from ..widgets.heatmap import HeatmapWidget
from ..work.warmup import step_work
from .base import View, placeholder

DECODER_INPUT = {
    "generated": "Both runs read the same decoder input: the changed model's own output (greedy) behind the start "
                 "token, so that every step lines up.",
    "typed": "Both runs read the typed target behind the start token (teacher forcing).",
    "start_only": "Both runs read the start token alone.",
    "windows": "Both runs read the same windows.",
    "none": "Both runs read the same source.",
}  # fmt: skip


def decoder_input_note(mode: str) -> str:
    return DECODER_INPUT.get(mode, "Both runs read the same inputs.")


class CompareView(View):
    title = "Compare"
    tooltip = "The current step before and after the interventions, and the difference"

    @property
    def explains(self) -> str:
        """Which tab text explains the view: a patching sweep's replayed cell gets its own (corrupted and patched
        runs, not before and after an ablation)."""
        return "compare_patch" if self._sides() is not None else "compare"

    def _sides(self):
        result = self.main.current_result()
        return None if result is None else result.request.sides

    def explain_facts(self) -> dict:
        sides = self._sides()
        return {"patched": sides.after_detail} if sides is not None else {}

    def __init__(self, window) -> None:
        super().__init__(window)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(6, 6, 6, 6)
        self.caption = QLabel()
        self.caption.setWordWrap(True)
        layout.addWidget(self.caption)
        self.empty = placeholder("No interventions yet. Right-click a head in the Heads, Overview or Step tab and "
                                 "ablate it: this tab then shows each step before and after the change.")
        layout.addWidget(self.empty)
        self.maps_host = QWidget()
        self.maps_host.setVisible(False)
        layout.addWidget(self.maps_host, 1)
        self.before = self.after = self.difference = None  # built with the first comparison (window start-up)
        self.comparison: Comparison | None = None

    def _build_maps(self) -> None:
        row = QHBoxLayout(self.maps_host)
        row.setContentsMargins(0, 0, 0, 0)
        self.before = HeatmapWidget(square=False)
        self.after = HeatmapWidget(square=False)
        self.difference = HeatmapWidget(square=False)
        for w in (self.before, self.after, self.difference):
            self.connect_heatmap(w)
            row.addWidget(w, 1)

    def preparation(self, trace, batch: int) -> list:
        """Recomputed off the UI thread before this tab draws: the current step of the run without the
        interventions (the window prepares the current step of the changed run itself)."""
        result, step = self.main.current_result(), self.main.current_step()
        before = result.before.find(step.name) if result is not None and result.before and step else None
        return step_work([before], batch) if before is not None else []

    def refresh(self) -> None:
        result, step = self.main.current_result(), self.main.current_step()
        before = result.before if result is not None else None
        self.comparison = None
        if before is None or step is None:
            self._show(False)
            self.caption.setText("")
            return
        try:
            sides = result.request.sides
            names = (sides.before, sides.after) if sides is not None else ("Before", "After")
            self.comparison = compare_step(before, result.trace, step.name, self.main.current_batch(),
                                           self.main.current_head(), result.vocab_labels, names)  # fmt: skip
        except UserError as exc:
            self._show(False)
            self.caption.setText(str(exc))
            return
        self._show(True)
        c = self.comparison
        for w, hm in ((self.before, c.before), (self.after, c.after), (self.difference, c.difference)):
            w.set_heatmap(hm)
        changes = "; ".join(i.spec() for i in result.trace.interventions)
        verdict = (f"largest change {c.largest:.4g}" if c.largest > 0
                   else "no change at this step (it comes before the intervention, or does not depend on it)")
        if sides is not None:  # e.g. a patching sweep's cell: the corrupted run, and it with one patch
            first = f"<b>{html.escape(sides.before)}</b>"
            second = f"<b>{html.escape(sides.after)}</b>: {html.escape(sides.after_detail)}"
            minus = f"{sides.after.lower()} − {sides.before.lower()}"
        else:
            first, second, minus = "<b>Before</b> (no interventions)", f"<b>after</b> ({changes})", "after − before"
        self.caption.setText(f"{first} | {second} | {minus}: {verdict}. "
                             f"{decoder_input_note(result.inputs.decoder_input)}")

    def _show(self, on: bool) -> None:
        if on and self.before is None:
            self._build_maps()
        self.empty.setVisible(not on)
        self.maps_host.setVisible(on)

    def current_heatmaps(self) -> list[Heatmap]:
        c = self.comparison
        return [c.before, c.after, c.difference] if c is not None else []

    def view_title(self) -> str:
        return "Compare: before | after | after − before"
