"""The Graph view's exports: the picture shown (PNG, SVG, PDF, drawn from the same layout) and the JSON that
`scratchformer graph --json` prints for it. A mixin of GraphView (app/views/graph/view.py): its methods read the
view's `built` and `main`."""

from __future__ import annotations

import json
from pathlib import Path

from scratchformer.errors import UserError
from scratchformer.exporting.files import atomic_write_bytes
from scratchformer.plotdata.graph_layout import graph_payload

from ...export.actions import save_numbers


class GraphExports:
    """The graph shown as a picture or as JSON, and the dialogs that ask where."""

    def current_picture(self):
        """fmt → the picture's bytes (.png, .svg, .pdf), drawn from the layout shown; None before a graph is drawn.
        File › Export › Current view and the clipboard use it (app/export/actions.py)."""
        if self.built is None:
            return None
        from ...export.graph_render import graph_bytes

        layout = self.built.layout
        return lambda fmt: graph_bytes(layout, fmt)

    def export_picture(self, path: str | Path) -> Path:
        """Write the graph shown to `path` (.png, .svg or .pdf)."""
        from ...export.graph_render import save_graph

        if self.built is None:
            raise UserError("There is no graph to export yet; run a model with transcoders first.")
        return save_graph(self.built.layout, path)

    def export_json(self, path: str | Path) -> Path:
        """Write what `scratchformer graph --json` prints for the graph shown (at the slider's pruning), with its
        supernodes, to `path`."""
        if self.built is None:
            raise UserError("There is no graph to export yet; run a model with transcoders first.")
        payload = graph_payload(self.built.result, self.built.kept, self.built.layout.groups)
        path = Path(path)
        atomic_write_bytes(path, (json.dumps(payload, ensure_ascii=False) + "\n").encode("utf-8"), overwrite=True)
        return path

    def _stem(self) -> str:
        g = self.built.result.graph if self.built is not None else None
        return f"graph-{self.main.current_bundle().name}-position-{g.position}" if g is not None else "graph"

    def _export_picture_dialog(self) -> None:
        save_numbers(self.main, "Export the graph", f"{self._stem()}.png", "PNG (*.png);;SVG (*.svg);;PDF (*.pdf)",
                     self.export_picture, ("png", "svg", "pdf"))  # fmt: skip

    def _export_json_dialog(self) -> None:
        save_numbers(self.main, "Export the graph as JSON", f"{self._stem()}.json", "JSON (*.json)", self.export_json,
                     ("json",))  # fmt: skip
